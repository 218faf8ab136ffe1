@_spi(Storage) import LedgerCore
import LedgerModels
import Testing

/// A time shown on the wall clock of a customer's zone, as `status`, `audit` and the support
/// pages show it beside UTC.
@Suite struct LocalTimeTests {
    @Test(arguments: [
        ("2026-03-01T09:30:00Z", "Europe/Berlin", "2026-03-01 10:30 +01:00"),
        ("2026-07-01T09:30:00Z", "Europe/Berlin", "2026-07-01 11:30 +02:00"),
        ("2026-03-01T09:30:00Z", "America/St_Johns", "2026-03-01 06:00 -03:30"),
        ("2026-03-01T09:30:00Z", "No/Such_Zone", "2026-03-01 09:30 +00:00"),
        // Past the end of year 9999 east of UTC: written in full, not cut.
        ("9999-12-31T23:00:00Z", "Asia/Tokyo", "10000-01-01 08:00 +09:00"),
        ("0000-01-01T05:00:00Z", "America/New_York", "0000-01-01 00:03 -04:56"),
    ])
    func aTimeIsShownOnTheZonesWallClock(utc: String, zone: String, shown: String) throws {
        let t = try #require(Timestamp(rfc3339: utc))
        #expect(t.local(in: zone) == shown)
    }
}

import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

@Suite struct TimestampTests {
    /// `Date` in and out: to the millisecond (rounded down, before 1970 too), and clamped, not
    /// trapping, beyond what 64-bit milliseconds hold.
    @Test func convertsToAndFromDate() {
        let t = Timestamp(milliseconds: 1_772_357_400_123)
        #expect(Timestamp(t.date) == t)
        #expect(t.date == Date(timeIntervalSince1970: 1_772_357_400.123))
        #expect(Timestamp(Date(timeIntervalSince1970: 1.0009)) == Timestamp(milliseconds: 1_000))
        #expect(Timestamp(Date(timeIntervalSince1970: -1.0001)) == Timestamp(milliseconds: -1_001))
        #expect(Timestamp(Date.distantFuture).description == "4001-01-01T00:00:00.000Z")
        #expect(Timestamp(Date(timeIntervalSince1970: 1e300)) == Timestamp(milliseconds: .max))
        #expect(Timestamp(Date(timeIntervalSince1970: -1e300)) == Timestamp(milliseconds: .min))
    }

    @Test func formatsAsUTCWithThreeFractionalDigits() {
        #expect(Timestamp(milliseconds: 0).description == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp(milliseconds: 1_772_357_400_007).description == "2026-03-01T09:30:00.007Z")
        #expect(Timestamp(milliseconds: -1).description == "1969-12-31T23:59:59.999Z")
    }

    @Test(arguments: [
        ("2026-03-01T09:30:00Z", Int64(1_772_357_400_000)),
        ("2026-03-01T09:30:00.5Z", 1_772_357_400_500),
        ("2026-03-01T09:30:00.123456Z", 1_772_357_400_123),
        ("2026-03-01T10:30:00+01:00", 1_772_357_400_000),
        ("2026-03-01T04:00:00.000-05:30", 1_772_357_400_000),
        ("2024-02-29T00:00:00z", 1_709_164_800_000),
    ])
    func parsesZonesAndFractions(text: String, milliseconds: Int64) {
        #expect(Timestamp(rfc3339: text)?.milliseconds == milliseconds)
    }

    @Test(arguments: [
        "2026-03-01T09:30:00",          // no zone
        "2026-03-01 09:30",             // no seconds
        "2026-02-29T00:00:00Z",         // not a leap year
        "2026-13-01T00:00:00Z",
        "2026-03-01T24:00:00Z",
        "2026-03-01T09:30:00.Z",        // empty fraction
        "2026-03-01T09:30:00+0100",     // offset without colon
        "2026-03-01T09:30:00Zjunk",
        "",
        "42",
    ])
    func rejectsWhatIsNotRFC3339WithAZone(text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    /// The defect: a time whose UTC form falls outside years 0000–9999 was taken, then exported
    /// as 10000-01-01… (or with a sign), which append refuses: one such event made the whole
    /// export unrestorable. The parser refuses it and says why; the ends themselves pass.
    @Test(arguments: [
        ("9999-12-31T23:59:59-00:01", "10000-01-01T00:00:59.000Z"),
        ("0000-01-01T00:00:00+00:01", "-0001-12-31T23:59:00.000Z"),
        ("9999-12-31T23:59:59.999-23:59", "10000-01-01T23:58:59.999Z"),
    ])
    func refusesTimesOutsideFourDigitYearsOnceInUTC(text: String, utc: String) {
        #expect(Timestamp(rfc3339: text) == nil)
        #expect(Timestamp.reason(rfc3339: text) == "is outside years 0000–9999 once in UTC (\(utc))")
        #expect(Timestamp.inputProblem(.string(text)) == "\"\(text)\" is outside years 0000–9999 once in UTC (\(utc))")
    }

    @Test(arguments: [
        ("9999-12-31T23:59:59.999Z", Int64(253_402_300_799_999)),
        ("9999-12-31T23:59:59+00:01", 253_402_300_739_000),
        ("0000-01-01T00:00:00Z", -62_167_219_200_000),
        ("0000-01-01T00:00:00-00:01", -62_167_219_140_000),
    ])
    func acceptsTheEndsOfFourDigitYearsOnceInUTC(text: String, milliseconds: Int64) {
        #expect(Timestamp(rfc3339: text)?.milliseconds == milliseconds)
        #expect(Timestamp.reason(rfc3339: text) == nil)
        #expect(Timestamp.fourDigitYears.contains(Timestamp(milliseconds: milliseconds)))
    }

    /// A year before 0000 is written with its sign and four digits, never as "00-1".
    @Test func formatsAYearBeforeZeroWithItsSign() {
        #expect(Timestamp(milliseconds: -62_167_219_200_001).description == "-0001-12-31T23:59:59.999Z")
        #expect(Timestamp(milliseconds: 253_402_300_800_000).description == "10000-01-01T00:00:00.000Z")
    }

    /// Time arithmetic saturates at the ends of Int64 instead of trapping: a policy built in
    /// code, unbounded by the decoder, cannot bring down status, audit or a rebuild.
    @Test func addingSaturatesAtTheEndsOfInt64() {
        let latest = Timestamp(milliseconds: .max), earliest = Timestamp(milliseconds: .min), epoch = Timestamp(milliseconds: 0)
        #expect(latest.adding(seconds: 1) == latest)
        #expect(earliest.adding(seconds: -1) == earliest)
        #expect(epoch.adding(seconds: .max) == latest)
        #expect(epoch.adding(seconds: .min) == earliest)
        #expect(earliest.adding(seconds: .max) == latest)
        // A span past Int64 still lands inside it from the other end: exactly, not saturated.
        #expect(earliest.adding(seconds: Int64.max / 1000 + 1) == Timestamp(milliseconds: 192))
        #expect(latest.adding(seconds: -1) == Timestamp(milliseconds: .max - 1000))
        #expect(Timestamp(milliseconds: 5).adding(seconds: -2) == Timestamp(milliseconds: -1995))
    }

    @Test func formattingThenParsingIsTheIdentity() async {
        // Year 0001 to 9999: what four-digit years can say.
        await checkProperty(count: 500, input: Gen.int64(in: -62_135_596_800_000 ... 253_402_300_799_999)) { ms in
            let time = Timestamp(milliseconds: ms)
            #expect(Timestamp(rfc3339: time.description) == time)
        }
    }
}

@Suite struct EventIDTests {
    @Test func printsAndParsesTheUsualForm() {
        let text = "0b6d2f4e-8a1c-4c3b-9f00-1234567890ab"
        let id = EventID(text)
        #expect(id?.description == text)
        #expect(EventID("0B6D2F4E-8A1C-4C3B-9F00-1234567890AB") == id)
        #expect(id.map { EventID(bytes: $0.bytes) } == id)
        #expect(id.map { EventID($0.uuid) } == id)
    }

    @Test(arguments: ["", "0b6d2f4e8a1c4c3b9f001234567890ab", "0b6d2f4e-8a1c-4c3b-9f00-1234567890ag", "0b6d2f4e-8a1c-4c3b-9f00-1234567890abc"])
    func rejectsMalformedText(text: String) {
        #expect(EventID(text) == nil)
    }
}

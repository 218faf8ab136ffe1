import Foundation
@_spi(Storage) import LedgerCore

/// Local calendar dates in an IANA time zone, DST-correct (the badge's "due today", the
/// access model's "per local calendar day"). An unknown zone name counts as UTC.
package enum LocalTime {
    /// The zone, or UTC.
    package static func zone(_ identifier: String) -> TimeZone {
        TimeZone(identifier: identifier) ?? TimeZone(secondsFromGMT: 0) ?? .current
    }

    /// The local date at `t` in `zone`, as days since 1970-01-01.
    package static func day(at t: Timestamp, in zone: TimeZone) -> Int64 {
        t.adding(seconds: offset(of: zone, at: t)).milliseconds.floorDivided(by: 86_400_000).quotient
    }

    /// The instant local `day` (days since 1970-01-01) begins in `zone`: its first instant whose
    /// local date is `day`, so a DST change at midnight is honoured.
    package static func start(ofDay day: Int64, in zone: TimeZone) -> Timestamp {
        let midnightUTC = Timestamp(milliseconds: day.multipliedClamping(by: 86_400_000))
        let guess = midnightUTC.adding(seconds: -offset(of: zone, at: midnightUTC))
        var t = midnightUTC.adding(seconds: -offset(of: zone, at: guess))
        // Where local midnight does not exist (a spring-forward at 00:00), the day starts later.
        // A day's worth of hours either way at most: past the last timestamp (a time saturated
        // by a policy built in code) there is no later day to reach.
        var hours = 0
        while hours < 48, self.day(at: t, in: zone) < day { t = t.adding(seconds: 3600); hours += 1 }
        hours = 0
        while hours < 48, self.day(at: t.adding(seconds: -3600), in: zone) >= day { t = t.adding(seconds: -3600); hours += 1 }
        return t
    }

    /// The zone's offset from UTC at `t`, in seconds.
    private static func offset(of zone: TimeZone, at t: Timestamp) -> Int64 {
        Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(t.milliseconds) / 1000)))
    }

    /// Days since 1970-01-01 of a `YYYY-MM-DD` date, or `nil`.
    package static func day(of date: String) -> Int64? {
        let parts = date.split(separator: "-")
        guard parts.count == 3, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
              (1...12).contains(m), (1...CivilDate.daysIn(month: m, year: y)).contains(d) else { return nil }
        return CivilDate.days(year: y, month: m, day: d)
    }
}

extension Timestamp {
    /// This instant on the wall clock of `zone` (an IANA name; unknown means UTC), to the minute,
    /// with its offset: `2026-03-01 10:30 +01:00`. How the command line and the support pages
    /// show a customer's local time.
    public func local(in zone: String) -> String {
        let offset = Int64(LocalTime.zone(zone).secondsFromGMT(for: Date(timeIntervalSince1970: Double(milliseconds) / 1000)))
        // The wall clock's date by the proleptic Gregorian calendar of the ledger's times
        // (`CivilDate`), so that any year is written in full: one past 9999 east of UTC too.
        let wall = milliseconds + offset * 1000
        let days = wall >= 0 ? wall / 86_400_000 : (wall - 86_399_999) / 86_400_000
        let msOfDay = wall - days * 86_400_000
        let date = CivilDate.fromDays(days)
        let magnitude = abs(offset)
        return String(format: "%@%04d-%02d-%02d %02lld:%02lld %@%02lld:%02lld", date.year < 0 ? "-" : "", abs(date.year), date.month, date.day,
                      msOfDay / 3_600_000, msOfDay % 3_600_000 / 60_000, offset < 0 ? "-" : "+", magnitude / 3600, magnitude % 3600 / 60)
    }

}

import Foundation
import LedgerCore

/// Local calendar dates in an IANA time zone, DST-correct (the badge's "due today", the
/// access model's "per local calendar day"). An unknown zone name counts as UTC.
public enum LocalTime {
    /// The zone, or UTC.
    public static func zone(_ identifier: String) -> TimeZone {
        TimeZone(identifier: identifier) ?? TimeZone(secondsFromGMT: 0) ?? .current
    }

    /// The local date at `t` in `zone`, as days since 1970-01-01.
    public static func day(at t: Timestamp, in zone: TimeZone) -> Int64 {
        let offset = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(t.milliseconds) / 1000)))
        return (t.milliseconds + offset * 1000).floorDivided(by: 86_400_000).quotient
    }

    /// The instant local `day` (days since 1970-01-01) begins in `zone`: its first instant whose
    /// local date is `day`, so a DST change at midnight is honoured.
    public static func start(ofDay day: Int64, in zone: TimeZone) -> Timestamp {
        let midnightUTC = day * 86_400_000
        var guess = midnightUTC - Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(midnightUTC) / 1000))) * 1000
        guess = midnightUTC - Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(guess) / 1000))) * 1000
        // Where local midnight does not exist (a spring-forward at 00:00), the day starts later.
        var t = Timestamp(milliseconds: guess)
        while self.day(at: t, in: zone) < day { t = t.adding(seconds: 3600) }
        while self.day(at: t.adding(seconds: -3600), in: zone) >= day { t = t.adding(seconds: -3600) }
        return t
    }

    /// Days since 1970-01-01 of a `YYYY-MM-DD` date, or `nil`.
    public static func day(of date: String) -> Int64? {
        let parts = date.split(separator: "-")
        guard parts.count == 3, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
              (1...12).contains(m), (1...CivilDate.daysIn(month: m, year: y)).contains(d) else { return nil }
        return CivilDate.days(year: y, month: m, day: d)
    }
}

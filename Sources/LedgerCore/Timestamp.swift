#if canImport(Glibc)
import Glibc
#endif

/// A point in time as UTC milliseconds since 1970-01-01T00:00:00Z.
///
/// Every time in the ledger is one of these: business time (`occurredAt`), append time
/// (`recordedAt`) and the times inside events' data. Written as `YYYY-MM-DDTHH:MM:SS.sssZ`.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible, Encodable {
    /// Milliseconds since the Unix epoch, UTC.
    public var milliseconds: Int64

    /// Creates a timestamp from UTC milliseconds since the epoch.
    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    /// The current wall-clock time.
    public static func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.milliseconds < b.milliseconds }

    /// This time plus `seconds` (may be negative), saturating at the ends of `Int64` rather
    /// than trapping: a policy built in code is not bounded by the decoder, and a rule that adds
    /// its days to a time must not bring down `status`, `audit` or the rebuild that would
    /// replace it.
    public func adding(seconds: Int64) -> Timestamp { adding(seconds, times: 1000) }

    /// This time plus `milliseconds`, saturating as `adding(seconds:)` does.
    public func adding(milliseconds: Int64) -> Timestamp { adding(milliseconds, times: 1) }

    /// This time plus `hours`, saturating as `adding(seconds:)` does.
    public func adding(hours: Int64) -> Timestamp { adding(hours, times: 3_600_000) }

    /// This time plus `days` of 24 hours, saturating as `adding(seconds:)` does.
    public func adding(days: Int64) -> Timestamp { adding(days, times: 86_400_000) }

    /// Milliseconds from `earlier` to this time (negative when `earlier` is later), clamped to
    /// Int64's range: a saturated time is as far from any other as Int64 can say.
    public func milliseconds(since earlier: Timestamp) -> Int64 {
        Int64(clamping: Int128(milliseconds) - Int128(earlier.milliseconds))
    }

    private func adding(_ count: Int64, times unit: Int64) -> Timestamp {
        // Exact in 128 bits (|count × unit| < 2^91), then clamped to Int64.
        Timestamp(milliseconds: Int64(clamping: Int128(milliseconds) + Int128(count) * Int128(unit)))
    }

    /// `YYYY-MM-DDTHH:MM:SS.sssZ`, always UTC with three fractional digits.
    public var description: String {
        let (days, msOfDay) = milliseconds.floorDivided(by: 86_400_000)
        let (y, m, d) = CivilDate.fromDays(days)
        guard (0...9999).contains(y) else {
            // Outside four-digit years: the slow, general form.
            let ms = Int(msOfDay)
            return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(ms / 3_600_000, 2)):\(pad(ms / 60_000 % 60, 2)):\(pad(ms / 1000 % 60, 2)).\(pad(ms % 1000, 3))Z"
        }
        let ms = Int(msOfDay)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            // Two digits at a time, straight into the 24 bytes (views format a few timestamps
            // on every status query; a loop per field cost four times as much).
            guard buffer.count >= 24, let p = buffer.baseAddress else { return 0 }
            func two(_ value: Int, at offset: Int) {
                p[offset] = UInt8(truncatingIfNeeded: 48 + value / 10)
                p[offset + 1] = UInt8(truncatingIfNeeded: 48 + value % 10)
            }
            two(y / 100, at: 0); two(y % 100, at: 2); p[4] = 45; two(m, at: 5); p[7] = 45; two(d, at: 8); p[10] = 84
            two(ms / 3_600_000, at: 11); p[13] = 58; two(ms / 60_000 % 60, at: 14); p[16] = 58
            two(ms / 1000 % 60, at: 17); p[19] = 46
            p[20] = UInt8(truncatingIfNeeded: 48 + ms % 1000 / 100); two(ms % 100, at: 21); p[23] = 90
            return 24
        }
    }

    /// The instants of years 0000–9999 in UTC: the times the ledger writes as
    /// `YYYY-MM-DDTHH:MM:SS.sssZ`, and so the only ones it takes as input (a time outside them
    /// would be exported with five digits or a sign, which append refuses).
    public static let fourDigitYears = Timestamp(milliseconds: -62_167_219_200_000) ... Timestamp(milliseconds: 253_402_300_799_999)

    /// Parses an RFC 3339 date-time with a zone (`Z` or `±HH:MM`), with or without a fraction
    /// (any number of digits; precision past milliseconds is truncated). `nil` if it is not one,
    /// or if it falls outside years 0000–9999 once in UTC (`reason(rfc3339:)` says why).
    public init?(rfc3339 text: some StringProtocol) {
        guard case .time(let ms)? = Self.parse(text), Self.fourDigitYears.contains(Timestamp(milliseconds: ms)) else { return nil }
        self.init(milliseconds: ms)
    }

    /// Why text shaped like an RFC 3339 time is not one the ledger takes, as a predicate to
    /// follow the quoted text ("is outside years 0000–9999 once in UTC (10000-01-01T00:00:59.000Z)",
    /// "is not a calendar date: February 2026 has 28 days"); `nil` for a time it takes and for
    /// text that is not shaped like one.
    public static func reason(rfc3339 text: some StringProtocol) -> String? {
        switch parse(text) {
        case .time(let ms)?:
            let t = Timestamp(milliseconds: ms)
            return fourDigitYears.contains(t) ? nil : "is outside years 0000–9999 once in UTC (\(t))"
        case .notACalendarDate(let year, let month)?:
            return CivilDate.monthLengthProblem(year: year, month: month)
        case nil:
            return nil
        }
    }

    /// The message for a JSON value given where a time belongs and refused by
    /// `init?(rfc3339:)`: why, when the text is shaped like a time; else what was expected,
    /// with the advice to add a zone when that is all it lacks.
    public static func inputProblem(_ value: JSON) -> String {
        if case .string(let s) = value, let reason = reason(rfc3339: s) { return "\(EnvelopeDecoder.describe(value)) \(reason)" }
        let message = "expected an RFC 3339 time, got \(EnvelopeDecoder.describe(value))"
        return zoneHint(value).map { "\(message) (\($0))" } ?? message
    }

    /// Why a typed time (a library caller's, not parsed from text) is not one the ledger takes:
    /// outside years 0000–9999. `nil` when it is inside them.
    public static func rangeProblem(_ t: Timestamp) -> String? {
        fourDigitYears.contains(t) ? nil : "\"\(t)\" is outside years 0000–9999 once in UTC"
    }

    /// What RFC 3339 text says, before the ledger's own limits.
    private enum Parsed {
        /// UTC milliseconds since 1970, which may lie outside years 0000–9999.
        case time(Int64)
        /// A day past the end of its month (30 February), otherwise well formed.
        case notACalendarDate(year: Int, month: Int)
    }

    private static func parse(_ text: some StringProtocol) -> Parsed? {
        let c = Array(text.utf8)
        var i = 0
        func number(_ width: Int) -> Int? {
            guard i + width <= c.count else { return nil }
            var v = 0
            for k in i..<(i + width) {
                let d = c[k] &- UInt8(ascii: "0")
                guard d < 10 else { return nil }
                v = v * 10 + Int(d)
            }
            i += width
            return v
        }
        func expect(_ chars: String) -> Bool {
            guard i < c.count, chars.utf8.contains(c[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
              expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
              let second = number(2)
        else { return nil }
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
        var millis = 0
        if i < c.count, c[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < c.count, c[i] &- UInt8(ascii: "0") < 10 {
                if digits < 3 { millis = millis * 10 + Int(c[i] - UInt8(ascii: "0")) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { millis *= 10 } }
        }
        var offsetMinutes = 0
        guard i < c.count else { return nil }
        if c[i] == UInt8(ascii: "Z") || c[i] == UInt8(ascii: "z") {
            i += 1
        } else if c[i] == UInt8(ascii: "+") || c[i] == UInt8(ascii: "-") {
            let sign = c[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = number(2), expect(":"), let om = number(2), oh < 24, om < 60 else { return nil }
            offsetMinutes = sign * (oh * 60 + om)
        } else {
            return nil
        }
        guard i == c.count else { return nil }
        guard day <= CivilDate.daysIn(month: month, year: year) else { return .notACalendarDate(year: year, month: month) }
        // Four-digit years and offsets under a day: no overflow here, whatever the text.
        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        return .time(seconds * 1000 + Int64(millis))
    }
}

private func pad(_ value: Int, _ width: Int) -> String {
    // A year before 0000 keeps its sign in front of the padding: -0001, never 00-1.
    if value < 0 { return "-" + pad(-value, width) }
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}

extension Int64 {
    /// `self × factor`, clamped to Int64's range rather than trapping (a policy's seconds in
    /// milliseconds, say).
    public func multipliedClamping(by factor: Int64) -> Int64 { Int64(clamping: Int128(self) * Int128(factor)) }

    /// `self + other`, clamped to Int64's range rather than trapping.
    public func addingClamped(_ other: Int64) -> Int64 { Int64(clamping: Int128(self) + Int128(other)) }

    /// Division rounding towards negative infinity, with a non-negative remainder.
    public func floorDivided(by divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let q = self / divisor, r = self % divisor
        return r < 0 ? (q - 1, r + divisor) : (q, r)
    }
}

/// Proleptic Gregorian calendar arithmetic (Howard Hinnant's days-from-civil).
public enum CivilDate {
    /// Days since 1970-01-01 for a calendar date.
    public static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The calendar date of a day count since 1970-01-01.
    public static func fromDays(_ days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        return (Int(y), Int(m), Int(d))
    }

    /// For a day past the end of its month, why the date is not one, as a predicate to follow
    /// the quoted date: "is not a calendar date: February 2026 has 28 days".
    public static func monthLengthProblem(year: Int, month: Int) -> String {
        let names = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
        let name = (1...12).contains(month) ? names[month - 1] : "month \(month)"
        return "is not a calendar date: \(name) \(pad(year, 4)) has \(daysIn(month: month, year: year)) days"
    }

    /// Days in a month of a year.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

extension Timestamp {
    /// For a JSON value that would be a valid time with a zone added, the advice to add one.
    public static func zoneHint(_ value: JSON) -> String? {
        guard case .string(let s) = value, Timestamp(rfc3339: s) == nil, Timestamp(rfc3339: s + "Z") != nil else { return nil }
        return "add a zone: Z or ±HH:MM"
    }
}

extension Duration {
    /// The duration in seconds, as a `Double` (for rates and reports).
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Timestamp {
    /// Encodes as its `description`: `YYYY-MM-DDTHH:MM:SS.sssZ`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

@_spi(Storage) @testable import LedgerCore

/// The Swift checks of the string codecs accept exactly what their schema patterns do.
@Suite struct PatternTests {
    /// Strings over the bytes that matter to a zone name: letters, digits, the three marks,
    /// the slash, and a few that are never allowed.
    static let zoneLike = Gen.element(of: Array("aZ09_+-//. é")).map { $0 ?? "a" }.string(of: 0...8)

    @Test func aTimeZoneIsWhatItsPatternMatches() async throws {
        let pattern = try Regex(Patterns.timeZone)
        await checkProperty(count: 2_000, input: Self.zoneLike) { text in
            #expect(Patterns.isTimeZone(text) == (text.wholeMatch(of: pattern) != nil), "\(text)")
        }
        for name in ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"] { #expect(Patterns.isTimeZone(name)) }
        for name in ["", "/UTC", "UTC/", "Europe//Berlin", "5UTC", "Europe/Ber lin"] { #expect(!Patterns.isTimeZone(name)) }
    }

    /// Strings over the bytes a decimal, a period or a date is made of, and a few others.
    static let decimalLike = Gen.element(of: Array("0019.-a ")).map { $0 ?? "0" }.string(of: 0...7)
    static let periodLike = Gen.element(of: Array("P01YMWDHx")).map { $0 ?? "P" }.string(of: 0...7)
    static let dateLike = Gen.element(of: Array("01239-")).map { $0 ?? "0" }.string(of: 8...11)

    @Test func aDecimalIsWhatItsPatternMatches() async throws {
        let pattern = try Regex(Patterns.decimal)
        await checkProperty(count: 2_000, input: Self.decimalLike) { text in
            #expect(Patterns.isDecimal(text) == (text.wholeMatch(of: pattern) != nil), "\(text)")
        }
        for text in ["0", "9.99", "-19.99", "100", "0.5"] { #expect(Patterns.isDecimal(text)) }
        for text in ["", "-", "01", "1.", ".5", "1.2.3", "--1", "1e3"] { #expect(!Patterns.isDecimal(text)) }
    }

    @Test func aPeriodIsWhatItsPatternMatches() async throws {
        let pattern = try Regex(Patterns.period)
        await checkProperty(count: 2_000, input: Self.periodLike) { text in
            #expect(Patterns.isPeriod(text) == (text.wholeMatch(of: pattern) != nil), "\(text)")
        }
        for text in ["P1M", "P1Y", "P7D", "P1Y6M", "P02W"] { #expect(Patterns.isPeriod(text)) }
        for text in ["", "P", "PM", "P1", "1M", "P1H", "p1M"] { #expect(!Patterns.isPeriod(text)) }
    }

    @Test func aLocalDateIsWhatItsPatternMatches() async throws {
        let pattern = try Regex(Patterns.localDate)
        await checkProperty(count: 2_000, input: Self.dateLike) { text in
            #expect(Patterns.isLocalDate(text) == (text.wholeMatch(of: pattern) != nil), "\(text)")
        }
        for text in ["2026-01-31", "2026-12-01", "0000-10-10"] { #expect(Patterns.isLocalDate(text)) }
        for text in ["2026-00-10", "2026-13-10", "2026-01-00", "2026-01-32", "2026-1-10", "2026/01/10", "2026-01-10 "] { #expect(!Patterns.isLocalDate(text)) }
    }
}

import PropertyBased
import Testing

@testable import LedgerCore

/// The Swift checks of the string codecs accept exactly what their schema patterns do.
@Suite struct PatternTests {
    /// Strings over the bytes that matter to a zone name: letters, digits, the three marks,
    /// the slash, and a few that are never allowed.
    static let zoneLike = Gen.element(of: Array("aZ09_+-//. é")).map { $0 ?? "a" }.string(of: 0...8)

    @Test func aTimeZoneIsWhatItsPatternMatches() async throws {
        let pattern = try Regex(Patterns.timeZone)
        await propertyCheck(count: 2_000, input: Self.zoneLike) { text in
            #expect(Patterns.isTimeZone(text) == (text.wholeMatch(of: pattern) != nil), "\(text)")
        }
        for name in ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"] { #expect(Patterns.isTimeZone(name)) }
        for name in ["", "/UTC", "UTC/", "Europe//Berlin", "5UTC", "Europe/Ber lin"] { #expect(!Patterns.isTimeZone(name)) }
    }
}

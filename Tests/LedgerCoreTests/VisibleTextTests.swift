@_spi(Storage) import LedgerCore
import Testing

/// The one rule for showing outside text to people (`VisibleText`).
@Suite struct VisibleTextTests {
    /// For people, every control, bidirectional and invisible character is shown by its code
    /// point; letters of any script, and emoji with their variation selectors, are not.
    @Test func peopleSeeControlBidiAndInvisibleCharactersByTheirCodePoints() {
        let hidden: [UInt32] = [0x00, 0x07, 0x0A, 0x1B, 0x7F, 0x85, 0x9B, 0x9F, 0xAD, 0x061C, 0x180E, 0x200B, 0x200C, 0x200D,
                                0x200E, 0x200F, 0x202A, 0x202E, 0x2028, 0x2029, 0x2060, 0x2064, 0x2066, 0x2069, 0x3164, 0xFEFF,
                                0xFFF9, 0xFFFB, 0xE0001]
        for value in hidden {
            guard let scalar = Unicode.Scalar(value) else { continue }
            #expect(VisibleText.isHidden(scalar), "U+\(String(value, radix: 16, uppercase: true))")
        }
        #expect(VisibleText.shown("user-\u{202E}gnp.exe") == "user-‹U+202E›gnp.exe")
        #expect(VisibleText.shown("nul-a\u{0}b\u{E0001}") == "nul-a‹U+0000›b‹U+E0001›")
        #expect(VisibleText.shown("a\tb\nc") == "a‹U+0009›b‹U+000A›c")
        #expect(VisibleText.shown("a\tb\nc\r", keepingLayout: true) == "a\tb\nc‹U+000D›")
        for plain in ["user-42", "café", "עברית", "العربية", "中文", "❤️", "‹U+202E›"] { #expect(VisibleText.shown(plain) == plain) }
    }
}

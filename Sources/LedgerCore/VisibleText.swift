/// The one rule for showing outside text (a subject, event data, a key, a file name) to people,
/// on a terminal or a page: a character that a terminal or a browser would act on or show as
/// nothing is written as its code point between guillemets, `‹U+202E›`.
///
/// Such a character can make what a support agent reads differ from what is stored: an escape
/// sequence or a carriage return rewrites the terminal, a right-to-left override turns
/// `user-\u{202E}gnp.exe` into `user-exe.png`, a zero-width space makes two subjects look
/// alike, and a control a page dropped made `nul-a\0b` read `nul-ab`.
///
/// ```swift
/// VisibleText.shown("user-\u{202E}gnp.exe")   // "user-‹U+202E›gnp.exe"
/// VisibleText.shown("a\u{1B}[2Jb")            // "a‹U+001B›[2Jb"
/// ```
///
/// JSON output has its own rule (`JSON.Escaping.output`): controls become `\u00XX` escapes.
public enum VisibleText {
    /// Whether `scalar` is shown by its code point: a C0 or C1 control or DEL (general category
    /// Cc); a format character (Cf: the bidirectional controls U+061C, U+200E, U+200F,
    /// U+202A–U+202E, U+2066–U+2069, zero-width U+200B–U+200D, U+2060–U+2064, U+FEFF, the soft
    /// hyphen U+00AD, U+180E, U+FFF9–U+FFFB, tags…); a line or paragraph separator (U+2028,
    /// U+2029); or a Hangul filler, which is drawn as blank space (U+115F, U+1160, U+3164,
    /// U+FFA0).
    public static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        // Printable ASCII, the bulk of every text, without a property lookup.
        if scalar.value >= 0x20 && scalar.value < 0x7F { return false }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return [0x115F, 0x1160, 0x3164, 0xFFA0].contains(scalar.value)
        }
    }

    /// How a hidden scalar is shown: `‹U+` and at least four upper-case hex digits, `›`.
    public static func name(of scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "‹U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "›"
    }

    /// `text` with every hidden scalar (`isHidden(_:)`) written as its name (`name(of:)`);
    /// with `keepingLayout`, tabs and newlines stay as they are (a page's preformatted block,
    /// a message of several lines).
    public static func shown(_ text: String, keepingLayout: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isHidden($0) && !(keepingLayout && isLayout($0)) }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if isHidden(scalar) && !(keepingLayout && isLayout(scalar)) {
                out += name(of: scalar)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A tab or a newline: whitespace a page or a multi-line message lays out by.
    public static func isLayout(_ scalar: Unicode.Scalar) -> Bool { scalar == "\n" || scalar == "\t" }
}

@_spi(Storage) import LedgerCore
import Testing

/// Output escapes what a terminal would act on; the bytes the store hashes never change.
@Suite struct OutputEscapingTests {
    /// An App Store notification holding U+009B (a one-byte CSI), DEL and other C1 controls in
    /// its payload, which the payload codec keeps as the serializer's canonical JSON text: the
    /// bytes its derived id, the hash chain and the stored content are computed over.
    static func notificationWithC1() -> LedgerEvent {
        var notification = AppStoreNotification(notificationType: "DID_RENEW", notificationUUID: "n-1", signedDate: Timestamp(milliseconds: 1_000))
        notification.payload = JSONObject([("note", .string("x\u{9B}31my\u{7F}z")), ("nested", .object(JSONObject([("k\u{85}", .string("\u{9F}"))])))])
        return LedgerEvent(subject: "user-\u{9B}1", occurredAt: Timestamp(milliseconds: 5), source: .appstore, data: notification.eventData)
    }

    /// A support note holding U+009B in its subject and string fields.
    static func noteWithC1() -> LedgerEvent {
        LedgerEvent(subject: "user-\u{9B}1", occurredAt: Timestamp(milliseconds: 5), source: .support,
                    data: SupportNoteAdded(text: "a\u{9B}2Jb", agent: "bob\u{9B}").eventData)
    }

    /// Derived ids come from the canonical bytes, which escaping output must not change: an
    /// existing store's ids and hashes stay what they were.
    @Test func derivedIdsOfEventsHoldingC1ControlsAreUnchanged() throws {
        // Both ids were printed by this test run against the code before output escaping
        // (commit 5edc850, with a placeholder expected value), then written here.
        #expect(try Self.notificationWithC1().draft().id.description == "cec33377-c0f1-8d84-9ecf-d91b69e87fe8")
        #expect(try Self.noteWithC1().draft().id.description == "7ca02390-0686-8ad1-a263-0f9da5eb83f4")
    }

    /// The canonical form writes C1 and DEL as they are (JSON does not require escaping them);
    /// the output form escapes them as `\u00XX`, lower-case as C0's, and reads back the same.
    @Test func outputEscapesDELAndC1AndCanonicalDoesNot() throws {
        let value = JSON.object(JSONObject([("k\u{9B}", .string("\u{1B}\u{7F}\u{80}\u{9B}\u{9F}\u{A0}é€"))]))
        #expect(value.serialized() == "{\"k\u{9B}\":\"\\u001b\u{7F}\u{80}\u{9B}\u{9F}\u{A0}é€\"}")
        #expect(value.serialized(sortedKeys: true) == value.serialized(sortedKeys: true, escaping: .canonical))
        let output = value.serialized(escaping: .output)
        #expect(output == #"{"k\u009b":"\u001b\u007f\u0080\u009b\u009f"# + "\u{A0}é€\"}")
        #expect(try JSONParser.parse(output) == value)
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@_spi(Storage) import LedgerCore
import LedgerServer
import Testing

/// The pages show what a browser would hide or act on, and keep a right-to-left run from
/// reordering the text around it (GitHub issue 59); the JSON API escapes C1 controls.
@Suite struct PageEscapingTests {
    static func purchase(_ subject: String, transaction: String) -> LedgerEvent {
        LedgerEvent(subject: subject, occurredAt: Timestamp(rfc3339: "2026-03-01T09:30:00Z") ?? .now(), source: .appstore,
                    data: SubscriptionPurchased(productId: "pro.monthly", transactionId: transaction, originalTransactionId: "o-" + transaction,
                                                purchasedAt: Timestamp(rfc3339: "2026-03-01T09:30:00Z") ?? .now(),
                                                expiresAt: Timestamp(rfc3339: "2026-04-01T09:30:00Z") ?? .now()).eventData)
    }

    static func path(_ subject: String) -> String {
        "/ui/subjects/" + (subject.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") + "?at=\(Served.at)"
    }

    /// `user-\u{202E}gnp.exe` once read as `user-exe.png` in the heading and the links: the
    /// override is shown, and each outside value sits in a `<bdi>`.
    @Test func aBidiOverrideIsShownAndOutsideValuesAreIsolated() async throws {
        let subject = "user-\u{202E}gnp.exe"
        try await Served.run(configure: { ledger in
            try ledger.append([Self.purchase(subject, transaction: "t-rlo"),
                               LedgerEvent(subject: subject, occurredAt: Timestamp(rfc3339: "2026-03-02T10:00:00Z") ?? .now(), source: .support,
                                           data: SupportNoteAdded(text: "see \u{2067}אבג\u{2069} and \u{200B}", agent: "bob").eventData)])
        }) { client, served async throws in
            let cookie = try await PagesTests.signIn(client, served.support)
            let page = try await client.execute(uri: Self.path(subject), method: .get, headers: cookie)
            #expect(page.status == .ok)
            #expect(page.text.contains("<title>user-‹U+202E›gnp.exe · ledger</title>"))
            #expect(page.text.contains("<h1><bdi>user-‹U+202E›gnp.exe</bdi></h1>"))
            #expect(page.text.contains("‹U+2067›אבג‹U+2069› and ‹U+200B›"))
            #expect(page.text.contains("<td><bdi>guest</bdi> → <bdi>pro</bdi></td>"))
            let held = try await client.execute(uri: "/?q=t-rlo&by=transactionId", method: .get, headers: cookie)
            #expect(held.text.contains(#"<li><a href="/ui/subjects/user-%E2%80%AEgnp.exe"><bdi>user-‹U+202E›gnp.exe</bdi></a></li>"#), "\(held.text)")
            #expect(held.text.contains("<h2>Holding transactionId <bdi>t-rlo</bdi></h2>"))
            for text in [page.text, held.text] {
                #expect(!text.unicodeScalars.contains { $0.properties.generalCategory == .format }, "a format character is in the page")
            }
        }
    }

    /// Controls were dropped, so that `nul-a\0b` looked like `nul-ab`: they are shown.
    @Test func controlCharactersAreShownNeverDropped() async throws {
        let subject = "nul-a\u{0}b"
        try await Served.run(configure: { ledger in
            try ledger.append([Self.purchase(subject, transaction: "t-nul\u{7}")])
        }) { client, served async throws in
            let cookie = try await PagesTests.signIn(client, served.support)
            let page = try await client.execute(uri: Self.path(subject), method: .get, headers: cookie)
            #expect(page.status == .ok)
            #expect(page.text.contains("<h1><bdi>nul-a‹U+0000›b</bdi></h1>"))
            #expect(page.text.contains("t-nul‹U+0007›"))
            #expect(!page.text.unicodeScalars.contains { $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t" })
            let none = try await client.execute(uri: "/?q=o%0D9&by=originalTransactionId", method: .get, headers: cookie)
            #expect(none.text.contains("No subject holds originalTransactionId <bdi>o‹U+000D›9</bdi>."), "\(none.text)")
        }
    }

    /// The JSON API escapes DEL and C1 controls as `\u00XX`, as the command line does.
    @Test func theAPIsJSONEscapesC1Controls() async throws {
        let subject = "user-\u{9B}1"
        try await Served.run(configure: { ledger in
            try ledger.append([Self.purchase(subject, transaction: "t\u{85}")])
        }) { client, served async throws in
            let uri = "/v1/subjects/" + (subject.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") + "/audit?at=\(Served.at)"
            let response = try await client.execute(uri: uri, method: .get, headers: served.bearer(served.support))
            #expect(response.status == .ok)
            #expect(response.text.contains(#"user-\u009b1"#), "\(response.text)")
            #expect(!response.text.unicodeScalars.contains { (0x7F ... 0x9F).contains($0.value) })
        }
    }
}

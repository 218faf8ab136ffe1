import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@_spi(Storage) import LedgerCore
import LedgerServer
import Testing

/// The JSON API escapes C1 controls (GitHub issue 59).
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

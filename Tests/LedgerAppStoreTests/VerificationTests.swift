import Crypto
import Foundation
import LedgerAppStore
@_spi(Storage) import LedgerCore
import Testing

/// Signed notifications verified as Apple's library verifies them: Apple's own samples, and
/// notifications minted with Apple's test chain, genuine and forged.
@Suite(.enabled(if: Samples.present, Comment(rawValue: Samples.absent)))
struct VerificationTests {
    func verifier(_ configuration: AppStoreConfiguration? = nil) throws -> SignedDataVerifier {
        try SignedDataVerifier(try configuration ?? Samples.configuration())
    }

    /// The rejection `body` meets, or a recorded issue when it verifies.
    func rejection(_ body: [UInt8], _ configuration: AppStoreConfiguration? = nil) async throws -> AppStoreRejection? {
        let verifier = try verifier(configuration)
        do {
            let verified = try await verifier.verifyNotification(body: body)
            Issue.record("verified: \(verified.notificationType) \(verified.notificationUUID)")
            return nil
        } catch {
            return error
        }
    }

    // MARK: Apple's samples

    @Test func applesTestNotificationVerifiesToTheTestRoot() async throws {
        let signed = try Samples.text("mock_signed_data/testNotification")
        let verified = try await verifier().verifyNotification(body: Samples.body(signed))
        #expect(verified.notificationType == "TEST")
        #expect(verified.subtype == nil)
        #expect(verified.notificationUUID == "9ad56bd2-0bc6-42e0-af24-fd996d87a1e6")
        #expect(verified.signedDate == Timestamp(milliseconds: 1_681_314_324_000))
        #expect(verified.transaction == nil)
    }

    @Test func applesWrongBundleIdSampleIsRejected() async throws {
        let rejected = try await rejection(Samples.body(try Samples.text("mock_signed_data/wrongBundleId")))
        #expect(rejected?.reason == .wrongBundle)
        #expect(rejected?.pointer == "/signedPayload/data")
    }

    @Test func applesMissingX5CSampleIsRejected() async throws {
        let rejected = try await rejection(Samples.body(try Samples.text("mock_signed_data/missingX5CHeaderClaim")))
        #expect(rejected?.reason == .badCertificates)
    }

    @Test func aProductionConfigurationRefusesTheSandboxSample() async throws {
        let rejected = try await rejection(Samples.body(try Samples.text("mock_signed_data/testNotification")),
                                           try Samples.configuration(environment: .production))
        #expect(rejected?.reason == .wrongEnvironment)
    }

    // MARK: Minted with Apple's test chain

    @Test func aMintedNotificationWithItsTransactionVerifies() async throws {
        let transaction: JSON = ["transactionId": "2000000100", "originalTransactionId": "2000000100", "bundleId": "com.example",
                                 "productId": "pro.monthly", "environment": "Sandbox", "signedDate": 1_772_357_400_000]
        let renewal: JSON = ["originalTransactionId": "2000000100", "autoRenewStatus": 1, "environment": "Sandbox", "signedDate": 1_772_357_400_000]
        let payload = Samples.notification("SUBSCRIBED", subtype: "INITIAL_BUY", data: [
            ("signedTransactionInfo", .string(try Samples.mint(transaction))),
            ("signedRenewalInfo", .string(try Samples.mint(renewal))),
        ])
        let verified = try await verifier().verifyNotification(body: Samples.body(try Samples.mint(payload)))
        #expect(verified.notificationType == "SUBSCRIBED")
        #expect(verified.subtype == "INITIAL_BUY")
        #expect(verified.transaction?["transactionId"] == "2000000100")
        #expect(verified.renewal?["autoRenewStatus"] == 1)
    }

    /// Apple's times may carry a fraction of a millisecond: it is truncated.
    @Test func aFractionalSignedDateIsTruncated() async throws {
        guard case .object(var payload) = Samples.notification("TEST") else { return }
        payload["signedDate"] = .number(try #require(JSONNumber(1_772_357_400_123.875)))
        let verified = try await verifier().verifyNotification(body: Samples.body(try Samples.mint(.object(payload))))
        #expect(verified.signedDate == Timestamp(milliseconds: 1_772_357_400_123))
    }

    // MARK: Forgeries: each refused, with the reason named

    @Test func aFlippedSignatureBitIsRefused() async throws {
        let signed = try Samples.mint(Samples.notification("TEST"))
        var parts = signed.split(separator: ".").map(String.init)
        var signature = try #require(Data(base64Encoded: parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "=="))
        signature[10] ^= 0x01
        parts[2] = Samples.base64URL(signature)
        #expect(try await rejection(Samples.body(parts.joined(separator: "."))).map(\.reason) == .badSignature)
    }

    @Test func aRogueKeyWithTheRealChainIsRefused() async throws {
        let forged = try Samples.mint(Samples.notification("TEST"), key: P256.Signing.PrivateKey())
        #expect(try await rejection(Samples.body(forged)).map(\.reason) == .badSignature)
    }

    @Test func aChainToAnotherRootIsRefused() async throws {
        let other = try Samples.otherRoot()
        let rejected = try await rejection(Samples.body(try Samples.mint(Samples.notification("TEST"))), try Samples.configuration(roots: [other.der]))
        #expect(rejected?.reason == .untrustedChain)
    }

    @Test func aLeafWithoutApplesOIDIsRefused() async throws {
        let forged = try Samples.mint(Samples.notification("TEST"), x5c: try Samples.chain(leaf: "testInvalidOIDLeaf"))
        let rejected = try await rejection(Samples.body(forged))
        #expect(rejected?.reason == .missingOID)
        #expect(rejected?.message.contains("leaf") == true)
    }

    @Test func anIntermediateWithoutApplesOIDIsRefused() async throws {
        let forged = try Samples.mint(Samples.notification("TEST"),
                                      x5c: try Samples.chain(leaf: "testInvalidIntermediateLeaf", intermediate: "testInvalidOIDIntermediate"))
        let rejected = try await rejection(Samples.body(forged))
        #expect(rejected?.reason == .missingOID)
        #expect(rejected?.message.contains("intermediate") == true)
    }

    /// Validity is checked at the payload's signedDate: the test chain runs out in January 2033.
    @Test func aCertificateNotValidAtSignedDateIsRefused() async throws {
        let late = try Samples.mint(Samples.notification("TEST", signedDate: 2_000_000_000_000))   // 2033-05-18
        #expect(try await rejection(Samples.body(late)).map(\.reason) == .certificateExpired)
        let early = try Samples.mint(Samples.notification("TEST", signedDate: 1_600_000_000_000))  // 2020-09-13
        #expect(try await rejection(Samples.body(early)).map(\.reason) == .certificateExpired)
    }

    @Test func aWrongBundleOrEnvironmentIsRefused() async throws {
        let bundle = try Samples.mint(Samples.notification("TEST", bundleId: "com.other"))
        #expect(try await rejection(Samples.body(bundle)).map(\.reason) == .wrongBundle)
        let environment = try Samples.mint(Samples.notification("TEST", environment: "Production"))
        #expect(try await rejection(Samples.body(environment)).map(\.reason) == .wrongEnvironment)
    }

    @Test func aWrongAppAppleIdIsRefusedInProduction() async throws {
        let signed = try Samples.mint(Samples.notification("TEST", environment: "Production"))
        let rejected = try await rejection(Samples.body(signed), try Samples.configuration(environment: .production, appAppleId: 99))
        #expect(rejected?.reason == .wrongAppAppleId)
        let accepted = try await verifier(try Samples.configuration(environment: .production, appAppleId: 1234)).verifyNotification(body: Samples.body(signed))
        #expect(accepted.notificationType == "TEST")
    }

    /// In production with an app id configured, a notification that names none is refused.
    @Test func aMissingAppAppleIdIsRefusedInProduction() async throws {
        guard case .object(var payload) = Samples.notification("TEST", environment: "Production"),
              case .object(var data)? = payload["data"] else { return }
        data["appAppleId"] = nil
        payload["data"] = .object(data)
        let rejected = try await rejection(Samples.body(try Samples.mint(.object(payload))), try Samples.configuration(environment: .production, appAppleId: 1234))
        #expect(rejected?.reason == .wrongAppAppleId)
    }

    /// An external purchase token names no environment: its id's "SANDBOX" prefix says it.
    @Test func anExternalPurchaseTokenTakesItsEnvironmentFromItsId() async throws {
        let token: JSON = ["externalPurchaseId": "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e", "tokenCreationDate": 1_698_148_900_000,
                           "appAppleId": 1234, "bundleId": "com.example"]
        let payload: JSON = ["notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED", "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
                             "version": "2.0", "signedDate": 1_772_357_400_000, "externalPurchaseToken": token]
        let verified = try await verifier().verifyNotification(body: Samples.body(try Samples.mint(payload)))
        #expect(verified.notificationType == "EXTERNAL_PURCHASE_TOKEN")
        let production = try await rejection(Samples.body(try Samples.mint(payload)), try Samples.configuration(environment: .production))
        #expect(production?.reason == .wrongEnvironment)
    }

    /// A nested transaction is verified too, at its own pointer.
    @Test func aForgedNestedTransactionIsRefused() async throws {
        let transaction: JSON = ["transactionId": "t1", "originalTransactionId": "t1", "bundleId": "com.example", "environment": "Sandbox",
                                 "signedDate": 1_772_357_400_000]
        let forged = try Samples.mint(transaction, key: P256.Signing.PrivateKey())
        let payload = Samples.notification("DID_RENEW", data: [("signedTransactionInfo", .string(forged))])
        let rejected = try await rejection(Samples.body(try Samples.mint(payload)))
        #expect(rejected?.reason == .badSignature)
        #expect(rejected?.pointer == "/signedPayload/data/signedTransactionInfo")
    }

    @Test func aMissingOrTwoCertificateX5CIsRefused() async throws {
        let chain = try Samples.chain()
        let two = try Samples.mint(Samples.notification("TEST"), x5c: Array(chain.prefix(2)))
        #expect(try await rejection(Samples.body(two)).map(\.reason) == .badCertificates)
        let none = try Samples.mint(Samples.notification("TEST"), x5c: [])
        #expect(try await rejection(Samples.body(none)).map(\.reason) == .badCertificates)
    }

    @Test func anAlgorithmOtherThanES256IsRefused() async throws {
        for alg in ["HS256", "none", "ES384"] {
            let signed = try Samples.mint(Samples.notification("TEST"), alg: alg)
            #expect(try await rejection(Samples.body(signed)).map(\.reason) == .unsupportedAlgorithm, "alg \(alg)")
        }
    }

    @Test func aTruncatedTokenIsRefused() async throws {
        let signed = try Samples.mint(Samples.notification("TEST"))
        let cut = String(signed.prefix(upTo: try #require(signed.lastIndex(of: "."))))
        #expect(try await rejection(Samples.body(cut)).map(\.reason) == .malformed)
        #expect(try await rejection(Samples.body(String(signed.dropLast(20)))).map(\.reason) == .badSignature)
    }

    @Test func aPayloadThatIsNotJSONIsRefused() async throws {
        let header = Samples.base64URL(Array(#"{"alg":"ES256","x5c":[]}"#.utf8))
        let token = header + "." + Samples.base64URL(Array("not json".utf8)) + "." + Samples.base64URL([1, 2, 3])
        #expect(try await rejection(Samples.body(token)).map(\.reason) == .malformed)
        #expect(try await rejection(Array("not json".utf8)).map(\.reason) == .malformed)
        #expect(try await rejection(Array(#"{"signedPayload": 7}"#.utf8)).map(\.reason) == .malformed)
    }

    /// A payload without a signedDate has its chain checked now (as Apple's library does); a
    /// notification still needs one, the time of what it reports.
    @Test func aNotificationWithoutSignedDateIsRefusedOnceVerified() async throws {
        guard case .object(var payload) = Samples.notification("TEST") else { return }
        payload["signedDate"] = nil
        let rejected = try await rejection(Samples.body(try Samples.mint(.object(payload))))
        #expect(rejected?.reason == .malformed)
        #expect(rejected?.message.contains("no signedDate") == true)
    }

    @Test func aTenMegabyteBodyIsRefused() async throws {
        let body = Samples.body(String(repeating: "a", count: 10 << 20))
        let rejected = try await rejection(body)
        #expect(rejected?.reason == .tooLarge)
    }
}

import Crypto
import Foundation
@_spi(Storage) import LedgerCore
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509

/// Why a signed notification was refused, with the JSON pointer of the part at fault
/// (`/signedPayload`, or `/signedPayload/data/signedTransactionInfo` for a nested one).
public struct AppStoreRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: String, Sendable, Hashable {
        /// Not a POST body of `{"signedPayload": …}`, not three base64url parts, or a header or
        /// payload that is not a JSON object.
        case malformed
        /// The body is larger than `SignedDataVerifier.maximumBodySize`.
        case tooLarge
        /// The header's `alg` is not ES256.
        case unsupportedAlgorithm
        /// The header has no `x5c` of exactly three certificates that parse.
        case badCertificates
        /// A certificate of the chain is not valid at the payload's `signedDate`.
        case certificateExpired
        /// The leaf or the intermediate lacks Apple's OID.
        case missingOID
        /// The chain does not reach a configured root.
        case untrustedChain
        /// The signature does not verify with the leaf's key.
        case badSignature
        /// `bundleId` is not the configured one.
        case wrongBundle
        /// `environment` is not the configured one.
        case wrongEnvironment
        /// `appAppleId` is not the configured one (production).
        case wrongAppAppleId

        /// The reason in a few words, as an error line names it.
        public var words: String {
            switch self {
            case .malformed: "malformed JWS"
            case .tooLarge: "body too large"
            case .unsupportedAlgorithm: "algorithm not ES256"
            case .badCertificates: "bad x5c"
            case .certificateExpired: "certificate not valid at signedDate"
            case .missingOID: "missing Apple OID"
            case .untrustedChain: "chain does not reach a configured root"
            case .badSignature: "bad signature"
            case .wrongBundle: "wrong bundle"
            case .wrongEnvironment: "wrong environment"
            case .wrongAppAppleId: "wrong appAppleId"
            }
        }
    }

    public var reason: Reason
    public var message: String
    public var pointer: String

    public init(_ reason: Reason, _ message: String, at pointer: String = "/signedPayload") {
        self.reason = reason
        self.message = message
        self.pointer = pointer
    }

    public var description: String { "\(pointer): \(message)" }

    /// The line an ingest reports under `/signedPayload`: the reason, the nested part at fault
    /// when it is one, and the detail ("bad signature in data/signedTransactionInfo: …").
    public var summary: String {
        let part = pointer.hasPrefix("/signedPayload/") ? " in \(pointer.dropFirst("/signedPayload/".count))" : ""
        return "\(reason.words)\(part): \(message)"
    }
}

/// A notification that verified: its payload, and its nested transaction and renewal info, each
/// verified the same way.
public struct VerifiedNotification: Sendable, Hashable {
    /// The decoded payload, whole (what `appstore.notification` keeps).
    public var payload: JSONObject
    public var notificationType: String
    public var subtype: String?
    public var notificationUUID: String
    /// When Apple signed it (milliseconds, any fraction truncated).
    public var signedDate: Timestamp
    /// The decoded `signedTransactionInfo`, when the notification has one.
    public var transaction: JSONObject?
    /// The decoded `signedRenewalInfo`, when the notification has one.
    public var renewal: JSONObject?
}

/// Verifies the App Store's signed data as Apple's App Store Server Library does
/// (`ChainVerifier`, `SignedDataVerifier`): a compact JWS whose header has `alg` ES256 and an
/// `x5c` of exactly three certificates; the chain built from the leaf and the intermediate to a
/// configured root (the x5c's own root is not trusted) under RFC 5280 at the payload's
/// `signedDate`, with Apple's OIDs on the leaf and the intermediate; the ES256 signature by the
/// leaf's key; then `bundleId`, `environment` and, in production when configured, `appAppleId`.
/// Certificates and signatures are swift-certificates' and swift-crypto's work; nothing here
/// parses ASN.1 or checks a signature by hand.
public struct SignedDataVerifier: Sendable {
    /// The largest POST body taken: Apple's notifications are a few kilobytes.
    public static let maximumBodySize = 256 * 1024

    static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    public let configuration: AppStoreConfiguration
    private let roots: CertificateStore

    /// - Throws: `LedgerError.invalidEvent` when a root does not parse, or there is none.
    public init(_ configuration: AppStoreConfiguration) throws(LedgerError) {
        guard !configuration.rootCertificates.isEmpty else {
            throw LedgerError(.invalidEvent, "no root certificate configured: give the App Store's root (Apple Root CA G3) or a test root")
        }
        var parsed: [Certificate] = []
        for der in configuration.rootCertificates {
            do {
                parsed.append(try Certificate(derEncoded: der))
            } catch {
                throw LedgerError(.invalidEvent, "a configured root certificate does not parse (\(error))")
            }
        }
        self.configuration = configuration
        roots = CertificateStore(parsed)
    }

    /// Verifies a POST body, `{"signedPayload": "<JWS>"}`, and the signed data inside it.
    public func verifyNotification(body: [UInt8]) async throws(AppStoreRejection) -> VerifiedNotification {
        guard body.count <= Self.maximumBodySize else {
            throw AppStoreRejection(.tooLarge, "the body is \(body.count) bytes; a notification is at most \(Self.maximumBodySize)", at: "/")
        }
        guard case .object(let object) = try? JSONParser.parse(body) else {
            throw AppStoreRejection(.malformed, "the body is not a JSON object", at: "/")
        }
        guard case .string(let signed) = object["signedPayload"] else {
            throw AppStoreRejection(.malformed, "the body has no signedPayload string")
        }
        return try await verifyNotification(signedPayload: signed)
    }

    /// Verifies a notification's JWS (`signedPayload`), then its nested signed data.
    public func verifyNotification(signedPayload: String) async throws(AppStoreRejection) -> VerifiedNotification {
        let pointer = "/signedPayload"
        let (payload, signedDate) = try await verify(signedPayload, at: pointer)
        guard case .string(let type) = payload["notificationType"], case .string(let uuid) = payload["notificationUUID"] else {
            throw AppStoreRejection(.malformed, "the payload has no notificationType or notificationUUID", at: pointer)
        }
        var subtype: String?
        if case .string(let value) = payload["subtype"] { subtype = value }
        // `data` for a transaction's notifications, `summary` for a renewal extension's summary,
        // `externalPurchaseToken` for external purchases: each names the app and environment.
        let app = ["data", "summary", "externalPurchaseToken"].lazy.compactMap { key -> (String, JSONObject)? in
            if case .object(let object) = payload[key] { (key, object) } else { nil }
        }.first
        var transaction: JSONObject?
        var renewal: JSONObject?
        if let (key, data) = app {
            // An external purchase token names no environment: its id says it (Apple's library
            // reads a "SANDBOX" prefix as the sandbox).
            var named = data
            if key == "externalPurchaseToken", named["environment"] == nil, case .string(let id)? = data["externalPurchaseId"] {
                named["environment"] = .string(id.hasPrefix("SANDBOX") ? AppStoreEnvironment.sandbox.rawValue : AppStoreEnvironment.production.rawValue)
            }
            try check(named, at: "\(pointer)/\(key)", checksAppAppleId: true)
            if case .string(let jws) = data["signedTransactionInfo"] {
                let nested = "\(pointer)/\(key)/signedTransactionInfo"
                transaction = try await verify(jws, at: nested).payload
                try check(transaction ?? JSONObject(), at: nested)
            }
            if case .string(let jws) = data["signedRenewalInfo"] {
                let nested = "\(pointer)/\(key)/signedRenewalInfo"
                renewal = try await verify(jws, at: nested).payload
                try check(renewal ?? JSONObject(), at: nested, hasBundle: false)
            }
        } else {
            throw AppStoreRejection(.malformed, "the payload has no data, summary or externalPurchaseToken naming the app", at: pointer)
        }
        guard let signedDate else {
            throw AppStoreRejection(.malformed, "the notification has no signedDate: the time of the facts it reports", at: pointer)
        }
        return VerifiedNotification(payload: payload, notificationType: type, subtype: subtype, notificationUUID: uuid,
                                    signedDate: signedDate, transaction: transaction, renewal: renewal)
    }

    /// The app's identifiers in `object` against the configuration. A renewal info names no
    /// bundle or app id: only its environment is checked. The notification itself names the
    /// app id (`checksAppAppleId`): in production, when one is configured, it must be it —
    /// absent is no match (as in Apple's library).
    private func check(_ object: JSONObject, at pointer: String, hasBundle: Bool = true, checksAppAppleId: Bool = false) throws(AppStoreRejection) {
        if hasBundle {
            let bundle: String? = if case .string(let value) = object["bundleId"] { value } else { nil }
            guard bundle == configuration.bundleId else {
                throw AppStoreRejection(.wrongBundle, "bundleId is \(bundle.map { "\"\($0)\"" } ?? "missing"), not \"\(configuration.bundleId)\"", at: pointer)
            }
        }
        let environment: String? = if case .string(let value) = object["environment"] { value } else { nil }
        guard environment == configuration.environment.rawValue else {
            throw AppStoreRejection(.wrongEnvironment, "environment is \(environment.map { "\"\($0)\"" } ?? "missing"), not \"\(configuration.environment.rawValue)\"", at: pointer)
        }
        if checksAppAppleId, configuration.environment == .production, let expected = configuration.appAppleId {
            let actual: Int64? = if case .number(let number) = object["appAppleId"] { number.int64 } else { nil }
            guard actual == expected else {
                throw AppStoreRejection(.wrongAppAppleId, "appAppleId is \(actual.map(String.init) ?? "missing"), not \(expected)", at: pointer)
            }
        }
    }

    /// Verifies one compact JWS: its header, its chain at its payload's `signedDate`, and its
    /// signature. Returns the payload and that date, if it has one.
    func verify(_ jws: String, at pointer: String) async throws(AppStoreRejection) -> (payload: JSONObject, signedDate: Timestamp?) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URL(parts[0]), let payloadBytes = Self.base64URL(parts[1]),
              let signature = Self.base64URL(parts[2]) else {
            throw AppStoreRejection(.malformed, "not a compact JWS: three base64url parts separated by dots", at: pointer)
        }
        guard case .object(let header) = try? JSONParser.parse(headerBytes) else {
            throw AppStoreRejection(.malformed, "the JWS header is not a JSON object", at: pointer)
        }
        guard case .object(let payload) = try? JSONParser.parse(payloadBytes) else {
            throw AppStoreRejection(.malformed, "the JWS payload is not a JSON object", at: pointer)
        }
        guard case .string("ES256") = header["alg"] else {
            throw AppStoreRejection(.unsupportedAlgorithm, "the JWS alg is \(header["alg"]?.serialized() ?? "missing"), not \"ES256\"", at: pointer)
        }
        guard case .array(let x5c) = header["x5c"], x5c.count == 3 else {
            throw AppStoreRejection(.badCertificates, "the JWS header needs an x5c of exactly three certificates (leaf, intermediate, root)", at: pointer)
        }
        var chain: [Certificate] = []
        for (index, entry) in x5c.enumerated() {
            guard case .string(let text) = entry, let der = Data(base64Encoded: text), let certificate = try? Certificate(derEncoded: Array(der)) else {
                throw AppStoreRejection(.badCertificates, "x5c[\(index)] is not a base64 DER certificate", at: pointer)
            }
            chain.append(certificate)
        }
        // Without a signedDate, the chain is checked now, as Apple's library does.
        var signedDate: Timestamp?
        if let value = payload["signedDate"] {
            guard case .number(let number) = value, let milliseconds = number.double, milliseconds.isFinite,
                  milliseconds >= 0, milliseconds < 253_402_300_800_000 else {
                throw AppStoreRejection(.malformed, "signedDate is \(value.serialized()), not milliseconds since 1970", at: pointer)
            }
            signedDate = Timestamp(milliseconds: Int64(milliseconds.rounded(.towardZero)))
        }
        try await verifyChain(leaf: chain[0], intermediate: chain[1], at: signedDate ?? .now(), pointer: pointer)

        guard let key = P256.Signing.PublicKey(chain[0].publicKey) else {
            throw AppStoreRejection(.badSignature, "the leaf certificate's key is not a P-256 key", at: pointer)
        }
        guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
              key.isValidSignature(ecdsa, for: Array("\(parts[0]).\(parts[1])".utf8)) else {
            throw AppStoreRejection(.badSignature, "the signature does not verify with the leaf certificate's key", at: pointer)
        }
        return (payload, signedDate)
    }

    /// The chain from `leaf` through `intermediate` to a configured root, under RFC 5280 at
    /// `time` and Apple's OIDs, as Apple's library builds it. The dates and OIDs are looked at
    /// first, only to name what is wrong.
    private func verifyChain(leaf: Certificate, intermediate: Certificate, at time: Timestamp, pointer: String) async throws(AppStoreRejection) {
        let date = time.date
        for (name, certificate) in [("leaf", leaf), ("intermediate", intermediate)] {
            guard certificate.notValidBefore <= date, date <= certificate.notValidAfter else {
                throw AppStoreRejection(.certificateExpired, "the \(name) certificate is not valid at signedDate \(time): it is valid from \(Timestamp(certificate.notValidBefore)) to \(Timestamp(certificate.notValidAfter))", at: pointer)
            }
        }
        guard leaf.extensions.contains(where: { $0.oid == Self.leafOID }) else {
            throw AppStoreRejection(.missingOID, "the leaf certificate lacks Apple's receipt-signing OID 1.2.840.113635.100.6.11.1", at: pointer)
        }
        guard intermediate.extensions.contains(where: { $0.oid == Self.intermediateOID }) else {
            throw AppStoreRejection(.missingOID, "the intermediate certificate lacks Apple's WWDR OID 1.2.840.113635.100.6.2.1", at: pointer)
        }
        var verifier = Verifier(rootCertificates: roots) {
            RFC5280Policy(fixedExpiryValidationTime: date)
            AppStoreOIDPolicy()
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])) {
        case .validCertificate:
            return
        case .couldNotValidate(let failures):
            let why = failures.first.map { " (\($0.policyFailureReason))" } ?? ""
            throw AppStoreRejection(.untrustedChain, "the x5c chain does not reach a configured root\(why)", at: pointer)
        }
    }

    /// Base64url without padding, as JWS writes it; `nil` for any other character.
    static func base64URL(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.allSatisfy(\.isBase64URL) else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}

/// Apple's OIDs on the leaf and the intermediate of a chain of three (Apple's `AppStoreOIDPolicy`).
struct AppStoreOIDPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.count == 3 else { return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, not 3") }
        guard chain[1].extensions.contains(where: { $0.oid == SignedDataVerifier.intermediateOID }) else {
            return .failsToMeetPolicy(reason: "the intermediate certificate lacks Apple's WWDR OID")
        }
        guard chain[0].extensions.contains(where: { $0.oid == SignedDataVerifier.leafOID }) else {
            return .failsToMeetPolicy(reason: "the leaf certificate lacks Apple's receipt-signing OID")
        }
        return .meetsPolicy
    }
}

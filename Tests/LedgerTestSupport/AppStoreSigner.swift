import Crypto
import Foundation
@_spi(Storage) import LedgerCore
import SwiftASN1
import X509

/// A chain of the App Store's shape made in memory — a root, an intermediate and a leaf with
/// Apple's OIDs, valid 2026–2036 — and notifications signed by it: for tests that need signed
/// data without Apple's samples.
public struct AppStoreSigner: Sendable {
    public let rootDER: [UInt8]
    public let x5c: [String]
    private let leafKey: P256.Signing.PrivateKey

    public init() throws {
        let from = Date(timeIntervalSince1970: 1_767_225_600), until = Date(timeIntervalSince1970: 2_082_758_400)
        func name(_ cn: String) throws -> DistinguishedName { try DistinguishedName { CommonName(cn) } }
        let rootKey = P256.Signing.PrivateKey(), interKey = P256.Signing.PrivateKey()
        leafKey = P256.Signing.PrivateKey()
        let root = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: from, notValidAfter: until,
                                   issuer: try name("Test Root"), subject: try name("Test Root"), signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: try Certificate.Extensions { Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil)) },
                                   issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(interKey.publicKey), notValidBefore: from, notValidAfter: until,
                                           issuer: root.subject, subject: try name("Test Intermediate"), signatureAlgorithm: .ecdsaWithSHA256,
                                           extensions: try Certificate.Extensions {
                                               Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                                               Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: [0x05, 0x00])
                                           }, issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: from, notValidAfter: until,
                                   issuer: intermediate.subject, subject: try name("Test Signer"), signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: try Certificate.Extensions {
                                       Critical(BasicConstraints.notCertificateAuthority)
                                       Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: [0x05, 0x00])
                                   }, issuerPrivateKey: .init(interKey))
        func der(_ certificate: Certificate) throws -> [UInt8] {
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return serializer.serializedBytes
        }
        rootDER = try der(root)
        x5c = try [leaf, intermediate, root].map { Data(try der($0)).base64EncodedString() }
    }

    /// The root as a PEM file's text.
    public var rootPEM: String {
        get throws { try PEMDocument(type: "CERTIFICATE", derBytes: rootDER).pemString + "\n" }
    }

    /// A compact JWS of `payload`, signed by the leaf, with the chain as its x5c.
    public func sign(_ payload: JSON) throws -> String {
        func base64URL(_ bytes: some Sequence<UInt8>) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = JSON.object(["alg": "ES256", "x5c": .array(x5c.map(JSON.string))])
        let input = base64URL(Array(header.serialized().utf8)) + "." + base64URL(Array(payload.serialized().utf8))
        return input + "." + base64URL(try leafKey.signature(for: Array(input.utf8)).rawRepresentation)
    }

    /// A POST body of a notification of `type` for `bundleId` in the sandbox, `data` holding
    /// `extra` besides the app's ids.
    public func body(_ type: String, subtype: String? = nil, uuid: String, signedDate: Int64, bundleId: String = "com.example.ledger",
                     data extra: [(String, JSON)] = []) throws -> String {
        var data: JSONObject = ["bundleId": .string(bundleId), "environment": "Sandbox", "appAppleId": 1234]
        for (key, value) in extra { data[key] = value }
        var payload: JSONObject = ["notificationType": .string(type), "notificationUUID": .string(uuid), "version": "2.0",
                                   "signedDate": .integer(signedDate), "data": .object(data)]
        if let subtype { payload["subtype"] = .string(subtype) }
        return JSON.object(["signedPayload": .string(try sign(.object(payload)))]).serialized()
    }
}

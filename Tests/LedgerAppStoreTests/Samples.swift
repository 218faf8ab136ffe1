import Crypto
import Foundation
import LedgerAppStore
@_spi(Storage) import LedgerCore
import SwiftASN1
import X509

/// Apple's App Store samples (`../shared/appstore-samples` beside the repository, or
/// `$LEDGER_APPSTORE_SAMPLES`): signed data from Apple's library, and its test chain with the
/// keys that mint notifications of any type. Not copied into the project.
enum Samples {
    static let folder: URL = {
        if let path = ProcessInfo.processInfo.environment["LEDGER_APPSTORE_SAMPLES"], !path.isEmpty { return URL(fileURLWithPath: path) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.deletingLastPathComponent().appendingPathComponent("shared/appstore-samples")
    }()

    static let present = FileManager.default.fileExists(atPath: folder.appendingPathComponent("java-certs/testLeaf.key").path)
    static let absent = "Apple's App Store samples are not at \(folder.path) (set LEDGER_APPSTORE_SAMPLES to their folder)"

    static func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: folder.appendingPathComponent(path)))
    }

    static func text(_ path: String) throws -> String {
        String(decoding: try bytes(path), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The DER of a PEM certificate of java-certs.
    static func der(_ name: String) throws -> [UInt8] {
        try PEMDocument(pemString: try text("java-certs/\(name).pem")).derBytes
    }

    static func testRoot() throws -> [UInt8] { try bytes("certs/testCA.der") }

    static func configuration(bundleId: String = "com.example", environment: AppStoreEnvironment = .sandbox,
                              appAppleId: Int64? = nil, roots: [[UInt8]]? = nil) throws -> AppStoreConfiguration {
        AppStoreConfiguration(rootCertificates: try roots ?? [testRoot()], bundleId: bundleId, environment: environment, appAppleId: appAppleId)
    }

    static func leafKey() throws -> P256.Signing.PrivateKey {
        try P256.Signing.PrivateKey(pemRepresentation: try text("java-certs/testLeaf.key"))
    }

    /// The x5c Apple sends: leaf, intermediate, root.
    static func chain(leaf: String = "testLeaf", intermediate: String = "testIntermediate") throws -> [String] {
        [try der(leaf), try der(intermediate), try der("testCA")].map { Data($0).base64EncodedString() }
    }

    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A compact JWS of `payload`, signed by `key` (default: the test leaf's), with `header`.
    static func mint(_ payload: JSON, key: P256.Signing.PrivateKey? = nil, alg: String = "ES256", x5c: [String]? = nil) throws -> String {
        var header = JSONObject()
        header["alg"] = .string(alg)
        header["x5c"] = .array(try (x5c ?? chain()).map(JSON.string))
        let signingInput = base64URL(Array(JSON.object(header).serialized().utf8)) + "." + base64URL(Array(payload.serialized().utf8))
        let signature = try (key ?? leafKey()).signature(for: Array(signingInput.utf8))
        return signingInput + "." + base64URL(signature.rawRepresentation)
    }

    /// The POST body Apple sends.
    static func body(_ signedPayload: String) -> [UInt8] {
        var object = JSONObject()
        object["signedPayload"] = .string(signedPayload)
        return Array(JSON.object(object).serialized().utf8)
    }

    /// A notification payload for the test app, `data` holding `extra` besides the app's ids.
    static func notification(_ type: String, subtype: String? = nil, uuid: String = "0e6c5a7e-6f3a-4b1f-9a39-3f2f7c1d0a01",
                             signedDate: Int64 = 1_772_357_400_000, bundleId: String = "com.example", environment: String = "Sandbox",
                             data extra: [(String, JSON)] = []) -> JSON {
        var data = JSONObject()
        data["bundleId"] = .string(bundleId)
        data["environment"] = .string(environment)
        data["appAppleId"] = .integer(1234)
        for (key, value) in extra { data[key] = value }
        var payload = JSONObject()
        payload["notificationType"] = .string(type)
        if let subtype { payload["subtype"] = .string(subtype) }
        payload["notificationUUID"] = .string(uuid)
        payload["version"] = .string("2.0")
        payload["signedDate"] = .integer(signedDate)
        payload["data"] = .object(data)
        return .object(payload)
    }

    /// A self-signed root of another authority, with its key.
    static func otherRoot() throws -> (der: [UInt8], key: P256.Signing.PrivateKey) {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Another Root") }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: 1_600_000_000), notValidAfter: Date(timeIntervalSince1970: 2_000_000_000),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions { Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil)) },
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return (serializer.serializedBytes, key)
    }
}

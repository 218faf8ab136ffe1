import Foundation
@_spi(Storage) import LedgerCore
import SwiftASN1
import X509

/// The App Store environment a notification belongs to, spelled as Apple spells it.
public enum AppStoreEnvironment: String, Sendable, Hashable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// What a signed notification must match to be accepted: the roots its chain must reach (Apple
/// Root CA G3 in production, a test root in tests — never the x5c's own), and the app it is for.
public struct AppStoreConfiguration: Sendable, Hashable {
    /// The trusted roots, DER-encoded.
    public var rootCertificates: [[UInt8]]
    /// The app's bundle id; every payload's `bundleId` must equal it.
    public var bundleId: String
    /// Every payload's `environment` must equal it.
    public var environment: AppStoreEnvironment
    /// In production, when set, every payload's `appAppleId` must equal it.
    public var appAppleId: Int64?

    public init(rootCertificates: [[UInt8]], bundleId: String, environment: AppStoreEnvironment, appAppleId: Int64? = nil) {
        self.rootCertificates = rootCertificates
        self.bundleId = bundleId
        self.environment = environment
        self.appAppleId = appAppleId
    }

    /// The certificates of a root file: DER, or one or more PEM blocks.
    /// - Throws: `LedgerError.invalidEvent` naming `file` when it holds no certificate.
    public static func certificates(inFile bytes: [UInt8], named file: String) throws(LedgerError) -> [[UInt8]] {
        if let text = String(validating: bytes, as: UTF8.self), text.contains("-----BEGIN CERTIFICATE-----") {
            do {
                let blocks = try PEMDocument.parseMultiple(pemString: text).filter { $0.discriminator == "CERTIFICATE" }
                let certificates = blocks.map { $0.derBytes }
                for der in certificates { _ = try Certificate(derEncoded: der) }
                if !certificates.isEmpty { return certificates }
            } catch {
                throw LedgerError(.invalidEvent, "\(file): a certificate in it does not parse (\(error))")
            }
        }
        do {
            _ = try Certificate(derEncoded: bytes)
            return [bytes]
        } catch {
            throw LedgerError(.invalidEvent, "\(file) holds no certificate (neither DER nor PEM)")
        }
    }
}

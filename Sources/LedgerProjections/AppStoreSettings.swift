import Foundation
@_spi(Storage) import LedgerCore
import LedgerAppStore
@_spi(Storage) import LedgerStore

extension Ledger {
    /// The App Store configuration recorded in the store (`setAppStoreConfiguration`), `nil`
    /// when none is: so that `ledger ingest appstore` and a server need no flags.
    /// - Throws: `LedgerError.corruptRecord` when the record does not decode.
    public func appStoreConfiguration() throws(LedgerError) -> AppStoreConfiguration? {
        guard let settings = try log.appStoreSettings() else { return nil }
        guard case .string(let bundleId)? = settings["bundleId"], case .string(let name)? = settings["environment"],
              let environment = AppStoreEnvironment(rawValue: name), case .array(let encoded)? = settings["roots"] else {
            throw LedgerError(.corruptRecord, "the store's App Store settings lack a bundleId, environment or roots")
        }
        var roots: [[UInt8]] = []
        for root in encoded {
            guard case .string(let text) = root, let der = Data(base64Encoded: text) else {
                throw LedgerError(.corruptRecord, "a root certificate of the store's App Store settings is not base64")
            }
            roots.append(Array(der))
        }
        var appAppleId: Int64?
        if case .number(let number)? = settings["appAppleId"] { appAppleId = number.int64 }
        return AppStoreConfiguration(rootCertificates: roots, bundleId: bundleId, environment: environment, appAppleId: appAppleId)
    }

    /// Records `configuration` in the store, checked first (its roots must parse).
    public func setAppStoreConfiguration(_ configuration: AppStoreConfiguration) throws(LedgerError) {
        _ = try SignedDataVerifier(configuration)
        var settings = JSONObject()
        settings["bundleId"] = .string(configuration.bundleId)
        settings["environment"] = .string(configuration.environment.rawValue)
        settings["appAppleId"] = configuration.appAppleId.map { .integer($0) } ?? .null
        settings["roots"] = .array(configuration.rootCertificates.map { .string(Data($0).base64EncodedString()) })
        try log.setAppStoreSettings(settings)
    }
}

@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

extension EventLog {
    /// The policy this store was built with (SPEC §3), `nil` for a store made before policies
    /// were recorded.
    /// - Throws: `LedgerError.corruptRecord` when the stored document does not decode.
    public func policy() throws(LedgerError) -> Policy? {
        let bytes: [UInt8]? = try storage.read("reading the policy") { txn in
            try txn.get(storage.meta, key: LogSchema.policyKey).map { Array($0) }
        }
        guard let bytes else { return nil }
        switch Policy.decode(bytes) {
        case .success(let policy):
            return policy
        case .failure(let failure):
            throw LedgerError(.corruptRecord, "the store's policy does not decode (\(failure.violations.first.map { "\($0.field): \($0.message)" } ?? "")); " + Self.damagedPolicyRemedy)
        }
    }

    /// Records `policy` (its canonical JSON) as the store's policy.
    public func setPolicy(_ policy: Policy) throws(LedgerError) {
        let bytes = LogSchema.policyValue(policy)
        do {
            try storage.env.write { txn in try txn.put(storage.meta, key: LogSchema.policyKey, value: bytes) }
        } catch {
            throw LedgerError.storage(error, doing: "recording the policy")
        }
    }
}

extension EventLog {
    /// What to do about a store whose policy record does not decode: the log itself is intact.
    public static let damagedPolicyRemedy = "the log is intact: `ledger export --store S | ledger append --restore --store NEW -` after `ledger init --policy FILE --store NEW`"
}

extension EventLog {
    /// The store's App Store settings, as the ledger recorded them (a JSON object), `nil` when
    /// none are: what `ledger ingest appstore` and a server use when given no flags.
    /// - Throws: `LedgerError.corruptRecord` when the record is not a JSON object.
    public func appStoreSettings() throws(LedgerError) -> JSONObject? {
        let bytes: [UInt8]? = try storage.read("reading the App Store settings") { txn in
            try txn.get(storage.meta, key: LogSchema.appStoreKey).map { Array($0) }
        }
        guard let bytes else { return nil }
        guard case .object(let object)? = try? JSONParser.parse(bytes) else {
            throw LedgerError(.corruptRecord, "the store's App Store settings do not decode; record them again with `ledger init --appstore-…` on a new store")
        }
        return object
    }

    /// Records the store's App Store settings.
    public func setAppStoreSettings(_ settings: JSONObject) throws(LedgerError) {
        let bytes = Array(JSON.object(settings).serialized(sortedKeys: true).utf8)
        do {
            try storage.env.write { txn in try txn.put(storage.meta, key: LogSchema.appStoreKey, value: bytes) }
        } catch {
            throw LedgerError.storage(error, doing: "recording the App Store settings")
        }
    }
}

extension LogSchema {
    /// The `meta` key of the store's App Store settings (a JSON object).
    static let appStoreKey = Array("appstore".utf8)
}

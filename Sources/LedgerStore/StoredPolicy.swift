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

extension EventLog {
    /// The JSON object a tool keeps in the store under `name` (the server's access tokens),
    /// `nil` when there is none.
    /// - Throws: `LedgerError.corruptRecord` when the record is not a JSON object.
    @_spi(Storage) public func setting(_ name: String) throws(LedgerError) -> JSONObject? {
        let bytes: [UInt8]? = try storage.read("reading the \(name) setting") { txn in
            try txn.get(storage.meta, key: LogSchema.settingKey(name)).map { Array($0) }
        }
        guard let bytes else { return nil }
        guard case .object(let object)? = try? JSONParser.parse(bytes) else {
            throw LedgerError(.corruptRecord, "the store's \(name) setting does not decode")
        }
        return object
    }

    /// Replaces the JSON object kept under `name` with what `change` makes of it (`nil` for
    /// none), in one write transaction: two changes never lose each other's.
    @_spi(Storage) public func changeSetting<R>(_ name: String, _ change: (inout JSONObject?) throws(LedgerError) -> R) throws(LedgerError) -> R {
        var failure: LedgerError?
        do {
            let result: R? = try storage.env.write { txn -> R? in
                var object: JSONObject?
                if let stored = try txn.get(storage.meta, key: LogSchema.settingKey(name)) {
                    guard case .object(let decoded)? = try? JSONParser.parse(Array(stored)) else {
                        failure = LedgerError(.corruptRecord, "the store's \(name) setting does not decode")
                        return nil
                    }
                    object = decoded
                }
                let result: R
                do throws(LedgerError) {
                    result = try change(&object)
                } catch {
                    failure = error
                    return nil
                }
                if let object {
                    try txn.put(storage.meta, key: LogSchema.settingKey(name), value: Array(JSON.object(object).serialized(sortedKeys: true).utf8))
                } else {
                    _ = try txn.delete(storage.meta, key: LogSchema.settingKey(name))
                }
                return result
            }
            if let failure { throw failure }
            guard let result else { throw LedgerError(.storage, "the \(name) setting was not changed") }
            return result
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.storage(error, doing: "recording the \(name) setting")
        }
    }
}

extension LogSchema {
    /// The `meta` key of the store's App Store settings (a JSON object).
    static let appStoreKey = Array("appstore".utf8)

    /// The `meta` key of a tool's setting (`EventLog.setting(_:)`).
    static func settingKey(_ name: String) -> [UInt8] { Array("setting/\(name)".utf8) }
}

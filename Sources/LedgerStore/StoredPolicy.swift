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

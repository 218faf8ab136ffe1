@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// What code running beside the log in the same store — the projection engine — reads of it
/// inside its own transactions (or the append's, from `CommitObserver`): the head, the events
/// in position order, and the store's policy. It never reads the log's databases otherwise.
package struct LogAccess: Sendable {
    let events: Database
    let meta: Database

    /// The log's databases in `env` (the store must exist).
    package init(_ env: Environment) throws {
        events = try env.openDatabase(LogSchema.events, flags: [])
        meta = try env.openDatabase(LogSchema.meta, flags: [])
    }

    /// The last position of the log (0 when empty).
    package func head(_ txn: borrowing Transaction) throws -> UInt64 {
        try txn.withCursor(events) { cursor in try cursor.last().flatMap { LogSchema.integer($0.key) } ?? 0 }
    }

    /// How many subjects have events.
    package func subjectCount(_ txn: borrowing Transaction) throws -> UInt64 {
        try txn.get(meta, key: LogSchema.subjectCountKey).flatMap(LogSchema.integer) ?? 0
    }

    /// The events after `after` through `through`, in position order: `body` gets each one
    /// whose type is in `types`, its payload decoded (the others are skipped on their type
    /// alone), and that `keep` keeps (given the type's catalog index and the subject);
    /// `tick` gets the position every 65,536 events, for progress reports.
    /// - Throws: `LedgerError.corruptRecord` for a record that does not decode, or a position
    ///   missing from the log (positions are gap-free), naming the position.
    package func forEachEvent(after: UInt64, through: UInt64, types: Set<String>, keep: ((_ known: Int?, _ subject: String) -> Bool)? = nil,
                             _ txn: borrowing Transaction, tick: (UInt64) -> Void = { _ in }, _ body: (RecordedEvent) throws -> Void) throws {
        guard through > after else { return }
        let filter = EventRecord.TypeFilter(types)
        try txn.withCursor(events) { cursor in
            var expected = after + 1
            var entry = try cursor.seek(atLeast: LogSchema.key(expected))
            while expected <= through {
                guard let current = entry, LogSchema.integer(current.key) == expected else {
                    throw LedgerError(.corruptRecord, "position \(expected) is missing from the log; run `ledger verify`", position: expected)
                }
                if let event = try EventRecord.decodeForFolding(current.value, position: expected, types: filter, keep: keep) { try body(event) }
                if expected & 0xFFFF == 0 { tick(expected) }
                expected += 1
                entry = expected <= through ? try cursor.next() : nil
            }
        }
    }

    /// The store's policy document as stored (canonical JSON), `nil` when it has none; valid
    /// until `txn` ends.
    package func policyBytes(_ txn: borrowing Transaction) throws -> UnsafeRawBufferPointer? {
        try txn.get(meta, key: LogSchema.policyKey)
    }

    /// Records `policy` as the store's, in `txn` (a rebuild swapping in a new policy).
    package func setPolicy(_ policy: Policy, _ txn: borrowing Transaction) throws {
        try txn.put(meta, key: LogSchema.policyKey, value: LogSchema.policyValue(policy))
    }
}

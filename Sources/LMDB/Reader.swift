import CLMDB

/// A read transaction an `Environment` keeps between reads (reset, then renewed), with the
/// cursors opened in it. Read-only cursors outlive a reset and are renewed with
/// `mdb_cursor_renew`, so a read that seeks one database again allocates no cursor.
///
/// One thread uses it at a time: the environment hands it to one `read` and takes it back.
final class Reader: @unchecked Sendable {
    struct KeptCursor {
        let handle: OpaquePointer
        let dbi: MDB_dbi
        /// The renewal of the transaction it was last renewed in.
        var renewal: Int
        var inUse: Bool
    }

    let txn: OpaquePointer
    /// How many times the transaction was renewed: a kept cursor from an earlier one is renewed
    /// before use.
    /// (Unchecked exclusivity: one thread at a time, as above; the runtime's checks cost a
    /// read as much as the allocations keeping the transaction saves.)
    @exclusivity(unchecked) var renewals = 0
    @exclusivity(unchecked) private(set) var cursors: [KeptCursor] = []
    /// The environment's count of commits that dropped a database when the cursors were opened.
    @exclusivity(unchecked) var databasesDropped = 0

    init(txn: OpaquePointer) { self.txn = txn }

    /// The index of a kept cursor over `db` (found by its handle number: the environment has
    /// these cursors closed once a commit drops a database, whose number another may take),
    /// ready in this transaction; `nil` when the kept one is in use (a second cursor over the
    /// same database at once) or cannot be had, so the caller opens one of its own.
    func takeCursor(_ db: Database) -> Int? {
        if let index = cursors.firstIndex(where: { $0.dbi == db.dbi }) {
            guard !cursors[index].inUse else { return nil }
            if cursors[index].renewal != renewals {
                guard mdb_cursor_renew(txn, cursors[index].handle) == MDB_SUCCESS else { return nil }
                cursors[index].renewal = renewals
            }
            cursors[index].inUse = true
            return index
        }
        var cursor: OpaquePointer?
        guard mdb_cursor_open(txn, db.dbi, &cursor) == MDB_SUCCESS, let cursor else { return nil }
        if cursors.isEmpty { cursors.reserveCapacity(4) }
        cursors.append(KeptCursor(handle: cursor, dbi: db.dbi, renewal: renewals, inUse: true))
        return cursors.count - 1
    }

    func putBack(_ index: Int) { cursors[index].inUse = false }

    /// Closes the kept cursors (none is in use: the reader is between reads).
    func closeCursors() {
        for cursor in cursors { mdb_cursor_close(cursor.handle) }
        cursors.removeAll()
    }

    /// Closes the cursors and ends the transaction, for good.
    func close() {
        closeCursors()
        mdb_txn_abort(txn)
    }
}

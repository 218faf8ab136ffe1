import CLMDB

/// A transaction, valid only inside the `Environment.read` or `Environment.write` closure
/// that received it.
///
/// It is `~Copyable` and handed over borrowed, so it cannot be stored or used after its
/// closure returns. Values it returns point into the memory map: copy them (`Array(buffer)`)
/// if they must outlive the closure. In a write transaction, a value read before a write to
/// the same database may move; read it again after writing.
@_spi(Storage) public struct Transaction: ~Copyable {
    let handle: OpaquePointer
    let writeState: WriteState?

    init(handle: OpaquePointer, writeState: WriteState?) {
        self.handle = handle
        self.writeState = writeState
    }

    /// Whether writes are allowed.
    public var isReadOnly: Bool { writeState == nil }

    // MARK: Reads

    /// The value stored under `key`, or `nil`. Zero-copy: the buffer points into the map.
    /// - Throws: `LMDBError` for anything but a missing key.
    public func get(_ db: Database, key: UnsafeRawBufferPointer) throws(LMDBError) -> UnsafeRawBufferPointer? {
        var k = MDB_val(key)
        var v = MDB_val()
        let rc = mdb_get(handle, db.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get", db.name)
        return v.buffer
    }

    /// The value stored under `key`, or `nil`. Zero-copy: the buffer points into the map.
    public func get(_ db: Database, key: [UInt8]) throws(LMDBError) -> UnsafeRawBufferPointer? {
        try withBytes(key) { (k) throws(LMDBError) in try get(db, key: k) }
    }

    /// How many entries `db` holds (`mdb_stat`, no scan).
    public func count(_ db: Database) throws(LMDBError) -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.dbi, &stat), "mdb_stat", db.name)
        return stat.ms_entries
    }

    /// The bytes of pages `db` occupies (branch, leaf and overflow pages times the page size).
    /// For a `.dupSort` database, LMDB counts only the tree of its keys, not the trees that
    /// hold a key's many values.
    public func sizeOnDisk(_ db: Database) throws(LMDBError) -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.dbi, &stat), "mdb_stat", db.name)
        return (stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages) * Int(stat.ms_psize)
    }

    /// Pages on LMDB's free list: freed by earlier transactions, kept until no snapshot can
    /// see them, then reused before the file grows.
    public func freePages() throws(LMDBError) -> Int {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, 0, &cursor), "mdb_cursor_open", "the free list")
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val(), v = MDB_val()
        var total = 0
        var rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
        while rc == MDB_SUCCESS {
            // Each value is a page list whose first word is its length.
            if v.mv_size >= MemoryLayout<Int>.size, let data = v.mv_data { total += data.loadUnaligned(as: Int.self) }
            rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
        }
        guard rc == MDB_NOTFOUND else { throw LMDBError(rc, "mdb_cursor_get", "the free list") }
        return total
    }

    /// Pages of LMDB's own bookkeeping: the two meta pages, the main database (which names
    /// the others) and the free list's tree.
    public func bookkeepingPages() throws(LMDBError) -> Int {
        var pages = 2
        for dbi: MDB_dbi in [0, 1] {
            var stat = MDB_stat()
            try check(mdb_stat(handle, dbi, &stat), "mdb_stat", dbi == 0 ? "the free list" : "main")
            pages += stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages
        }
        return pages
    }

    /// Runs `body` with a cursor over `db`; the cursor is closed when `body` returns.
    public func withCursor<R>(_ db: Database, _ body: (borrowing Cursor) throws -> R) throws -> R {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, db.dbi, &cursor), "mdb_cursor_open", db.name)
        guard let cursor else { throw LMDBError(code: .badTransaction, operation: "mdb_cursor_open", context: db.name) }
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(handle: cursor, database: db, writeState: writeState))
    }

    // MARK: Writes

    /// Stores `value` under `key`.
    /// - Throws: `LMDBError`: `.keyExists` with `.noOverwrite` or an out-of-order `.append`,
    ///   `.permissionDenied` in a read transaction.
    public func put(_ db: Database, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, flags: PutFlags = []) throws(LMDBError) {
        var k = MDB_val(key)
        var v = MDB_val(value)
        try checkWrite(mdb_put(handle, db.dbi, &k, &v, flags.rawValue), "mdb_put", db.name)
    }

    /// Stores `value` under `key`.
    public func put(_ db: Database, key: [UInt8], value: [UInt8], flags: PutFlags = []) throws(LMDBError) {
        try withBytes(key) { (k) throws(LMDBError) in
            try withBytes(value) { (v) throws(LMDBError) in
                try put(db, key: k, value: v, flags: flags)
            }
        }
    }

    /// Reserves `size` bytes under `key` and lets `fill` write the value straight into the map
    /// (`MDB_RESERVE`): no intermediate copy.
    public func put(_ db: Database, key: UnsafeRawBufferPointer, reserving size: Int, flags: PutFlags = [],
                    fill: (UnsafeMutableRawBufferPointer) -> Void) throws(LMDBError) {
        var k = MDB_val(key)
        var v = MDB_val(mv_size: size, mv_data: nil)
        try checkWrite(mdb_put(handle, db.dbi, &k, &v, flags.rawValue | UInt32(MDB_RESERVE)), "mdb_put", db.name)
        fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: size))
    }

    /// Deletes `key`. Returns whether it was there.
    @discardableResult
    public func delete(_ db: Database, key: UnsafeRawBufferPointer) throws(LMDBError) -> Bool {
        var k = MDB_val(key)
        let rc = mdb_del(handle, db.dbi, &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try checkWrite(rc, "mdb_del", db.name)
        return true
    }

    /// Deletes `key`. Returns whether it was there.
    @discardableResult
    public func delete(_ db: Database, key: [UInt8]) throws(LMDBError) -> Bool {
        try withBytes(key) { (k) throws(LMDBError) in try delete(db, key: k) }
    }

    /// Deletes one value of a `.dupSort` key. Returns whether it was there.
    @discardableResult
    public func delete(_ db: Database, key: [UInt8], value: [UInt8]) throws(LMDBError) -> Bool {
        try withBytes(key) { (k) throws(LMDBError) in
            try withBytes(value) { (v) throws(LMDBError) in
                var key = MDB_val(k)
                var value = MDB_val(v)
                let rc = mdb_del(handle, db.dbi, &key, &value)
                if rc == MDB_NOTFOUND { return false }
                try checkWrite(rc, "mdb_del", db.name)
                return true
            }
        }
    }

    /// Removes every entry of `db` (the database itself stays).
    public func removeAll(_ db: Database) throws(LMDBError) {
        try checkWrite(mdb_drop(handle, db.dbi, 0), "mdb_drop", db.name)
    }

    /// Deletes `db` itself from the environment and closes its handle: it must not be used
    /// again. Takes effect when this transaction commits.
    public func drop(_ db: Database) throws(LMDBError) {
        try checkWrite(mdb_drop(handle, db.dbi, 1), "mdb_drop", db.name)
    }

    /// Opens (or with `.create`, creates) a named database inside this write transaction, for
    /// changes of layout that must commit together with the data they move. The handle stays
    /// valid for the life of the environment once this transaction commits; `nil` if the
    /// database does not exist and `.create` is not given.
    public func openDatabase(_ name: String, flags: Database.Flags) throws(LMDBError) -> Database? {
        var dbi: MDB_dbi = 0
        let rc = mdb_dbi_open(handle, name, flags.rawValue, &dbi)
        if rc == MDB_NOTFOUND { return nil }
        try checkWrite(rc, "mdb_dbi_open", name)
        return Database(dbi: dbi, name: name)
    }

    func checkWrite(_ rc: Int32, _ operation: String, _ context: String?) throws(LMDBError) {
        if rc == MDB_MAP_FULL { writeState?.sawMapFull = true }
        try check(rc, operation, context)
    }
}

/// A cursor over one database, valid only inside `Transaction.withCursor`.
///
/// Positioning calls return the entry they land on, or `nil` past either end.
/// Entries point into the map (see `Entry`).
@_spi(Storage) public struct Cursor: ~Copyable {
    let handle: OpaquePointer
    let database: Database
    let writeState: WriteState?

    private func get(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws(LMDBError) -> Entry? {
        var k = key.map { MDB_val($0) } ?? MDB_val()
        var v = MDB_val()
        let rc = mdb_cursor_get(handle, &k, &v, op)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get", database.name)
        return Entry(key: k.buffer, value: v.buffer)
    }

    /// Moves to the first entry.
    public func first() throws(LMDBError) -> Entry? { try get(MDB_FIRST) }
    /// Moves to the last entry.
    public func last() throws(LMDBError) -> Entry? { try get(MDB_LAST) }
    /// Moves to the next entry (the first, if the cursor is not positioned yet).
    public func next() throws(LMDBError) -> Entry? { try get(MDB_NEXT) }
    /// Moves to the previous entry (the last, if the cursor is not positioned yet).
    public func previous() throws(LMDBError) -> Entry? { try get(MDB_PREV) }
    /// The entry under the cursor.
    public func current() throws(LMDBError) -> Entry? { try get(MDB_GET_CURRENT) }

    /// Moves to the first entry whose key is ≥ `key`.
    public func seek(atLeast key: UnsafeRawBufferPointer) throws(LMDBError) -> Entry? {
        try get(MDB_SET_RANGE, key: key)
    }

    /// Moves to the first entry whose key is ≥ `key`.
    public func seek(atLeast key: [UInt8]) throws(LMDBError) -> Entry? {
        try withBytes(key) { (k) throws(LMDBError) in try seek(atLeast: k) }
    }

    /// Moves to the entry whose key is exactly `key`.
    public func seek(exactly key: UnsafeRawBufferPointer) throws(LMDBError) -> Entry? {
        try get(MDB_SET_KEY, key: key)
    }

    /// In a `.dupSort` database: moves to the first value of `key` that is ≥ `value`
    /// (`MDB_GET_BOTH_RANGE`); `nil` if `key` has none.
    public func seek(key: UnsafeRawBufferPointer, valueAtLeast value: UnsafeRawBufferPointer) throws(LMDBError) -> Entry? {
        var k = MDB_val(key)
        var v = MDB_val(value)
        let rc = mdb_cursor_get(handle, &k, &v, MDB_GET_BOTH_RANGE)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get", database.name)
        return Entry(key: k.buffer, value: v.buffer)
    }

    /// In a `.dupSort` database: moves to the next value of the current key; `nil` after its last.
    public func nextDuplicate() throws(LMDBError) -> Entry? { try get(MDB_NEXT_DUP) }

    /// Stores `value` under `key` through the cursor (write transactions only).
    public func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, flags: PutFlags = []) throws(LMDBError) {
        var k = MDB_val(key)
        var v = MDB_val(value)
        let rc = mdb_cursor_put(handle, &k, &v, flags.rawValue)
        if rc == MDB_MAP_FULL { writeState?.sawMapFull = true }
        try check(rc, "mdb_cursor_put", database.name)
    }

    /// Deletes the entry under the cursor (write transactions only).
    public func deleteCurrent() throws(LMDBError) {
        let rc = mdb_cursor_del(handle, 0)
        if rc == MDB_MAP_FULL { writeState?.sawMapFull = true }
        try check(rc, "mdb_cursor_del", database.name)
    }
}

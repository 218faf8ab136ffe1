import CLMDB

/// A named database (LMDB's `MDB_dbi`) inside an environment.
///
/// Opened once with `Environment.openDatabase(_:flags:)`; the handle stays valid for the life
/// of the environment and may be used from any transaction on any thread.
@_spi(Storage) public struct Database: Sendable, Hashable {
    let dbi: MDB_dbi
    /// The database's name, or `nil` for the environment's main database.
    public let name: String?

    /// Flags a database is created with. Reopening with different flags is an error.
    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Create the database if it does not exist.
        public static let create = Flags(rawValue: UInt32(MDB_CREATE))
        /// Keys are compared as bytes from the end.
        public static let reverseKey = Flags(rawValue: UInt32(MDB_REVERSEKEY))
        /// A key may hold several sorted values.
        public static let dupSort = Flags(rawValue: UInt32(MDB_DUPSORT))
        /// With `.dupSort`: every value has the same size, and LMDB packs them without a
        /// header each.
        public static let dupFixed = Flags(rawValue: UInt32(MDB_DUPFIXED))
    }
}

/// Flags for a single put.
@_spi(Storage) public struct PutFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Fail with `.keyExists` instead of replacing an existing value.
    public static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
    /// The key sorts after every key in the database: skip the search (bulk loads, logs).
    /// A key out of order fails with `.keyExists`.
    public static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
    /// Through a cursor: replace the value of the entry under it (the key must be its key).
    public static let current = PutFlags(rawValue: UInt32(MDB_CURRENT))
    /// For `.dupSort` databases: fail if this key/value pair is already stored.
    public static let noDupData = PutFlags(rawValue: UInt32(MDB_NODUPDATA))
    /// For `.dupSort` databases: the value sorts after every value of its key (bulk loads).
    public static let appendDuplicate = PutFlags(rawValue: UInt32(MDB_APPENDDUP))
}

/// One key/value pair read inside a transaction.
///
/// Both buffers point into the memory map: they are valid only until the transaction ends
/// (or, in a write transaction, until the next write). Copy what must outlive it.
@_spi(Storage) public struct Entry {
    /// The key's bytes.
    public let key: UnsafeRawBufferPointer
    /// The value's bytes.
    public let value: UnsafeRawBufferPointer
}

extension MDB_val {
    init(_ buffer: UnsafeRawBufferPointer) {
        self.init(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
    }

    var buffer: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: mv_data, count: mv_size)
    }
}

/// `Array.withUnsafeBytes` is `rethrows`, which loses a typed error; this keeps it.
@inline(__always)
func withBytes<R>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(LMDBError) -> R) throws(LMDBError) -> R {
    let result: Result<R, LMDBError> = bytes.withUnsafeBytes { buffer in
        Result { () throws(LMDBError) -> R in try body(buffer) }
    }
    return try result.get()
}

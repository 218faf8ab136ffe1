import CLMDB
import Glibc

/// An error from LMDB or from the operating system underneath it.
///
/// It carries the raw return code (`MDB_*` or an `errno` value), the LMDB call that failed,
/// and a message that says what went wrong and what to do about it.
///
/// ```swift
/// do { try env.write { txn in try txn.put(db, key: k, value: v, flags: .noOverwrite) } }
/// catch let error as LMDBError where error.code == .keyExists { … }
/// ```
@_spi(Storage) public struct LMDBError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An extensible error code: the raw LMDB (or `errno`) return value with names for the
    /// ones callers act upon.
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `MDB_KEYEXIST`: a put with `.noOverwrite` or `.append` found the key taken or out of order.
        public static let keyExists = Code(rawValue: MDB_KEYEXIST)
        /// `MDB_NOTFOUND`: no such key (the wrapper turns this into `nil` wherever it can).
        public static let notFound = Code(rawValue: MDB_NOTFOUND)
        /// `MDB_CORRUPTED`: a page has the wrong type; the file is damaged.
        public static let corrupted = Code(rawValue: MDB_CORRUPTED)
        /// `MDB_PANIC`: a fatal error earlier in this environment; reopen it.
        public static let panic = Code(rawValue: MDB_PANIC)
        /// `MDB_VERSION_MISMATCH`: the file was written by an incompatible LMDB.
        public static let versionMismatch = Code(rawValue: MDB_VERSION_MISMATCH)
        /// `MDB_INVALID`: the file is not an LMDB file.
        public static let invalid = Code(rawValue: MDB_INVALID)
        /// `MDB_MAP_FULL`: the map is full; `Environment.write` grows it and retries by itself.
        public static let mapFull = Code(rawValue: MDB_MAP_FULL)
        /// `MDB_DBS_FULL`: more named databases than `maxDatabases`.
        public static let databasesFull = Code(rawValue: MDB_DBS_FULL)
        /// `MDB_READERS_FULL`: every reader slot is taken.
        public static let readersFull = Code(rawValue: MDB_READERS_FULL)
        /// `MDB_TXN_FULL`: one transaction touched too many pages.
        public static let transactionFull = Code(rawValue: MDB_TXN_FULL)
        /// `MDB_MAP_RESIZED`: another process grew the map; the wrapper adopts it and retries.
        public static let mapResized = Code(rawValue: MDB_MAP_RESIZED)
        /// `MDB_INCOMPATIBLE`: a database was opened with flags it was not created with.
        public static let incompatible = Code(rawValue: MDB_INCOMPATIBLE)
        /// `MDB_BAD_VALSIZE`: a key is empty or longer than LMDB's key limit (511 bytes).
        public static let badValueSize = Code(rawValue: MDB_BAD_VALSIZE)
        /// `MDB_BAD_TXN`: the transaction cannot be used any more.
        public static let badTransaction = Code(rawValue: MDB_BAD_TXN)
        /// `EACCES`: a write in a read-only transaction or environment, or no permission on the file.
        public static let permissionDenied = Code(rawValue: EACCES)
        /// `ENOENT`: the directory does not exist and the environment was opened read-only.
        public static let noSuchFile = Code(rawValue: ENOENT)
        /// `EBUSY`: this process already has the environment open.
        public static let alreadyOpen = Code(rawValue: EBUSY)
        /// `EDEADLK`: a write transaction was begun inside another on the same thread.
        public static let nestedWrite = Code(rawValue: EDEADLK)
        /// `ENOSPC`: the disk is full.
        public static let noSpace = Code(rawValue: ENOSPC)
        /// `EROFS`: the store is on a read-only file system and was opened for writing.
        public static let readOnlyFileSystem = Code(rawValue: EROFS)
        /// The wrapper's own: `data.mdb` is shorter than the pages its meta page records (or
        /// empty), so reading it would fault.
        public static let truncated = Code(rawValue: -30_600)
    }

    /// The return code, by name where the wrapper knows one.
    public let code: Code
    /// The LMDB function (or wrapper operation) that failed, such as `mdb_put`.
    public let operation: String
    /// Extra context from the wrapper: which database, which path.
    public let context: String?

    /// Creates an error for a raw return code.
    public init(code: Code, operation: String, context: String? = nil) {
        self.code = code
        self.operation = operation
        self.context = context
    }

    init(_ rc: Int32, _ operation: String, _ context: String? = nil) {
        self.init(code: Code(rawValue: rc), operation: operation, context: context)
    }

    /// The raw return code, an `MDB_*` constant or an `errno` value.
    public var returnCode: Int32 { code.rawValue }

    /// LMDB's own text for the code (`mdb_strerror`).
    public var lmdbMessage: String {
        code == .truncated ? "the store is truncated" : String(cString: mdb_strerror(code.rawValue))
    }

    /// What to do about it.
    public var advice: String {
        switch code {
        case .mapFull:
            return "the map could not be grown far enough; free disk space or open with a larger mapSize"
        case .readersFull:
            return "too many open read transactions; raise maxReaders, or reopen so that stale slots of dead processes are freed"
        case .databasesFull:
            return "raise maxDatabases when opening the environment"
        case .truncated:
            return "the file was cut short (a full disk, an interrupted copy, a truncate); keep a copy, and restore the store from an export or a backup"
        case .corrupted, .panic:
            return "the store is damaged; stop writing to it, keep a copy, and restore it from an export or a backup"
        case .versionMismatch, .invalid:
            return "this path does not hold a store this LMDB can read; check the path"
        case .mapResized:
            return "another process grew the map; retry the operation"
        case .transactionFull:
            return "split the work into smaller transactions"
        case .badValueSize:
            return "keys must be 1…511 bytes"
        case .permissionDenied:
            return "check the file's owner and mode (stores are created 0600) or open the store for writing"
        case .noSuchFile:
            return "create the store first, or check the path"
        case .alreadyOpen:
            return "this process already has this store open; share that one instance (LMDB's locks belong to the process, so a second handle would undo the first one's locks)"
        case .nestedWrite:
            return "this thread is already inside a write transaction, and LMDB allows one writer at a time; do the work inside that transaction (open databases before writing)"
        case .noSpace:
            return "the disk holding the store is full; nothing of this write was kept: free disk space (or move the store to a larger disk), then retry"
        case .readOnlyFileSystem:
            return "the store is on a read-only file system: reading commands work; to write, remount it read-write or copy the store elsewhere"
        case .keyExists:
            return "the key is already stored (or, for an ordered append, is not after the last key)"
        default:
            return "see the LMDB documentation for this code"
        }
    }

    public var description: String {
        var text = "LMDB \(operation) failed"
        if let context { text += " (\(context))" }
        text += ": \(lmdbMessage) [code \(code.rawValue)]; \(advice)"
        return text
    }
}

/// Turns an LMDB return code into a thrown `LMDBError`.
@inline(__always)
func check(_ rc: Int32, _ operation: @autoclosure () -> String, _ context: @autoclosure () -> String? = nil) throws(LMDBError) {
    if rc != MDB_SUCCESS {
        throw LMDBError(rc, operation(), context())
    }
}

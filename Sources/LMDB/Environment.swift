import CLMDB
import Glibc
import Synchronization

/// An LMDB environment: one directory holding `data.mdb` and `lock.mdb`, shared by every
/// thread of this process and by other processes that open the same path.
///
/// ```swift
/// let env = try Environment(path: "/tmp/example.lmdb")
/// let db = try env.openDatabase("things")
/// try env.write { txn in try txn.put(db, key: [1], value: Array("one".utf8)) }
/// let value = try env.read { txn in try txn.get(db, key: [1]).map { Array($0) } }
/// ```
///
/// Transactions are closure-scoped: `read` and `write` hand the closure a transaction that is
/// valid only inside it; `write` commits when the closure returns and aborts when it throws.
/// The map grows by itself: when a write fills it, the write is aborted, the map is doubled
/// (in steps of at most `Configuration.maxGrowthStep` once large) and the write runs again.
///
/// Rules LMDB holds every caller to, which this type enforces or documents:
/// - A write transaction belongs to the thread that began it; `write` runs its closure
///   synchronously on the calling thread, so it can never cross an `await`.
/// - Do not call `write` from inside a `read` or `write` closure on the same thread: LMDB has
///   one writer at a time, and growing the map waits for this process's open transactions.
/// - Values read inside a closure point into the map and are valid only inside it.
@_spi(Storage) public final class Environment: @unchecked Sendable {
    // @unchecked Sendable: LMDB environments are thread-safe (opened with MDB_NOTLS so read
    // transactions are not tied to threads); the mutable map-size state sits in a Mutex and the
    // resize is serialised against live transactions by `resizeLock`.

    /// How to open an environment.
    public struct Configuration: Sendable {
        /// The initial map size in bytes; it grows on demand.
        public var mapSize: Int = 64 << 20
        /// The largest single growth once the map is bigger than this (below it, the map doubles).
        public var maxGrowthStep: Int = 1 << 30
        /// Read transactions open at once across all processes.
        public var maxReaders: UInt32 = 510
        /// Named databases in this environment.
        public var maxDatabases: UInt32 = 32
        /// Environment flags.
        public var flags: Flags = []
        /// The mode of files created for the store: owner-only by default, since they hold
        /// customers' data.
        public var fileMode: mode_t = 0o600
        /// Whether a writable open creates the directory when it is missing (else it is an error).
        public var createsDirectory = true

        public init() {}
    }

    /// Flags an environment is opened with.
    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Do not fsync on commit. A process crash loses nothing (the data is in the OS page
        /// cache), but an OS crash or power loss can lose the latest commits or, worse, leave the
        /// file inconsistent. For bulk loads that can be redone; call `sync(force: true)` at the end.
        public static let noSync = Flags(rawValue: UInt32(MDB_NOSYNC))
        /// Fsync the data but not the meta page on commit: an OS crash can lose the last commit
        /// but not corrupt the file.
        public static let noMetaSync = Flags(rawValue: UInt32(MDB_NOMETASYNC))
        /// Open read-only: no writes, no growth, and the directory must exist.
        public static let readOnly = Flags(rawValue: UInt32(MDB_RDONLY))
        /// Do not read ahead: better for random reads over a store larger than memory.
        public static let noReadahead = Flags(rawValue: UInt32(MDB_NORDAHEAD))
        /// Take no locks. Only for a store nothing can write: with `readOnly` on a read-only
        /// file system (where LMDB could not write its lock file), which `init` chooses by itself.
        public static let noLock = Flags(rawValue: UInt32(MDB_NOLOCK))
    }

    /// Facts about the map, from `mdb_env_info` and `mdb_env_stat`.
    public struct Info: Sendable, Equatable {
        /// Bytes mapped (the map size in force in this process).
        public let mapSize: Int
        /// Bytes of the map used: pages up to the last one used, times the page size.
        public let usedBytes: Int
        /// The OS page size LMDB uses.
        public let pageSize: Int
        /// Reader slots ever taken (LMDB's high-water mark, not the ones live now: see `activeReaders()`).
        public let readerSlotsUsed: Int
        /// Reader slots in total.
        public let maxReaders: Int
    }

    let handle: OpaquePointer
    /// The directory the environment lives in.
    public let path: String
    /// The configuration it was opened with.
    public let configuration: Configuration
    let resizeLock = ReadWriteLock()
    private let growthCount = Mutex(0)
    private let adoptionCount = Mutex(0)
    private let pageSize: Int
    private let identity: FileIdentity?
    /// The thread inside a write transaction of this environment, if any: a second write
    /// begun on that same thread would wait forever on LMDB's writer lock.
    private let writingThread = Mutex<pthread_t?>(nil)

    /// Directories opened in this process. LMDB's locks belong to the process: a second
    /// environment on the same files would drop the first one's locks when closed.
    private static let openInProcess = Mutex(Set<FileIdentity>())

    /// Opens (and, unless read-only, creates) the environment in the directory `path`.
    ///
    /// A new directory is created with mode 0700 (an existing empty one others may write to is
    /// tightened to 0700; one holding other files is refused) and its files with
    /// `configuration.fileMode`.
    /// Reader slots left behind by processes that died holding them are freed on open.
    /// - Throws: `LMDBError` if the directory cannot be created or the environment opened.
    public init(path: String, configuration: Configuration = Configuration()) throws(LMDBError) {
        self.path = path
        self.configuration = configuration
        self.pageSize = max(4096, Int(sysconf(Int32(_SC_PAGESIZE))))

        let readOnly = configuration.flags.contains(.readOnly)
        if !readOnly && configuration.createsDirectory {
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw LMDBError(errno, "mkdir", path)
            }
        }

        var st = stat()
        guard stat(path, &st) == 0 else { throw LMDBError(errno, "stat", path) }
        // A store made in a directory others may write to would let them swap its files (which
        // hold customers' data): an empty one gets the mode a new one has; one holding other
        // files is not the store's to change, and is refused.
        var data = stat()
        let hasData = stat(path + "/data.mdb", &data) == 0
        if !readOnly && !hasData && st.st_mode & 0o022 != 0 {
            guard Self.isEmptyDirectory(path) else {
                throw LMDBError(code: .permissionDenied, operation: "creating a store",
                                context: "\(path) is writable by others (mode \(String(st.st_mode & 0o777, radix: 8))) and holds other files; make the store in a directory of its own")
            }
            guard chmod(path, 0o700) == 0 else { throw LMDBError(errno, "chmod 0700", path) }
        }
        let identity = FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        let claimed = Self.openInProcess.withLock { $0.insert(identity).inserted }
        guard claimed else {
            throw LMDBError(code: .alreadyOpen, operation: "mdb_env_open", context: path)
        }

        // LMDB takes an empty data.mdb for a new store and writes fresh meta pages into it; but
        // LMDB writes those pages as it creates the file, so an empty one is a cut file.
        if hasData && data.st_size == 0 {
            Self.release(identity)
            throw LMDBError(code: .truncated, operation: "mdb_env_open",
                            context: "\(path)/data.mdb is empty; a store whose creation was interrupted before its first commit is empty too: if nothing was ever appended to it, remove the directory")
        }

        var env: OpaquePointer?
        do throws(LMDBError) {
            try check(mdb_env_create(&env), "mdb_env_create")
        } catch {
            Self.release(identity)
            throw error
        }
        guard let env else {
            Self.release(identity)
            throw LMDBError(code: .invalid, operation: "mdb_env_create")
        }
        do throws(LMDBError) {
            try check(mdb_env_set_maxreaders(env, configuration.maxReaders), "mdb_env_set_maxreaders")
            try check(mdb_env_set_maxdbs(env, configuration.maxDatabases), "mdb_env_set_maxdbs")
            let size = Self.round(configuration.mapSize, to: pageSize)
            try check(mdb_env_set_mapsize(env, size), "mdb_env_set_mapsize")
            var flags = configuration.flags.rawValue | UInt32(MDB_NOTLS)
            // On a read-only file system LMDB cannot write its lock file, and nothing can write
            // the store: a reader needs no lock.
            if readOnly && Self.onReadOnlyFileSystem(path) { flags |= UInt32(MDB_NOLOCK) }
            try check(mdb_env_open(env, path, flags, configuration.fileMode), "mdb_env_open", path)
            try Self.checkLength(env, path: path)
        } catch {
            mdb_env_close(env)
            Self.release(identity)
            throw error
        }
        self.handle = env
        self.identity = identity
        _ = try? checkReaders()
    }

    /// Whether the directory `path` holds nothing.
    static func isEmptyDirectory(_ path: String) -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { return false }
        }
        return true
    }

    /// Whether `path` lies on a file system mounted read-only.
    public static func onReadOnlyFileSystem(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) == 0 && info.f_flag & UInt(ST_RDONLY) != 0
    }

    /// Bytes free to this user on the file system holding `path`, if it can be told.
    public static func availableBytes(_ path: String) -> Int? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        let (bytes, overflow) = Int(info.f_bavail).multipliedReportingOverflow(by: Int(info.f_frsize))
        return overflow ? Int.max : bytes
    }

    /// Refuses a data file shorter than the last page its meta page records: LMDB maps the file
    /// and would touch the missing pages, which the OS answers with SIGBUS.
    private static func checkLength(_ env: OpaquePointer, path: String) throws(LMDBError) {
        var info = MDB_envinfo()
        var stats = MDB_stat()
        try check(mdb_env_info(env, &info), "mdb_env_info", path)
        try check(mdb_env_stat(env, &stats), "mdb_env_stat", path)
        var data = stat()
        guard stat(path + "/data.mdb", &data) == 0 else { throw LMDBError(errno, "stat", path + "/data.mdb") }
        let (pages, overflow) = (info.me_last_pgno + 1).multipliedReportingOverflow(by: Int(stats.ms_psize))
        guard !overflow, Int(data.st_size) >= pages else {
            let needed = overflow ? "beyond any file size" : "at byte \(pages)"
            throw LMDBError(code: .truncated, operation: "mdb_env_open",
                            context: "\(path)/data.mdb is \(data.st_size) bytes, but its last page ends \(needed)")
        }
    }

    deinit {
        mdb_env_close(handle)
        if let identity { Self.release(identity) }
    }

    private static func release(_ identity: FileIdentity) {
        _ = openInProcess.withLock { $0.remove(identity) }
    }

    // MARK: Transactions

    /// Runs `body` in a read-only transaction: a consistent snapshot of the last commit.
    ///
    /// Keep it short: an open reader pins the pages it sees (the file cannot reuse them) and
    /// holds off growth of the map in this process.
    /// - Throws: what `body` throws, or `LMDBError`.
    public func read<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        try resizeLock.withShared { () throws -> R in
            let txn = try begin(readOnly: true)
            defer { mdb_txn_abort(txn) }
            return try body(Transaction(handle: txn, writeState: nil))
        }
    }

    /// Runs `body` in a write transaction and commits it when `body` returns.
    ///
    /// If `body` throws, nothing it wrote is kept. If the map fills, the transaction is
    /// aborted, the map grows and `body` runs again from the start — so keep side effects
    /// other than writes to the transaction out of `body`, or make them repeatable.
    /// - Throws: what `body` throws, or `LMDBError`.
    public func write<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        if isWritingOnThisThread() { throw LMDBError(code: .nestedWrite, operation: "mdb_txn_begin", context: path) }
        let writers = try lockWriters()
        defer { close(writers) }
        let me = pthread_self()
        while true {
            let state = WriteState()
            do {
                return try resizeLock.withShared { () throws -> R in
                    let txn = try begin(readOnly: false)
                    writingThread.withLock { $0 = me }
                    defer { writingThread.withLock { $0 = nil } }
                    let transaction = Transaction(handle: txn, writeState: state)
                    let result: R
                    do {
                        result = try body(transaction)
                    } catch {
                        mdb_txn_abort(txn)
                        throw error
                    }
                    let rc = mdb_txn_commit(txn)
                    if rc == MDB_MAP_FULL { state.sawMapFull = true }
                    if (rc == EIO || rc == ENOSPC), let free = Self.availableBytes(path), free < Self.fullDiskBytes {
                        // LMDB reports a write cut short by a full disk as EIO.
                        throw LMDBError(code: .noSpace, operation: "mdb_txn_commit", context: "\(path): \(free) bytes free")
                    }
                    try check(rc, "mdb_txn_commit")
                    return result
                }
            } catch {
                // A full map can surface as the LMDB error itself or wrapped by the body;
                // the transaction's own flag catches both.
                guard state.sawMapFull else { throw error }
                try grow()
            }
        }
    }

    /// Takes the store's writer lock: an exclusive `flock` on its directory, held until the
    /// returned descriptor is closed, waiting for another writer's.
    ///
    /// LMDB's own writer mutex lives in `lock.mdb`; deleted while a writer runs, the next process
    /// makes a new one and two writers commit over each other (one of them loses a write that
    /// reported success). The directory cannot go while the store is there. Each write opens its
    /// own descriptor, so threads of one process exclude each other too (a `flock` belongs to
    /// the open file, not the process).
    private func lockWriters() throws(LMDBError) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(errno, "open", path) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let error = LMDBError(errno, "flock", path)
                close(fd)
                throw error
            }
        }
        return fd
    }

    /// Below this many free bytes, a failed write is put down to a full disk.
    static let fullDiskBytes = 1 << 20

    /// Whether the calling thread is inside a write transaction of this environment.
    private func isWritingOnThisThread() -> Bool {
        let me = pthread_self()
        return writingThread.withLock { current in current.map { pthread_equal($0, me) != 0 } ?? false }
    }

    private func begin(readOnly: Bool) throws(LMDBError) -> OpaquePointer {
        var attempts = 0
        while true {
            var txn: OpaquePointer?
            let rc = mdb_txn_begin(handle, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
            if rc == MDB_SUCCESS, let txn { return txn }
            if rc == MDB_MAP_RESIZED && attempts < 8 {
                attempts += 1
                // Another process grew the map. Adopting its size needs every transaction of
                // this process closed, and this thread holds the lock shared: hand it back,
                // adopt, and come back in.
                try adoptGrownMapFromInsideSharedLock()
                continue
            }
            if rc == MDB_READERS_FULL && attempts < 1 {
                attempts += 1
                _ = try? checkReaders()
                continue
            }
            throw LMDBError(rc, "mdb_txn_begin", readOnly ? "read" : "write")
        }
    }

    /// Adopts a map grown by another process. Called with the resize lock held shared by
    /// this thread: it steps out of the shared hold, takes the lock exclusively, and steps
    /// back in, so the caller's `withShared` still balances.
    private func adoptGrownMapFromInsideSharedLock() throws(LMDBError) {
        try resizeLock.releaseSharedTemporarily { () throws(LMDBError) in
            try resizeLock.withExclusive { () throws(LMDBError) in
                try check(mdb_env_set_mapsize(handle, 0), "mdb_env_set_mapsize", "adopting a map grown by another process")
            }
        }
        adoptionCount.withLock { $0 += 1 }
    }

    /// Grows the map: doubles it, or adds `maxGrowthStep` once it is larger than that.
    /// Waits for this process's transactions to end first.
    public func grow() throws(LMDBError) {
        guard !configuration.flags.contains(.readOnly) else {
            throw LMDBError(code: .permissionDenied, operation: "grow", context: "read-only environment")
        }
        try resizeLock.withExclusive { () throws(LMDBError) in
            let current = info().mapSize
            let step = min(current, configuration.maxGrowthStep)
            let next = Self.round(current + step, to: pageSize)
            try check(mdb_env_set_mapsize(handle, next), "mdb_env_set_mapsize", "growing the map to \(next) bytes")
        }
        growthCount.withLock { $0 += 1 }
    }

    /// How many times this process grew the map.
    public var growths: Int { growthCount.withLock { $0 } }

    /// How many times this process adopted a map grown by another process (`MDB_MAP_RESIZED`).
    public var adoptedResizes: Int { adoptionCount.withLock { $0 } }

    // MARK: Databases

    /// Opens a named database, creating it if `flags` contains `.create`.
    ///
    /// Call this once per database after opening the environment and keep the handle.
    /// - Throws: `LMDBError` (`.notFound` if it does not exist and `.create` was not given).
    public func openDatabase(_ name: String?, flags: Database.Flags = [.create]) throws -> Database {
        // LMDB keeps a handle opened in a transaction only if that transaction commits, so
        // this commits even a read-only one (which a plain `read` would abort).
        let readOnly = configuration.flags.contains(.readOnly) || !flags.contains(.create)
        if !readOnly, isWritingOnThisThread() {
            throw LMDBError(code: .nestedWrite, operation: "mdb_dbi_open", context: name)
        }
        // A write transaction like any other: it takes the writers' lock too.
        let writers = readOnly ? -1 : try lockWriters()
        defer { if writers >= 0 { close(writers) } }
        return try resizeLock.withShared { () throws -> Database in
            let txn = try begin(readOnly: readOnly)
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, name, flags.rawValue, &dbi)
            guard rc == MDB_SUCCESS else {
                mdb_txn_abort(txn)
                throw LMDBError(rc, "mdb_dbi_open", name ?? "main")
            }
            try check(mdb_txn_commit(txn), "mdb_txn_commit", "opening \(name ?? "main")")
            return Database(dbi: dbi, name: name)
        }
    }

    // MARK: Maintenance

    /// Frees reader slots held by processes that no longer exist (`mdb_reader_check`).
    /// - Returns: how many slots were freed.
    @discardableResult
    public func checkReaders() throws(LMDBError) -> Int {
        var dead: Int32 = 0
        try check(mdb_reader_check(handle, &dead), "mdb_reader_check")
        return Int(dead)
    }

    /// Read transactions open right now across every process, live or left by a dead one
    /// (until `checkReaders()` frees those).
    public func activeReaders() -> Int {
        var lines = 0
        mdb_reader_list(handle, { message, context in
            guard let message, let context else { return 0 }
            let text = String(cString: message)
            // LMDB prints a header line, then one line per taken reader slot, ending in "-"
            // for a slot held without a transaction.
            if !text.contains("pid") && !text.contains("no active readers") && !text.hasSuffix("-\n") {
                context.assumingMemoryBound(to: Int.self).pointee += 1
            }
            return 0
        }, &lines)
        return lines
    }

    /// Flushes written data to disk; with `force`, even when opened with `.noSync`.
    public func sync(force: Bool = true) throws(LMDBError) {
        try check(mdb_env_sync(handle, force ? 1 : 0), "mdb_env_sync")
    }

    /// The map size, bytes used, page size and reader slots.
    public func info() -> Info {
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        var stat = MDB_stat()
        mdb_env_stat(handle, &stat)
        let page = Int(stat.ms_psize)
        return Info(
            mapSize: info.me_mapsize,
            usedBytes: (info.me_last_pgno + 1) * page,
            pageSize: page,
            readerSlotsUsed: Int(info.me_numreaders),
            maxReaders: Int(info.me_maxreaders)
        )
    }

    static func round(_ size: Int, to page: Int) -> Int {
        (size + page - 1) / page * page
    }
}

struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
}

/// State of one write attempt that must survive the body wrapping LMDB's errors.
final class WriteState {
    var sawMapFull = false
}

extension ReadWriteLock {
    /// Drops one shared hold, runs `body`, and takes the shared hold again.
    func releaseSharedTemporarily<E: Error>(_ body: () throws(E) -> Void) throws(E) {
        unlockShared()
        defer { lockShared() }
        try body()
    }
}

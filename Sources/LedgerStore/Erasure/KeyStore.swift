import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import Synchronization

/// The subjects' keys for their personal fields, in an LMDB environment of their own beside
/// the log's files: `keys-<generation>/`. The log's `meta` names the current generation.
///
/// A key is never deleted in place: LMDB keeps freed pages, and the unused middle of a page,
/// until they are reused. Destroying keys writes the next generation afresh — every key that
/// lives, put one by one into a new environment, synced — switches the log's `meta` to it in
/// one commit (the atomic step), then removes the old directory. See the LedgerStore article
/// *Personal data*.
///
/// `keys` database: subject (its UTF-8) → sorted values of 48 bytes, key id (16) ‖ key (32).
/// A subject has one key, or more while an erasure is being completed.
final class KeyStore: @unchecked Sendable {
    // @unchecked: the only mutable state is `opened`, behind its mutex.

    /// One subject key.
    struct Key: Sendable, Hashable {
        /// Its random id, which every field sealed under it names.
        let id: [UInt8]
        /// 256 bits for AES-GCM.
        let bytes: [UInt8]

        static let idSize = 16
        static let size = 32

        static func random() -> Key {
            var generator = SystemRandomNumberGenerator()
            return Key(id: (0..<idSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) },
                       bytes: (0..<size).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        }

        var value: [UInt8] { id + bytes }

        init(id: [UInt8], bytes: [UInt8]) { (self.id, self.bytes) = (id, bytes) }

        init?(value: UnsafeRawBufferPointer) {
            guard value.count == Self.idSize + Self.size else { return nil }
            id = Array(value[0 ..< Self.idSize])
            bytes = Array(value[Self.idSize...])
        }
    }

    struct Opened: @unchecked Sendable {
        let generation: UInt64
        let env: Environment
        let keys: Database
        /// The directory's device and inode when it was opened: a directory removed and made
        /// again under the same name (by another process) is another store.
        let directory: (device: UInt64, inode: UInt64)
    }

    /// The store's directory.
    let root: String
    let writable: Bool
    /// The generations this process has open (the current one; for a moment also the one
    /// before it, or the next).
    private let opened = Mutex<[UInt64: Opened]>([:])

    static let databaseName = "keys"
    static let flags: Database.Flags = [.dupSort, .dupFixed]

    init(root: String, writable: Bool) {
        self.root = root
        self.writable = writable
    }

    static func directoryName(_ generation: UInt64) -> String { "keys-\(generation)" }

    func directory(_ generation: UInt64) -> String { root + "/" + Self.directoryName(generation) }

    /// The device and inode of `path`, `nil` when it does not exist.
    /// - Throws: `LedgerError.storage` when it exists but cannot be looked at.
    private static func identity(_ path: String) throws(LedgerError) -> (device: UInt64, inode: UInt64)? {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw LedgerError(.storage, "\(path): \(String(cString: strerror(errno)))")
        }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    /// The environment of `generation`, opened once per process and checked to be the directory
    /// now on disk; `nil` for generation 0, or when its directory is gone (a later generation
    /// replaced it) — unless `creating`, which makes it.
    func open(_ generation: UInt64, creating: Bool = false) throws -> Opened? {
        guard generation > 0 else { return nil }
        let path = directory(generation)
        return try opened.withLock { opened throws -> Opened? in
            // Generations whose directories are gone are dropped: their files are freed once no
            // reader holds them.
            for (other, store) in opened where other != generation {
                if try Self.identity(store.env.path).map({ $0 != store.directory }) ?? true { opened[other] = nil }
            }
            var onDisk = try Self.identity(path)
            if let current = opened[generation] {
                if let onDisk, onDisk == current.directory { return current }
                opened[generation] = nil
            }
            guard onDisk != nil || creating else { return nil }
            var config = Environment.Configuration()
            // Keys are small (a million subjects take ~100 MB): the map never needs to grow.
            config.mapSize = 4 << 30
            config.maxDatabases = 2
            config.createsDirectory = creating
            if !writable { config.flags.insert(.readOnly) }
            let env: Environment
            do {
                env = try Environment(path: path, configuration: config)
            } catch {
                // Removed between the look and the open.
                if !creating, try Self.identity(path) == nil { return nil }
                throw error
            }
            let keys = try env.openDatabase(Self.databaseName, flags: writable ? Self.flags.union(.create) : Self.flags)
            onDisk = try Self.identity(path)
            guard let onDisk else { return nil }
            if creating {
                Self.syncDirectory(path)
                Self.syncDirectory(root)
            }
            let made = Opened(generation: generation, env: env, keys: keys, directory: onDisk)
            opened[generation] = made
            return made
        }
    }

    /// The current generation's environment, which must be there.
    /// - Throws: `LedgerError.corruptRecord` when its directory is missing.
    func required(_ generation: UInt64) throws -> Opened? {
        guard generation > 0 else { return nil }
        guard let store = try open(generation) else {
            throw LedgerError(.corruptRecord, "the key store \(directory(generation)) is missing: the keys of every subject's personal fields were in it; restore the store from a backup")
        }
        return store
    }

    /// Forgets the open environment (a generation replaced), so that it closes once no reader holds it.
    func forget(_ generation: UInt64) {
        _ = opened.withLock { $0.removeValue(forKey: generation) }
    }

    /// The keys `subject` has in `generation`; none when that generation has been replaced
    /// since (a reader's older snapshot), unless `required` (the writer's).
    func keys(of subject: String, generation: UInt64, required: Bool = false) throws -> [Key] {
        guard let store = try required ? self.required(generation) : open(generation) else { return [] }
        return try store.env.read { txn in try Self.keys(of: subject, store.keys, txn) }
    }

    static func keys(of subject: String, _ db: Database, _ txn: borrowing Transaction) throws -> [Key] {
        let name = Array(subject.utf8)
        return try name.withUnsafeBytes { name in
            try txn.withCursor(db) { cursor in
                var found: [Key] = []
                var entry = try cursor.seek(exactly: name)
                while let current = entry {
                    if let key = Key(value: current.value) { found.append(key) }
                    entry = try cursor.nextDuplicate()
                }
                return found
            }
        }
    }

    /// Adds keys in one commit (synced) to `generation`: the current one, or 1, which it makes.
    func add(_ keys: [(subject: String, key: Key)], generation: UInt64, creating: Bool) throws {
        guard !keys.isEmpty else { return }
        guard let store = try creating ? open(generation, creating: true) : required(generation) else { return }
        try store.env.write { txn in
            for (subject, key) in keys { try txn.put(store.keys, key: Array(subject.utf8), value: key.value) }
        }
    }

    /// Writes generation `next`: every key of `current` but those whose id is in `dropped`,
    /// into a new environment, committed and synced, its directory synced. A leftover
    /// directory of that name (a compaction cut short) is removed first.
    func compact(from current: UInt64, to next: UInt64, dropping dropped: Set<[UInt8]>) throws {
        forget(next)
        try Self.removeDirectory(directory(next))
        var live: [(name: [UInt8], value: [UInt8])] = []
        if let old = try required(current) {
            try old.env.read { txn in
                try txn.withCursor(old.keys) { cursor in
                    var entry = try cursor.first()
                    while let e = entry {
                        if let key = Key(value: e.value), !dropped.contains(key.id) { live.append((Array(e.key), key.value)) }
                        entry = try cursor.next()
                    }
                }
            }
        }
        guard let fresh = try open(next, creating: true) else { return }
        try fresh.env.write { txn in
            for (name, value) in live { try txn.put(fresh.keys, key: name, value: value) }
        }
        try fresh.env.sync(force: true)
    }

    /// Removes every `keys-N` directory but `keep`'s (generations replaced, or made by a
    /// compaction or a first key that never committed), then syncs the store's directory.
    func removeStale(keeping keep: UInt64) throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        var removed = false
        for name in names where name.hasPrefix("keys-") && name != Self.directoryName(keep) {
            // Gone from disk first, then from this process: a reader in between finds the
            // directory missing and goes to the current generation, never opens it twice.
            try Self.removeDirectory(root + "/" + name)
            if let generation = UInt64(name.dropFirst("keys-".count)) { forget(generation) }
            removed = true
        }
        if removed { Self.syncDirectory(root) }
    }

    /// The `keys-N` directories there are, by generation.
    func generationsOnDisk() -> [UInt64] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { $0.hasPrefix("keys-") ? UInt64($0.dropFirst("keys-".count)) : nil }.sorted()
    }

    private static func removeDirectory(_ path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            throw LedgerError(.storage, "removing \(path): \(error.localizedDescription)")
        }
    }

    static func syncDirectory(_ path: String) {
        let fd = Foundation.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}

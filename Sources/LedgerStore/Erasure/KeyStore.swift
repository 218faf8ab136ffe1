import Foundation
import LMDB
import LedgerCore
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
    }

    /// The store's directory.
    let root: String
    let writable: Bool
    /// The generations this process has open (the current one, and for a moment the next).
    private let opened = Mutex<[UInt64: Opened]>([:])

    static let databaseName = "keys"
    static let flags: Database.Flags = [.dupSort, .dupFixed]

    init(root: String, writable: Bool) {
        self.root = root
        self.writable = writable
    }

    static func directoryName(_ generation: UInt64) -> String { "keys-\(generation)" }

    func directory(_ generation: UInt64) -> String { root + "/" + Self.directoryName(generation) }

    /// The environment of `generation`, opened once per process; `nil` when its directory
    /// holds no store (generation 0, or one a later generation has replaced and removed).
    func open(_ generation: UInt64, creating: Bool = false) throws -> Opened? {
        guard generation > 0 else { return nil }
        return try opened.withLock { opened throws -> Opened? in
            if let current = opened[generation] { return current }
            let path = directory(generation)
            if !creating && access(path + "/data.mdb", F_OK) != 0 { return nil }
            var config = Environment.Configuration()
            // Keys are small (a million subjects take ~100 MB): the map never needs to grow.
            config.mapSize = 4 << 30
            config.maxDatabases = 2
            if !writable { config.flags.insert(.readOnly) }
            let env = try Environment(path: path, configuration: config)
            let keys = try env.openDatabase(Self.databaseName, flags: writable ? Self.flags.union(.create) : Self.flags)
            let made = Opened(generation: generation, env: env, keys: keys)
            opened[generation] = made
            // An older generation is replaced: readers that hold it finish with it, new ones
            // read the current one.
            for older in opened.keys where older < generation { opened.removeValue(forKey: older) }
            return made
        }
    }

    /// Forgets the open environment (a generation replaced), so that it closes once no reader holds it.
    func forget(_ generation: UInt64) {
        _ = opened.withLock { $0.removeValue(forKey: generation) }
    }

    /// The keys `subject` has in `generation`.
    func keys(of subject: String, generation: UInt64) throws -> [Key] {
        guard let store = try open(generation) else { return [] }
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

    /// Adds keys in one commit (synced) to `generation`, creating its environment if needed.
    func add(_ keys: [(subject: String, key: Key)], generation: UInt64) throws {
        guard !keys.isEmpty else { return }
        guard let store = try open(generation, creating: true) else { return }
        try store.env.write { txn in
            for (subject, key) in keys { try txn.put(store.keys, key: Array(subject.utf8), value: key.value) }
        }
    }

    /// Writes generation `next`: every key of `current` but those whose id is in `dropped`,
    /// into a new environment, committed and synced, its directory synced. A leftover
    /// directory of that name (a compaction cut short) is removed first.
    /// - Returns: how many keys the new generation holds.
    @discardableResult
    func compact(from current: UInt64, to next: UInt64, dropping dropped: Set<[UInt8]>) throws -> Int {
        try Self.removeDirectory(directory(next))
        var live: [(name: [UInt8], value: [UInt8])] = []
        if let old = try open(current) {
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
        guard let fresh = try open(next, creating: true) else { return 0 }
        try fresh.env.write { txn in
            for (name, value) in live { try txn.put(fresh.keys, key: name, value: value) }
        }
        try fresh.env.sync(force: true)
        Self.syncDirectory(directory(next))
        Self.syncDirectory(root)
        return live.count
    }

    /// Removes every `keys-N` directory but `keep`'s (generations replaced, or made by a
    /// compaction or a first key that never committed), then syncs the store's directory.
    func removeStale(keeping keep: UInt64) throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        var removed = false
        for name in names where name.hasPrefix("keys-") && name != Self.directoryName(keep) {
            if let generation = UInt64(name.dropFirst("keys-".count)) { forget(generation) }
            try Self.removeDirectory(root + "/" + name)
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

import Crypto
import LMDB
import LedgerCore

/// The id index (store layout 3): for every event, the first 8 bytes of SHA-256(id) and its
/// position, packed.
///
/// All entries are the sorted, fixed-size values of one key (`MDB_DUPSORT | MDB_DUPFIXED`), so
/// LMDB keeps them 14 to an entry with no header each: about 20 bytes per event on disk
/// where layout 2, a 16-byte key and an 8-byte value per id with a node header each, took 50.
///
/// Two ids may share a hash prefix. A lookup reads the record at each position under the
/// prefix and compares ids, so a shared prefix costs a read, never a wrong answer. The prefix
/// is of a cryptographic hash so that ids crafted to share one cannot pile up under it.
enum IDIndex {
    /// The one key every entry is a value of.
    static let key: [UInt8] = [0x69]   // "i"
    static let hashSize = 8
    static let positionSize = 6
    /// The largest position an entry can hold (2⁴⁸ − 1).
    static let maxPosition: UInt64 = 1 << 48 - 1

    /// The first 8 bytes of SHA-256 of the id's 16 bytes.
    static func hash(_ id: EventID) -> [UInt8] {
        Array(SHA256.hash(data: id.bytes).prefix(hashSize))
    }

    /// The entry of `id` at `position`: its hash ‖ the position (6 bytes, big-endian).
    static func entry(hash: [UInt8], position: UInt64) -> [UInt8] {
        var bytes = hash
        for shift in stride(from: (positionSize - 1) * 8, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: position >> UInt64(shift)))
        }
        return bytes
    }

    /// The position in an entry; `nil` if it is not an entry's size.
    static func position(ofEntry entry: UnsafeRawBufferPointer) -> UInt64? {
        guard entry.count == hashSize + positionSize else { return nil }
        return entry[hashSize...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// Whether `entry` starts with `hash`.
    static func entry(_ entry: UnsafeRawBufferPointer, has hash: [UInt8]) -> Bool {
        entry.count == hashSize + positionSize && hash.withUnsafeBytes { entry.prefix(hashSize).elementsEqual($0) }
    }
}

/// The id index cannot take a position (beyond 2⁴⁸ − 1): the write transaction is aborted.
struct IDIndexFull: Error, CustomStringConvertible {
    var position: UInt64
    var description: String { "position \(position) is beyond what the id index holds (2⁴⁸ − 1)" }
}

extension LogSchema {
    /// The id index's entry for an event (see `ids`): for tools that check or repair a store.
    public static func idEntry(_ id: EventID, position: UInt64) -> [UInt8] {
        IDIndex.entry(hash: IDIndex.hash(id), position: position)
    }

    /// The one key under which `ids` keeps every entry.
    public static var idKey: [UInt8] { IDIndex.key }
}

extension LogStorage {
    /// The position of the event stored with `id`, and its record; `nil` if there is none.
    /// Reads the record at each position under the id's hash prefix (nearly always one).
    func stored(_ id: EventID, _ txn: borrowing Transaction) throws -> (position: UInt64, record: UnsafeRawBufferPointer)? {
        let hash = IDIndex.hash(id)
        let idBytes = id.bytes
        var candidates: [UInt64] = []
        try txn.withCursor(ids) { cursor in
            let start = IDIndex.entry(hash: hash, position: 0)
            var entry = try IDIndex.key.withUnsafeBytes { k in try start.withUnsafeBytes { v in try cursor.seek(key: k, valueAtLeast: v) } }
            while let current = entry, IDIndex.entry(current.value, has: hash) {
                guard let position = IDIndex.position(ofEntry: current.value) else { break }
                candidates.append(position)
                entry = try cursor.nextDuplicate()
            }
        }
        for position in candidates {
            guard let record = try txn.get(events, key: LogSchema.key(position)), let content = EventRecord.content(ofRecord: record),
                  content.count >= 16
            else {
                throw LedgerError(.corruptRecord, "the id index points at position \(position), which holds no readable record; run `ledger verify`")
            }
            if idBytes.withUnsafeBytes({ content.prefix(16).elementsEqual($0) }) { return (position, record) }
        }
        return nil
    }

    /// Adds `id` at `position` to the id index.
    func index(_ id: EventID, at position: UInt64, _ txn: borrowing Transaction) throws {
        guard position <= IDIndex.maxPosition else { throw IDIndexFull(position: position) }
        try txn.put(ids, key: IDIndex.key, value: IDIndex.entry(hash: IDIndex.hash(id), position: position), flags: .noDupData)
    }

    /// Builds the layout-3 id index from the log, in `txn`, and drops the layout-2 one (a
    /// key per id) if there is one. Returns the new index's handle.
    static func indexIDsByHash(events: Database, _ txn: borrowing Transaction) throws -> Database {
        guard let index = try txn.openDatabase(LogSchema.ids, flags: LogSchema.idsFlags.union(.create)) else {
            throw LedgerError(.storage, "could not create the id index")
        }
        var entries: [[UInt8]] = []
        try txn.withCursor(events) { cursor in
            var entry = try cursor.first()
            while let e = entry {
                guard let position = LogSchema.integer(e.key), let content = EventRecord.content(ofRecord: e.value), content.count >= 16,
                      let id = EventID(bytes: content.prefix(16))
                else { throw LedgerError(.corruptRecord, "a record of the log is damaged; the id index cannot be rebuilt (run `ledger verify`)") }
                guard position <= IDIndex.maxPosition else { throw IDIndexFull(position: position) }
                entries.append(IDIndex.entry(hash: IDIndex.hash(id), position: position))
                entry = try cursor.next()
            }
        }
        entries.sort { $0.lexicographicallyPrecedes($1) }
        try txn.removeAll(index)
        for entry in entries { try txn.put(index, key: IDIndex.key, value: entry, flags: .appendDuplicate) }
        if let layout2 = try txn.openDatabase(LogSchema.layout2IDs, flags: []) { try txn.drop(layout2) }
        return index
    }
}

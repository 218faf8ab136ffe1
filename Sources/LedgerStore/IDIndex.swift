import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

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

    /// The first 8 bytes of SHA-256 of the id's 16 bytes, as a big-endian integer.
    static func hash(_ id: EventID) -> UInt64 {
        withUnsafeBytes(of: (id.high.bigEndian, id.low.bigEndian)) { bytes in
            SHA256.hash(data: bytes).withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
        }
    }

    /// Runs `body` with the entry of `hash` at `position`: the hash ‖ the position (6 bytes,
    /// big-endian), both big-endian so that entries sort by hash, then position.
    static func withEntry<R>(hash: UInt64, position: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: (hash.bigEndian, (position << 16).bigEndian)) { both in
            try body(UnsafeRawBufferPointer(rebasing: both[..<(hashSize + positionSize)]))
        }
    }

    /// The entry of `hash` at `position`, as bytes.
    static func entry(hash: UInt64, position: UInt64) -> [UInt8] { withEntry(hash: hash, position: position) { Array($0) } }

    /// The hash in an entry; `nil` if it is not an entry's size.
    static func hash(ofEntry entry: UnsafeRawBufferPointer) -> UInt64? {
        guard entry.count == hashSize + positionSize else { return nil }
        return UInt64(bigEndian: entry.loadUnaligned(as: UInt64.self))
    }

    /// The position in an entry; `nil` if it is not an entry's size.
    static func position(ofEntry entry: UnsafeRawBufferPointer) -> UInt64? {
        guard entry.count == hashSize + positionSize else { return nil }
        return entry[hashSize...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
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
    /// The position of the event stored with `id` (whose `IDIndex.hash` is `hash`), and its
    /// record; `nil` if there is none. Looks in a write transaction's `pending` entries and the
    /// index `tail` first; in the stored index, reads the record at each position under the hash
    /// (nearly always one, or none).
    func stored(_ id: EventID, hash: UInt64, _ txn: borrowing Transaction, tail: IndexTail?, pending: IndexTail? = nil) throws -> (position: UInt64, record: UnsafeRawBufferPointer)? {
        if let position = pending?.position(of: id) ?? tail?.position(of: id) {
            guard let record = try txn.get(events, key: LogSchema.key(position)) else {
                throw LedgerError(.corruptRecord, "position \(position), where the index tail has event \(id), holds no record; run `ledger verify`")
            }
            return (position, record)
        }
        return try txn.withCursor(ids) { cursor in
            var entry = try IDIndex.key.withUnsafeBytes { key in
                try IDIndex.withEntry(hash: hash, position: 0) { start in try cursor.seek(key: key, valueAtLeast: start) }
            }
            while let current = entry, IDIndex.hash(ofEntry: current.value) == hash {
                guard let position = IDIndex.position(ofEntry: current.value) else { break }
                guard let record = try txn.get(events, key: LogSchema.key(position)), let stored = EventRecord.id(ofRecord: record) else {
                    throw LedgerError(.corruptRecord, "the id index points at position \(position), which holds no readable record; run `ledger verify`")
                }
                if stored == id { return (position, record) }
                entry = try cursor.nextDuplicate()
            }
            return nil
        }
    }

    /// The position of the event stored with `id`, and its record; `nil` if there is none.
    func stored(_ id: EventID, _ txn: borrowing Transaction, tail: IndexTail) throws -> (position: UInt64, record: UnsafeRawBufferPointer)? {
        try stored(id, hash: IDIndex.hash(id), txn, tail: tail)
    }

    /// Whether the id index holds `id` at exactly `position` (what `verify` checks per event).
    func idIndexHolds(_ id: EventID, at position: UInt64, _ txn: borrowing Transaction, tail: IndexTail) throws -> Bool {
        if position > tail.base { return tail.position(of: id) == position }
        return try txn.withCursor(ids) { cursor in
            try IDIndex.key.withUnsafeBytes { key in
                try IDIndex.withEntry(hash: IDIndex.hash(id), position: position) { entry in
                    try cursor.seek(key: key, valueAtLeast: entry)?.value.elementsEqual(entry) == true
                }
            }
        }
    }

    /// Adds the id whose `IDIndex.hash` is `hash` at `position` to the id index.
    func index(hash: UInt64, at position: UInt64, _ txn: borrowing Transaction) throws {
        guard position <= IDIndex.maxPosition else { throw IDIndexFull(position: position) }
        try IDIndex.key.withUnsafeBytes { key in
            try IDIndex.withEntry(hash: hash, position: position) { entry in try txn.put(ids, key: key, value: entry, flags: .noDupData) }
        }
    }

    /// Builds the layout-3 id index from the log, in `txn`, and drops the layout-2 one (a
    /// key per id) if there is one.
    static func indexIDsByHash(events: Database, _ txn: borrowing Transaction) throws {
        guard let index = try txn.openDatabase(LogSchema.ids, flags: LogSchema.idsFlags.union(.create)) else {
            throw LedgerError(.storage, "could not create the id index")
        }
        var entries: [(hash: UInt64, position: UInt64)] = []
        try txn.withCursor(events) { cursor in
            var entry = try cursor.first()
            while let e = entry {
                guard let position = LogSchema.integer(e.key), let id = EventRecord.id(ofRecord: e.value) else {
                    throw LedgerError(.corruptRecord, "a record of the log is damaged; the id index cannot be rebuilt (run `ledger verify`)")
                }
                guard position <= IDIndex.maxPosition else { throw IDIndexFull(position: position) }
                entries.append((IDIndex.hash(id), position))
                entry = try cursor.next()
            }
        }
        entries.sort { ($0.hash, $0.position) < ($1.hash, $1.position) }
        try txn.removeAll(index)
        try IDIndex.key.withUnsafeBytes { key in
            for entry in entries {
                try IDIndex.withEntry(hash: entry.hash, position: entry.position) { value in try txn.put(index, key: key, value: value, flags: .appendDuplicate) }
            }
        }
        if let layout2 = try txn.openDatabase(LogSchema.layout2IDs, flags: []) { try txn.drop(layout2) }
    }
}

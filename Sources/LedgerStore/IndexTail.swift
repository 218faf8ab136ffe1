@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// The id and stream index entries of the latest events, kept in memory instead of in the
/// stored indexes until enough of them gather (store layout 5).
///
/// An append writes each event's record to the log, which is sequential (`MDB_APPEND`), and
/// used to put its id and stream entries into their B-trees too: random keys, so every event of
/// a 1,000-event batch dirtied a page of its own in each index, and the commit wrote each of
/// those 4 KB pages whole. Now the entries of the events after the stored indexes' position
/// (`base`, the store's `indexed` meta value) live here, and go into the B-trees together, in
/// key order, inside the append that brings the tail to `limit` events (and when the log is
/// closed), where each page takes many entries at once.
///
/// Nothing is lost in a crash: the log is durable and holds every event the tail holds, so a
/// tail is rebuilt from the log (`syncTail`) when a store is opened, and whenever another process
/// has appended or merged since. Every lookup consults the tail, then the stored index.
struct IndexTail {
    /// The stored indexes hold every event through `base`.
    var base: UInt64
    /// The tail holds every event after `base` through `head`.
    var head: UInt64
    /// Each tail event's position and `IDIndex.hash` by id (the hash the append computed to
    /// look the id up, kept for the merge).
    var ids: [EventID: TailID] = [:]
    /// Each subject's tail events.
    var streams: [String: TailStream] = [:]

    init(base: UInt64) {
        self.base = base
        self.head = base
    }

    /// Events the tail holds.
    var count: Int { Int(head - base) }

    /// Adds the event at `position` (the next after `head`).
    mutating func add(id: EventID, hash: UInt64, subject: String, version: UInt64, position: UInt64) {
        ids[id] = ids[id] ?? TailID(position: position, hash: hash)
        streams[subject, default: TailStream(before: version - 1)].positions.append(position)
        head = position
    }

    /// Adds the events of `later`, a tail that starts where this one ends.
    mutating func absorb(_ later: IndexTail) {
        ids.merge(later.ids) { earlier, _ in earlier }
        for (subject, stream) in later.streams {
            if let index = streams.index(forKey: subject) {
                streams.values[index].positions += stream.positions
            } else {
                streams[subject] = stream
            }
        }
        head = later.head
    }

    /// Drops the events through `position`, which the stored indexes now hold.
    mutating func drop(through position: UInt64) {
        ids = ids.filter { $0.value.position > position }
        var kept: [String: TailStream] = [:]
        for (subject, stream) in streams {
            let later = stream.positions.filter { $0 > position }
            guard !later.isEmpty else { continue }
            kept[subject] = TailStream(before: stream.before + UInt64(stream.positions.count - later.count), positions: later)
        }
        streams = kept
        base = position
        head = max(head, position)
    }
}

/// An event of an `IndexTail` as the id index will hold it.
struct TailID {
    var position: UInt64
    var hash: UInt64
}

/// One subject's events in an `IndexTail`.
struct TailStream {
    /// The subject's version before the first of them: what the stored index holds.
    var before: UInt64
    /// Their positions, in version order.
    var positions: [UInt64] = []

    /// The subject's version after them.
    var version: UInt64 { before + UInt64(positions.count) }
}

/// A log's index tail and the lock readers and writers share it under.
///
/// Readers hold the lock shared while they look events up in a snapshot — a read by id or by
/// stream releases it before decoding what it found (`LogStorage.readIndexed(_:find:then:)`);
/// `version(of:)` and the verifier hold it for their whole, short, body — and take it
/// exclusively only to bring the tail up to their snapshot. A write transaction brings
/// it up to itself under the exclusive lock first, then holds it shared while it writes,
/// keeping its own entries apart (`Head.pending`), and adds them under the exclusive lock
/// once it has committed. Since the tail only ever holds committed events, and a reader
/// takes the lock before its snapshot, a reader never finds the tail ahead of its snapshot.
final class IndexTails: @unchecked Sendable {
    // @unchecked Sendable: `tail` is read under `lock` held shared, written under it held
    // exclusively.
    /// Readers hold it while they look events up, and keep overlapping under load: it prefers
    /// the writer, whose every commit needs it exclusively, so that no stream of readers
    /// starves appends. No path takes it shared inside a read that holds it (that would
    /// deadlock behind a waiting writer): a read's body reads `tail` directly.
    private let lock = ReadWriteLock(preferringWriters: true)
    var tail: IndexTail
    /// The tail's size at which an append merges it into the stored indexes.
    let limit: Int

    init(limit: Int) {
        self.limit = limit
        tail = IndexTail(base: 0)
    }

    func withShared<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R { try lock.withShared(body) }
    func lockShared() { lock.lockShared() }
    func unlockShared() { lock.unlockShared() }
    func withExclusive<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R { try lock.withExclusive(body) }

    /// The position of the event with `id` after the stored index's position, if the tail or
    /// (for a write transaction) its own `pending` entries hold it.
    func position(of id: EventID, pending: IndexTail?) -> UInt64? {
        if let entry = pending?.ids[id] { return entry.position }
        return tail.ids[id]?.position
    }

    /// `subject`'s version, if `pending` or (when `tail`) the tail holds events of it.
    func version(of subject: String, pending: IndexTail?, tail includeTail: Bool = true) -> UInt64? {
        if let version = pending?.streams[subject]?.version { return version }
        return includeTail ? tail.streams[subject]?.version : nil
    }
}

extension LogSchema {
    /// The `meta` key of the position the stored id and stream indexes are complete through
    /// (u64 BE); the events after it are indexed in memory (`IndexTail`). Absent in stores of
    /// layout 4 and older, whose indexes hold every event.
    public static let indexedKey = Array("indexed".utf8)
}

extension LogStorage {
    /// The position the stored indexes hold every event through, in `txn`.
    func indexedThrough(_ txn: borrowing Transaction, head: UInt64) throws -> UInt64 {
        guard let stored = try txn.get(meta, key: LogSchema.indexedKey) else { return head }
        guard let position = LogSchema.integer(stored), position <= head else {
            throw LedgerError(.corruptRecord, "the store's indexed position is damaged; run `ledger verify`")
        }
        return position
    }

    /// Whether the tail holds exactly the events after the stored indexes' position through
    /// the head, as `txn` sees them.
    func tailIsCurrent(_ txn: borrowing Transaction) throws -> Bool {
        let head = try head(txn).position
        let base = try indexedThrough(txn, head: head)
        let tail = tails.tail
        return tail.head == head && tail.base == base
    }

    /// Brings the tail to what `txn` sees: drops what another process merged into the stored
    /// indexes, and adds the events appended since from the log. Under the exclusive lock.
    func syncTail(_ txn: borrowing Transaction) throws {
        let head = try head(txn).position
        let base = try indexedThrough(txn, head: head)
        var tail = tails.tail
        tails.tail = IndexTail(base: 0)   // unshared while it changes: no copy of its tables
        if tail.base > base || tail.head > head {
            // Another store at this path, or one rolled back: start over.
            tail = IndexTail(base: base)
        } else if tail.base < base {
            tail.drop(through: base)
        }
        if tail.head < head {
            try txn.withCursor(events) { cursor in
                var entry = try LogSchema.withKey(tail.head + 1) { key in try cursor.seek(atLeast: key) }
                while let current = entry {
                    guard let position = LogSchema.integer(current.key), position == tail.head + 1 else {
                        throw LedgerError(.corruptRecord, "position \(tail.head + 1) is missing from the log; run `ledger verify`")
                    }
                    let (id, subject, version) = try EventRecord.indexed(current.value, position: position)
                    tail.add(id: id, hash: IDIndex.hash(id), subject: subject, version: version, position: position)
                    if position == head { break }
                    entry = try cursor.next()
                }
            }
        }
        tails.tail = tail
    }

    /// Runs a read transaction with the tail brought up to it and held (shared) meanwhile:
    /// for every read that looks an event up by id or by stream.
    func readIndexed<R>(_ what: @autoclosure () -> String, _ body: (borrowing Transaction) throws -> R) throws(LedgerError) -> R {
        try readIndexed(what(), find: body, then: { found, _ in found })
    }

    /// Runs a read transaction in two steps: `find`, with the tail brought up to it and held
    /// (shared), looks events up by id or by stream; `then`, in the same transaction with the
    /// lock released, reads and decodes what `find` found. An appender's commit waits for
    /// readers in `find` only — a lookup in memory and a seek or two — never for their
    /// decoding, so readers that keep overlapping hold it up for microseconds
    /// (`append.underReadLoad`).
    func readIndexed<Found, R>(_ what: @autoclosure () -> String, find: (borrowing Transaction) throws -> Found,
                               then: (Found, borrowing Transaction) throws -> R) throws(LedgerError) -> R {
        while true {
            var result: R?
            // Taken before the snapshot, so the tail is never ahead of it; released by hand
            // inside the transaction, which outlives it.
            tails.lockShared()
            var held = true
            defer { if held { tails.unlockShared() } }
            try read(what()) { txn in
                guard try tailIsCurrent(txn) else { return }
                let found = try find(txn)
                tails.unlockShared()
                held = false
                result = try then(found, txn)
            }
            if let result { return result }
            if held {
                tails.unlockShared()
                held = false
            }
            try tails.withExclusive { () throws(LedgerError) in
                try read(what()) { txn in try syncTail(txn) }
            }
        }
    }

    /// Puts `tail`'s entries (the shared tail's, unless the transaction merged them already)
    /// and a write transaction's `pending` ones into the stored indexes, in key order, and
    /// records `head` as indexed. In that transaction.
    func mergeTail(_ tail: IndexTail?, _ pending: IndexTail, through head: UInt64, _ txn: borrowing Transaction) throws {
        var tail = tail ?? IndexTail(base: pending.base)
        tail.absorb(pending)
        guard tail.head == head else {
            throw LedgerError(.storage, "the index tail ends at \(tail.head), the log at \(head); this is a bug in the ledger")
        }
        var idEntries: [(hash: UInt64, position: UInt64)] = []
        idEntries.reserveCapacity(tail.ids.count)
        for entry in tail.ids.values { idEntries.append((entry.hash, entry.position)) }
        idEntries.sort { ($0.hash, $0.position) < ($1.hash, $1.position) }
        for entry in idEntries { try index(hash: entry.hash, at: entry.position, txn) }

        let subjects = tail.streams.keys.sorted { LogSchema.streamPrefix($0).lexicographicallyPrecedes(LogSchema.streamPrefix($1)) }
        for subject in subjects {
            guard let stream = tail.streams[subject] else { continue }
            try appendToStream(subject, after: stream.before, positions: stream.positions, txn)
        }
        try txn.put(meta, key: LogSchema.indexedKey, value: LogSchema.key(head))
    }
}

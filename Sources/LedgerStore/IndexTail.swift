import Dispatch
import HashTreeCollections
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import Synchronization

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
/// tail is rebuilt from the log (`catchUp`) when a store is opened, and whenever another process
/// has appended or merged since. Every lookup consults the tail, then the stored index.
///
/// A value: its tables are persistent (`TreeDictionary`), so a copy costs three references and a
/// change to one copy copies only the paths it changes, never the tables. Readers look events
/// up in a copy of their own (`IndexTails`).
struct IndexTail: Sendable {
    /// The stored indexes hold every event through `base`.
    var base: UInt64
    /// The tail holds every event after `base` through `head`.
    var head: UInt64
    /// Each tail event's position and `IDIndex.hash` by id (the hash the append computed to
    /// look the id up, kept for the merge).
    var ids: TreeDictionary<EventID, TailID> = [:]
    /// Each subject's tail events: how many, after which version.
    var streams: TreeDictionary<String, TailStream> = [:]
    /// Each tail event's position by subject and version: entries of their own, not an array
    /// per subject, so that adding to a long stream shared with a reader's copy copies a path,
    /// never the stream.
    var positions: TreeDictionary<StreamVersion, UInt64> = [:]

    init(base: UInt64) {
        self.base = base
        self.head = base
    }

    /// Events the tail holds.
    var count: Int { Int(head - base) }

    /// Adds the event at `position` (the next after `head`).
    ///
    /// Every change goes through `updateValue(forKey:default:with:)` or a plain assignment,
    /// never through the subscript in place: there, a `TreeDictionary` (swift-collections 1.6)
    /// that copies a node another copy shares goes on to read the original in a debug build's
    /// assertion — which that other copy, released on another thread meanwhile, may have freed
    /// (a crash the readers' tests found).
    mutating func add(id: EventID, hash: UInt64, subject: String, version: UInt64, position: UInt64) {
        ids.updateValue(forKey: id, default: TailID(position: position, hash: hash)) { _ in }   // the first kept
        streams.updateValue(forKey: subject, default: TailStream(before: version - 1)) { $0.count += 1 }
        positions[StreamVersion(subject: subject, version: version)] = position
        head = position
    }

    /// Adds the events of `later`, a tail that starts where this one ends.
    mutating func absorb(_ later: IndexTail) {
        ids.merge(later.ids) { earlier, _ in earlier }
        positions.merge(later.positions) { _, later in later }
        for (subject, stream) in later.streams {
            streams.updateValue(forKey: subject, default: TailStream(before: stream.before)) { $0.count += stream.count }
        }
        head = later.head
    }

    /// Drops the events through `position`, which the stored indexes now hold.
    mutating func drop(through position: UInt64) {
        ids = ids.filter { $0.value.position > position }
        positions = positions.filter { $0.value > position }
        var kept: TreeDictionary<String, TailStream> = [:]
        for (subject, stream) in streams {
            // A stream's positions rise with its versions: the ones dropped are its first.
            var first = stream.before + 1
            while first <= stream.version && positions[StreamVersion(subject: subject, version: first)] == nil { first += 1 }
            guard first <= stream.version else { continue }
            kept[subject] = TailStream(before: first - 1, count: Int(stream.version - first + 1))
        }
        streams = kept
        base = position
        head = max(head, position)
    }

    /// The position of the event with `id`, if the tail holds it.
    func position(of id: EventID) -> UInt64? { ids[id]?.position }

    /// `subject`'s version, if the tail holds events of it.
    func version(of subject: String) -> UInt64? { streams[subject]?.version }

    /// The versions of `subject` the tail holds from `start` on, at most `limit` of them, with
    /// their positions, in order.
    func positions(of subject: String, from start: UInt64 = 0, limit: Int = .max) -> [(version: UInt64, position: UInt64)] {
        guard let stream = streams[subject], limit > 0 else { return [] }
        let first = max(start, stream.before + 1)
        guard first <= stream.version else { return [] }
        return (first ... min(stream.version, first &+ UInt64(limit - 1))).compactMap { version in
            positions[StreamVersion(subject: subject, version: version)].map { (version, $0) }
        }
    }
}

/// An event of an `IndexTail` as the id index will hold it.
struct TailID: Sendable {
    var position: UInt64
    var hash: UInt64
}

/// One subject's events in an `IndexTail`.
struct TailStream: Sendable {
    /// The subject's version before the first of them: what the stored index holds.
    var before: UInt64
    /// How many there are.
    var count = 0

    /// The subject's version after them.
    var version: UInt64 { before + UInt64(count) }
}

/// A subject and one of its versions: the key of an `IndexTail`'s positions.
struct StreamVersion: Hashable, Sendable {
    var subject: String
    var version: UInt64
}

/// What `LogStorage.catchUp` did to a copy of the index tail.
enum TailChange: Equatable {
    /// It was current.
    case none
    /// It took the events appended since, or dropped the ones merged since.
    case advanced
    /// It did not fit the store (another store at the path): it was built again from the log.
    case restarted
}

/// A log's index tail, handed between its writer and its readers as a value.
///
/// A reader takes the tail as it stands before it opens its snapshot (`snapshot`): since the
/// shared tail only ever holds committed events, that copy is never ahead of the snapshot.
/// If it lags (a commit came between), the reader brings its own copy up from the log
/// (`LogStorage.catchUp`) and offers it back (`publish`). Then it looks events up in its copy
/// with no lock held. The writer takes a copy the same way inside its write transaction, keeps
/// its own entries apart (`Head.pending`), and adds them to the shared tail once it has
/// committed (`absorb`). The lock guards only the handing over of the value, for the time of a
/// copy or of adding one commit's entries: no append waits for a reader's lookups, however
/// many readers keep overlapping (`append.underReadLoad`).
final class IndexTails: Sendable {
    private let current = Mutex(IndexTail(base: 0))
    /// The tail's size at which an append merges it into the stored indexes.
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// The shared tail, as it stands.
    var snapshot: IndexTail { current.withLock { $0 } }

    /// Makes `tail`, a copy brought up to a later commit by `catchUp`, the shared tail, unless
    /// a later one is already there — or whatever is there, if the copy had to start over.
    func publish(_ tail: IndexTail, _ change: TailChange) {
        let replaced = current.withLock { shared -> IndexTail? in
            guard change == .restarted || (tail.head, tail.base) > (shared.head, shared.base) else { return nil }
            defer { shared = tail }
            return shared
        }
        releaseAside(replaced)
    }

    /// After a write transaction has committed: its index entries join the tail, or, if it
    /// merged the tail, start it over. Unless a reader has already brought the tail past it
    /// from the log.
    func absorb(_ pending: IndexTail, merged: Bool) {
        let replaced = current.withLock { shared -> IndexTail? in
            if merged {
                guard shared.base < pending.base else { return nil }
                defer { shared = pending }
                return shared
            } else if shared.head == pending.base {
                shared.absorb(pending)
            }
            return nil
        }
        releaseAside(replaced)
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

    /// Brings `tail`, a copy of the shared tail taken before `txn` began, to what `txn` sees:
    /// drops what the stored indexes hold since (merged by this process or another), and adds
    /// the events appended since from the log.
    func catchUp(_ tail: inout IndexTail, _ txn: borrowing Transaction) throws -> TailChange {
        let head = try head(txn).position
        let base = try indexedThrough(txn, head: head)
        guard tail.head != head || tail.base != base else { return .none }
        var change = TailChange.advanced
        if tail.base > base || tail.head > head {
            // Another store at this path, or one rolled back: start over.
            tail = IndexTail(base: base)
            change = .restarted
        } else if tail.head <= base {
            tail = IndexTail(base: base)   // all of it merged: nothing to keep
        } else if tail.base < base {
            tail.drop(through: base)
        }
        if tail.head < head {
            let from = tail.head + 1
            try txn.withCursor(events) { cursor in
                var entry = try LogSchema.withKey(from) { key in try cursor.seek(atLeast: key) }
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
        return change
    }

    /// Runs a read transaction with the index tail as it sees it: for every read that looks an
    /// event up by id or by stream. No lock is held while `body` runs.
    func readIndexed<R>(_ what: @autoclosure () -> String, _ body: (borrowing Transaction, IndexTail) throws -> R) throws(LedgerError) -> R {
        // Taken before the snapshot, so never ahead of it (which `catchUp` would take for
        // another store, and build again from the log).
        var tail = tails.snapshot
        return try read(what()) { txn in
            let change = try catchUp(&tail, txn)
            if change != .none { tails.publish(tail, change) }
            return try body(txn, tail)
        }
    }

    /// Puts `tail`'s entries (the transaction's copy of the shared tail, unless it merged them
    /// already) and a write transaction's `pending` ones into the stored indexes, in key order, and
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

        // In key order (`LogSchema.streamPrefix`: the length's two bytes, then the UTF-8),
        // compared in place: making the prefixes in the comparison made two arrays per step.
        let subjects = tail.streams.keys.sorted { a, b in
            let (x, y) = (UInt16(truncatingIfNeeded: a.utf8.count), UInt16(truncatingIfNeeded: b.utf8.count))
            return x != y ? x < y : a.utf8.lexicographicallyPrecedes(b.utf8)
        }
        for subject in subjects {
            guard let stream = tail.streams[subject] else { continue }
            try appendToStream(subject, after: stream.before, positions: tail.positions(of: subject).map(\.position), txn)
        }
        try txn.put(meta, key: LogSchema.indexedKey, value: LogSchema.key(head))
    }
}

/// Lets go of `value` on a thread of its own, not under a lock and not on the writer's: a tail
/// replaced after thousands of events holds tens of thousands of nodes, whose freeing the
/// next append would otherwise wait for. Freed there unless a reader still holds a copy.
package func releaseAside<T: Sendable>(_ value: consuming T?) {
    guard let value else { return }
    releasingAside.enter()
    DispatchQueue.global(qos: .utility).async {
        withExtendedLifetime(value) {}
        releasingAside.leave()
    }
}

/// What `releaseAside` has been handed and not yet freed.
private let releasingAside = DispatchGroup()

/// Waits until everything handed to `releaseAside` so far is freed: a benchmark starts each
/// case once the frees of the one before are done, not beside them.
@_spi(Storage) public func waitForReleasesAside() {
    releasingAside.wait()
}

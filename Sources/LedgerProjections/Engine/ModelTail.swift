import HashTreeCollections
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerStore

/// The read models' writes of the latest appends, kept in memory instead of in the store until
/// enough of them gather (the Engine article, *Write-behind*).
///
/// With every model on, an event of a customer among 100,000 dirties a 4 KB page of `models`
/// of its own, which the commit writes whole: the pages, not the folds, were half an append.
/// Now an append's state, item, anchor-list and index writes go into the tail, which an append
/// puts into the store together, in key order, once it holds `limit` events (and when the
/// store is closed), where each page takes many writes at once.
///
/// Nothing is lost in a crash: the log is durable and holds every event the tail came from, so
/// opening the store folds the events after the stored checkpoint again (catch-up), and a
/// reader that finds the log ahead of its copy folds the events between into it.
///
/// A value: its tables are persistent (`TreeDictionary`), so a copy costs a few references and
/// a change copies only the paths a reader's copy still shares. Readers read through a copy of
/// their own; a transaction writes into plain tables of its own (`TailWrites`), which join the
/// shared tail in place once it commits.
struct ModelTail: Sendable {
    /// The generation the tail's writes belong to (0: none yet).
    let generation: UInt64
    /// The stored models held every event through `base` when the tail began.
    let base: UInt64
    /// With the tail's writes, the models hold every event through `head`.
    private(set) var head: UInt64
    /// The served generation record as the tail's writes leave it; `nil`: as stored.
    private(set) var served: Generation?
    /// `models` keys → the bytes written (`nil`: deleted).
    private(set) var states: TreeDictionary<TailKey, TailBytes?> = [:]
    /// For each key prefix of `states` (generation ‖ key length ‖ key), the tags (bit per tag)
    /// of its states there: a status query looks its key up once.
    private(set) var tags: TreeDictionary<TailKey, UInt64> = [:]
    /// `modelIndex` keys → the bytes written (`nil`: deleted).
    private(set) var index: TreeDictionary<TailKey, TailBytes?> = [:]
    /// The entry keys of `index` by their anchor's day: a range read looks up the days it spans.
    private(set) var days: TreeDictionary<Int64, TreeSet<TailKey>> = [:]

    /// The events a tail gathers before an append stores it, unless the store is opened with
    /// another limit (`EventLog.Options.modelTailLimit`).
    static let defaultLimit = EventLog.Options().modelTailLimit

    init(generation: UInt64, through position: UInt64) {
        self.generation = generation
        base = position
        head = position
    }

    /// Whether the tail holds no write.
    var isEmpty: Bool { states.isEmpty && index.isEmpty && served == nil }

    /// Which tail this is: the shared tail is replaced only by a later one.
    var identity: Identity { Identity(generation: generation, base: base, head: head) }

    struct Identity: Equatable, Comparable {
        var generation: UInt64
        var base: UInt64
        var head: UInt64

        static func < (a: Identity, b: Identity) -> Bool { (a.generation, a.head, a.base) < (b.generation, b.head, b.base) }
    }

    /// Adds one transaction's writes. Every change is an assignment or an
    /// `updateValue(forKey:default:with:)`, never the subscript in place (see `IndexTail.add`).
    mutating func absorb(_ writes: TailWrites) {
        for (key, value) in writes.states { states[key] = .some(value) }
        for (prefix, bits) in writes.tags { tags.updateValue(forKey: prefix, default: 0) { $0 |= bits } }
        for (key, value) in writes.index { index[key] = .some(value) }
        for (day, keys) in writes.days { days.updateValue(forKey: day, default: []) { $0.formUnion(keys) } }
        if let written = writes.served { served = written }
        head = max(head, writes.head)
    }

    static let dayMilliseconds: Int64 = 86_400_000

    static func day(_ milliseconds: Int64) -> Int64 {
        milliseconds >= 0 ? milliseconds / dayMilliseconds : -((-(milliseconds + 1)) / dayMilliseconds) - 1
    }

    /// The anchor (milliseconds) of an entry key of `modelIndex` (`e` ‖ generation ‖ tag ‖
    /// anchor ‖ key length ‖ key), `nil` for any other key.
    static func anchor(ofEntry key: [UInt8]) -> Int64? {
        guard key.count >= 16, key[0] == UInt8(ascii: "e") else { return nil }
        return key.withUnsafeBytes { ModelSchema.indexTime($0[6 ..< 14]).milliseconds }
    }
}

/// The model writes of one transaction, until it commits and they join the shared tail: plain
/// tables, changed in place.
struct TailWrites {
    var head: UInt64
    var served: Generation?
    private(set) var states: [TailKey: TailBytes?] = [:]
    private(set) var tags: [TailKey: UInt64] = [:]
    private(set) var index: [TailKey: TailBytes?] = [:]
    private(set) var days: [Int64: Set<TailKey>] = [:]

    init(head: UInt64) {
        self.head = head
    }

    var isEmpty: Bool { states.isEmpty && index.isEmpty && served == nil }

    /// Makes room for the writes of `events` more events at once (an event writes one or
    /// two states and a tag on average).
    mutating func reserve(events: Int) {
        guard events > 0 else { return }
        states.reserveCapacity(states.count + 2 * events)
        tags.reserveCapacity(tags.count + events)
    }

    mutating func put(state key: [UInt8], _ bytes: [UInt8]?) {
        states[TailKey(key)] = .some(bytes.map(TailBytes.init))
        guard key.count >= 7 else { return }
        let length = Int(key[4]) << 8 | Int(key[5])
        let tag = key.count == 6 + length + 1 ? key[6 + length] : ModelSchema.itemMark
        guard tag < ModelSchema.itemMark else { return }
        tags[TailKey(Array(key[0 ..< 6 + length])), default: 0] |= 1 << UInt64(tag)
    }

    mutating func put(entry key: [UInt8], _ bytes: [UInt8]?) {
        let key = TailKey(key)
        index[key] = .some(bytes.map(TailBytes.init))
        if let anchor = ModelTail.anchor(ofEntry: key.bytes) { days[ModelTail.day(anchor), default: []].insert(key) }
    }
}

/// What one transaction sees of the read models, and where its writes go: the stored models
/// under a tail's writes and its own. An append leaves its writes to join the shared tail
/// (`ModelTails`); every other write transaction stores them (`store`).
final class Overlay {
    /// The tail the transaction read through, as it took it.
    private(set) var tail: ModelTail
    /// The transaction's own writes.
    private(set) var writes: TailWrites
    /// Whether `tail` is one of the transaction's own, not the shared one it took.
    private(set) var startedOver: Bool

    init(_ tail: ModelTail, startedOver: Bool = true) {
        self.tail = tail
        writes = TailWrites(head: tail.head)
        self.startedOver = startedOver
    }

    /// An overlay with no tail: the stored models alone.
    static var none: Overlay { Overlay(ModelTail(generation: 0, through: 0)) }

    /// Starts over from the stored models: `tail` is empty.
    func startOver(_ tail: ModelTail) {
        self.tail = tail
        writes = TailWrites(head: tail.head)
        startedOver = true
    }

    var generation: UInt64 { tail.generation }
    var head: UInt64 {
        get { writes.head }
        set { writes.head = newValue }
    }
    /// The events the writes come from, the tail's with the transaction's.
    var events: UInt64 { writes.head - tail.base }
    var isEmpty: Bool { tail.isEmpty && writes.isEmpty }
    var served: Generation? {
        get { writes.served ?? tail.served }
        set { writes.served = newValue }
    }

    /// The tail with the transaction's writes in it.
    var combined: ModelTail {
        var combined = tail
        combined.absorb(writes)
        return combined
    }

    // MARK: models

    /// The bytes written at `key` of `models`: `.some(nil)` when deleted, `nil` when neither
    /// the tail nor the transaction wrote it.
    func state(_ key: [UInt8]) -> TailBytes?? { state(TailKey(key)) }

    private func state(_ key: TailKey) -> TailBytes?? {
        if let written = writes.states[key] { return written }
        return tail.states[key]
    }

    /// The tags of `prefix`'s states written (bit per tag).
    func tags(of prefix: [UInt8]) -> UInt64 {
        let prefix = TailKey(prefix)
        return (writes.tags[prefix] ?? 0) | (tail.tags[prefix] ?? 0)
    }

    func put(state key: [UInt8], _ bytes: [UInt8]?) { writes.put(state: key, bytes) }

    /// Makes room for the writes of `events` events (`TailWrites.reserve`).
    func reserve(events: Int) { writes.reserve(events: events) }

    /// Every `models` key written beginning with `prefix`, in byte order.
    func stateKeys(beginningWith prefix: [UInt8]) -> [[UInt8]] {
        var keys = Set(tail.states.keys.lazy.map(\.bytes).filter { $0.starts(with: prefix) })
        for key in writes.states.keys where key.bytes.starts(with: prefix) { keys.insert(key.bytes) }
        return keys.sorted { $0.precedesInByteOrder($1) }
    }

    // MARK: modelIndex

    func entry(_ key: [UInt8]) -> TailBytes?? { entry(TailKey(key)) }

    private func entry(_ key: TailKey) -> TailBytes?? {
        if let written = writes.index[key] { return written }
        return tail.index[key]
    }

    func put(entry key: [UInt8], _ bytes: [UInt8]?) { writes.put(entry: key, bytes) }

    /// The entry keys written beginning with `prefix` whose anchor is in `from ..< to` (`nil`:
    /// no end).
    func entryKeys(beginningWith prefix: [UInt8], from: Int64, to: Int64?) -> [[UInt8]] {
        var found: Set<TailKey> = []
        let dayCount = Int64(tail.days.count + writes.days.count)
        if let to, to > from, to.subtractingClamped(from) / ModelTail.dayMilliseconds < dayCount {
            var day = ModelTail.day(from)
            let last = ModelTail.day(to - 1)
            while day <= last {
                if let some = tail.days[day] { found.formUnion(some) }
                if let some = writes.days[day] { found.formUnion(some) }
                day += 1
            }
        } else {
            for keys in tail.days.values { found.formUnion(keys) }
            for keys in writes.days.values { found.formUnion(keys) }
        }
        return found.lazy.map(\.bytes).filter { key in
            guard key.starts(with: prefix), let anchor = ModelTail.anchor(ofEntry: key) else { return false }
            return anchor >= from && to.map { anchor < $0 } ?? true
        }
    }

    // MARK: Storing

    /// Puts every write of the tail and the transaction into the store, in key order, and the
    /// served record they leave: in `txn`.
    func store(into store: ModelStore, _ txn: borrowing Transaction) throws {
        for (database, isState) in [(store.states, true), (store.index, false)] {
            // The transaction's writes, then the tail's it did not replace: each key once, with
            // its latest bytes, gathered in one pass over each table.
            let (tailed, written) = isState ? (tail.states, writes.states) : (tail.index, writes.index)
            var entries: [(key: TailKey, bytes: TailBytes?)] = []
            entries.reserveCapacity(tailed.count + written.count)
            for (key, bytes) in written { entries.append((key, bytes)) }
            for (key, bytes) in tailed where written.isEmpty || written[key] == nil { entries.append((key, bytes)) }
            entries.sort { $0.key.bytes.precedesInByteOrder($1.key.bytes) }
            for (key, bytes) in entries {
                if let bytes {
                    try key.bytes.withUnsafeBytes { key in try txn.put(database, key: key, value: bytes.bytes) }
                } else {
                    _ = try txn.delete(database, key: key.bytes)
                }
            }
        }
        if let served { try store.setStoredServed(served, txn) }
    }
}

/// A key of the tail's tables: its bytes, hashed as one buffer and compared with `memcmp`
/// (an array of bytes hashes and compares byte by byte).
struct TailKey: Hashable, Sendable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: TailKey, b: TailKey) -> Bool {
        a.bytes.withUnsafeBytes { $0.hasSameBytes(as: b.bytes) }
    }
}

/// Bytes a `ModelTail` holds: allocated once, never changed, freed with their last reference,
/// so a query hands out a pointer to them (as to a stored value) for as long as it holds its
/// copy of the tail.
final class TailBytes: @unchecked Sendable {
    // @unchecked: immutable after init.
    private let buffer: UnsafeMutableRawBufferPointer

    init(_ bytes: [UInt8]) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        self.buffer = buffer
        count = bytes.count
    }

    let count: Int

    deinit { buffer.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[0 ..< count]) }
    var array: [UInt8] { Array(bytes) }
}

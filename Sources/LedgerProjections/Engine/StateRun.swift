import Foundation
@_spi(Storage) import LedgerCore

/// Every fold's states in the order the store keeps them: each entry's stored key without the
/// generation (key length ‖ key ‖ tag, the fold's index) and its encoded state.
///
/// The keys are sorted once; then every core encodes the states of ranges of them, every
/// fold's in turn, each range into a run of its own (the folds are only read meanwhile).
struct StateRun {
    let entries: [(stored: [UInt8], state: [UInt8])]
    /// The folds, by tag (their items are merged in when the run is written).
    let folded: [any StateFold]

    init(_ folded: [any StateFold]) {
        self.folded = folded
        var keys: [(stored: [UInt8], key: String)] = []
        var seen: Set<String> = []
        for states in folded {
            for key in states.keys where seen.insert(key).inserted { keys.append((ModelSchema.keyBytes(key), key)) }
        }
        keys.sort { $0.stored.precedesInByteOrder($1.stored) }
        // Eight ranges a core, taken as cores come free: in the store's order a range of short
        // keys (subscriptions, by their ids) holds a state or two each, one of customers nine.
        let cores = max(1, min(ProcessInfo.processInfo.activeProcessorCount, keys.count / 1_000))
        let parts = Parts(folded: folded, keys: keys, count: cores == 1 ? 1 : cores * 8)
        DispatchQueue.concurrentPerform(iterations: parts.count) { part in parts.encode(part) }
        entries = parts.joined
    }

    /// Entry `index`'s key length ‖ key (its stored key without the tag).
    func key(at index: Int) -> [UInt8] { Array(entries[index].stored.dropLast()) }
}

extension StateRun {
    /// What is written beside the states — each fold's items and each indexed model's anchor
    /// lists, as (key length ‖ key ‖ mark ‖ item, state) — and the index's records
    /// (`ModelStore.freshEntries`), each in key order: the two worked out at once, on two cores.
    func beside(generation: UInt32, entries: [(index: Int, key: String, entries: [IndexEntry])])
        -> (beside: [(stored: [UInt8], state: [UInt8])], records: [(key: [UInt8], value: [UInt8])]) {
        let work = Beside(folded: folded, entries: entries, generation: generation)
        DispatchQueue.concurrentPerform(iterations: 2) { part in part == 0 ? work.items() : work.fresh() }
        // Two sorted runs, merged.
        var beside: [(stored: [UInt8], state: [UInt8])] = []
        beside.reserveCapacity(work.itemRun.count + work.lists.count)
        var (i, j) = (0, 0)
        while i < work.itemRun.count || j < work.lists.count {
            if j == work.lists.count || (i < work.itemRun.count && work.itemRun[i].stored.precedesInByteOrder(work.lists[j].stored)) {
                beside.append(work.itemRun[i])
                i += 1
            } else {
                beside.append(work.lists[j])
                j += 1
            }
        }
        return (beside, work.records)
    }
}

/// The two halves of `StateRun.beside`, each written by one thread alone.
private final class Beside: @unchecked Sendable {
    // @unchecked: `items()` writes `itemRun` alone and `fresh()` the other two; the folds and
    // the entries are only read meanwhile; the results are read once both are done.
    private let folded: [any StateFold]
    private let entries: [(index: Int, key: String, entries: [IndexEntry])]
    private let generation: UInt32
    var itemRun: [(stored: [UInt8], state: [UInt8])] = []
    var lists: [(stored: [UInt8], state: [UInt8])] = []
    var records: [(key: [UInt8], value: [UInt8])] = []

    init(folded: [any StateFold], entries: [(index: Int, key: String, entries: [IndexEntry])], generation: UInt32) {
        (self.folded, self.entries, self.generation) = (folded, entries, generation)
    }

    func items() {
        itemRun = folded.indices.flatMap { tag in
            folded[tag].encodedItems().map { (stored: Array(ModelSchema.itemKey(generation, tag: UInt8(tag), $0.key).dropFirst(4)), state: $0.state) }
        }
        itemRun.sort { $0.stored.precedesInByteOrder($1.stored) }
    }

    func fresh() {
        for index in Set(entries.map(\.index)).sorted() {
            let fresh = ModelStore.freshEntries(entries.filter { $0.index == index }.map { ($0.key, $0.entries) }, generation: generation, tag: UInt8(index))
            records += fresh.records
            lists += fresh.lists
        }
        records.sort { $0.key.precedesInByteOrder($1.key) }
        lists.sort { $0.stored.precedesInByteOrder($1.stored) }
    }
}

/// The runs `StateRun` encodes on every core, one range of the sorted keys each.
private final class Parts: @unchecked Sendable {
    // @unchecked: each part is written by one thread alone, into a slot of its own; the folds
    // are only read while the parts are encoded; `joined` is read after every part is done.
    private let folded: [any StateFold]
    private let keys: [(stored: [UInt8], key: String)]
    private let slots: [Slot]

    private final class Slot {
        var run: [(stored: [UInt8], state: [UInt8])] = []
    }

    init(folded: [any StateFold], keys: [(stored: [UInt8], key: String)], count: Int) {
        self.folded = folded
        self.keys = keys
        slots = (0 ..< count).map { _ in Slot() }
    }

    var count: Int { slots.count }

    func encode(_ part: Int) {
        let size = (keys.count + slots.count - 1) / slots.count
        var run: [(stored: [UInt8], state: [UInt8])] = []
        run.reserveCapacity(size * folded.count)
        for (stored, key) in keys[min(part * size, keys.count) ..< min((part + 1) * size, keys.count)] {
            for (tag, states) in folded.enumerated() {
                guard let state = states.encodedState(of: key) else { continue }
                run.append((stored + [UInt8(tag)], state))
            }
        }
        slots[part].run = run
    }

    var joined: [(stored: [UInt8], state: [UInt8])] { Array(slots.map(\.run).joined()) }
}

/// The folds' states, read by every core while the index entries are worked out
/// (`ProjectionEngine.indexEntries(of:policy:)`).

import Foundation
@_spi(Storage) import LedgerCore

/// Every fold's states in the order the store keeps them: each entry's stored key without the
/// generation (key length ‖ key ‖ tag, the fold's index) and its encoded state.
///
/// Each fold's states are encoded in one pass over its own table and sorted, a fold at a time
/// on every core (the folds are only read meanwhile); the sorted runs are then merged, with no
/// lookup of a key in a fold's table.
struct StateRun {
    let entries: [(stored: [UInt8], state: [UInt8])]
    /// The folds, by tag (their items are merged in when the run is written).
    let folded: [any StateFold]

    init(_ folded: [any StateFold]) {
        self.folded = folded
        let runs = FoldRuns(folded)
        DispatchQueue.concurrentPerform(iterations: folded.count) { tag in runs.encode(tag) }
        entries = runs.merged()
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

/// Each fold's run of `StateRun`, encoded and sorted by the thread that takes the fold.
private final class FoldRuns: @unchecked Sendable {
    // @unchecked: each run is written by one thread alone, into a slot of its own; the folds
    // are only read while the runs are encoded; `merged` is called after every run is done.
    private let folded: [any StateFold]
    private let slots: [Slot]

    private final class Slot {
        var run: [(stored: [UInt8], state: [UInt8])] = []
    }

    init(_ folded: [any StateFold]) {
        self.folded = folded
        slots = folded.map { _ in Slot() }
    }

    func encode(_ tag: Int) {
        let mark = UInt8(truncatingIfNeeded: tag)
        var run = folded[tag].encoded().map { entry in
            var stored = ModelSchema.keyBytes(entry.key)
            stored.append(mark)
            return (stored: stored, state: entry.state)
        }
        run.sort { $0.stored.precedesInByteOrder($1.stored) }
        slots[tag].run = run
    }

    /// The runs merged in key order (one fold's entry of a key before the next fold's: the tag
    /// ends the stored key).
    func merged() -> [(stored: [UInt8], state: [UInt8])] {
        let runs = slots.map(\.run)
        var merged: [(stored: [UInt8], state: [UInt8])] = []
        merged.reserveCapacity(runs.reduce(0) { $0 + $1.count })
        var next = runs.map { _ in 0 }
        while true {
            var least: Int?
            for (index, run) in runs.enumerated() where next[index] < run.count {
                if let l = least, !run[next[index]].stored.precedesInByteOrder(runs[l][next[l]].stored) { continue }
                least = index
            }
            guard let least else { return merged }
            merged.append(runs[least][next[least]])
            next[least] += 1
        }
    }
}

/// The folds' states, read by every core while the index entries are worked out
/// (`ProjectionEngine.indexEntries(of:policy:)`).

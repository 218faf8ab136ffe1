import Foundation
@_spi(Storage) import LedgerCore

/// Every fold's states in the order the store keeps them: each entry's stored key without the
/// generation (key length ‖ key ‖ tag, the fold's index) and its encoded state.
///
/// The keys are sorted once; then each core encodes the states of a range of them, every
/// fold's in turn, into a run of its own (the folds are only read meanwhile).
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
        let cores = max(1, min(ProcessInfo.processInfo.activeProcessorCount, keys.count / 1_000))
        let parts = Parts(folded: folded, keys: keys, count: cores)
        DispatchQueue.concurrentPerform(iterations: cores) { part in parts.encode(part) }
        entries = parts.joined
    }

    /// Entry `index`'s key length ‖ key (its stored key without the tag).
    func key(at index: Int) -> [UInt8] { Array(entries[index].stored.dropLast()) }
}

/// The runs `StateRun` encodes on each core, one range of the sorted keys each.
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

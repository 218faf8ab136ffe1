import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
import Synchronization

extension ProjectionEngine {
    /// The index entries of every subject of `folded` (every fold's states, by fold index), by
    /// indexed model, worked out from the states in memory on every core; and the subjects
    /// whose entries read the log instead (`Attributed`: a subject bound to a holding subject,
    /// and a holding subject), left to `refreshIndexes`.
    func indexEntries(of folded: [any StateFold], policy: Policy) throws -> (entries: [(index: Int, key: String, entries: [IndexEntry])], deferred: [String]) {
        let indexed = folds.indices.filter { $0 != 0 && indexInputs.contains($0) && folded.indices.contains($0) }
        guard let facts = folded.first, !indexed.isEmpty else { return ([], []) }
        let keys = facts.keys
        let cores = max(1, min(foldCores, keys.count / 1_000))
        let slots = EntrySlots(count: cores)
        let work = FoldedStates(folded)
        DispatchQueue.concurrentPerform(iterations: cores) { part in
            let size = (keys.count + cores - 1) / cores
            var found: [(index: Int, key: String, entries: [IndexEntry])] = [], deferred: [String] = []
            do {
                for key in keys[min(part * size, keys.count) ..< min((part + 1) * size, keys.count)] {
                    guard !key.hasPrefix(AppStoreSubjectBound.holdingPrefix), let subjectFacts = try work.folded[0].facts(of: key, stored: nil),
                          subjectFacts.bound.isEmpty else {
                        deferred.append(key)
                        continue
                    }
                    for index in indexed {
                        found.append((index, key, try work.folded[index].indexEntries(of: key, stored: nil, facts: subjectFacts, policy: policy)))
                    }
                }
            } catch {
                slots.fail(error)
            }
            slots.set(part, found, deferred)
        }
        if let failure = slots.failure { throw failure }
        return slots.joined
    }
}

private final class FoldedStates: @unchecked Sendable {
    // @unchecked: nothing changes the states while the entries are worked out; each thread
    // only reads them (a dictionary read from several threads at once is safe).
    let folded: [any StateFold]
    init(_ folded: [any StateFold]) { self.folded = folded }
}

/// The index entries each core worked out, and the first failure.
private final class EntrySlots: @unchecked Sendable {
    // @unchecked: guarded by the lock.
    private let lock = NSLock()
    private var slots: [(entries: [(index: Int, key: String, entries: [IndexEntry])], deferred: [String])]
    private var first: (any Error)?

    init(count: Int) { slots = Array(repeating: ([], []), count: count) }

    func set(_ part: Int, _ entries: [(index: Int, key: String, entries: [IndexEntry])], _ deferred: [String]) {
        lock.withLock { slots[part] = (entries, deferred) }
    }
    func fail(_ error: any Error) { lock.withLock { if first == nil { first = error } } }
    var failure: (any Error)? { lock.withLock { first } }
    var joined: (entries: [(index: Int, key: String, entries: [IndexEntry])], deferred: [String]) {
        lock.withLock { (Array(slots.map(\.entries).joined()), Array(slots.map(\.deferred).joined())) }
    }
}

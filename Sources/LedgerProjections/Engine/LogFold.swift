import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore
import Synchronization

extension ProjectionEngine {
    /// Every fold over the whole log through its head, in memory (the keys of `part` only);
    /// returns the states and the head. The keys are split again into one part per core
    /// (`foldCores`), each folded by a thread of its own, scanning the log in a read
    /// transaction of its own through the head (the events up to it never change) and
    /// decoding only its own subjects' events — and every event a fold keyed otherwise than
    /// by subject reads (the holders of a subscription, by its id), folding its own keys. The parts
    /// share nothing while they fold; their states are then joined. The caller holds no
    /// transaction meanwhile, so that no thread waits for it (a read that finds the map grown
    /// by another process waits for every read of this one to end). Reports `.folding`
    /// progress (of the first part).
    func foldLog(policy: Policy, part: Partition = .whole, progress: (RebuildProgress) -> Void) throws -> (states: [any StateFold], head: UInt64) {
        let head = try store.env.read { txn in try store.log.head(txn) }
        let clock = ContinuousClock()
        let start = clock.now
        func report(_ done: UInt64) {
            let seconds = (clock.now - start).seconds
            progress(RebuildProgress(phase: .folding, done: done, total: head, perSecond: seconds > 0 ? Double(done) / seconds : 0))
        }
        report(0)
        let cores = foldCores
        // Part j of `part` split in `cores`: the keys whose hash is part.index + part.count × j
        // modulo part.count × cores (all of them in `part`).
        let parts = (0 ..< cores).map { j in Partition(count: part.count * cores, index: part.index + part.count * j) }
        // Every fold's keys are split among the parts, a fold keyed otherwise (the holders of a
        // subscription) too: were one part to fold those alone, it would fold a subscription
        // event of every subject and the others would wait for it.
        let threads = FoldThreads(parts.map { sub in
            folds.map { fold in
                let states = fold.makeStates(policy: policy)
                states.restrict(to: sub)
                return states
            }
        })
        // The types every part decodes whatever the subject: those a fold keyed otherwise
        // reads, and those a model registered here reads — its key may be no subject,
        // whatever it says; this package's own models are keyed by subject when they say so.
        let own = Set(ReadModels.all.filter { $0.keyedBySubject }.map { $0.name })
        let readByAll = folds.filter { !$0.keyedBySubject || $0.model != nil && !own.contains($0.name) }.reduce(into: Set<String>()) { $0.formUnion($1.reads) }
        let decodedByAll = EventCatalog.known.map { readByAll.contains($0.name) }
        let types = folds.reduce(into: Set<String>()) { $0.formUnion($1.reads) }
        if cores == 1 {
            try foldPart(0, of: parts, into: threads, through: head, types: types, others: decodedByAll, tick: report)
        } else {
            let done = DispatchGroup()
            for j in 1 ..< cores {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    do {
                        try self.foldPart(j, of: parts, into: threads, through: head, types: types, others: decodedByAll)
                    } catch {
                        threads.fail(error)
                    }
                }
            }
            do {
                try foldPart(0, of: parts, into: threads, through: head, types: types, others: decodedByAll, tick: report)
            } catch {
                threads.fail(error)
            }
            done.wait()
            if let error = threads.failure { throw error }
        }
        let states = threads.states[0]
        // Each fold's parts joined by a thread of its own, taken as cores come free.
        DispatchQueue.concurrentPerform(iterations: states.count) { index in threads.join(index) }
        // Events appended since the head fold into the joined states, for any key of `part`.
        for fold in states { fold.restrict(to: part) }
        report(head)
        return (states, head)
    }

    /// Folds part `j` of `parts` (`foldLog`): the events through `head` of `types` its
    /// subjects have, and those of the types it must read whatever the subject (`others`, by
    /// catalog index), in its own read transaction.
    private func foldPart(_ j: Int, of parts: [Partition], into threads: FoldThreads, through head: UInt64, types: Set<String>, others: [Bool],
                          tick: (UInt64) -> Void = { _ in }) throws {
        let part = parts[j], states = threads.states[j]
        try store.env.read { txn in
            try store.log.forEachEvent(after: 0, through: head, types: types,
                                       keep: { known, subject in part.contains(subject) || known.map { others[$0] } ?? true },
                                       txn, tick: tick) { event in
                for index in readers[event.data.ordinal] { states[index].apply(event) }
            }
        }
    }

    /// Folds the events after `after` through `head` that the folds of `group` read into
    /// their `states`, in position order.
    func foldEvents(_ group: [Int], into states: [any StateFold], after: UInt64, through head: UInt64, _ txn: borrowing Transaction,
                    tick: (UInt64) -> Void = { _ in }) throws {
        let types = group.reduce(into: Set<String>()) { $0.formUnion(folds[$1].reads) }
        let readers = self.readers.map { $0.filter(group.contains) }
        try store.log.forEachEvent(after: after, through: head, types: types, txn, tick: tick) { event in
            for index in readers[event.data.ordinal] { states[index].apply(event) }
        }
    }
}

/// Each part's states, handed to its thread (`ProjectionEngine.foldLog`), and the first
/// failure.
final class FoldThreads: @unchecked Sendable {
    // @unchecked: each thread alone touches its part's states until the caller has waited for
    // every thread, and then each fold's alone (`join`); `failure` is kept under the lock.
    let states: [[any StateFold]]
    private let lock = NSLock()
    private var first: (any Error)?

    init(_ states: [[any StateFold]]) { self.states = states }

    func fail(_ error: any Error) { lock.withLock { if first == nil { first = error } } }
    var failure: (any Error)? { lock.withLock { first } }

    /// Takes fold `index`'s states of every other part into the first part's. Each fold's
    /// states are separate objects, so folds may be joined on several threads at once.
    func join(_ index: Int) {
        for others in states.dropFirst() { states[0][index].absorb(others[index]) }
    }
}

import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore
import Synchronization

extension ProjectionEngine {
    /// Rebuilds every read model from position 1 and reports what changes in `names` (all
    /// models when empty).
    ///
    /// 1. Folds the whole log in memory — the facts and every model — from one read snapshot,
    ///    and compares each subject's views at `at` (under `policy`, else the store's) with the
    ///    served ones.
    /// 2. Unless `dryRun`: writes the states as a new generation (sorted, so as appends), a
    ///    batch per write transaction; appends go on meanwhile into the served generation.
    /// 3. Catches the new generation up with the events appended since the snapshot, and swaps
    ///    it in (with `policy`, which becomes the store's) in one write transaction: readers see
    ///    the old models or the new, never half. Then deletes the old generation.
    ///
    /// A crash before the swap leaves the served generation as it was; the next rebuild deletes
    /// the abandoned one.
    @discardableResult
    func rebuild(_ names: [String] = [], policy newPolicy: Policy? = nil, dryRun: Bool = false, at: Timestamp = .now(),
                 events: (String) throws -> [RecordedEvent], progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> RebuildReport {
        let prepared = try prepareRebuild(names, policy: newPolicy, dryRun: dryRun, at: at, events: events, progress: progress)
        guard !dryRun else { return prepared.report }
        return try prepared.swap(progress: progress)
    }

    /// Steps 1 and 2 of `rebuild`: folds and compares, and unless `dryRun` writes the new
    /// generation, which then waits for `PreparedRebuild.swap` (or `abandon`). No other rebuild
    /// runs in this process until then.
    func prepareRebuild(_ names: [String] = [], policy newPolicy: Policy? = nil, dryRun: Bool = false, at: Timestamp = .now(),
                        events: (String) throws -> [RecordedEvent], progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> PreparedRebuild {
        let chosen = try choose(names)
        let alreadyRunning = rebuildLock.withLock { running in
            defer { running = true }
            return running
        }
        guard !alreadyRunning else { throw LedgerError(.rebuildRunning, "a rebuild is already running in this process; wait for it to finish") }
        // Held on by a prepared new generation, until it is swapped in or abandoned.
        var holding = false
        defer { if !holding { rebuildLock.withLock { $0 = false } } }
        do {
            if !dryRun { try collectGarbage() }
            var (report, run, snapshot) = try foldAndCompare(chosen, newPolicy: newPolicy, at: at, dryRun: dryRun, events: events, progress: progress)
            guard !dryRun else { return PreparedRebuild(engine: self, report: report, shadow: nil, newPolicy: newPolicy, holdsLock: false) }
            let writing = ContinuousClock().now
            let policy = try newPolicy ?? store.env.read { txn in try self.policy(txn) }
            let shadow = try writeShadow(run, through: snapshot, policy: policy, progress: progress)
            // Millions of small arrays and the folds' states: freed on a utility thread.
            releaseAside(Unshared(value: consume run))
            report.writeSeconds = (ContinuousClock().now - writing).seconds
            holding = true
            return PreparedRebuild(engine: self, report: report, shadow: shadow, newPolicy: newPolicy, holdsLock: true)
        } catch {
            throw LedgerError.wrapping(error, doing: "rebuilding the read models")
        }
    }

    /// The models named (all when none is), checked.
    func choose(_ names: [String]) throws(LedgerError) -> [any ReadModel.Type] {
        guard !names.isEmpty else { return models }
        var chosen: [any ReadModel.Type] = []
        for name in names {
            guard let model = models.first(where: { $0.name == name }) else {
                throw LedgerError(.unknownModel, "no read model named \(name); the models are \(modelNames.joined(separator: ", "))")
            }
            if !chosen.contains(where: { $0.name == name }) { chosen.append(model) }
        }
        return chosen
    }

    /// Folds the log, then compares the chosen models' views with the served generation in
    /// one read snapshot, after folding the events appended meanwhile in it too. Returns the
    /// report, the new states as a sorted run, and the head they hold.
    private func foldAndCompare(_ chosen: [any ReadModel.Type], newPolicy: Policy?, at: Timestamp, dryRun: Bool,
                                events: (String) throws -> [RecordedEvent], progress: (RebuildProgress) -> Void) throws -> (RebuildReport, StateRun, UInt64) {
        let clock = ContinuousClock()
        let start = clock.now
        let (states, folded) = try foldLog(policy: try newPolicy ?? store.env.read { txn in try servedPolicy(txn).policy }, progress: progress)
        var (report, run, head, replay) = try read { txn, overlay in
            let head = try store.log.head(txn)
            try foldEvents(Array(folds.indices), into: states, after: folded, through: head, txn)
            let run = StateRun(states)
            let foldSeconds = (clock.now - start).seconds
            let (served, servedHash) = try servedPolicy(txn)
            let policy = newPolicy ?? served
            let comparing = clock.now
            var changes: [ViewChange] = []
            var notCompared: [String] = []
            var replay: (subjects: [String], models: [any ReadModel.Type], served: Policy, new: Policy) = ([], [], served, policy)
            if let generation = try store.served(txn, overlay) {
                let compared = try compare(chosen, run, generation, servedPolicy: served, newPolicy: policy, at: at, txn, overlay)
                (changes, notCompared) = (compared.changes, compared.notCompared)
                replay.subjects = compared.replay
                replay.models = compared.compared
            }
            var report = RebuildReport(at: at, dryRun: dryRun, models: chosen.map { $0.name }, policyFrom: servedHash, policyTo: newPolicy?.hash ?? servedHash,
                                       changes: changes, notCompared: notCompared, events: head, caughtUp: 0, foldSeconds: foldSeconds)
            report.compareSeconds = (clock.now - comparing).seconds
            return (report, run, head, replay)
        }
        // Replayed with no transaction held: the log's reads open their own.
        let comparable = replay.models.filter { !report.notCompared.contains($0.name) }
        report.changes += try replayedChanges(replay.subjects, models: comparable, through: head, servedPolicy: replay.served,
                                              newPolicy: replay.new, at: at, events: events)
        report.changes = Self.sorted(report.changes, models: chosen)
        return (report, run, head)
    }

    /// The chosen models' views of every key, served against new, field by field: where a
    /// key's states and facts and the policy are the same, so are the views, and only the
    /// others are worked out. The served generation and the new run are walked together, in
    /// the store's order, a key's states at a time. A model whose served states another version
    /// built, or whose served state of a key is damaged, cannot be compared (`notCompared`).
    private func compare(_ chosen: [any ReadModel.Type], _ run: StateRun, _ generation: Generation, servedPolicy: Policy,
                         newPolicy: Policy, at: Timestamp, _ txn: borrowing Transaction, _ overlay: Overlay)
        throws -> (changes: [ViewChange], notCompared: [String], replay: [String], compared: [any ReadModel.Type]) {
        let samePolicy = servedPolicy == newPolicy
        guard let oldFacts = generation.record(Fold.factsName), oldFacts.version == UInt64(Fold.factsVersion) else {
            return ([], chosen.map { $0.name }, [], [])
        }
        var compared: [(model: any ReadModel.Type, old: UInt8, new: UInt8)] = []
        var notCompared: [String] = []
        // The views compared are subjects': a model keyed otherwise (the holders of a
        // subscription) answers the same under any policy, and its keys are no subjects.
        let oldSubjectTags = Set(generation.folds.filter { record in folds.first { $0.name == record.name }?.keyedBySubject ?? false }.map(\.tagByte))
        let newSubjectTags = Set(folds.indices.filter { folds[$0].keyedBySubject }.map(UInt8.init))
        for model in chosen where model.keyedBySubject {
            guard let record = generation.record(model.name), let index = folds.firstIndex(where: { $0.name == model.name }) else { continue }
            guard record.version == UInt64(model.version) else {
                notCompared.append(model.name)
                continue
            }
            compared.append((model, record.tagByte, UInt8(index)))
        }
        var allChanges: [ViewChange] = []
        var replayed: [String] = []
        /// One key's served and new states, by tag.
        func differ(_ key: [UInt8], _ old: [UInt8: UnsafeRawBufferPointer], _ new: [UInt8: [UInt8]]) throws {
            guard old.keys.contains(where: oldSubjectTags.contains) || new.keys.contains(where: newSubjectTags.contains) else { return }
            let subject = String(decoding: key.dropFirst(2), as: UTF8.self)
            let factsSame = old[oldFacts.tagByte].map { $0.hasSameBytes(as: new[0] ?? []) } ?? (new[0] == nil)
            var changes: [ViewChange] = []
            defer { if replayed.last != subject { allChanges += changes } }
            for (model, oldTag, newTag) in compared {
                let same = old[oldTag].map { $0.hasSameBytes(as: new[newTag] ?? []) } ?? (new[newTag] == nil)
                if samePolicy && factsSame && same { continue }
                let before: JSONObject?
                do {
                    before = try Self.viewJSON(model, stateBytes: old[oldTag], factsBytes: old[oldFacts.tagByte], at: at, policy: servedPolicy)
                } catch is StateDecoder.Damaged {
                    // A damaged served state: what the rebuild is for. Its views cannot be
                    // compared; the report says so, and the rebuild replaces it.
                    if !notCompared.contains(model.name) { notCompared.append(model.name) }
                    continue
                } catch is NeedsReplay {
                    replayed.append(subject)
                    return
                }
                let after: JSONObject?
                do {
                    after = try new[newTag].withOptionalBytes { state in
                        try new[0].withOptionalBytes { facts in try Self.viewJSON(model, stateBytes: state, factsBytes: facts, at: at, policy: newPolicy) }
                    }
                } catch is NeedsReplay {
                    replayed.append(subject)
                    return
                }
                for (field, from, to) in FlatView.flatten(after ?? JSONObject()).changes(since: FlatView.flatten(before ?? JSONObject())) {
                    changes.append(ViewChange(subject: subject, model: model.name, field: field, from: from, to: to))
                }
            }
        }
        if !compared.isEmpty {
            // The served generation and the new run in the store's order, a key's states at a
            // time; items and anchor lists are not compared: the views are worked out from states.
            var next = 0
            var current: [UInt8]?
            var old: [UInt8: UnsafeRawBufferPointer] = [:]
            func fresh(_ key: [UInt8]) -> [UInt8: [UInt8]] {
                var new: [UInt8: [UInt8]] = [:]
                while next < run.entries.count, run.key(at: next) == key {
                    new[run.entries[next].stored[run.entries[next].stored.count - 1]] = run.entries[next].state
                    next += 1
                }
                return new
            }
            /// The new keys that sort before `key` (all of them: `nil`), which have no served states.
            func newOnly(before key: [UInt8]?) throws {
                while next < run.entries.count {
                    let first = run.key(at: next)
                    if let key, !first.precedesInByteOrder(key) { break }
                    try differ(first, [:], fresh(first))
                }
            }
            func served() throws {
                guard let key = current else { return }
                try newOnly(before: key)
                try differ(key, old, fresh(key))
                old.removeAll(keepingCapacity: true)
            }
            try store.forEachStored(beginningWith: ModelSchema.prefix(generation.number), txn, overlay) { stored, value in
                guard ModelSchema.isState(stored) else { return }
                let key = Array(stored[4 ..< stored.count - 1])
                if key != current {
                    try served()
                    current = key
                }
                old[stored[stored.count - 1]] = value
            }
            try served()
            try newOnly(before: nil)
        }
        return (allChanges, notCompared, replayed, compared.map(\.model))
    }

    /// The changes of the subjects whose stored states do not answer at `at`, from their
    /// events through `head` replayed under each policy: for them, what is served is taken to
    /// be what their events give (`verify` is what compares the two).
    private func replayedChanges(_ subjects: [String], models: [any ReadModel.Type], through head: UInt64, servedPolicy: Policy, newPolicy: Policy,
                                 at: Timestamp, events: (String) throws -> [RecordedEvent]) throws -> [ViewChange] {
        var changes: [ViewChange] = []
        for subject in subjects {
            let history = try events(subject).filter { $0.position <= head }
            let before = Replay.views(of: subject, from: history, at: at, models: models, policy: servedPolicy)
            let after = Replay.views(of: subject, from: history, at: at, models: models, policy: newPolicy)
            for (old, new) in zip(before, after) {
                let from = FlatView.flatten(old.view?.json ?? JSONObject()), to = FlatView.flatten(new.view?.json ?? JSONObject())
                for (field, a, b) in to.changes(since: from) { changes.append(ViewChange(subject: subject, model: new.model, field: field, from: a, to: b)) }
            }
        }
        return changes
    }

    /// By subject, then in model and field order (the sort is made stable by the index).
    static func sorted(_ changes: [ViewChange], models: [any ReadModel.Type]) -> [ViewChange] {
        let order = Dictionary(uniqueKeysWithValues: models.enumerated().map { ($1.name, $0) })
        return changes.enumerated().sorted { a, b in
            if a.element.subject != b.element.subject { return a.element.subject.utf8.lexicographicallyPrecedes(b.element.subject.utf8) }
            let (first, second) = (order[a.element.model] ?? 0, order[b.element.model] ?? 0)
            return first != second ? first < second : a.offset < b.offset
        }.map(\.element)
    }

    /// A model's view of stored bytes as JSON, `nil` when the policy has no such model.
    static func viewJSON<M: ReadModel>(_ model: M.Type, stateBytes: UnsafeRawBufferPointer?, factsBytes: UnsafeRawBufferPointer?,
                                       at t: Timestamp, policy: Policy) throws -> JSONObject? {
        try view(model, stateBytes: stateBytes, factsBytes: factsBytes, at: t, policy: policy)?.json
    }

    /// A model's view of stored bytes, `nil` when the policy has no such model.
    static func view<M: ReadModel>(_ model: M.Type, stateBytes: UnsafeRawBufferPointer?, factsBytes: UnsafeRawBufferPointer?,
                                   at t: Timestamp, policy: Policy) throws -> M.View? {
        let facts = try factsBytes.map { bytes throws(StateDecoder.Damaged) in try SubjectFacts.decode(bytes) } ?? SubjectFacts()
        return try view(model, stateBytes: stateBytes, facts: facts, at: t, policy: policy)
    }

    /// A model's view of its stored state and the subject's decoded facts.
    /// - Throws: `StateDecoder.Damaged`, or `NeedsReplay` when the state does not answer at `t`
    ///   or the subject's views count a holding subject's events (`SubjectFacts.bound`), which
    ///   its stored states do not hold.
    static func view<M: ReadModel>(_ model: M.Type, stateBytes: UnsafeRawBufferPointer?, facts: SubjectFacts,
                                   at t: Timestamp, policy: Policy) throws -> M.View? {
        if M.keyedBySubject, !facts.bound.isEmpty { throw NeedsReplay() }
        // No optional of the state: each generic optional asks the runtime for its type.
        let state: M.State
        if let stateBytes { state = try M.State.decodeForView(stateBytes) } else { state = M.State() }
        if let from = M.answersFrom(state, facts: facts), from > t { throw NeedsReplay() }
        return M.view(of: state, facts: facts, at: t, policy: policy)
    }

    /// Writes the run as a new generation, in the store's order (so each put is an append at
    /// the end), a batch per write transaction so that appends keep flowing: each key's states,
    /// items and anchor lists, then the indexed models' entries.
    private func writeShadow(_ run: StateRun, through snapshot: UInt64, policy: Policy,
                             progress: (RebuildProgress) -> Void) throws -> Generation {
        var shadow = Generation()
        shadow.policyHash = policy.hash
        try store.env.write { txn in
            shadow.id = UInt64(try store.allocate(txn))
            shadow.folds = folds.enumerated().map { .init(name: $1.name, tag: UInt8($0), version: $1.version, checkpoint: snapshot) }
            try store.setShadow(shadow, txn)
        }
        // Worked out from the states in memory, on every core; those that read the log (a
        // subject bound to a holding subject, a holding subject) from the states written.
        let (entries, deferred) = hasIndex ? try indexEntries(of: run.folded, policy: policy) : ([], [])
        // What is kept beside the states (items and anchor lists) and the index's records.
        let (beside, records) = run.beside(generation: shadow.number, entries: entries)
        let prefix = ModelSchema.prefix(shadow.number)
        let batch = 20_000
        let clock = ContinuousClock()
        let start = clock.now
        let total = run.entries.count + beside.count
        var key: [UInt8] = []
        var (i, j) = (0, 0)
        while i + j < total {
            try store.env.write { txn in
                let end = min(i + j + batch, total)
                while i + j < end {
                    // The next of the two sorted runs.
                    let state = j == beside.count || (i < run.entries.count && run.entries[i].stored.precedesInByteOrder(beside[j].stored))
                    let entry = state ? run.entries[i] : beside[j]
                    if state { i += 1 } else { j += 1 }
                    key.removeAll(keepingCapacity: true)
                    key += prefix
                    key += entry.stored
                    try txn.put(store.states, key: key, value: entry.state, flags: .append)
                }
            }
            let done = UInt64(i + j), seconds = (clock.now - start).seconds
            progress(RebuildProgress(phase: .writing, done: done, total: UInt64(total), perSecond: seconds > 0 ? Double(done) / seconds : 0))
        }
        // The new generation has no entries yet: they are put in key order.
        for first in stride(from: 0, to: records.count, by: batch) {
            try store.env.write { txn in try store.putFresh(records[first ..< min(first + batch, records.count)], txn) }
        }
        for first in stride(from: 0, to: deferred.count, by: batch) {
            try store.env.write { txn in
                let overlay = Overlay(ModelTail(generation: shadow.id, through: 0))
                try refreshIndexes(of: Set(deferred[first ..< min(first + batch, deferred.count)]), in: shadow, policy: policy, txn, overlay)
                try overlay.store(into: store, txn)
            }
        }
        releaseAside(Unshared(value: (consume entries, consume records, consume beside)))
        return shadow
    }

    /// Applies the events appended since the snapshot to the new generation, and swaps it in
    /// once the rest fits in one transaction. Returns how many events it applied.
    fileprivate func swap(_ shadow: Generation, newPolicy: Policy?, progress: (RebuildProgress) -> Void) throws -> UInt64 {
        let start = shadow.folds.map(\.checkpoint).min() ?? 0
        while true {
            let (swapped, reached, head) = try store.env.write { txn -> (Bool, UInt64, UInt64) in
                let head = try store.log.head(txn)
                guard var current = try store.shadow(txn), current.id == shadow.id else {
                    throw LedgerError(.storage, "the new generation disappeared during the rebuild (another process rebuilt the models); run the rebuild again")
                }
                let behind = head - (current.folds.map(\.checkpoint).min() ?? head)
                let last = behind <= inlineCatchUpLimit
                let target = last ? head : (current.folds.map(\.checkpoint).min() ?? head) + inlineCatchUpLimit
                let policy = try newPolicy ?? self.policy(txn)
                // The new generation's writes are its own (its number in every key): stored here.
                let overlay = Overlay(ModelTail(generation: current.id, through: 0))
                for index in catchUpOrder {
                    _ = try catchUp(index, of: &current, through: target, shadow: true, policy: policy, txn, overlay)
                }
                try overlay.store(into: store, txn)
                guard last else { return (false, target, head) }
                if let newPolicy { try store.log.setPolicy(newPolicy, txn) }
                try store.setStoredServed(current, txn)
                try store.setShadow(nil, txn)
                return (true, head, head)
            }
            // The served generation's tail is the old generation's: a new one starts.
            if swapped { tails.publish(ModelTail(generation: shadow.id, through: head)) }
            // Outside the transaction, so that the callback may append.
            progress(RebuildProgress(phase: .catchingUp, done: reached - start, total: head - start, perSecond: 0))
            if swapped { return head - start }
        }
    }

    /// Deletes the states of every generation that is neither served nor being built (an
    /// abandoned rebuild's, and the one a rebuild replaced), a batch per write transaction.
    func collectGarbage() throws {
        try store.env.write { txn in try store.setShadow(nil, txn) }
        while true {
            let more = try store.env.write { txn -> Bool in
                let live = Set([try store.storedServed(txn)?.number, try store.shadow(txn)?.number].compactMap { $0 })
                guard let dead = try store.storedGenerations(txn).subtracting(live).min() else { return false }
                return try store.delete(dead, limit: 50_000, txn) > 0
            }
            if !more { return }
        }
    }
}

/// A rebuild whose new generation is written and waits (`ProjectionEngine.prepareRebuild`):
/// `swap` catches it up and puts it in with its policy, `abandon` deletes it. Until one of them
/// (or its end), no other rebuild runs in the process; appends go on into the served generation.
/// A cluster prepares one on every node, and swaps them once all are ready.
package final class PreparedRebuild: @unchecked Sendable {
    // @unchecked: `finished` guards the one swap or abandon; the rest is set once.
    private let engine: ProjectionEngine
    private let shadow: Generation?
    /// The policy the new generation was built under, when it is not the store's.
    package let newPolicy: Policy?
    private let finished: Mutex<Bool>
    /// What the rebuild found: for a prepared one, `writeSeconds` is the time writing took.
    package private(set) var report: RebuildReport

    init(engine: ProjectionEngine, report: RebuildReport, shadow: Generation?, newPolicy: Policy?, holdsLock: Bool) {
        self.engine = engine
        self.report = report
        self.shadow = shadow
        self.newPolicy = newPolicy
        finished = Mutex(!holdsLock)
    }

    /// Whether it was neither swapped in nor abandoned.
    private func finish() -> Bool {
        let first = finished.withLock { done in defer { done = true }; return !done }
        return first
    }

    /// Catches the new generation up with the events appended since it was folded and swaps
    /// it in (with its policy, which becomes the store's) in one write transaction; deletes the
    /// old. Returns the report with `caughtUp` and `writeSeconds` (the whole write) set.
    package func swap(progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> RebuildReport {
        guard let shadow, finish() else { throw LedgerError(.invalidArgument, "this rebuild was already swapped in or abandoned") }
        defer { engine.rebuildLock.withLock { $0 = false } }
        let start = ContinuousClock().now
        do {
            report.caughtUp = try engine.swap(shadow, newPolicy: newPolicy, progress: progress)
            try engine.collectGarbage()
        } catch {
            throw LedgerError.wrapping(error, doing: "swapping the rebuilt read models in")
        }
        report.writeSeconds += (ContinuousClock().now - start).seconds
        return report
    }

    /// Rewrites each change of the report (`Ledger` opens personal fields).
    func openChanges(_ open: (ViewChange) throws(LedgerError) -> ViewChange) throws(LedgerError) {
        for index in report.changes.indices { report.changes[index] = try open(report.changes[index]) }
    }

    /// Deletes the new generation; the served one stays.
    package func abandon() throws(LedgerError) {
        guard finish() else { return }
        defer { engine.rebuildLock.withLock { $0 = false } }
        do {
            try engine.collectGarbage()
        } catch {
            throw LedgerError.wrapping(error, doing: "deleting an abandoned rebuild")
        }
    }

    deinit {
        // Dropped unfinished: the next rebuild deletes the generation.
        if finish() { engine.rebuildLock.withLock { $0 = false } }
    }
}

extension Optional where Wrapped == [UInt8] {
    /// `body` with the bytes, or with `nil`.
    func withOptionalBytes<R>(_ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        guard let self else { return try body(nil) }
        return try self.withUnsafeBytes { try body($0) }
    }
}

/// A stored state that does not answer at the time asked (`ReadModel.answersFrom`): the
/// key's events are replayed instead (`Replay`).
struct NeedsReplay: Error {}

/// A value no other thread holds, handed to one only to be freed there (`releaseAside`).
private struct Unshared<T>: @unchecked Sendable {
    // @unchecked: whoever makes one gives its value up; the receiving thread only drops it.
    let value: T
}

import Foundation
import LMDB
import LedgerCore
import LedgerStore

/// How far a rebuild (or verify) has got, for a progress bar.
public struct RebuildProgress: Sendable, Hashable {
    /// What it is doing.
    public enum Phase: String, Sendable {
        /// Reading the log and folding every event in memory.
        case folding
        /// Writing the new generation's states.
        case writing
        /// Applying the events appended meanwhile, then swapping.
        case catchingUp
    }

    public var phase: Phase
    /// Events (folding) or states (writing) done.
    public var done: UInt64
    /// Of how many.
    public var total: UInt64
    /// The rate so far, per second.
    public var perSecond: Double
    /// Seconds left at that rate, `nil` before there is a rate.
    public var secondsLeft: Double? {
        guard perSecond > 0 else { return nil }
        return Double(total - min(done, total)) / perSecond
    }
}

/// One field of one model's view that differs between two builds, for one subject.
public struct ViewChange: Sendable, Hashable {
    public var subject: String
    public var model: String
    public var field: String
    public var from: JSON
    public var to: JSON

    public init(subject: String, model: String, field: String, from: JSON, to: JSON) {
        self.subject = subject
        self.model = model
        self.field = field
        self.from = from
        self.to = to
    }

    /// As `rebuild --json` prints it.
    public var json: JSON {
        ["subject": .string(subject), "model": .string(model), "field": .string(field), "from": from, "to": to]
    }

    /// A value as the summary names it: strings bare, anything else as JSON.
    static func label(_ value: JSON) -> String {
        if case .string(let text) = value { return text }
        return value.serialized()
    }
}

/// What a rebuild found and did.
public struct RebuildReport: Sendable {
    /// The time the views were compared at.
    public var at: Timestamp
    /// Nothing was swapped.
    public var dryRun: Bool
    /// The models rebuilt.
    public var models: [String]
    /// The policy hash served before, and the one the rebuild used.
    public var policyFrom: String
    public var policyTo: String
    /// Every field that changes, by subject, model and field.
    public var changes: [ViewChange]
    /// Models whose served build, made by another code version, this code cannot read: their
    /// views could not be compared, so `changes` says nothing about them.
    public var notCompared: [String] = []
    /// Events folded.
    public var events: UInt64
    /// Events appended while it ran, applied before the swap.
    public var caughtUp: UInt64
    /// Seconds spent folding the log.
    public var foldSeconds: Double
    /// Seconds spent comparing the new views with the served ones, after the fold (0 when not
    /// compared): each key's new state is encoded and checked against its stored one, and the
    /// views of those that differ are worked out.
    public var compareSeconds: Double = 0
    /// Seconds spent after the fold: writing the new states, catching up and swapping them in,
    /// and deleting the old ones (0 for a dry run).
    public var writeSeconds: Double = 0

    /// Per `model.field`, how many subjects went from each value to each other (`free→pro`).
    /// A time moves `earlier` or `later`, or goes `null→time` or `time→null`: each subject's
    /// times differ, so counting them one by one would say nothing. Fields that cite an event's
    /// position (`reason.position`) are left out: a position names one subject's event, not a
    /// state shared by many; `changes` lists them.
    public var summary: [String: [String: Int]] {
        var summary: [String: [String: Int]] = [:]
        for change in changes where !change.field.hasSuffix("position") {
            summary["\(change.model).\(change.field)", default: [:]][Self.transition(change.from, change.to), default: 0] += 1
        }
        return summary
    }

    /// `from→to`, or for times `earlier`, `later`, `null→time`, `time→null`.
    static func transition(_ from: JSON, _ to: JSON) -> String {
        func time(_ value: JSON) -> Timestamp? {
            if case .string(let text) = value { return Timestamp(rfc3339: text) }
            return nil
        }
        switch (time(from), time(to)) {
        case (let a?, let b?): return a < b ? "later" : "earlier"
        case (nil, _?) where from == .null: return "null→time"
        case (_?, nil) where to == .null: return "time→null"
        default: return "\(ViewChange.label(from))→\(ViewChange.label(to))"
        }
    }

    /// The `rebuild --json` shape of SPEC §5.
    public var json: JSON {
        let summary = self.summary
        return [
            "at": .string(at.description), "dryRun": .bool(dryRun),
            "policy": ["from": .string(policyFrom), "to": .string(policyTo)],
            "changes": .array(changes.map(\.json)),
            "summary": .object(JSONObject(summary.keys.sorted().map { field in
                let counts = summary[field] ?? [:]
                return (field, JSON.object(JSONObject(counts.keys.sorted().map { ($0, JSON.integer(Int64(counts[$0] ?? 0))) })))
            })),
            "notCompared": .array(notCompared.map(JSON.string)),
        ]
    }
}

extension ProjectionEngine {
    /// Rebuilds `names` (all models when empty) from position 1.
    ///
    /// 1. Folds the whole log in memory, per key, from one read snapshot, and compares the new
    ///    views at `at` (under `policy`, else the store's) with the served ones.
    /// 2. Unless `dryRun`: writes the states as a new shadow generation in sorted,
    ///    append-ordered batches; appends go on meanwhile into the served generation.
    /// 3. Catches the shadow up with the events appended since the snapshot, and swaps it in
    ///    with its checkpoint, code version and policy hash in one write transaction (with
    ///    `policy`, which becomes the store's). Readers see the old model or the new, never half.
    ///
    /// A crash before the swap leaves the served generation as it was; the next rebuild discards
    /// the abandoned shadow.
    @discardableResult
    public func rebuild(_ names: [String] = [], policy newPolicy: Policy? = nil, dryRun: Bool = false, at: Timestamp = .now(),
                        compare: Bool = true, progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> RebuildReport {
        let chosen = try choose(names)
        guard !chosen.isEmpty else {
            throw LedgerError(.invalidEvent, "this ledger has no read models registered, so there is nothing to rebuild")
        }
        let alreadyRunning = rebuildLock.withLock { running in
            defer { running = true }
            return running
        }
        guard !alreadyRunning else { throw LedgerError(.storage, "a rebuild is already running in this process; wait for it to finish") }
        defer { rebuildLock.withLock { $0 = false } }
        do {
            if !dryRun { try collectGarbage(discardingShadowsOf: chosen) }
            var report = try fold(chosen, newPolicy: newPolicy, at: at, dryRun: dryRun, compare: compare, progress: progress)
            guard !dryRun else { return report.report }
            let clock = ContinuousClock()
            let writing = clock.now
            let policy = try newPolicy ?? storage.env.read { txn in try self.policy(txn) }
            let shadows = try writeShadows(chosen, report.fold.folds, through: report.snapshot, policyHash: policy.hash, progress: progress)
            // Written: the states in memory are freed while the rebuild swaps and collects.
            report.fold.discard()
            report.report.caughtUp = try swap(chosen, shadows, newPolicy: newPolicy, progress: progress)
            try collectGarbage(discardingShadowsOf: [])
            report.report.writeSeconds = (clock.now - writing).seconds
            return report.report
        } catch {
            throw LedgerError.wrapping(error, doing: "rebuilding \(chosen.map(\.name).joined(separator: ", "))")
        }
    }

    func choose(_ names: [String]) throws(LedgerError) -> [ModelRunner] {
        guard !names.isEmpty else { return models }
        var chosen: [ModelRunner] = []
        for name in names {
            guard let model = runner(name) else {
                throw LedgerError(.invalidEvent, "no read model named \(name); the models are \(modelNames.joined(separator: ", "))")
            }
            if !chosen.contains(where: { $0.name == name }) { chosen.append(model) }
        }
        return chosen
    }

    private struct Folded {
        var report: RebuildReport
        let fold: ReadModelFold
        var snapshot: UInt64
    }

    /// Folds the log through its head in one read snapshot, and compares views with the served
    /// generations of the same snapshot.
    private func fold(_ chosen: [ModelRunner], newPolicy: Policy?, at: Timestamp, dryRun: Bool, compare: Bool,
                      progress: (RebuildProgress) -> Void) throws -> Folded {
        try storage.env.read { txn in
            let head = try storage.head(txn)
            let served = try self.policy(txn)
            let policy = newPolicy ?? served
            let clock = ContinuousClock()
            let start = clock.now
            let folded = try foldLog(chosen, through: head, txn, progress: progress)
            let foldSeconds = (clock.now - start).seconds
            var changes: [ViewChange] = []
            var notCompared: [String] = []
            let comparing = clock.now
            if compare {
                for (model, fold) in zip(chosen, folded.folds) {
                    let generation = try storage.served(model.name, txn)
                    if let found = try diff(model, fold, served: generation, servedPolicy: served, newPolicy: policy, at: at, txn) {
                        changes += found
                    } else {
                        notCompared.append(model.name)
                    }
                }
                // By subject, then in model and field order (the sort is made stable by the index).
                let order = Dictionary(uniqueKeysWithValues: chosen.enumerated().map { ($1.name, $0) })
                changes = changes.enumerated().sorted {
                    ($0.element.subject, order[$0.element.model] ?? 0, $0.offset) < ($1.element.subject, order[$1.element.model] ?? 0, $1.offset)
                }.map(\.element)
            }
            var report = RebuildReport(at: at, dryRun: dryRun, models: chosen.map(\.name), policyFrom: served.hash, policyTo: policy.hash,
                                       changes: changes, notCompared: notCompared, events: head, caughtUp: 0, foldSeconds: foldSeconds)
            if compare { report.compareSeconds = (clock.now - comparing).seconds }
            return Folded(report: report, fold: folded, snapshot: head)
        }
    }

    /// Folds the whole log through `head` in memory, one fold per model, decoding each event
    /// once for every model that reads it: the finished fold. Reports `.folding` progress.
    func foldLog(_ chosen: [ModelRunner], through head: UInt64, _ txn: borrowing Transaction,
                 progress: (RebuildProgress) -> Void) throws -> ReadModelFold {
        // Room for the store's subjects at once; a count no larger than the events, and kept
        // to a million, in case the store's count is damaged (growing takes over past it).
        let subjects = try txn.get(storage.meta, key: LogSchema.subjectCountKey).flatMap(LogSchema.integer) ?? 0
        let fold = ReadModelFold(chosen, expectedKeys: Int(min(subjects, head, 1 << 20)))
        let clock = ContinuousClock()
        let start = clock.now
        func report(_ done: UInt64) {
            let seconds = (clock.now - start).seconds
            progress(RebuildProgress(phase: .folding, done: done, total: head, perSecond: seconds > 0 ? Double(done) / seconds : 0))
        }
        report(0)
        try storage.forEachEvent(after: 0, through: head, types: fold.eventTypes, txn, tick: report) { event in
            try fold.apply(event)
        }
        try fold.finish()
        report(head)
        return fold
    }

    /// Field by field, the views at `at` of the served generation and of the fold; `nil` when
    /// the served generation was built by another code version whose states this code cannot
    /// read (a state that does not decode under the same code version is damage, and throws).
    private func diff(_ model: ModelRunner, _ fold: any StateFold, served generation: Generation?, servedPolicy: Policy,
                      newPolicy: Policy, at: Timestamp, _ txn: borrowing Transaction) throws -> [ViewChange]? {
        var changes: [ViewChange] = []
        // The same state under the same policy gives the same view: only the states that differ
        // need their views computed, unless the policy changes.
        let samePolicy = servedPolicy == newPolicy
        /// Appends the changes between the views of `stored` and `new` for `key`; `false` when
        /// the stored state is of a code version this code cannot read.
        func compare(_ key: UnsafeRawBufferPointer, stored: UnsafeRawBufferPointer?, new: UnsafeRawBufferPointer?) throws -> Bool {
            let old: JSONObject
            do throws(StateReader.Damaged) {
                old = try model.viewJSON(stored, at, servedPolicy, nil) ?? JSONObject()
            } catch {
                let failure = storage.unreadable(model.name, error, served: generation, codeVersion: model.codeVersion)
                if failure.code == .unsupportedFormat { return false }
                throw failure
            }
            let subject = String(decoding: key, as: UTF8.self)
            for (field, from, to) in Self.flatten(try model.viewJSON(new, at, newPolicy, nil) ?? JSONObject()).changes(since: Self.flatten(old)) {
                changes.append(ViewChange(subject: subject, model: model.name, field: field, from: from, to: to))
            }
            return true
        }
        // The new states, encoded on every core, each under the key it has in the served
        // generation (`EncodedStates`), then looked up there in that order. (Encoding each key's
        // state alone, on one thread, with a string and a set entry for every key, took as
        // long as the fold at 100,000 customers.)
        let encoded = EncodedStates([(fold, generation)])
        var found = 0
        var readable = true
        try encoded.forEach { storedKey, state in
            guard readable else { return }
            let key = generation.flatMap { ModelSchema.key(ofStored: storedKey, in: $0) } ?? storedKey
            let stored = try generation.flatMap { _ in try txn.get(storage.states, key: storedKey) }
            if stored != nil { found += 1 }
            if samePolicy, let stored, stored.elementsEqual(state) { return }
            readable = try compare(key, stored: stored, new: state)
        }
        guard readable else { return nil }
        // Keys served that the fold no longer holds, if there are any: more served states than
        // the fold's keys found among them.
        guard let generation else { return changes }
        var served = 0
        try storage.forEachState(in: generation, txn) { _, _ in served += 1 }
        guard served > found else { return changes }
        let held = Set(fold.keys)
        try storage.forEachState(in: generation, txn) { key, stored in
            guard readable, !held.contains(String(decoding: key, as: UTF8.self)) else { return }
            readable = try compare(key, stored: stored, new: nil)
        }
        return readable ? changes : nil
    }

    /// A view's leaves with their dotted paths (`reason.rule`), in the view's order: a change
    /// names the very field that differs, and the summary counts transitions per field.
    static func flatten(_ object: JSONObject, prefix: String = "") -> FlatView {
        var leaves: [(String, JSON)] = []
        for member in object.members {
            if case .object(let inner) = member.value, !inner.members.isEmpty {
                leaves += flatten(inner, prefix: prefix + member.key + ".").pairs
            } else {
                leaves.append((prefix + member.key, member.value))
            }
        }
        return .init(pairs: leaves)
    }

    /// Writes the folds as new shadow generations, sorted, a batch of states per write
    /// transaction so that appends keep flowing. Models rebuilt together share one generation,
    /// so their states are written together in the order the store keeps them.
    private func writeShadows(_ chosen: [ModelRunner], _ folds: [any StateFold], through snapshot: UInt64, policyHash: String,
                              progress: (RebuildProgress) -> Void) throws -> [Generation] {
        let batch = 20_000
        let total = UInt64(folds.reduce(0) { $0 + $1.count })
        let clock = ContinuousClock()
        let start = clock.now
        var written: UInt64 = 0
        let shadows = try storage.env.write { txn in
            try zip(chosen, storage.allocateGenerations(chosen.count, txn)).map { model, place in
                let shadow = Generation(id: place.id, checkpoint: snapshot, codeVersion: model.codeVersion, policyHash: policyHash, tag: place.tag)
                try storage.setShadow(model.name, shadow, txn)
                return shadow
            }
        }
        // A generation's states are written key by key as they are encoded (on the other
        // cores meanwhile), all its models' together.
        var first = 0
        var highest: [UInt8] = []
        while first < shadows.count {
            var end = first + 1
            while end < shadows.count, shadows[end].id == shadows[first].id { end += 1 }
            try EncodedStates.streamed((first ..< end).map { (folds[$0], shadows[$0]) }) { run in
                var next = 0
                while next < run.entries.count {
                    let last = min(next + batch, run.entries.count)
                    try storage.env.write { txn in
                        try run.forEach(in: next ..< last) { key, state in
                            // The shadow's number is above every other generation's, so each key
                            // above the last is an append at the end of the tree. A key that
                            // another begins with, followed by a byte below the tags, is not (the
                            // runs are in key order, not always in stored order).
                            if highest.isEmpty || highest.lexicographicallyPrecedes(key) {
                                try txn.put(storage.states, key: key, value: state, flags: .append)
                                highest.removeAll(keepingCapacity: true)
                                highest.append(contentsOf: key)
                            } else {
                                try txn.put(storage.states, key: key, value: state)
                            }
                        }
                    }
                    written += UInt64(last - next)
                    next = last
                    let seconds = (clock.now - start).seconds
                    progress(RebuildProgress(phase: .writing, done: written, total: total, perSecond: seconds > 0 ? Double(written) / seconds : 0))
                }
            }
            first = end
        }
        return shadows
    }

    /// Applies the events appended since the snapshot to the shadows, and swaps them in once
    /// the rest fits in one transaction. Returns how many events it applied.
    private func swap(_ chosen: [ModelRunner], _ shadows: [Generation], newPolicy: Policy?,
                      progress: (RebuildProgress) -> Void) throws -> UInt64 {
        let start = shadows.map(\.checkpoint).min() ?? 0
        while true {
            let (swapped, reached, head) = try storage.env.write { txn -> (Bool, UInt64, UInt64) in
                let head = try storage.head(txn)
                var current = try chosen.map { model in
                    guard let shadow = try storage.shadow(model.name, txn) else {
                        throw LedgerError(.storage, "the shadow of \(model.name) disappeared during the rebuild (another process rebuilt it); run the rebuild again")
                    }
                    return shadow
                }
                let behind = head - (current.map(\.checkpoint).min() ?? head)
                let last = behind <= inlineCatchUpLimit
                for (i, model) in chosen.enumerated() {
                    current[i] = try catchUp(model, current[i], through: last ? head : current[i].checkpoint + inlineCatchUpLimit, txn, served: false)
                }
                let reached = current.map(\.checkpoint).min() ?? head
                guard last else { return (false, reached, head) }
                if let newPolicy { try txn.put(storage.meta, key: LogSchema.policyKey, value: LogSchema.policyValue(newPolicy)) }
                for (model, shadow) in zip(chosen, current) {
                    // A model leaving a generation it shares leaves its states there to the
                    // garbage collector, which the others' states would otherwise keep alive.
                    if let old = try storage.served(model.name, txn), let tag = old.tag, old.id != shadow.id {
                        try storage.markDead(old.id, tag: tag, txn)
                    }
                    try storage.setServed(model.name, shadow, txn)
                    try storage.setShadow(model.name, nil, txn)
                }
                return (true, reached, head)
            }
            // Outside the transaction, so that the callback may append.
            progress(RebuildProgress(phase: .catchingUp, done: reached - start, total: head - start, perSecond: 0))
            if swapped { return head - start }
        }
    }

    /// Deletes the states of every generation no model serves or builds (and first the
    /// shadows of `models`: a rebuild that did not finish), a batch per write transaction.
    func collectGarbage(discardingShadowsOf models: [ModelRunner]) throws {
        if !models.isEmpty {
            try storage.env.write { txn in
                for model in models { try storage.setShadow(model.name, nil, txn) }
            }
        }
        while true {
            let more = try storage.env.write { txn -> Bool in
                let live = try storage.liveGenerations(txn)
                if let dead = try storage.storedGenerations(txn).first(where: { !live.contains($0) }) {
                    _ = try storage.deleteStates(of: dead, limit: 50_000, txn)
                    return true
                }
                // The states models left behind in generations others still serve.
                guard let (generation, tag) = try storage.deadTags(txn).first else { return false }
                let cleared = try !live.contains(generation) || storage.deleteStates(of: generation, tag: tag, limit: 50_000, txn)
                if cleared {
                    try storage.forgetDead(generation, tag: tag, txn)
                }
                return true
            }
            if !more { return }
        }
    }
}

/// A view's leaves by dotted path, in order.
struct FlatView: Sequence {
    var pairs: [(String, JSON)]

    subscript(field: String) -> JSON? { pairs.first { $0.0 == field }?.1 }

    /// The fields that differ from `old`, in this view's order then `old`'s: a field one side
    /// lacks (an object that became `null`, or the reverse) counts as `null` there.
    func changes(since old: FlatView) -> [(field: String, from: JSON, to: JSON)] {
        var before: [String: JSON] = [:]
        for (field, value) in old.pairs { before[field] = value }
        var out: [(field: String, from: JSON, to: JSON)] = []
        var seen: Set<String> = []
        for (field, value) in pairs {
            seen.insert(field)
            let from = before[field] ?? .null
            if from != value { out.append((field, from, value)) }
        }
        for (field, value) in old.pairs where !seen.contains(field) && value != .null {
            out.append((field, value, .null))
        }
        return out
    }

    func makeIterator() -> IndexingIterator<[(String, JSON)]> { pairs.makeIterator() }
}

import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore
import Synchronization

/// Runs the read models against the log of one store: inline in every append's write
/// transaction, by catch-up from a checkpoint, and by rebuild from scratch into a new
/// generation. `Ledger` is its face; the Engine article (DocC) says how it keeps them exact.
///
/// Exactly once: a fold's state writes and its checkpoint commit in the same LMDB write
/// transaction as the events they come from (inline), or in one transaction of their own
/// (catch-up), so after any crash a fold holds every event up to its checkpoint and none after.
final class ProjectionEngine: CommitObserver {
    let store: ModelStore
    let models: [any ReadModel.Type]
    /// The facts (index 0) and each model.
    let folds: [Fold]
    /// For each event type (by `EventData.ordinal`), the folds (by index) that read it.
    let readers: [[Int]]
    /// A fold this far behind is caught up inside the next append's transaction; further
    /// behind, it waits for `catchUp()` (which `Ledger` runs when it opens the store).
    let inlineCatchUpLimit: UInt64 = 10_000
    /// Whether a model keeps a time-ordered index (`ReadModel.isIndexed`): only then does a
    /// write work out index entries.
    let hasIndex: Bool
    /// The folds (by index) an indexed model's entries are worked out from: the facts and the
    /// indexed models.
    let indexInputs: Set<Int>
    /// The folds (by index) in the order a catch-up advances them: the facts, then the models
    /// keyed otherwise than by subject (the holders, whose positions a bound subject's index
    /// entries read: `Attributed`), then the others.
    let catchUpOrder: [Int]
    let broadcaster = PositionBroadcaster()
    /// The models' writes of the latest appends, not stored yet (`ModelTail`).
    let tails: ModelTails
    private let policyCache = Mutex<(bytes: [UInt8], policy: Policy, hash: String)?>(nil)
    /// One rebuild at a time in this process.
    let rebuildLock = Mutex(false)
    /// The threads a fold of the whole log (rebuild, verify) folds on, each a part of the
    /// keys; 0: one per core. For measuring (`Tools/bench` shows a rebuild on one and on all).
    let foldThreads = Atomic<Int>(0)

    /// The threads a fold of the whole log folds on.
    var foldCores: Int {
        let set = foldThreads.load(ordering: .relaxed)
        return set > 0 ? set : max(1, ProcessInfo.processInfo.activeProcessorCount)
    }

    init(env: Environment, models: [any ReadModel.Type], tailLimit: Int = ModelTail.defaultLimit) throws {
        store = try ModelStore(env: env)
        tails = ModelTails(limit: tailLimit)
        self.models = models
        hasIndex = models.contains { $0.isIndexed }
        folds = Fold.all(models)
        indexInputs = hasIndex ? Set([0] + models.indices.filter { models[$0].isIndexed }.map { $0 + 1 }) : []
        let folds = self.folds
        readers = EventCatalog.typeNames.map { type in folds.indices.filter { folds[$0].reads.contains(type) } }
        catchUpOrder = [0] + folds.indices.dropFirst().filter { !folds[$0].keyedBySubject } + folds.indices.dropFirst().filter { folds[$0].keyedBySubject }
    }

    var modelNames: [String] { models.map { $0.name } }

    // MARK: Generations

    /// The served generation, made (or given records for folds it lacks: a model added since)
    /// in `txn`, a write transaction. A damaged generation record is replaced by a new, empty
    /// generation, which catch-up builds from the log; the next rebuild deletes the old
    /// generation's states.
    func servedForWriting(_ txn: borrowing Transaction, _ overlay: Overlay) throws -> Generation {
        var stored: Generation
        do {
            stored = try store.storedServed(txn) ?? Generation()
        } catch let error as LedgerError where error.code == .corruptRecord {
            stored = Generation()
        }
        var changed = false
        if stored.id == 0 {
            stored.id = UInt64(try store.allocate(txn))
            stored.policyHash = try servedPolicy(txn).hash
            changed = true
        }
        // A fold new to the generation gets a record (checkpoint 0), stored at once; the tail's
        // record, if it holds one, gets the same.
        var served = overlay.generation == stored.id ? overlay.served ?? stored : stored
        for fold in folds where stored.record(fold.name) == nil {
            let used = Set(stored.folds.map(\.tag))
            guard let tag = (0 ..< ModelSchema.itemMark).first(where: { !used.contains(UInt64($0)) }) else {
                throw LedgerError(.storage, "a store holds at most \(ModelSchema.itemMark) folds: the subjects' facts and \(ModelSchema.itemMark - 1) read models")
            }
            let record = Generation.FoldRecord(name: fold.name, tag: UInt8(tag), version: fold.version, checkpoint: 0)
            stored.folds.append(record)
            if served.record(fold.name) == nil { served.folds.append(record) }
            changed = true
        }
        guard changed else { return served }
        try store.setStoredServed(stored, txn)
        if overlay.generation != stored.id {
            overlay.startOver(ModelTail(generation: stored.id, through: overlay.head))
            return stored
        }
        if overlay.served != nil { store.setServed(served, overlay) }
        return served
    }

    // MARK: Inline (the writer thread, inside the append's transaction)

    func begin(_ txn: borrowing Transaction, head: UInt64) throws -> any CommitSession {
        let overlay = try overlay(tails.snapshot, txn, reading: false)
        var served = try servedForWriting(txn, overlay)
        var active: [InlineSession.Entry?] = Array(repeating: nil, count: folds.count)
        let policy = try self.policy(txn)
        for index in catchUpOrder {
            let fold = folds[index]
            guard let record = served.record(fold.name), record.version == UInt64(fold.version) else { continue }
            var checkpoint = record.checkpoint
            if checkpoint < head && head - checkpoint <= inlineCatchUpLimit {
                checkpoint = try catchUp(index, of: &served, through: head, txn, overlay)
            }
            // Further behind (or ahead, which only a damaged store shows): left to catchUp()
            // or a rebuild; never applied out of order. Built by another version: its states
            // may not even decode; it stays stale until a rebuild.
            if checkpoint == head { active[index] = InlineSession.Entry(tag: record.tagByte) }
        }
        overlay.head = max(overlay.head, head)
        return InlineSession(engine: self, generation: served, active: active, policy: policy, overlay: overlay)
    }

    func committed(head: UInt64) {
        tails.committed()
        broadcaster.publish(head)
    }

    /// Applies the events after fold `index`'s checkpoint through `head` to it, in `txn`, and
    /// refreshes the index entries of the keys it touched (under `policy`, default the
    /// store's); returns the new checkpoint. The generation is the served one, or with
    /// `shadow`, the one a rebuild is making.
    func catchUp(_ index: Int, of generation: inout Generation, through head: UInt64, shadow: Bool = false, policy: Policy? = nil,
                 _ txn: borrowing Transaction, _ overlay: Overlay) throws -> UInt64 {
        let fold = folds[index]
        guard let position = generation.folds.firstIndex(where: { $0.name == fold.name }) else { return 0 }
        let record = generation.folds[position]
        guard record.checkpoint < head else { return record.checkpoint }
        let foldPolicy = try policy ?? self.policy(txn)
        let states = fold.makeStates(policy: foldPolicy)
        let id = generation.number, tag = record.tagByte
        // An indexed model's entries are worked out from the facts too: the keys whose facts
        // these events changed are refreshed with those whose state they changed (a model added
        // to a store, or one behind appends made without it, would otherwise miss them).
        let indexed = index != 0 && indexInputs.contains(index)
        var factsTouched: Set<String> = []
        try store.log.forEachEvent(after: record.checkpoint, through: head, types: indexed ? fold.reads.union(SubjectFacts.reads) : fold.reads, txn) { event in
            if indexed, SubjectFacts.planReads.contains(event.type) { factsTouched.insert(event.subject) }
            guard !indexed || fold.reads.contains(event.type) else { return }
            try states.apply(event, load: { key in try store.state(id, tag: tag, key, txn, overlay) },
                             loadItem: { item in try store.item(id, tag: tag, item, txn, overlay) })
        }
        for (key, state) in states.encoded() { store.put(id, tag: tag, key, state, overlay) }
        for (item, state) in states.encodedItems() { store.putItem(id, tag: tag, item, state, overlay) }
        generation.folds[position].checkpoint = head
        if shadow { try store.setShadow(generation, txn) } else { store.setServed(generation, overlay) }
        if indexInputs.contains(index) {
            try refreshIndexes(of: Set(states.keys).union(factsTouched), in: generation, policy: foldPolicy, txn, overlay)
        }
        return head
    }

    /// Works out again the index entries of `keys` in every indexed model of `generation`,
    /// from their stored states and facts under `policy`. The entries of a subject whose views
    /// count a holding subject's events are worked out with those events folded onto its
    /// states (`Attributed`), and a bound holding subject has none; so refreshing either
    /// refreshes the other.
    func refreshIndexes(of keys: Set<String>, in generation: Generation, policy: Policy, _ txn: borrowing Transaction, _ overlay: Overlay) throws {
        guard hasIndex, !keys.isEmpty else { return }
        guard let facts = generation.record(Fold.factsName), facts.version == UInt64(Fold.factsVersion) else { return }
        let attributed = Attributed(engine: self, generation: generation, overlay: overlay)
        // Each key's facts decoded once, and the keys a refresh of these brings in.
        var decoded: [String: SubjectFacts] = [:]
        var holdings: Set<String> = []
        func note(_ key: String) throws {
            guard decoded[key] == nil else { return }
            decoded[key] = try Attributed.facts(try store.states(of: key, in: generation.number, txn, overlay)[facts.tagByte])
            if try attributed.boundSubject(ofHolding: key, txn) != nil { holdings.insert(key) }
        }
        for key in keys {
            try note(key)
            for holding in decoded[key]?.bound ?? [] { try note(holding) }
            if holdings.contains(key), let subject = try attributed.boundSubject(ofHolding: key, txn) { try note(subject) }
        }
        for model in models where model.isIndexed {
            // Another version's states may not decode under this code: its index stays as it
            // is, stale with the model, until a rebuild.
            guard let record = generation.record(model.name), record.version == UInt64(model.version) else { continue }
            for (key, keyFacts) in decoded {
                let entries = holdings.contains(key) ? [] : try attributed.typedEntries(model, of: key, stateBytes: try store.states(of: key, in: generation.number, txn, overlay)[record.tagByte],
                                                                                         facts: keyFacts, policy: policy, txn)
                try store.setEntries(entries, of: key, generation: generation.number, tag: record.tagByte, txn, overlay)
            }
        }
    }

    // MARK: Catch-up (any thread but the writer's)

    /// Brings every fold up to the head of the log, a batch of events per write transaction.
    /// Returns the last position it applied to some fold (0 when all were up to date).
    @discardableResult
    func catchUp(batch: UInt64 = 50_000) throws(LedgerError) -> UInt64 {
        var applied: UInt64 = 0
        do {
            while true {
                let done = try writeThrough { txn, overlay -> Bool in
                    let head = try store.log.head(txn)
                    var served = try servedForWriting(txn, overlay)
                    var finished = true
                    for index in catchUpOrder {
                        let fold = folds[index]
                        guard let record = served.record(fold.name), record.checkpoint < head, record.version == UInt64(fold.version) else { continue }
                        let target = min(head, record.checkpoint + batch)
                        _ = try catchUp(index, of: &served, through: target, txn, overlay)
                        applied = max(applied, target)
                        if target < head { finished = false }
                    }
                    return finished
                }
                if done { return applied }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "catching up the read models")
        }
    }

    // MARK: Policy

    /// The store's policy, decoded once per distinct document.
    func policy(_ txn: borrowing Transaction) throws -> Policy { try servedPolicy(txn).policy }

    /// The store's policy with its hash, both worked out once per distinct document: a query
    /// only compares the stored bytes with the cached ones.
    func servedPolicy(_ txn: borrowing Transaction) throws -> (policy: Policy, hash: String) {
        guard let stored = try store.log.policyBytes(txn) else { return (Policy.reference, Self.referenceHash) }
        if let cached = policyCache.withLock({ $0 }), stored.hasSameBytes(as: cached.bytes) { return (cached.policy, cached.hash) }
        let bytes = Array(stored)
        switch Policy.decode(bytes) {
        case .success(let policy):
            let hash = policy.hash
            policyCache.withLock { $0 = (bytes, policy, hash) }
            return (policy, hash)
        case .failure:
            throw LedgerError(.corruptRecord, "the store's policy does not decode; " + EventLog.damagedPolicyRemedy)
        }
    }

    private static let referenceHash = Policy.reference.hash
}

extension LedgerError {
    /// Wraps an error from the store underneath, or a state that does not decode.
    static func wrapping(_ error: any Error, doing what: String) -> LedgerError {
        if let damaged = error as? StateDecoder.Damaged {
            return LedgerError(.corruptRecord, "\(what): a read model's state is damaged (\(damaged)); run `ledger rebuild`")
        }
        return .storage(error, doing: what)
    }
}

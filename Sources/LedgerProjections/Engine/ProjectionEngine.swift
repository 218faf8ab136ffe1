import LMDB
import LedgerCore
import LedgerStore
import Synchronization

/// Runs projections against the log of one store: inline in every append's write transaction,
/// by catch-up from a checkpoint, and by rebuild from scratch into a shadow generation.
///
/// Exactly once: a model's state writes and its checkpoint commit in the same LMDB write
/// transaction as the events they come from (inline), or in one transaction of their own
/// (catch-up), so after any crash a model holds every event up to its checkpoint and none after.
public final class ProjectionEngine: CommitObserver {
    let storage: ModelStorage
    let models: [ModelRunner]
    /// For each event type (by `EventData.ordinal`), the models (by index) that read it.
    let readers: [[Int]]
    /// A model this far behind is caught up inside the next append's transaction; further
    /// behind, it waits for `catchUp()` (which `Ledger` runs when it opens the store).
    let inlineCatchUpLimit: UInt64 = 10_000
    let broadcaster = PositionBroadcaster()
    private let policyCache = Mutex<(bytes: [UInt8], policy: Policy, hash: String)?>(nil)
    private let queryContextCache = Mutex<QueryContext?>(nil)
    /// One rebuild at a time in this process.
    let rebuildLock = Mutex(false)

    init(env: Environment, projections: [any Projection.Type]) throws {
        storage = try ModelStorage(env: env)
        models = projections.map { ModelRunner.make($0) }
        readers = ModelRunner.readers(models)
    }

    /// The models' names, in registration order.
    public var modelNames: [String] { models.map(\.name) }

    func runner(_ name: String) -> ModelRunner? { models.first { $0.name == name } }

    // MARK: Inline (the writer thread, inside the append's transaction)

    public func begin(_ txn: borrowing Transaction, head: UInt64) throws -> any CommitSession {
        var active = [InlineSession.Entry?](repeating: nil, count: models.count)
        let table = KeyTable()
        let generations = try servedGenerations(txn)
        for (index, model) in models.enumerated() {
            var served = generations[index]
            // Built by other code: its states may not even decode under this code's encoding.
            // It stays where it is, reported stale, until a rebuild replaces it.
            guard served.codeVersion == model.codeVersion else { continue }
            if served.checkpoint < head && head - served.checkpoint <= inlineCatchUpLimit {
                served = try catchUp(model, served, through: head, txn)
            }
            // Further behind (or ahead, which only a damaged store shows): left to catchUp()
            // or a rebuild; never applied out of order.
            if served.checkpoint == head { active[index] = InlineSession.Entry(model: model, generation: served, fold: model.makeFold(table)) }
        }
        return InlineSession(engine: self, active: active, table: table)
    }

    public func committed(head: UInt64) {
        broadcaster.publish(head)
    }

    /// Each model's served generation, by the engine's model index. The models the store has
    /// not seen get fresh, empty ones: one generation they share, each with its tag (the
    /// model's place among them), or one of its own for a model that comes alone.
    func servedGenerations(_ txn: borrowing Transaction) throws -> [Generation] {
        var served = try models.map { model in try storage.served(model.name, txn) }
        let missing = served.indices.filter { served[$0] == nil }
        guard !missing.isEmpty else { return served.compactMap { $0 } }
        let policyHash = try policyHash(txn)
        for (index, place) in zip(missing, try storage.allocateGenerations(missing.count, txn)) {
            let generation = Generation(id: place.id, checkpoint: 0, codeVersion: models[index].codeVersion, policyHash: policyHash, tag: place.tag)
            try storage.setServed(models[index].name, generation, txn)
            served[index] = generation
        }
        return served.compactMap { $0 }
    }

    /// Applies the events after `generation`'s checkpoint through `head` to it, in `txn`.
    func catchUp(_ model: ModelRunner, _ generation: Generation, through head: UInt64, _ txn: borrowing Transaction,
                 served: Bool = true) throws -> Generation {
        let fold = model.makeFold(KeyTable())
        try storage.forEachEvent(after: generation.checkpoint, through: head, types: model.eventTypes, txn) { event in
            try fold.apply(event) { key in try storage.state(generation, key, txn) }
        }
        try write(fold, into: generation, txn)
        var advanced = generation
        advanced.checkpoint = head
        if served { try storage.setServed(model.name, advanced, txn) } else { try storage.setShadow(model.name, advanced, txn) }
        return advanced
    }

    /// Writes the touched states of a fold into `generation` (random puts: the keys already
    /// have neighbours).
    func write(_ fold: any StateFold, into generation: Generation, _ txn: borrowing Transaction) throws {
        try EncodedStates([(fold, generation)]).forEach { key, state in try txn.put(storage.states, key: key, value: state) }
    }

    // MARK: Catch-up (any thread but the writer's)

    /// Brings every model up to the head of the log, a batch of events per write transaction.
    /// Returns the last position it applied to some model (0 when all were up to date).
    @discardableResult
    public func catchUp(batch: UInt64 = 50_000) throws(LedgerError) -> UInt64 {
        var applied: UInt64 = 0
        do {
            while true {
                let done = try storage.env.write { txn -> Bool in
                    let head = try storage.head(txn)
                    var finished = true
                    for (model, served) in zip(models, try servedGenerations(txn)) {
                        guard served.checkpoint < head, served.codeVersion == model.codeVersion else { continue }
                        let target = min(head, served.checkpoint + batch)
                        _ = try catchUp(model, served, through: target, txn)
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

    /// The store's policy with its hash, both computed once per distinct document: a query
    /// only compares the stored bytes with the cached ones.
    func servedPolicy(_ txn: borrowing Transaction) throws -> (policy: Policy, hash: String) {
        guard let stored = try txn.get(storage.meta, key: LogSchema.policyKey) else { return (Policy.reference, Self.referenceHash) }
        if let cached = policyCache.withLock({ $0 }), stored.hasSameBytes(as: cached.bytes) { return (cached.policy, cached.hash) }
        let bytes = Array(stored)
        switch Policy.decode(bytes) {
        case .success(let policy):
            let hash = policy.hash
            policyCache.withLock { $0 = (bytes, policy, hash) }
            return (policy, hash)
        case .failure:
            throw LedgerError(.corruptRecord, "the store's policy does not decode; set one with `ledger rebuild --policy FILE`")
        }
    }

    private static let referenceHash = Policy.reference.hash

    /// What a status query reads besides the states, read once per read snapshot: queries in
    /// read transactions of the same snapshot (`Transaction.snapshotID`) see the same data, so
    /// only the first reads the policy, the log's head and each model's served generation.
    func queryContext(_ txn: borrowing Transaction) throws -> QueryContext {
        let snapshot = txn.snapshotID
        if txn.isReadOnly, let cached = queryContextCache.withLock({ $0 }), cached.snapshot == snapshot { return cached }
        let (policy, hash) = try servedPolicy(txn)
        let head = try storage.head(txn)
        let served = try models.map { model in try storage.served(model.name, txn) }
        let stale = zip(models, served).map { model, served in
            staleness(model, served, policyHash: hash) != nil || (served?.checkpoint ?? 0) != head
        }
        let context = QueryContext(snapshot: snapshot, policy: policy, served: served, stale: stale)
        if txn.isReadOnly { queryContextCache.withLock { $0 = context } }
        return context
    }

    func policyHash(_ txn: borrowing Transaction) throws -> String { try servedPolicy(txn).hash }
}

/// The policy and served generations of one read snapshot, and which models are stale or
/// behind its head (`ProjectionEngine.queryContext`). A class: each query takes the cached one
/// with a single retain, not a copy of the policy.
final class QueryContext: Sendable {
    let snapshot: Int
    let policy: Policy
    /// By the engine's model index.
    let served: [Generation?]
    /// By the engine's model index: the model is stale or behind the log's head.
    let stale: [Bool]

    init(snapshot: Int, policy: Policy, served: [Generation?], stale: [Bool]) {
        self.snapshot = snapshot
        self.policy = policy
        self.served = served
        self.stale = stale
    }
}

/// The states one append's transaction touches, per model that is up to date.
final class InlineSession: CommitSession {
    struct Entry {
        let model: ModelRunner
        let generation: Generation
        let fold: any StateFold
    }

    let engine: ProjectionEngine
    /// By the engine's model index: the models this transaction advances (`nil`: left as it is).
    let active: [Entry?]
    /// The keys the active folds have met, shared by all of them.
    let table: KeyTable
    var last: UInt64?
    /// What the models that load one event's subject states share, decoded once
    /// (`StateReader.leading`): one memo for the session, emptied at each event.
    private let memo = DecodeMemo()

    init(engine: ProjectionEngine, active: [Entry?], table: KeyTable) {
        self.engine = engine
        self.active = active
        self.table = table
    }

    func written(_ event: StoredEvent, data: EventData, _ txn: borrowing Transaction) throws {
        last = event.position
        let readers = engine.readers[data.ordinal]
        guard !readers.isEmpty else { return }
        let recorded = RecordedEvent(event, data: data)
        let subject = table.number(of: recorded.subject)
        let memo = readers.count > 1 ? self.memo : nil
        memo?.entries.removeAll(keepingCapacity: true)
        for index in readers {
            guard let entry = active[index] else { continue }
            let generation = entry.generation
            try entry.fold.apply(recorded, subject: subject, memo: memo) { key in try engine.storage.state(generation, key, txn) }
        }
    }

    func finish(_ txn: borrowing Transaction) throws {
        guard let last else { return }
        for case let entry? in active {
            try engine.write(entry.fold, into: entry.generation, txn)
            var advanced = entry.generation
            advanced.checkpoint = last
            try engine.storage.setServed(entry.model.name, advanced, txn)
        }
    }
}

extension LedgerError {
    /// Wraps an error from the store underneath, or a read model's state that does not decode.
    static func wrapping(_ error: any Error, doing what: String) -> LedgerError {
        if let damaged = error as? StateReader.Damaged {
            return LedgerError(.corruptRecord, "\(what): a read model's state is damaged (\(damaged)); run `ledger rebuild`")
        }
        return .storage(error, doing: what)
    }
}

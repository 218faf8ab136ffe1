import Dispatch
import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore

/// The folds of one append's write transaction, for every fold that is up to date.
///
/// The holders fold runs as each event is written: what it holds decides the
/// `appstore.subject_bound` the log writes right after an event (`derived`). The others fold the
/// transaction's events at its end, in `finish`: the committing thread loads every state and item
/// they touch, the keys are split into parts that fold on every core — decoding, applying,
/// encoding and working out the index entries, pure work on states in memory — and the committing
/// thread puts what changed. Each key's events are applied in position order, by one thread.
final class InlineSession: CommitSession {
    struct Entry {
        let tag: UInt8
    }

    let engine: ProjectionEngine
    let generation: Generation
    /// By fold index: the folds this transaction advances (`nil`: left as it is).
    let active: [Entry?]
    let policy: Policy
    /// The models as this transaction sees them, and where its writes go.
    let overlay: Overlay
    var last: UInt64?
    /// The holders fold, when registered and up to date: folded as each event is written.
    private let holders: (index: Int, states: States<ModelFolding<HoldersModel>>)?
    /// The events the other active folds read, in position order.
    fileprivate private(set) var events: [RecordedEvent] = []
    /// What the event just written calls for (`CommitSession.derived`).
    private var pending: [EventDraft] = []
    /// Fewer events than this fold on the committing thread alone: a one-event append gains
    /// nothing from another thread.
    static let parallelFrom = 64
    /// The keys a transaction's tables make room for at once (a batch of the usual size has
    /// fewer); a larger import grows its tables as they fill.
    static let reservedKeys = 4_096

    /// The keys to make room for in a table of a transaction of `events` events: one per
    /// event, up to `reservedKeys`; none for a small append (under `parallelFrom`), which grows
    /// the few it fills.
    static func room(for events: Int) -> Int { events < parallelFrom ? 0 : min(events, reservedKeys) }

    init(engine: ProjectionEngine, generation: Generation, active: [Entry?], policy: Policy, overlay: Overlay) {
        self.engine = engine
        self.overlay = overlay
        self.generation = generation
        self.active = active
        self.policy = policy
        holders = engine.folds.firstIndex { $0.name == HoldersModel.name }.flatMap { index in
            active[index] == nil ? nil : (index, States<ModelFolding<HoldersModel>>(policy: policy))
        }
    }

    func written(_ event: StoredEvent, data: EventData, _ txn: borrowing Transaction) throws {
        last = event.position
        let readers = engine.readers[data.ordinal]
        guard !readers.isEmpty else { return }
        let recorded = RecordedEvent(event, data: data)
        var others = false
        for index in readers where active[index] != nil {
            guard let holders, index == holders.index else {
                others = true
                continue
            }
            let id = generation.number, tag = active[index]?.tag ?? 0
            try holders.states.apply(recorded, load: { key in try engine.store.state(id, tag: tag, key, txn, overlay) },
                                     loadItem: { item in try engine.store.item(id, tag: tag, item, txn, overlay) })
            if let key = HoldersModel.key(for: recorded), let state = holders.states.held(key),
               let binding = HoldersModel.binding(after: recorded, holders: state) {
                pending.append(try binding.draft())
            }
        }
        if others { events.append(recorded) }
    }

    func derived() -> [EventDraft] {
        defer { pending.removeAll() }
        return pending
    }

    func finish(_ txn: borrowing Transaction, closing: Bool) throws {
        try fold(txn)
        let tails = engine.tails
        if closing || overlay.events >= UInt64(max(tails.limit.load(ordering: .relaxed), 0)) {
            tails.leave(.tail(try engine.storeTail(overlay, txn)))
        } else if overlay.startedOver {
            tails.leave(.tail(overlay.combined))
        } else {
            tails.leave(.writes(overlay.writes, onto: overlay.tail.identity))
        }
    }

    private func fold(_ txn: borrowing Transaction) throws {
        guard let last else { return }
        let store = engine.store, id = generation.number, overlay = self.overlay
        var advanced = generation
        for (index, entry) in active.enumerated() where entry != nil {
            if let position = advanced.folds.firstIndex(where: { $0.name == engine.folds[index].name }) { advanced.folds[position].checkpoint = last }
        }
        // What the folds will read, loaded on this thread: each touched key's state and item,
        // and of a subject whose plan facts or indexed state may change, its facts and indexed
        // states (its entries are worked out from them).
        let folded = active.indices.filter { active[$0] != nil && $0 != holders?.index }
        let indexed = folded.filter { $0 != 0 && engine.indexInputs.contains($0) }
        // Room for the batch's keys from the start: a table grown one doubling at a time hashes
        // every key again at each.
        let room = Self.room(for: events.count)
        var stored: [[String: [UInt8]?]] = active.indices.map { folded.contains($0) ? .init(minimumCapacity: room) : [:] }
        overlay.reserve(events: room)
        var storedItems: [[ItemKey: [UInt8]?]] = Array(repeating: [:], count: active.count)
        func load(_ index: Int, _ key: String) throws {
            guard let tag = active[index]?.tag, stored[index].index(forKey: key) == nil else { return }
            stored[index][key] = .some(try store.state(id, tag: tag, key, txn, overlay))
        }
        for event in events {
            let readers = engine.readers[event.data.ordinal]
            for index in readers where active[index] != nil && index != holders?.index {
                let fold = engine.folds[index]
                guard let key = fold.key(for: event) else { continue }
                try load(index, key)
                if let item = fold.item(for: event).map({ ItemKey(key: key, item: $0) }), storedItems[index].index(forKey: item) == nil,
                   let tag = active[index]?.tag {
                    storedItems[index][item] = .some(try store.item(id, tag: tag, item, txn, overlay))
                }
            }
            if engine.hasIndex, SubjectFacts.planReads.contains(event.type) || readers.contains(where: indexed.contains) {
                for index in [0] + indexed { try load(index, event.subject) }
            }
        }
        // Folded in parts, each on a core of its own.
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let parts = events.count >= Self.parallelFrom && cores > 1 ? min(cores, 8) : 1
        let work = PartsWork((0 ..< parts).map { PartFold(part: Partition(count: parts, index: $0)) })
        let session = SessionInputs(self, folded: folded, indexed: indexed, stored: stored, storedItems: storedItems)
        if parts == 1 {
            work.parts[0].run(session)
        } else {
            DispatchQueue.concurrentPerform(iterations: parts) { work.parts[$0].run(session) }
        }
        // Put on this thread.
        var deferred: Set<String> = []
        for part in work.parts {
            if let failure = part.failure { throw failure }
            for (index, written) in part.written {
                guard let tag = active[index]?.tag else { continue }
                for (key, state) in written { store.put(id, tag: tag, key, state, overlay) }
            }
            for (index, written) in part.items {
                guard let tag = active[index]?.tag else { continue }
                for (item, state) in written { store.putItem(id, tag: tag, item, state, overlay) }
            }
            for (index, key, entries) in part.entries {
                guard let tag = active[index]?.tag else { continue }
                try store.setEntries(entries, of: key, generation: id, tag: tag, txn, overlay)
            }
            deferred.formUnion(part.deferred)
        }
        if let holders, let tag = active[holders.index]?.tag {
            for (key, state) in holders.states.encoded() { store.put(id, tag: tag, key, state, overlay) }
            for (item, state) in holders.states.encodedItems() { store.putItem(id, tag: tag, item, state, overlay) }
        }
        store.setServed(advanced, overlay)
        overlay.head = last
        // The entries of a subject that counts a holding subject's events, or of a holding
        // subject, fold events read from the log (`Attributed`): on this thread, from the
        // states just put.
        if !deferred.isEmpty { try engine.refreshIndexes(of: deferred, in: advanced, policy: policy, txn, overlay) }
    }
}

/// What every part of a transaction's fold reads, and only reads.
struct SessionInputs: @unchecked Sendable {
    // @unchecked: built before the parts start and never changed while they run; the engine's
    // folds and the policy are values, the session's events an array no one appends to then.
    let engine: ProjectionEngine
    let events: [RecordedEvent]
    let policy: Policy
    let folded: [Int]
    let indexed: [Int]
    /// By fold index, each key's (and item's) stored bytes as loaded: `nil` inside when none
    /// is stored.
    let stored: [[String: [UInt8]?]]
    let storedItems: [[ItemKey: [UInt8]?]]

    init(_ session: InlineSession, folded: [Int], indexed: [Int], stored: [[String: [UInt8]?]], storedItems: [[ItemKey: [UInt8]?]]) {
        engine = session.engine
        events = session.events
        policy = session.policy
        (self.folded, self.indexed, self.stored, self.storedItems) = (folded, indexed, stored, storedItems)
    }
}

/// The parts of one transaction's fold.
final class PartsWork: @unchecked Sendable {
    // @unchecked: each part is touched by the one thread that runs it until every part is
    // done (`concurrentPerform` returns); the committing thread reads them only after that.
    let parts: [PartFold]
    init(_ parts: [PartFold]) { self.parts = parts }
}

/// The keys of one part of a transaction: their states folded, encoded, and their index
/// entries worked out, in memory.
final class PartFold {
    let part: Partition
    /// By fold index: the states that changed, the items that changed.
    var written: [(index: Int, states: [(key: String, state: [UInt8])])] = []
    var items: [(index: Int, items: [(key: ItemKey, state: [UInt8])])] = []
    /// By indexed model: a subject's entries.
    var entries: [(index: Int, key: String, entries: [IndexEntry])] = []
    /// Subjects whose entries read the log (`Attributed`): worked out by the committing thread.
    var deferred: [String] = []
    var failure: (any Error)?

    init(part: Partition) { self.part = part }

    func run(_ inputs: SessionInputs) {
        do {
            try fold(inputs)
        } catch {
            failure = error
        }
    }

    private func fold(_ inputs: SessionInputs) throws {
        let engine = inputs.engine
        var states: [Int: any StateFold] = [:]
        let room = InlineSession.room(for: inputs.events.count)
        let keys = room == 0 ? 0 : room / part.count + 1
        for index in inputs.folded { states[index] = engine.folds[index].makeStates(policy: inputs.policy, keys: keys) }
        for event in inputs.events {
            // Most folds are keyed by the subject: whether it is this part's is asked once.
            let subjectHere = part.contains(event.subject)
            for index in engine.readers[event.data.ordinal] {
                guard let fold = states[index], let key = engine.folds[index].key(for: event),
                      key == event.subject ? subjectHere : part.contains(key) else { continue }
                try fold.apply(event, load: { inputs.stored[index][$0] ?? nil }, loadItem: { inputs.storedItems[index][$0] ?? nil })
            }
        }
        var touched: Set<String> = []
        for index in inputs.folded {
            guard let fold = states[index] else { continue }
            let changed = fold.encoded()
            written.append((index, changed))
            items.append((index, fold.encodedItems()))
            // An index entry is worked out from the key's plan facts and its indexed models'
            // states: a write to any other fold's state, or to the facts' activity alone,
            // leaves it as it is.
            guard engine.indexInputs.contains(index) else { continue }
            for (key, _) in changed where index != 0 || fold.readPlan(of: key) { touched.insert(key) }
        }
        guard let facts = states[0] else { return }
        for key in touched {
            if key.hasPrefix(AppStoreSubjectBound.holdingPrefix) {
                deferred.append(key)
                continue
            }
            guard let subjectFacts = try facts.facts(of: key, stored: inputs.stored[0][key] ?? nil) else { continue }
            guard subjectFacts.bound.isEmpty else {
                deferred.append(key)
                continue
            }
            for index in inputs.indexed {
                guard let model = states[index] else { continue }
                let entries = try model.indexEntries(of: key, stored: inputs.stored[index][key] ?? nil, facts: subjectFacts, policy: inputs.policy)
                self.entries.append((index, key, entries))
            }
        }
    }
}

@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore

/// A model as `stats` reports it.
public struct ModelStatus: Sendable, Hashable {
    public var name: String
    /// The last position its served states hold, `nil` when the store has never built it.
    public var checkpoint: UInt64?
    /// The policy the served states were built under.
    public var policyHash: String?
    /// The version that built it.
    public var version: UInt32?
    /// A rebuild is in progress (or was abandoned by a crash).
    public var rebuilding: Bool
    /// Built by another version than this code's, under another policy than the store's, or
    /// behind the log.
    public var stale: Bool
    /// Why it is stale, for people.
    public var staleReason: String?

    /// The `stats --json` shape: checkpoint, policy hash, stale.
    public var json: JSON {
        [
            "checkpoint": checkpoint.map { .integer(Int64(clamping: $0)) } ?? .null,
            "policyHash": policyHash.map(JSON.string) ?? .null,
            "stale": .bool(stale),
        ]
    }
}

/// One problem `verify` found in a read model.
public struct ModelProblem: Sendable, Hashable, CustomStringConvertible {
    public var model: String
    public var key: String?
    public var message: String
    public var description: String { "\(model)\(key.map { " \($0)" } ?? ""): \(message)" }
}

/// A model's answer from its stored state, or word that the key's events must be replayed.
enum StoredAnswer<View> {
    case view(View?)
    case replay
}

/// One subject's answers at a time: every registered model's view, in registration order.
public struct Status: Sendable {
    public struct Answer: Sendable {
        public var model: String
        /// `nil` when the store's policy has no such model (SPEC §4: `status` shows `null`), or
        /// when another code version built its states and this one cannot read them (it is then
        /// in `stale` too, until `ledger rebuild`).
        public var view: (any ModelView)?
    }

    public var subject: String
    public var at: Timestamp
    public var answers: [Answer]
    /// Models whose answer may not follow the current rules: built by another version or
    /// under another policy, or behind the log (`ledger rebuild` or a catch-up mends it).
    public var stale: [String]

    /// SPEC §5's `status --json`.
    public var json: JSON {
        .object(JSONObject([("subject", .string(subject)), ("at", .string(at.description))]
            + answers.map { ($0.model, $0.view.map { .object($0.json) } ?? .null) }))
    }
}

extension Generation {
    /// Whether another version than this code's built `model`'s states or the facts it reads.
    func builtByAnotherVersion(of model: any ReadModel.Type) -> Bool {
        record(model.name)?.version != UInt64(model.version) || record(Fold.factsName)?.version != UInt64(Fold.factsVersion)
    }
}

extension ProjectionEngine {
    /// Each model's served build and whether it is stale.
    func statuses() throws(LedgerError) -> [ModelStatus] {
        do {
            return try read { txn, overlay in
                let served = try store.served(txn, overlay)
                let rebuilding = try store.shadow(txn) != nil
                let policyHash = try servedPolicy(txn).hash
                let head = try store.log.head(txn)
                return models.map { model in
                    let record = served?.record(model.name)
                    let reason = staleness(model.name, model.version, served, policyHash: policyHash, head: head)
                    return ModelStatus(name: model.name, checkpoint: record?.checkpoint, policyHash: record == nil ? nil : served?.policyHash,
                                       version: record.map { UInt32(truncatingIfNeeded: $0.version) }, rebuilding: rebuilding,
                                       stale: reason != nil, staleReason: reason)
                }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the read models' checkpoints")
        }
    }

    /// Why a model's served states must not be taken as current, or `nil`: its own record's,
    /// or the facts' it reads.
    func staleness(_ name: String, _ version: UInt32, _ served: Generation?, policyHash: String, head: UInt64) -> String? {
        guard let served else { return Self.neverBuilt }
        return Self.staleness(version, served.record(name), served.record(Fold.factsName), served: served, policyHash: policyHash, head: head)
    }

    static let neverBuilt = "never built; open the store for writing to build it, or run `ledger rebuild`"

    /// `staleness(_:_:_:policyHash:head:)` of a model whose record and the facts' in `served`
    /// are looked up already.
    static func staleness(_ version: UInt32, _ record: Generation.FoldRecord?, _ facts: Generation.FoldRecord?, served: Generation,
                          policyHash: String, head: UInt64) -> String? {
        guard let record, let facts else { return neverBuilt }
        if record.version != UInt64(version) {
            return "built by version \(record.version), this ledger has \(version); run `ledger rebuild`"
        }
        if facts.version != UInt64(Fold.factsVersion) {
            return "its facts were built by version \(facts.version), this ledger has \(Fold.factsVersion); run `ledger rebuild`"
        }
        if served.policyHash != policyHash {
            return "built under policy \(served.policyHash.prefix(12))…, the store's is \(policyHash.prefix(12))…; run `ledger rebuild`"
        }
        if record.checkpoint != head || facts.checkpoint != head {
            return "its checkpoint is \(min(record.checkpoint, facts.checkpoint)) but the log ends at \(head); open the store for writing to catch it up"
        }
        return nil
    }

    /// Every model's view of `key` at `t` under the store's policy, in one read snapshot. A
    /// model whose served states another version built is answered when they decode, and
    /// answered `nil` when they do not (both named in `stale`). A model whose stored state does
    /// not answer at `t` (`ReadModel.answersFrom`) is answered `nil` and named in `replay`: the
    /// caller replays the key's events for it.
    func status(of key: String, at t: Timestamp) throws(LedgerError) -> (status: Status, replay: [(model: Int, answer: Int)]) {
        do {
            return try read { txn, overlay in
                let (policy, policyHash) = try servedPolicy(txn)
                let head = try store.log.head(txn)
                guard let served = try store.served(txn, overlay) else {
                    var answers: [Status.Answer] = []
                    for model in models where model.shownInStatus {
                        answers.append(Status.Answer(model: model.name, view: try Self.view(model, stateBytes: nil, factsBytes: nil, at: t, policy: policy)))
                    }
                    return (Status(subject: key, at: t, answers: answers, stale: []), [])
                }
                let stored = try store.states(of: key, in: served.number, txn, overlay)
                let factsBytes = served.record(Fold.factsName).flatMap { stored[$0.tagByte] }
                // Decoded once, for every model's view.
                let facts: SubjectFacts
                do {
                    facts = try factsBytes.map { bytes throws(StateDecoder.Damaged) in try SubjectFacts.decode(bytes) } ?? SubjectFacts()
                } catch let error as StateDecoder.Damaged {
                    guard served.record(Fold.factsName)?.version != UInt64(Fold.factsVersion) else { throw Self.damaged(Fold.factsName, key, error) }
                    let shown = models.filter { $0.shownInStatus }
                    return (Status(subject: key, at: t, answers: shown.map { Status.Answer(model: $0.name, view: nil) }, stale: shown.map { $0.name }), [])
                }
                var answers: [Status.Answer] = []
                answers.reserveCapacity(models.count)
                var stale: [String] = []
                var replay: [(model: Int, answer: Int)] = []
                let factsRecord = served.record(Fold.factsName)
                for (index, model) in models.enumerated() where model.shownInStatus {
                    let record = served.record(model.name)
                    if Self.staleness(model.version, record, factsRecord, served: served, policyHash: policyHash, head: head) != nil { stale.append(model.name) }
                    let bytes = record.flatMap { stored[$0.tagByte] }
                    do {
                        answers.append(Status.Answer(model: model.name, view: try Self.view(model, stateBytes: bytes, facts: facts, at: t, policy: policy)))
                    } catch let error as StateDecoder.Damaged {
                        // Another version's states may not decode under this code; this one's must.
                        guard served.builtByAnotherVersion(of: model) else { throw Self.damaged(model.name, key, error) }
                        answers.append(Status.Answer(model: model.name, view: nil))
                    } catch is NeedsReplay {
                        answers.append(Status.Answer(model: model.name, view: nil))
                        replay.append((index, answers.count - 1))
                    }
                }
                return (Status(subject: key, at: t, answers: answers, stale: stale), replay)
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the views of \(key)")
        }
    }

    /// A state that does not decode under the version that built it.
    static func damaged(_ model: String, _ key: String, _ error: StateDecoder.Damaged) -> LedgerError {
        LedgerError(.corruptRecord, "read model \(model) is damaged for \(key) (\(error)); run `ledger rebuild`")
    }

    /// One model's view of `key` at `t` under the store's policy: `.replay` when its stored
    /// state does not answer at `t` (`ReadModel.answersFrom`).
    func view<M: ReadModel>(_ model: M.Type, of key: String, at t: Timestamp) throws(LedgerError) -> StoredAnswer<M.View> {
        do {
            return .view(try read { txn, overlay -> M.View? in
                let policy = try self.policy(txn)
                guard let served = try store.served(txn, overlay), let record = served.record(M.name) else {
                    return try Self.view(model, stateBytes: nil, factsBytes: nil, at: t, policy: policy)
                }
                let stored = try store.states(of: key, in: served.number, txn, overlay)
                let facts = served.record(Fold.factsName).flatMap { stored[$0.tagByte] }
                do {
                    return try Self.view(model, stateBytes: stored[record.tagByte], factsBytes: facts, at: t, policy: policy)
                } catch let error as StateDecoder.Damaged {
                    guard served.builtByAnotherVersion(of: model) else { throw Self.damaged(M.name, key, error) }
                    throw LedgerError(.unsupportedFormat, "read model \(M.name) was built by version \(record.version), whose states this ledger (version \(M.version)) cannot read; run `ledger rebuild`")
                }
            })
        } catch is NeedsReplay {
            return .replay
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the \(M.name) view of \(key)")
        }
    }

    /// Every key of a fold's served states (`"facts"` or a model's name) with its encoded
    /// state, keys in UTF-8 byte order (tools and tests compare builds byte for byte).
    func servedStates(of name: String) throws(LedgerError) -> [(key: String, state: [UInt8])] {
        do {
            return try read { txn, overlay in
                guard let served = try store.served(txn, overlay), let record = served.record(name) else { return [] }
                var states: [(key: String, state: [UInt8])] = []
                try store.forEachState(in: served.number, txn, overlay) { key, tag, state in
                    if tag == record.tagByte { states.append((key, Array(state))) }
                }
                return states.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the states of \(name)")
        }
    }

    /// Calls `body` with every key's view in `model` at `t`, from one read snapshot, without
    /// holding every state in memory (for summaries over the whole store): the keys that hold
    /// a state of the model or facts. A key whose stored state does not answer at `t` is
    /// answered after the others, by `replay`.
    func forEachView<M: ReadModel>(of model: M.Type, at t: Timestamp, replay: (String) throws(LedgerError) -> M.View?,
                                   _ body: (String, M.View) throws -> Void) throws(LedgerError) {
        var replayed: [String] = []
        do {
            try read { txn, overlay in
                let policy = try self.policy(txn)
                guard let served = try store.served(txn, overlay), let record = served.record(M.name), let facts = served.record(Fold.factsName) else { return }
                // A key is a subject when a fold keyed by subject holds a state of it; a model
                // keyed otherwise (the holders of a subscription) answers for its own keys only.
                let subjectTags = Set(served.folds.filter { record in folds.first { $0.name == record.name }?.keyedBySubject ?? false }.map(\.tagByte))
                var current: String?
                var found: [UInt8: UnsafeRawBufferPointer] = [:]
                func flush(_ txn: borrowing Transaction) throws {
                    guard let key = current else { return }
                    defer { found.removeAll(keepingCapacity: true) }
                    let answers = M.keyedBySubject ? found.keys.contains(where: subjectTags.contains) : found[record.tagByte] != nil
                    guard answers else { return }
                    // A holding subject bound to a subject is answered with that subject.
                    if M.keyedBySubject, try Attributed(engine: self, generation: served, overlay: overlay).boundSubject(ofHolding: key, txn) != nil { return }
                    let view: M.View?
                    do {
                        view = try Self.view(model, stateBytes: found[record.tagByte], factsBytes: found[facts.tagByte], at: t, policy: policy)
                    } catch is NeedsReplay {
                        replayed.append(key)
                        return
                    }
                    if let view { try body(key, view) }
                }
                try store.forEachState(in: served.number, txn, overlay) { key, tag, state in
                    if key != current {
                        try flush(txn)
                        current = key
                    }
                    found[tag] = state
                }
                try flush(txn)
            }
            for key in replayed {
                if let view = try replay(key) { try body(key, view) }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading every view of \(M.name)")
        }
    }

    /// The entries of `model`'s time-ordered index with from ≤ at < to, sorted by (at, key,
    /// kind, detail), strings by their UTF-8 bytes.

    func entries(of model: String, from: Timestamp, to: Timestamp) throws(LedgerError) -> [(key: String, entry: IndexEntry, detail: JSON)] {
        do {
            return try read { txn, overlay in
                guard let served = try store.served(txn, overlay), let record = served.record(model) else { return [] }
                var found: [(key: String, entry: IndexEntry, detail: JSON)] = []
                try store.entries(generation: served.number, tag: record.tagByte, from: from, to: to, txn, overlay) { key, entry, detail in found.append((key, entry, detail)) }
                return Self.sorted(found)
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the index of \(model)")
        }
    }

    /// Index entries sorted by (at, key, kind, detail), strings by their UTF-8 bytes.
    static func sorted(_ entries: [(key: String, entry: IndexEntry, detail: JSON)]) -> [(key: String, entry: IndexEntry, detail: JSON)] {
        entries.sorted { a, b in
            if a.entry.at != b.entry.at { return a.entry.at < b.entry.at }
            if a.key != b.key { return a.key.utf8.lexicographicallyPrecedes(b.key.utf8) }
            if a.entry.kind != b.entry.kind { return a.entry.kind.utf8.lexicographicallyPrecedes(b.entry.kind.utf8) }
            return a.entry.detail.utf8.lexicographicallyPrecedes(b.entry.detail.utf8)
        }
    }


    /// Checks every fold's served states against a fresh fold of the whole log, state by
    /// state, byte for byte, in one read snapshot, and each indexed model's entries against
    /// those the fresh states give; and that none is stale or behind. Returns what differs
    /// (at most `limit` problems per fold).
    ///
    /// Memory stays bounded however many subjects the store holds: the keys are checked in
    /// parts of about `keysPerPass` subjects, each part a fold of the whole log of its own.
    func verify(limit: Int = 20, keysPerPass: Int = 100_000, progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> [ModelProblem] {
        do {
            let (policy, subjects) = try store.env.read { txn in (try servedPolicy(txn).policy, try store.log.subjectCount(txn)) }
            let perPass = UInt64(max(keysPerPass, 1))
            let passes = max(1, Int((subjects + perPass - 1) / perPass))
            var problems: [ModelProblem] = []
            for pass in 0 ..< passes {
                let found = try verify(Partition(count: passes, index: pass), policy: policy, limit: limit, checkingStaleness: pass == 0) { step in
                    var step = step
                    (step.done, step.total) = (UInt64(pass) * step.total + step.done, UInt64(passes) * step.total)
                    progress(step)
                }
                if pass == 0 && found.contains(where: { $0.message.hasPrefix("stale: ") || $0.model == "models" && $0.message.hasPrefix("never built") }) {
                    return found
                }
                problems += found
            }
            // At most `limit` per fold, over every part.
            var counts: [String: Int] = [:]
            return problems.filter { problem in
                counts[problem.model, default: 0] += 1
                return counts[problem.model, default: 0] <= limit
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "verifying the read models")
        }
    }

    /// `verify` of the keys in `part`.
    private func verify(_ part: Partition, policy servedPolicy: Policy, limit: Int, checkingStaleness: Bool,
                        progress: (RebuildProgress) -> Void) throws -> [ModelProblem] {
        // Folded with no transaction held (see `foldLog`), then compared in one snapshot
        // with the events appended meanwhile folded in too.
        let (folded, through) = try foldLog(policy: servedPolicy, part: part, progress: progress)
        return try read { txn, overlay in
            let head = try store.log.head(txn)
            try foldEvents(Array(folds.indices), into: folded, after: through, through: head, txn)
            let (policy, policyHash) = try self.servedPolicy(txn)
            guard let served = try store.served(txn, overlay) else {
                return head == 0 ? [] : [ModelProblem(model: "models", message: "never built; open the store for writing to build them")]
            }
            var problems: [ModelProblem] = []
            if checkingStaleness {
                for model in models {
                    if let reason = staleness(model.name, model.version, served, policyHash: policyHash, head: head) {
                        problems.append(ModelProblem(model: model.name, message: "stale: \(reason)"))
                    }
                }
                guard problems.isEmpty else { return problems }
            }
            var stored: [UInt8: [(key: String, state: [UInt8])]] = [:]
            try store.forEachState(in: served.number, txn, overlay) { key, tag, state in
                if part.contains(key) { stored[tag, default: []].append((key, Array(state))) }
            }
            for (index, fold) in folds.enumerated() {
                guard let record = served.record(fold.name) else { continue }
                let expected = folded[index].encoded().sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                problems += compare(fold.name, expected: expected, stored: stored[record.tagByte] ?? [], limit: limit)
            }
            // Items, by the key they are stored under.
            var storedItems: [UInt8: [(key: [UInt8], state: [UInt8])]] = [:]
            var damagedKeys = 0
            try store.forEachItem(in: served.number, txn, overlay) { key, state in
                guard let (_, tag) = ModelSchema.itemLabel(key), let owner = ModelSchema.itemOwner(key) else {
                    damagedKeys += 1
                    return
                }
                if part.contains(owner) { storedItems[tag, default: []].append((Array(key), Array(state))) }
            }
            if damagedKeys > 0 && checkingStaleness {
                problems.append(ModelProblem(model: "models", message: "\(damagedKeys) item keys are damaged; run `ledger rebuild`"))
            }
            for (index, fold) in folds.enumerated() {
                guard let record = served.record(fold.name) else { continue }
                let expected = folded[index].encodedItems().map { (key: ModelSchema.itemKey(served.number, tag: record.tagByte, $0.key), state: $0.state) }
                problems += compareItems(fold.name, expected: expected, stored: storedItems[record.tagByte] ?? [], limit: limit)
            }
            for (index, model) in models.enumerated() where model.isIndexed {
                guard let record = served.record(model.name) else { continue }
                problems += try compareIndex(model, index + 1, folded, served, record, part: part, policy: policy, limit: limit, txn, overlay)
            }
            return problems
        }
    }

    /// Stored items against expected ones, by their stored keys' bytes.
    private func compareItems(_ name: String, expected: [(key: [UInt8], state: [UInt8])], stored: [(key: [UInt8], state: [UInt8])],
                              limit: Int) -> [ModelProblem] {
        var problems: [ModelProblem] = []
        func report(_ key: [UInt8], _ message: String) {
            guard problems.count < limit else { return }
            let label = key.withUnsafeBytes { ModelSchema.itemLabel($0)?.label } ?? "an item"
            problems.append(ModelProblem(model: name, key: label, message: message))
        }
        let expected = expected.sorted { $0.key.precedesInByteOrder($1.key) }
        let stored = stored.sorted { $0.key.precedesInByteOrder($1.key) }
        var i = 0, j = 0
        while i < expected.count || j < stored.count {
            if j == stored.count || (i < expected.count && expected[i].key.precedesInByteOrder(stored[j].key)) {
                report(expected[i].key, "missing from the served model")
                i += 1
            } else if i == expected.count || stored[j].key.precedesInByteOrder(expected[i].key) {
                report(stored[j].key, "in the served model but not in a fresh rebuild")
                j += 1
            } else {
                if expected[i].state != stored[j].state { report(expected[i].key, "differs from a fresh rebuild") }
                i += 1
                j += 1
            }
        }
        return problems
    }

    /// Stored states against expected ones, both in key order.
    private func compare(_ name: String, expected: [(key: String, state: [UInt8])], stored: [(key: String, state: [UInt8])],
                         limit: Int) -> [ModelProblem] {
        var problems: [ModelProblem] = []
        func report(_ key: String, _ message: String) {
            if problems.count < limit { problems.append(ModelProblem(model: name, key: key, message: message)) }
        }
        let stored = stored.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        var i = 0, j = 0
        while i < expected.count || j < stored.count {
            if j == stored.count || (i < expected.count && expected[i].key.utf8.lexicographicallyPrecedes(stored[j].key.utf8)) {
                report(expected[i].key, "missing from the served model")
                i += 1
            } else if i == expected.count || stored[j].key.utf8.lexicographicallyPrecedes(expected[i].key.utf8) {
                report(stored[j].key, "in the served model but not in a fresh rebuild")
                j += 1
            } else {
                if expected[i].state != stored[j].state { report(expected[i].key, "differs from a fresh rebuild") }
                i += 1
                j += 1
            }
        }
        return problems
    }

    /// An indexed model's stored entries against those the fresh states give.
    private func compareIndex(_ model: any ReadModel.Type, _ index: Int, _ folded: [any StateFold], _ served: Generation,
                              _ record: Generation.FoldRecord, part: Partition, policy: Policy, limit: Int, _ txn: borrowing Transaction, _ overlay: Overlay) throws -> [ModelProblem] {
        let states = Dictionary(folded[index].encoded(), uniquingKeysWith: { first, _ in first })
        let facts = Dictionary(folded[0].encoded(), uniquingKeysWith: { first, _ in first })
        var expected: Set<String> = []
        // With the served holders: a bound subject's entries fold its holding subject's events.
        let attributed = Attributed(engine: self, generation: served, overlay: overlay)
        for key in Set(states.keys).union(facts.keys) {
            let entries = try states[key].withOptionalBytes { state in
                try facts[key].withOptionalBytes { facts in try attributed.indexEntries(model, of: key, stateBytes: state, factsBytes: facts, policy: policy, txn) }
            }
            for entry in entries { expected.insert("\(key) \(entry.at) \(entry.kind) \(entry.detail)") }
        }
        var stored: Set<String> = []
        try store.allEntries(generation: served.number, tag: record.tagByte, txn, overlay) { key, entry in
            if part.contains(key) { stored.insert("\(key) \(entry.at) \(entry.kind) \(entry.detail)") }
        }
        var problems: [ModelProblem] = []
        for entry in expected.subtracting(stored).sorted().prefix(limit) { problems.append(ModelProblem(model: model.name, message: "index entry missing: \(entry)")) }
        for entry in stored.subtracting(expected).sorted().prefix(limit) { problems.append(ModelProblem(model: model.name, message: "stray index entry: \(entry)")) }
        return problems
    }

    /// Every head position committed from now on, starting with the current one.
    func positions() throws(LedgerError) -> AsyncStream<UInt64> {
        let head: UInt64
        do {
            head = try store.env.read { txn in try store.log.head(txn) }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the log's head")
        }
        return broadcaster.stream(current: head)
    }
}

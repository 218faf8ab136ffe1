import LMDB
import LedgerCore
import LedgerStore

/// A model as `stats` reports it.
public struct ModelStatus: Sendable, Hashable {
    public var name: String
    /// The served generation, `nil` when the store has never built the model.
    public var served: Generation?
    /// A rebuild in progress (or abandoned by a crash) has this shadow.
    public var shadow: Generation?
    /// The served generation was built by another code version or policy than the current ones.
    public var stale: Bool
    /// Why it is stale, for people.
    public var staleReason: String?

    /// The `stats --json` shape: checkpoint, policy hash, stale.
    public var json: JSON {
        [
            "checkpoint": served.map { .integer(Int64($0.checkpoint)) } ?? .null,
            "policyHash": served.map { .string($0.policyHash) } ?? .null,
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

extension ProjectionEngine {
    /// Each model's served generation and whether it is stale.
    public func statuses() throws(LedgerError) -> [ModelStatus] {
        do {
            return try storage.env.read { txn in
                let policyHash = try policyHash(txn)
                return try models.map { model in
                    let served = try storage.served(model.name, txn)
                    let reason = staleness(model, served, policyHash: policyHash)
                    return ModelStatus(name: model.name, served: served, shadow: try storage.shadow(model.name, txn), stale: reason != nil, staleReason: reason)
                }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the read models' checkpoints")
        }
    }

    /// Why the served generation must not be taken as current, or `nil`.
    func staleness(_ model: ModelRunner, _ served: Generation?, policyHash: String) -> String? {
        guard let served else { return "never built; run `ledger rebuild \(model.name)`" }
        if served.codeVersion != model.codeVersion {
            return "built by code version \(served.codeVersion), this ledger has \(model.codeVersion); run `ledger rebuild \(model.name)`"
        }
        if served.policyHash != policyHash {
            return "built under policy \(served.policyHash.prefix(12))…, the store's is \(policyHash.prefix(12))…; run `ledger rebuild \(model.name)`"
        }
        return nil
    }

    /// Every model's view of `key` at `t` under the store's policy, in one read snapshot, with
    /// the names of models that are stale or behind the log. A stale model is still answered
    /// when its state decodes; one built by another code version whose state does not is left
    /// out of `views` (and named in `stale`).
    public func views(of key: String, at t: Timestamp) throws(LedgerError) -> (views: [(model: String, view: JSONObject?)], stale: [String]) {
        do {
            return try storage.env.read { txn in
                let context = try queryContext(txn)
                var stale: [String] = []
                // The states lie in the map, unchanged until this read transaction ends.
                let memo = DecodeMemo(statesStayInPlace: true)
                var views: [(model: String, view: JSONObject?)] = []
                views.reserveCapacity(models.count)
                // The states' places on the stack; each model's runner and generation read in
                // place by index, not copied out.
                try withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer?.self, capacity: models.count) { states in
                    try storage.states(of: key, in: context.served, txn, into: states)
                    for index in models.indices {
                        if context.stale[index] { stale.append(models[index].name) }
                        do throws(StateReader.Damaged) {
                            views.append((model: models[index].name, view: try models[index].viewJSON(states[index], t, context.policy, memo)))
                        } catch {
                            let failure = storage.unreadable(models[index].name, error, served: context.served[index], codeVersion: models[index].codeVersion)
                            if failure.code == .unsupportedFormat { continue }
                            throw failure
                        }
                    }
                }
                return (views, stale)
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the views of \(key)")
        }
    }

    /// One model's typed view of `key` at `t` under the store's policy.
    public func view<P: Projection>(_ projection: P.Type, of key: String, at t: Timestamp) throws(LedgerError) -> P.View {
        do {
            return try storage.env.read { txn in
                let context = try queryContext(txn)
                let policy = context.policy
                let index = models.firstIndex { $0.name == P.name }
                guard let served = try index.map({ context.served[$0] }) ?? storage.served(P.name, txn),
                      let bytes = try txn.get(storage.states, key: ModelSchema.stateKey(served, key))
                else { return P.view(of: P.State(), at: t, policy: policy) }
                do throws(StateReader.Damaged) {
                    return P.view(of: try P.State.decode(bytes), at: t, policy: policy)
                } catch {
                    throw storage.unreadable(P.name, error, served: served, codeVersion: P.codeVersion)
                }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the \(P.name) view of \(key)")
        }
    }

    /// Every key of a model's served generation with its encoded state, in key order (for
    /// tools and tests that compare builds byte for byte).
    public func servedStates(of model: String) throws(LedgerError) -> [(key: String, state: [UInt8])] {
        do {
            return try storage.env.read { txn in
                guard let served = try storage.served(model, txn) else { return [] }
                var states: [(key: String, state: [UInt8])] = []
                try storage.forEachState(in: served, txn) { key, state in
                    states.append((String(decoding: key, as: UTF8.self), Array(state)))
                }
                return states
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading the states of \(model)")
        }
    }

    /// Calls `body` with every subject's view in `model`'s served generation at `t`, in key
    /// order, from one read snapshot, without holding all states in memory (for summaries over
    /// the whole store). Subjects the model holds no state for are not visited.
    /// - Throws: `LedgerError.invalidEvent` for an unknown model name; what `body` throws, wrapped.
    public func forEachView(of model: String, at t: Timestamp, _ body: (String, JSONObject) throws -> Void) throws(LedgerError) {
        guard let runner = models.first(where: { $0.name == model }) else {
            throw LedgerError(.invalidEvent, "there is no read model named \(model); the models are \(modelNames.joined(separator: ", "))")
        }
        do {
            try storage.env.read { txn in
                let policy = try self.policy(txn)
                guard let served = try storage.served(model, txn) else { return }
                try storage.forEachState(in: served, txn) { key, state in
                    let view: JSONObject
                    do throws(StateReader.Damaged) {
                        guard let served = try runner.viewJSON(state, t, policy, nil) else { return }
                        view = served
                    } catch {
                        throw storage.unreadable(model, error, served: served, codeVersion: runner.codeVersion)
                    }
                    try body(String(decoding: key, as: UTF8.self), view)
                }
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "reading every view of \(model)")
        }
    }

    /// How many states the store holds across every generation (served, shadow and garbage).
    public func storedStateCount() throws(LedgerError) -> Int {
        do {
            return try storage.env.read { txn in try txn.count(storage.states) }
        } catch {
            throw LedgerError.wrapping(error, doing: "counting states")
        }
    }

    /// Checks every served model against a fresh fold of the whole log, state by state, byte
    /// for byte, in one read snapshot; and that none is stale or behind. Returns what differs
    /// (at most `limit` problems per model).
    public func verify(limit: Int = 20, progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> [ModelProblem] {
        do {
            return try storage.env.read { txn in
                let head = try storage.head(txn)
                let policyHash = try policyHash(txn)
                let folded = try foldLog(models, through: head, txn, progress: progress)
                var problems: [ModelProblem] = []
                for (model, fold) in zip(models, folded.folds) {
                    guard let served = try storage.served(model.name, txn) else {
                        problems.append(ModelProblem(model: model.name, message: "never built; run `ledger rebuild \(model.name)`"))
                        continue
                    }
                    if let reason = staleness(model, served, policyHash: policyHash) {
                        problems.append(ModelProblem(model: model.name, message: "stale: \(reason)"))
                    }
                    if served.checkpoint != head {
                        problems.append(ModelProblem(model: model.name, message: "its checkpoint is \(served.checkpoint) but the log ends at \(head); open the store for writing to catch it up"))
                        continue
                    }
                    problems += try compare(model, fold, served, limit: limit, txn)
                }
                return problems
            }
        } catch {
            throw LedgerError.wrapping(error, doing: "verifying the read models")
        }
    }

    /// A served generation against a fold, merged in the order the store keeps the keys.
    private func compare(_ model: ModelRunner, _ fold: any StateFold, _ served: Generation, limit: Int,
                         _ txn: borrowing Transaction) throws -> [ModelProblem] {
        let expected = fold.encodedStates().storedOrder(in: served)
        var problems: [ModelProblem] = []
        func report(_ key: [UInt8], _ message: String) {
            guard problems.count < limit else { return }
            problems.append(ModelProblem(model: model.name, key: String(decoding: key, as: UTF8.self), message: message))
        }
        var index = 0
        try storage.forEachState(in: served, txn) { stored, state in
            let key = Array(stored), storedKey = ModelSchema.stateKey(served, key)
            while index < expected.count, expected[index].stored.precedesInByteOrder(storedKey) {
                report(expected[index].key, "missing from the served model")
                index += 1
            }
            if index < expected.count, expected[index].key == key {
                if !expected[index].state.elementsEqual(state) { report(key, "differs from a fresh rebuild") }
                index += 1
            } else {
                report(key, "in the served model but not in a fresh rebuild")
            }
        }
        while index < expected.count {
            report(expected[index].key, "missing from the served model")
            index += 1
        }
        return problems
    }

    /// Every head position committed from now on, starting with the current one: for
    /// embedders that react to new events without polling. Positions from appends made by
    /// other processes are not seen until this process appends or reads.
    public func positions() -> AsyncStream<UInt64> {
        let head = (try? storage.env.read { txn in try storage.head(txn) }) ?? 0
        return broadcaster.stream(current: head)
    }
}

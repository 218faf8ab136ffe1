import LedgerCore

/// Read models folded from scratch in memory, one event at a time: how a rebuild folds the
/// log, open to events read from anywhere else (the benchmark feeds it events read back from
/// SQLite, so that both rebuilds run the very same projectors).
///
/// ```swift
/// let fold = ReadModelFold()
/// for event in events { try fold.apply(event) }      // in position order
/// try fold.forEachState { model, key, state in … }   // each key's encoded state
/// ```
public final class ReadModelFold {
    let runners: [ModelRunner]
    let folds: [any StateFold]
    /// Every event type some model reads; others may be skipped before decoding.
    public let eventTypes: Set<String>

    /// Empty states of `projections`.
    public convenience init(_ projections: [any Projection.Type] = ReadModels.all) {
        self.init(projections.map { ModelRunner($0) })
    }

    init(_ runners: [ModelRunner]) {
        self.runners = runners
        folds = runners.map { $0.makeFold() }
        eventTypes = runners.reduce(into: []) { $0.formUnion($1.eventTypes) }
    }

    /// Folds one event into every model that reads it. Events must come in position order.
    public func apply(_ event: RecordedEvent) throws {
        for (runner, fold) in zip(runners, folds) where runner.eventTypes.contains(event.type) {
            try fold.apply(event) { _ in nil }
        }
    }

    /// Keys held, over all models.
    public var stateCount: Int { folds.reduce(0) { $0 + $1.count } }

    /// Every model's states, model by model, keys in byte order (the order a store keeps them).
    public func forEachState(_ body: (_ model: String, _ key: [UInt8], _ state: [UInt8]) throws -> Void) rethrows {
        for (runner, fold) in zip(runners, folds) {
            for (key, state) in fold.encodedStates() { try body(runner.name, key, state) }
        }
    }
}

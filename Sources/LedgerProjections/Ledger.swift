import LMDB
import LedgerCore
import LedgerStore

/// A store with its read models: the event log plus the projection engine, as apps embed it
/// and as the `ledger` command uses it.
///
/// ```swift
/// let ledger = try Ledger(path: "customers.lmdb")
/// try ledger.append([LedgerEvent(subject: "user-42", occurredAt: .now(), source: .appstore, data: purchase.eventData)])
/// let entitlement = try ledger.view(EntitlementProjection.self, of: "user-42")
/// print(entitlement.planState)   // read-your-writes: the append's transaction updated it
/// ```
///
/// Opening a store for writing records `policy` (default: the reference policy) if the store
/// has none yet, and catches every registered model up to the head of the log (a model added
/// since the store was last opened, or appends made by a process without it).
public final class Ledger: Sendable {
    /// The event log underneath.
    public let log: EventLog
    /// The read models' engine.
    public let engine: ProjectionEngine

    /// Opens (or creates) the store at `path` with `projections` registered.
    /// - Throws: `LedgerError`.
    public init(path: String, projections: [any Projection.Type] = ReadModels.all, policy: Policy? = nil,
                options: EventLog.Options = EventLog.Options()) throws(LedgerError) {
        var options = options
        options.observer = { env in try ProjectionEngine(env: env, projections: projections) }
        let log = try EventLog(path: path, options: options)
        guard let engine = log.observer as? ProjectionEngine else {
            throw LedgerError(.storage, "the projection engine did not start; this is a bug in the ledger")
        }
        self.log = log
        self.engine = engine
        if !options.readOnly {
            if try log.policy() == nil { try log.setPolicy(policy ?? .reference) }
            try engine.catchUp()
        }
    }

    /// Finishes queued appends and stops the writer; subscriptions end.
    public func close() {
        log.close()
        engine.broadcaster.finish()
    }

    /// Appends typed events atomically (see `EventLog.append`); the read models are updated in
    /// the same transaction, so a view read after this returns reflects them.
    @discardableResult
    public func append(_ events: [LedgerEvent], expecting: [String: ExpectedVersion] = [:]) throws(LedgerError) -> AppendResult {
        try log.append(try events.map { event throws(LedgerError) in try event.draft() }, expecting: expecting)
    }

    /// Appends typed events, suspending until they are durable.
    @discardableResult
    public func append(_ events: [LedgerEvent], expecting: [String: ExpectedVersion] = [:]) async throws(LedgerError) -> AppendResult {
        try await log.append(try events.map { event throws(LedgerError) in try event.draft() }, expecting: expecting)
    }

    /// One model's view of `subject` at `t` (default now). A subject the store has never seen
    /// gets the view of an empty state.
    public func view<P: Projection>(_ projection: P.Type, of subject: String, at t: Timestamp = .now()) throws(LedgerError) -> P.View {
        try engine.view(projection, of: subject, at: t)
    }

    /// The store's policy (the reference policy for a store made before policies were recorded).
    public func policy() throws(LedgerError) -> Policy {
        try log.policy() ?? .reference
    }

    /// Every head position from now on, as appends in this process commit them.
    public func positions() -> AsyncStream<UInt64> { engine.positions() }

    /// Waits until the log's head has reached `position`.
    public func waitForPosition(_ position: UInt64) async {
        for await head in positions() where head >= position { return }
    }
}

/// The read models this package ships, in the order `status` shows them.
public enum ReadModels {
    public static let all: [any Projection.Type] = [EntitlementProjection.self, RetentionProjection.self, BadgeProjection.self]
}

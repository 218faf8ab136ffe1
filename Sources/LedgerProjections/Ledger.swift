@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore

/// A store with its read models: the event log and the engine that keeps the models in it,
/// as apps embed it and as the `ledger` command uses it.
///
/// ```swift
/// let ledger = try Ledger(path: "customers.lmdb")
/// try ledger.append([LedgerEvent(subject: "user-42", occurredAt: .now(), source: .appstore, data: purchase.eventData)])
/// let entitlement = try ledger.view(EntitlementModel.self, of: "user-42")
/// print(entitlement?.planState)   // read-your-writes: the append's transaction updated it
/// ```
///
/// Opening a store for writing records `policy` (default: the reference policy) if the store
/// has none yet, and catches every registered model up to the head of the log (a model added
/// since the store was last opened, or appends made by a process without it).
///
/// Safe for many threads: appends go through one leading thread at a time (group commit), reads run in
/// read transactions of their own.
public final class Ledger: Sendable {
    /// The event log underneath.
    @_spi(Storage) public let log: EventLog
    let engine: ProjectionEngine
    /// Opened with `EventLog.Options.readOnly`: reads only.
    let readOnly: Bool

    /// Opens (or creates) the store at `path` with `models` registered.
    /// - Throws: `LedgerError`.
    public init(path: String, models: [any ReadModel.Type] = ReadModels.all, policy: Policy? = nil,
                options: EventLog.Options = EventLog.Options()) throws(LedgerError) {
        var options = options
        let tailLimit = max(options.modelTailLimit, 0)
        options.observer = { env in try ProjectionEngine(env: env, models: models, tailLimit: tailLimit) }
        let log = try EventLog(path: path, options: options)
        guard let engine = log.observer as? ProjectionEngine else {
            throw LedgerError(.storage, "the projection engine did not start; this is a bug in the ledger")
        }
        self.log = log
        self.engine = engine
        readOnly = options.readOnly
        if !options.readOnly {
            if try log.policy() == nil { try log.setPolicy(policy ?? .reference) }
            try engine.catchUp()
        }
    }

    /// Flushes commits to disk: needed only for a store opened with
    /// `EventLog.Options.durability = .noSync`, whose appends return before the fsync.
    public func sync() throws(LedgerError) { try log.sync() }

    /// Stores the read models' latest writes, kept in memory until `modelTailLimit` events
    /// gather or the store closes (after a crash, opening folds those events again).
    public func storeModels() throws(LedgerError) {
        try requireWritable("storing the read models")
        try engine.storeTail()
    }

    /// Finishes queued appends and stops the writer; subscriptions end.
    public func close() {
        log.close()
        engine.broadcaster.finish()
    }

    /// The registered models' names, in the order `status` shows them.
    public var modelNames: [String] { engine.modelNames }

    // MARK: Writing

    /// Appends typed events atomically (see `EventLog.append`); the read models are updated in
    /// the same transaction, so a view read after this returns reflects them.
    @discardableResult
    public func append(_ events: [LedgerEvent], expecting: [String: ExpectedVersion] = [:]) throws(LedgerError) -> AppendResult {
        try log.append(try Self.drafts(events), expecting: expecting)
    }

    /// Appends typed events, suspending until they are durable.
    @discardableResult
    public func append(_ events: [LedgerEvent], expecting: [String: ExpectedVersion] = [:]) async throws(LedgerError) -> AppendResult {
        try await log.append(try Self.drafts(events), expecting: expecting)
    }

    /// Appends drafts — events whose payload is already encoded (`EventCatalog.encode`), or read
    /// back from another store — atomically; see `append(_:expecting:)` for typed events.
    /// A rejected batch's error names the failing event's `index`.
    @discardableResult @_disfavoredOverload
    public func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion] = [:]) throws(LedgerError) -> AppendResult {
        try log.append(drafts, expecting: expecting)
    }

    /// Appends drafts, suspending until they are durable.
    @discardableResult @_disfavoredOverload
    public func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion] = [:]) async throws(LedgerError) -> AppendResult {
        try await log.append(drafts, expecting: expecting)
    }

    /// The events' drafts; a bad one's error names its index in the batch.
    private static func drafts(_ events: [LedgerEvent]) throws(LedgerError) -> [EventDraft] {
        var drafts: [EventDraft] = []
        drafts.reserveCapacity(events.count)
        for (index, event) in events.enumerated() {
            do {
                drafts.append(try event.draft())
            } catch {
                var error = error
                error.index = error.index ?? index
                throw error
            }
        }
        return drafts
    }

    // MARK: Reading

    /// Every model's view of `subject` at `t` (default now) under the store's policy: what
    /// `ledger status` shows. A subject the store has never seen gets the views of no events.
    ///
    /// The stored states answer the present and the future; for a time before a subject's
    /// latest facts (`ReadModel.answersFrom`) its events are replayed from the log instead.
    ///
    /// With `knownAt`, the views are worked out from the events the ledger had recorded by then
    /// (bitemporal: what support would have seen at that moment), replayed from the log.
    public func status(of subject: String, at t: Timestamp = .now(), knownAt: KnownAt? = nil) throws(LedgerError) -> Status {
        if let knownAt {
            let shown = engine.models.filter { $0.shownInStatus }
            let views = Replay.views(of: subject, from: try recordedEvents(of: subject, knownAt: knownAt), at: t, models: shown, policy: try policy())
            var status = Status(subject: subject, at: t, answers: views.map { Status.Answer(model: $0.model, view: $0.view) }, stale: [])
            for index in status.answers.indices {
                if let view = status.answers[index].view, !type(of: view).personalFields.isEmpty {
                    status.answers[index].view = try revealed(view, of: subject)
                }
            }
            return status
        }
        var (status, replay) = try engine.status(of: subject, at: t)
        if !replay.isEmpty {
            let views = Replay.views(of: subject, from: try recordedEvents(of: subject), at: t, models: replay.map { engine.models[$0.model] }, policy: try policy())
            for (index, view) in zip(replay, views) { status.answers[index.answer].view = view.view }
        }
        for index in status.answers.indices {
            if let view = status.answers[index].view, !type(of: view).personalFields.isEmpty {
                status.answers[index].view = try revealed(view, of: subject)
            }
        }
        return status
    }

    /// A view with its personal fields opened (a read model keeps them sealed, as it folded them).
    func revealed<V: ModelView>(_ view: V, of subject: String) throws(LedgerError) -> V {
        try view.revealing { (value: String, pointer: String) throws(LedgerError) in try log.reveal(value, of: subject, field: pointer) }
    }

    /// One model's view of `subject` at `t` (default now); `nil` when the store's policy has
    /// no such model. With `knownAt`, from the events recorded by then (see `status`); a model
    /// keyed otherwise than by subject (`ReadModel.keyedBySubject`) answers from its stored
    /// state, `knownAt` aside.
    public func view<M: ReadModel>(_ model: M.Type, of subject: String, at t: Timestamp = .now(), knownAt: KnownAt? = nil) throws(LedgerError) -> M.View? {
        let view: M.View? = if let knownAt, M.keyedBySubject {
            Replay.view(model, of: subject, from: try recordedEvents(of: subject, knownAt: knownAt), at: t, policy: try policy())
        } else {
            switch try engine.view(model, of: subject, at: t) {
            case .view(let view): view
            case .replay: Replay.view(model, of: subject, from: try recordedEvents(of: subject), at: t, policy: try policy())
            }
        }
        guard let view, !M.View.personalFields.isEmpty else { return view }
        return try revealed(view, of: subject)
    }

    /// Every subject's view in `model` at `t`, one at a time: from one snapshot, but for the
    /// subjects whose stored state does not answer at `t` (`ReadModel.answersFrom`), which
    /// come last, their events replayed.
    public func forEachView<M: ReadModel>(of model: M.Type, at t: Timestamp = .now(), _ body: (String, M.View) throws -> Void) throws(LedgerError) {
        try engine.forEachView(of: model, at: t, replay: { subject throws(LedgerError) in
            Replay.view(model, of: subject, from: try recordedEvents(of: subject), at: t, policy: try policy())
        }, { subject, view in try body(subject, M.View.personalFields.isEmpty ? view : try revealed(view, of: subject)) })
    }

    /// `subject`'s events, decoded, personal fields sealed as the log stores them: what a
    /// replay folds, so that its views equal the stored states' (`revealed` opens both).
    /// With them, as `subject`'s, the events of the holding subjects its `appstore.subject_bound`
    /// events name (`attributed(_:knownAt:revealing:)`).
    func recordedEvents(of subject: String, knownAt: KnownAt? = nil) throws(LedgerError) -> [RecordedEvent] {
        try attributed(subject, knownAt: knownAt, revealing: false)
    }

    /// The events that count for `subject` recorded by `knownAt` (default: all), in position
    /// order: its own, and those of each holding subject an `appstore.subject_bound` among them
    /// names (SPEC §2.2 "Subject"), whenever they arrived, given `subject` as their subject.
    func attributed(_ subject: String, knownAt: KnownAt?, revealing: Bool) throws(LedgerError) -> [RecordedEvent] {
        func events(of subject: String) throws(LedgerError) -> [RecordedEvent] {
            try log.events(subject: subject, revealing: revealing).collect().filter { knownAt?.includes($0) ?? true }
                .map { event throws(LedgerError) in try RecordedEvent(event) }
        }
        var own = try events(of: subject)
        var holdings: [String] = []
        for event in own {
            if case .appStoreSubjectBound(let binding) = event.data, let holding = binding.holding(attributedTo: subject), !holdings.contains(holding) {
                holdings.append(holding)
            }
        }
        guard !holdings.isEmpty else { return own }
        for holding in holdings {
            own += try events(of: holding).map { event in
                var event = event
                event.event.subject = subject
                return event
            }
        }
        return own.sorted { $0.position < $1.position }
    }

    /// The subjects whose events name the store transaction `transactionId`, in the order
    /// they came (`TransactionsModel`): who holds it. Read by key, not by a scan.
    /// A holding subject bound to a subject counts as that subject (`appstore.subject_bound`).
    public func subjects(holdingTransaction transactionId: String) throws(LedgerError) -> [String] {
        try holdersAttributed(try view(TransactionsModel.self, of: transactionId)?.subjects ?? [])
    }

    /// The subjects whose events name the store subscription `originalTransactionId`, in the
    /// order they came (`HoldersModel`): a holding subject (`appstore:<id>`) while the App
    /// Store's notifications wait there, the subject it is bound to once they count for one.
    public func subjects(holdingOriginalTransaction originalTransactionId: String) throws(LedgerError) -> [String] {
        try holdersAttributed(try view(HoldersModel.self, of: originalTransactionId)?.subjects ?? [])
    }

    /// `subjects` with each bound holding subject replaced by the subject its events count
    /// for, each subject once, in order.
    private func holdersAttributed(_ subjects: [String]) throws(LedgerError) -> [String] {
        var out: [String] = []
        for subject in subjects {
            var named = subject
            if subject.hasPrefix(AppStoreSubjectBound.holdingPrefix),
               let bound = try view(HoldersModel.self, of: String(subject.dropFirst(AppStoreSubjectBound.holdingPrefix.count)))?.boundTo[subject] {
                named = bound
            }
            if !out.contains(named) { out.append(named) }
        }
        return out
    }

    /// The events from position `from` through `through` (default: the head), in position order.
    public func events(from: UInt64 = 1, through: UInt64? = nil) -> EventSequence {
        log.events(from: from, through: through)
    }

    /// `subject`'s events from `fromVersion`, in version order.
    public func events(of subject: String, fromVersion: UInt64 = 1) -> EventSequence {
        log.events(subject: subject, fromVersion: fromVersion)
    }

    /// The event at `position`, `nil` past the head.
    public func event(at position: UInt64) throws(LedgerError) -> StoredEvent? {
        try log.event(at: position)
    }

    /// `subject`'s version: how many events it has (0 for none). What `expecting:` compares.
    public func version(of subject: String) throws(LedgerError) -> UInt64 {
        try log.version(of: subject)
    }

    /// The last position written (0 for an empty store).
    public func lastPosition() throws(LedgerError) -> UInt64 {
        try log.lastPosition()
    }

    /// The event with `id`, `nil` when the store has none.
    public func event(id: EventID) throws(LedgerError) -> StoredEvent? {
        try log.event(id: id)
    }

    /// Counts, sizes, the policy, and each model's checkpoint and staleness: `ledger stats`.
    public func stats() throws(LedgerError) -> LedgerStats {
        LedgerStats(log: try log.stats(), policy: try policy(), models: try engine.statuses())
    }

    /// The audit of `subject` at `t` (default now), from the events recorded by `knownAt`
    /// (default: all), under the store's policy. A subject with no events has an empty timeline.
    public func audit(of subject: String, at t: Timestamp = .now(), knownAt: KnownAt? = nil) throws(LedgerError) -> AuditReport {
        let events = try attributed(subject, knownAt: knownAt, revealing: true)
        return Audit.report(subject: subject, events: events, at: t, knownAt: knownAt, models: engine.models, policy: try policy())
    }

    /// The entries of `model`'s time-ordered index (`ReadModel.indexEntries`) with
    /// from ≤ at < to, sorted by (at, key, kind, detail).
    public func index(of model: String, from: Timestamp, to: Timestamp) throws(LedgerError) -> [(key: String, entry: IndexEntry)] {
        try engine.entries(of: model, from: from, to: to).map { ($0.key, $0.entry) }
    }

    /// What falls due at from ≤ at < to (SPEC §4 "Due"), sorted by (at, subject, kind, detail),
    /// read by range from the due model's index: never a scan of every subject. Empty when the
    /// ledger has no due model.
    public func due(from: Timestamp, to: Timestamp) throws(LedgerError) -> [DueItem] {
        try engine.entries(of: DueModel.name, from: from, to: to).map { entry in
            let detail: JSONObject
            if case .object(let object) = entry.detail { detail = object } else { detail = JSONObject() }
            return DueItem(subject: entry.key, at: entry.entry.at, kind: entry.entry.kind, detail: detail)
        }
    }

    /// The time zone of `subject`'s latest session at or before `t`, `nil` when it has none:
    /// how the command line shows its times locally.
    public func timeZone(of subject: String, at t: Timestamp = .now()) throws(LedgerError) -> String? {
        let sessions = try log.events(subject: subject, revealing: false).collect().filter { $0.type == SessionStarted.type }
        return BadgeRules.sessionZone(in: try sessions.map { event throws(LedgerError) in try RecordedEvent(event) }, at: t)
    }

    /// The store's policy (the reference policy for a store made before policies were recorded).
    public func policy() throws(LedgerError) -> Policy {
        try log.policy() ?? .reference
    }

    // MARK: Models

    /// Folds of the whole log (rebuild, verify) on `threads` threads, each a part of the keys;
    /// 0 (the default): one per core. For measuring a rebuild on one core against all.
    @_spi(Storage) public func setFoldThreads(_ threads: Int) { engine.foldThreads.store(max(0, threads), ordering: .relaxed) }

    /// Rebuilds every read model from scratch into a new generation and swaps it in (unless
    /// `dryRun`), reporting what changes in `models` (all when empty) at `at`: see
    /// `RebuildReport`. With `policy`, the rebuild uses it and it becomes the store's.
    @discardableResult
    public func rebuild(_ models: [String] = [], policy: Policy? = nil, dryRun: Bool = false, at: Timestamp = .now(),
                        progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> RebuildReport {
        let prepared = try prepareRebuild(models, policy: policy, dryRun: dryRun, at: at, progress: progress)
        guard !dryRun else { return prepared.report }
        return try prepared.swap(progress: progress)
    }

    /// A rebuild whose new generation is written but not yet swapped in: a cluster prepares
    /// one on every node and swaps them once all are ready (`PreparedRebuild`). Its report's
    /// personal fields are shown opened, as `rebuild` shows them.
    package func prepareRebuild(_ models: [String] = [], policy: Policy? = nil, dryRun: Bool = false, at: Timestamp = .now(),
                                progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> PreparedRebuild {
        if !dryRun { try requireWritable("rebuild (a dry run works read-only)") }
        let prepared = try engine.prepareRebuild(models, policy: policy, dryRun: dryRun, at: at, events: { subject in try recordedEvents(of: subject) }, progress: progress)
        // A personal field's change is shown opened, as `status` shows it.
        try prepared.openChanges { change throws(LedgerError) -> ViewChange in
            guard let model = engine.models.first(where: { $0.name == change.model }),
                  let pointer = model.personalFields[change.field] else { return change }
            func open(_ value: JSON) throws(LedgerError) -> JSON {
                guard case .string(let text) = value else { return value }
                return .string(try log.reveal(text, of: change.subject, field: pointer))
            }
            var opened = change
            opened.from = try open(change.from)
            opened.to = try open(change.to)
            return opened
        }
        return prepared
    }

    /// Checks the log (hash chain, gap-free positions, both indexes), then, if it holds, every
    /// read model against a fresh fold of it, byte for byte: `ledger verify`.
    public func verify(checkingPages: Bool = true, progress: (VerifyProgress) -> Void = { _ in }) throws(LedgerError) -> VerifyResult {
        let head = try log.lastPosition()
        let report = try withoutActuallyEscaping(progress) { progress throws(LedgerError) in
            try log.verify(checkingPages: checkingPages) { done in progress(VerifyProgress(phase: .log, done: done, total: head)) }
        }
        guard report.isValid else { return VerifyResult(log: report, models: []) }
        let models = try engine.verify(limit: 20) { step in
            progress(VerifyProgress(phase: .models, done: step.done, total: step.total))
        }
        return VerifyResult(log: report, models: models)
    }

    /// Checks every read model against a fresh fold of the log, byte for byte (the log and the
    /// models together: `verify()`). Memory stays bounded: the subjects are checked about `keysPerPass` at a time, each part
    /// a fold of the whole log of its own.
    public func verifyModels(limit: Int = 20, keysPerPass: Int = 100_000, progress: (RebuildProgress) -> Void = { _ in }) throws(LedgerError) -> [ModelProblem] {
        try engine.verify(limit: limit, keysPerPass: keysPerPass, progress: progress)
    }

    /// Every key of a fold's served states (`"facts"` or a model's name) with its encoded
    /// state, in key order: for tools that compare builds byte for byte.
    @_spi(Storage) public func servedStates(of fold: String) throws(LedgerError) -> [(key: String, state: [UInt8])] {
        try engine.servedStates(of: fold)
    }

    /// Brings every model up to the head of the log (appends made by a process without them).
    @discardableResult
    public func catchUp() throws(LedgerError) -> UInt64 {
        try requireWritable("catch the models up")
        return try engine.catchUp()
    }

    /// Throws `.readOnly` when the store was opened read-only, before `what` starts.
    func requireWritable(_ what: String) throws(LedgerError) {
        guard !readOnly else {
            throw LedgerError(.readOnly, "the store was opened read-only; open it without `readOnly` to \(what)")
        }
    }

    /// Every head position from now on, as appends through this `Ledger` commit them; the
    /// stream finishes when the ledger closes.
    ///
    /// Appends by another process (or another `Ledger` on the same path) are not announced:
    /// their events are in the log, and `lastPosition()` and every read see them, but no
    /// position arrives here until this ledger appends again. A process that follows another's
    /// appends polls `lastPosition()` (and `catchUp()` brings the models to it).
    public func positions() throws(LedgerError) -> AsyncStream<UInt64> { try engine.positions() }

    /// How `waitForPosition` ended.
    public enum Wait: Sendable, Hashable {
        /// The head reached the position: it is `head`, at or past it.
        case reached(head: UInt64)
        /// The waiting task was cancelled first.
        case cancelled
        /// The ledger closed first.
        case closed
    }

    /// Waits until the head has reached `position` (at once if it has), the task is cancelled,
    /// or the ledger closes, and says which. Only this ledger's appends move it (see
    /// `positions()`).
    @discardableResult
    public func waitForPosition(_ position: UInt64) async throws(LedgerError) -> Wait {
        let stream = try positions()
        let head = try lastPosition()
        if head >= position { return .reached(head: head) }
        for await head in stream where head >= position { return .reached(head: head) }
        // The stream ended: a cancelled task's, or every stream once the ledger has closed
        // (also one asked for after that).
        return Task.isCancelled ? .cancelled : .closed
    }
}

/// What `Ledger.stats()` reports.
public struct LedgerStats: Sendable {
    /// The log's counts and sizes.
    public let log: LogStats
    /// The store's policy.
    public let policy: Policy
    /// Each registered model's checkpoint, policy and staleness, in `status` order.
    public let models: [ModelStatus]

    /// SPEC §5's `stats` shape: what `ledger stats --json` prints and the server answers.
    public var json: JSON {
        func count(_ value: UInt64) -> JSON { .integer(Int64(clamping: value)) }
        return .object(JSONObject([
            ("events", count(log.events)),
            ("subjects", count(log.subjects)),
            ("lastPosition", count(log.lastPosition)),
            ("policy", .object(JSONObject([("name", .string(policy.name)), ("version", .integer(policy.version)), ("hash", .string(policy.hash))]))),
            ("models", .object(JSONObject(models.map { ($0.name, $0.json) }))),
            ("storeBytes", .integer(Int64(log.usedBytes))),
        ]))
    }
}

/// What `Ledger.verify()` found.
public struct VerifyResult: Sendable {
    /// The log's check: events checked and the first problem, if any.
    public let log: VerifyReport
    /// Where served read models differ from a fresh fold (empty when the log failed: not checked).
    public let models: [ModelProblem]
    /// Whether the log and every model hold.
    public var isValid: Bool { log.isValid && models.isEmpty }
}

/// How far `Ledger.verify()` is.
public struct VerifyProgress: Sendable, Hashable {
    /// Which check is running.
    public enum Phase: Sendable { case log, models }
    public let phase: Phase
    /// Events (log) or steps (models) done, of `total`.
    public let done: UInt64
    public let total: UInt64
}

/// One item of the due list (SPEC §4 "Due").
public struct DueItem: Sendable, Hashable {
    public var subject: String
    public var at: Timestamp
    /// `trialEndingSoon`, `paymentFailed`, `retentionEmail`, `tierChanged` or `deletionQueued`
    /// (`DueModel.Kind`; a string, so that a kind added later reads too).
    public var kind: String
    public var detail: JSONObject

    public var json: JSON {
        .object(JSONObject([("subject", .string(subject)), ("at", .string(at.description)), ("kind", .string(kind)), ("detail", .object(detail))]))
    }

    /// SPEC §5's `due --json`.
    public static func json(_ items: [DueItem], from: Timestamp, to: Timestamp) -> JSON {
        .object(JSONObject([("from", .string(from.description)), ("to", .string(to.description)), ("items", .array(items.map(\.json)))]))
    }
}

extension DueItem {
    /// An item from its `json` (what the server and `due --json` give); `nil` for anything else.
    public init?(json: JSON) {
        guard case .object(let o) = json, case .string(let subject)? = o["subject"], case .string(let at)? = o["at"],
              let time = Timestamp(rfc3339: at), case .string(let kind)? = o["kind"] else { return nil }
        var detail = JSONObject()
        if case .object(let d)? = o["detail"] { detail = d }
        self.init(subject: subject, at: time, kind: kind, detail: detail)
    }
}

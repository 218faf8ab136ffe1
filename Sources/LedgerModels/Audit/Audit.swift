@_spi(Storage) import LedgerCore

/// How much of the log an audit may use: what the ledger had recorded by a time, or up to a
/// position (bitemporal: what we knew, against what was true).
public enum KnownAt: Sendable, Hashable {
    case time(Timestamp)
    case position(UInt64)

    /// Whether the ledger had recorded `event` by then.
    public func includes(_ event: StoredEvent) -> Bool {
        switch self {
        case .time(let t): event.recordedAt <= t
        case .position(let p): event.position <= p
        }
    }

    public var json: JSON {
        switch self {
        case .time(let t): .string(t.description)
        case .position(let p): .integer(Int64(p))
        }
    }

    /// A log position (digits) or an RFC 3339 time with a zone, as `--known-at` and the
    /// server's `knownAt` take it; `nil` for anything else.
    public init?(parsing text: String) {
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            guard let position = UInt64(text) else { return nil }
            self = .position(position)
        } else if let t = Timestamp(rfc3339: text) {
            self = .time(t)
        } else {
            return nil
        }
    }
}

/// One field of one read model that an audit entry changed.
public struct AuditChange: Sendable, Hashable {
    public var model: String
    /// The dotted path in the model's view (`planState`, `capabilities.upload`).
    public var field: String
    public var from: JSON
    public var to: JSON
    /// The rule that made the change (`storeCoverage`, `graceDays`, `billingIssue`…).
    public var rule: String

    public init(model: String, field: String, from: JSON, to: JSON, rule: String) {
        self.model = model
        self.field = field
        self.from = from
        self.to = to
        self.rule = rule
    }

    public var json: JSON {
        ["model": .string(model), "field": .string(field), "from": from, "to": to, "rule": .string(rule)]
    }
}

extension AuditChange {
    /// A changed value for people: strings bare, null as –, anything else as JSON.
    public static func words(_ value: JSON) -> String {
        switch value {
        case .null: "–"
        case .string(let text): text
        default: value.serialized()
        }
    }
}

extension AuditEntry {
    /// "recorded T, 3 days after it happened" for an event recorded more than an hour after it
    /// occurred (a late fact), else `nil`.
    public var lateness: String? {
        guard let recorded = recordedAt, recorded.milliseconds - occurredAt.milliseconds > 3_600_000 else { return nil }
        let hours = (recorded.milliseconds - occurredAt.milliseconds) / 3_600_000
        return "recorded \(recorded), \(hours >= 48 ? "\(hours / 24) days" : "\(hours) hours") after it happened"
    }
}

/// One line of a subject's timeline: an event, or a time at which a view changed by itself
/// (`type` `"time"`, no position).
public struct AuditEntry: Sendable, Hashable {
    public var position: UInt64?
    public var type: String
    public var occurredAt: Timestamp
    public var recordedAt: Timestamp?
    public var source: String?
    public var summary: String
    public var changes: [AuditChange]

    public var json: JSON {
        [
            "position": position.map { .integer(Int64($0)) } ?? .null,
            "type": .string(type),
            "occurredAt": .string(occurredAt.description),
            "recordedAt": recordedAt.map { .string($0.description) } ?? .null,
            "source": source.map(JSON.string) ?? .null,
            "summary": .string(summary),
            "changes": .array(changes.map(\.json)),
        ]
    }
}

/// A subject's audit (SPEC §4): every event at or before `at` in business-time order, with
/// what each changed in each read model and why, and the changes time made by itself.
public struct AuditReport: Sendable, Hashable {
    public var subject: String
    public var at: Timestamp
    public var knownAt: KnownAt?
    public var entries: [AuditEntry]
    /// Events recorded by `knownAt` that occurred after `at`, left out of the timeline.
    public var laterEvents: Int
    /// The subject's time zone at `at` (that of its latest session), `nil` when none is known:
    /// for showing times locally; the JSON's times are UTC.
    public var timeZone: String?
    /// Whether `entries` is one page of the timeline (`AuditPaging`); the JSON then says
    /// where the next starts.
    public var paged = false
    /// Where the next page starts, `nil` on the last.
    public var next: AuditCursor?

    public init(subject: String, at: Timestamp, knownAt: KnownAt?, entries: [AuditEntry], laterEvents: Int, timeZone: String?) {
        (self.subject, self.at, self.knownAt, self.entries) = (subject, at, knownAt, entries)
        (self.laterEvents, self.timeZone) = (laterEvents, timeZone)
    }

    public var json: JSON {
        var members: [(String, JSON)] = [("subject", .string(subject)), ("at", .string(at.description)), ("knownAt", knownAt?.json ?? .null),
                                         ("entries", .array(entries.map(\.json)))]
        if paged { members.append(("next", next.map { .string($0.description) } ?? .null)) }
        return .object(JSONObject(members))
    }
}

extension AuditReport {
    /// The report `json` gave, with the two things it leaves out: how many later events there
    /// are, and the subject's zone (a cluster's node sends them beside it). `nil` when `json`
    /// is not a report's.
    package init?(json: JSON, laterEvents: Int, timeZone: String?) {
        guard case .object(let o) = json, case .string(let subject)? = o["subject"], case .string(let atText)? = o["at"],
              let at = Timestamp(rfc3339: atText), case .array(let items)? = o["entries"] else { return nil }
        var knownAt: KnownAt?
        switch o["knownAt"] {
        case .string(let text)?: knownAt = KnownAt(parsing: text)
        case .number(let n)?: knownAt = n.int64.map { .position(UInt64(clamping: $0)) }
        default: knownAt = nil
        }
        var entries: [AuditEntry] = []
        for item in items {
            guard case .object(let e) = item, case .string(let type)? = e["type"], case .string(let occurred)? = e["occurredAt"],
                  let occurredAt = Timestamp(rfc3339: occurred), case .string(let summary)? = e["summary"],
                  case .array(let changeItems)? = e["changes"] else { return nil }
            var changes: [AuditChange] = []
            for change in changeItems {
                guard case .object(let c) = change, case .string(let model)? = c["model"], case .string(let field)? = c["field"],
                      case .string(let rule)? = c["rule"] else { return nil }
                changes.append(AuditChange(model: model, field: field, from: c["from"] ?? .null, to: c["to"] ?? .null, rule: rule))
            }
            var position: UInt64?
            if case .number(let n)? = e["position"] { position = n.int64.map { UInt64(clamping: $0) } }
            var recordedAt: Timestamp?
            if case .string(let text)? = e["recordedAt"] { recordedAt = Timestamp(rfc3339: text) }
            var source: String?
            if case .string(let text)? = e["source"] { source = text }
            entries.append(AuditEntry(position: position, type: type, occurredAt: occurredAt, recordedAt: recordedAt, source: source,
                                      summary: summary, changes: changes))
        }
        self.init(subject: subject, at: at, knownAt: knownAt, entries: entries, laterEvents: laterEvents, timeZone: timeZone)
    }
}

/// The audit's walk through one subject's history, as a pure function of its events: it
/// folds them in business-time order (position breaks ties) into the subject's facts and every
/// model, evaluating each view after each event and at each time a view can change by itself,
/// and reports the fields that changed with the rule behind them.
package enum Audit {
    /// The audit of `subject` at `t` from `events` (its events recorded by `knownAt`, in any
    /// order), under `policy`, through `models` (those the policy has are shown).
    /// With `paging`, the walk stops once the page and one entry more are worked out, and the
    /// report holds the page and where the next starts (as known at the latest of `events`
    /// when `knownAt` is `nil`, so that later appends move no entry).
    package static func report(subject: String, events: [RecordedEvent], at t: Timestamp, knownAt: KnownAt?,
                              models: [any ReadModel.Type] = ReadModels.all, policy: Policy, paging: AuditPaging? = nil) -> AuditReport {
        let timeline = events.filter { $0.occurredAt <= t }.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
        var facts = SubjectFacts()
        // Asked after every event: kept as the events are folded, not worked out at each.
        facts.keepPlanTimes(policy: policy.subscription)
        // The facts' change times, sorted, worked out again only when the facts change.
        var factsTimes: [Timestamp] = []
        var factsChanged = true
        /// The time of the latest step, before which no change time is asked for.
        var stepped: Timestamp?
        let folds = models.filter { $0.keyedBySubject }.compactMap { model in makeTimeline(model, policy: policy) }
        var entries: [AuditEntry] = []
        let start = timeline.first?.occurredAt ?? t
        var previous = folds.map { $0.step(facts, start, horizon: start, policy, factsChanged: true, factsTimes: factsTimes).step }

        /// The views at `time`, how they differ from the previous ones, and the models' words
        /// for it (used when no event caused it). A model whose state and facts are as they were,
        /// with none of its change times or the facts' passed since, is not asked again. The
        /// models' change times are listed through `horizon`, the next event's time (or `t`).
        func step(to time: Timestamp, horizon: Timestamp) -> (changes: [AuditChange], summary: String) {
            // Only times after the previous step are ever asked for (`ChangeTimes.between` and
            // `.any` look after it): a long history's past ones are not sorted at each step.
            if factsChanged {
                factsTimes = facts.keptPlanTimes(policy: policy.subscription)?.changeTimes(after: stepped)
                    ?? ChangeTimes.sorted(Plan.changeTimes(of: facts, policy: policy.subscription), after: stepped)
            }
            stepped = time
            var changes: [AuditChange] = []
            var sentences: [String] = []
            for (index, fold) in folds.enumerated() {
                let (current, asked) = fold.step(facts, time, horizon: horizon, policy, factsChanged: factsChanged, factsTimes: factsTimes)
                guard asked else { continue }
                let changed = diff(model: fold.name, from: previous[index], to: current)
                changes += changed
                if !changed.isEmpty, let sentence = current.timeChange { sentences.append(sentence) }
                previous[index] = current
            }
            factsChanged = false
            if sentences.isEmpty, let first = changes.first {
                sentences.append("\(first.model).\(first.field) \(label(first.from)) → \(label(first.to))")
            }
            return (changes, sentences.joined(separator: "; "))
        }

        /// Time entries for the changes strictly between `after` and `before` (or through `t`).
        func timeEntries(after: Timestamp, before: Timestamp?) {
            var candidates = Set(ChangeTimes.between(factsTimes, after: after, before: before, through: t))
            for fold in folds { candidates.formUnion(ChangeTimes.between(fold.times, after: after, before: before, through: t)) }
            for time in candidates.sorted() {
                let (changes, summary) = step(to: time, horizon: before ?? t)
                guard !changes.isEmpty else { continue }
                entries.append(AuditEntry(position: nil, type: "time", occurredAt: time, recordedAt: nil, source: nil,
                                          summary: summary, changes: changes))
            }
        }

        // With a page to fill: the entries to work out before the walk may stop.
        let enough = paging.map { $0.offset + $0.limit + 1 } ?? Int.max
        var last: Timestamp?
        for (index, event) in timeline.enumerated() {
            if entries.count >= enough { break }
            if let last { timeEntries(after: last, before: event.occurredAt) }
            // Every event folds into the facts' activity, seldom changing what a view reads.
            let activity = facts.activity
            facts.apply(event, policy: policy)
            if SubjectFacts.planReads.contains(event.type) || !facts.activity.answersAlike(activity) { factsChanged = true }
            for fold in folds { fold.apply(event) }
            entries.append(AuditEntry(position: event.position, type: event.type, occurredAt: event.occurredAt, recordedAt: event.recordedAt,
                                      source: event.event.source.rawValue, summary: EventSummary.line(event),
                                      changes: step(to: event.occurredAt, horizon: index + 1 < timeline.count ? timeline[index + 1].occurredAt : t).changes))
            last = event.occurredAt
        }
        if let last, entries.count < enough { timeEntries(after: last, before: nil) }
        var report = AuditReport(subject: subject, at: t, knownAt: knownAt, entries: entries, laterEvents: events.count - timeline.count,
                                 timeZone: BadgeRules.sessionZone(in: timeline, at: t))
        guard let paging else { return report }
        let end = min(entries.count, paging.offset + paging.limit)
        report.entries = paging.offset < end ? Array(entries[paging.offset ..< end]) : []
        report.paged = true
        if entries.count > end {
            let pinned = knownAt ?? .position(events.lazy.map(\.position).max() ?? 0)
            report.next = AuditCursor(at: t, knownAt: pinned, offset: end)
        }
        return report
    }

    /// A fold of `model` for the audit, `nil` when the policy has no such model.
    private static func makeTimeline<M: ReadModel>(_ model: M.Type, policy: Policy) -> Timeline? {
        guard M.view(of: M.State(), facts: SubjectFacts(), at: Timestamp(milliseconds: 0), policy: policy) != nil else { return nil }
        return TypedTimeline<M>(policy: policy)
    }

    /// The fields of one model that differ, each with its rule (a field with none takes the
    /// rule of the others that changed with it).
    static func diff(model: String, from old: TimelineStep, to new: TimelineStep) -> [AuditChange] {
        let changed = new.view.changes(since: old.view)
        let fallback = changed.lazy.compactMap { new.rules[$0.field] }.first ?? model
        return changed.map { AuditChange(model: model, field: $0.field, from: $0.from, to: $0.to, rule: new.rules[$0.field] ?? fallback) }
    }

    static func label(_ value: JSON) -> String {
        if case .string(let text) = value { return text }
        return value.serialized()
    }
}

/// One model folding one subject's events in business-time order, viewed between them.
private class Timeline {
    var name: String { "" }
    /// The model's change times for its current state and facts, sorted.
    var times: [Timestamp] { [] }
    func apply(_ event: RecordedEvent) {}
    /// The view at `t`, and whether it was worked out (`false`: the last one stands); `times`
    /// then holds the model's change times through `horizon`.
    func step(_ facts: SubjectFacts, _ t: Timestamp, horizon: Timestamp, _ policy: Policy, factsChanged: Bool, factsTimes: [Timestamp]) -> (step: TimelineStep, asked: Bool) {
        (TimelineStep(view: FlatView(pairs: []), rules: [:]), false)
    }
}

/// One model's view at a step of the audit's walk.
struct TimelineStep {
    /// The view's leaves, restated fields left out.
    var view: FlatView
    /// The rule behind each field's change since the previous step (`ModelView.rule(for:since:)`).
    var rules: [String: String]
    /// The model's words for the change, had no event caused it (`ModelView.timeChange(since:)`).
    var timeChange: String?
}

/// Sorted change times.
enum ChangeTimes {
    /// `times` after `after` (all with `nil`), sorted, each once.
    static func sorted(_ times: [Timestamp], after: Timestamp?) -> [Timestamp] {
        unique(after.map { bound in times.filter { $0 > bound } } ?? times)
    }

    /// `times` in `window`, sorted, each once.
    static func sorted(_ times: [Timestamp], in window: ChangeWindow) -> [Timestamp] {
        unique(times.filter(window.contains))
    }

    private static func unique(_ times: [Timestamp]) -> [Timestamp] {
        var later = times
        later.sort()
        var kept = 0
        for i in later.indices where kept == 0 || later[kept - 1] != later[i] {
            later[kept] = later[i]
            kept += 1
        }
        later.removeLast(later.count - kept)
        return later
    }

    /// The times strictly between `after` and `before`, or after `after` through `t`.
    static func between(_ sorted: [Timestamp], after: Timestamp, before: Timestamp?, through t: Timestamp) -> ArraySlice<Timestamp> {
        let lower = ChangeWindow.firstIndex(in: sorted) { $0 > after }
        let upper = before.map { end in ChangeWindow.firstIndex(in: sorted) { $0 >= end } } ?? ChangeWindow.firstIndex(in: sorted) { $0 > t }
        return sorted[lower ..< max(lower, upper)]
    }

    /// Whether a time lies in (after, through].
    static func any(_ sorted: [Timestamp], after: Timestamp, through t: Timestamp) -> Bool {
        let index = ChangeWindow.firstIndex(in: sorted) { $0 > after }
        return index < sorted.count && sorted[index] <= t
    }
}

private final class TypedTimeline<M: ReadModel>: Timeline {
    /// The policy the audit folds and views under.
    private let policy: Policy
    private var state = M.State()
    private var items: [[UInt8]: M.Item] = [:]
    private var last: M.View?
    private var lastStep = TimelineStep(view: FlatView(pairs: []), rules: [:])
    private var lastTime: Timestamp?
    /// The window `sortedTimes` lists the change times of: after `listedFrom` through
    /// `listedThrough`.
    private var listedFrom: Timestamp?
    private var listedThrough: Timestamp?
    /// The state changed since the view was last worked out.
    private var dirty = true

    init(policy: Policy) { self.policy = policy }
    private var sortedTimes: [Timestamp] = []

    override var name: String { M.name }
    override var times: [Timestamp] { sortedTimes }
    private static var readsEverything: Bool { M.reads.count >= EventCatalog.typeNames.count }

    override func apply(_ event: RecordedEvent) {
        guard M.reads.contains(event.type) else { return }
        // A model that reads every type (to note the first event) changes seldom: its state is
        // compared, and one the event left as it was needs no second look (views see the state
        // alone, not the items). Others are taken to have changed: comparing would copy their
        // lists at every event.
        guard Self.readsEverything else {
            M.fold(event, into: &state, items: &items, policy: policy)
            dirty = true
            return
        }
        let before = state
        M.fold(event, into: &state, items: &items, policy: policy)
        if state != before { dirty = true }
    }

    override func step(_ facts: SubjectFacts, _ t: Timestamp, horizon: Timestamp, _ policy: Policy, factsChanged: Bool, factsTimes: [Timestamp]) -> (step: TimelineStep, asked: Bool) {
        if dirty || factsChanged || listedThrough.map({ $0 < horizon }) ?? true {
            var through = horizon
            // Nothing changed but time: a window twice the last (an hour at least), so that a
            // model the events leave alone is asked a few dozen times, not at every event.
            if !dirty && !factsChanged, let listedFrom, let listedThrough {
                let span = max(listedThrough.milliseconds(since: listedFrom), 3_600_000)
                through = max(horizon, listedThrough.adding(milliseconds: span.multipliedClamping(by: 2)))
            }
            let window = ChangeWindow(after: lastTime, through: through)
            sortedTimes = ChangeTimes.sorted(M.changeTimes(of: state, facts: facts, policy: policy, in: window), in: window)
            (listedFrom, listedThrough) = (lastTime ?? horizon, through)
        }
        if !dirty && !factsChanged, let lastTime,
           !ChangeTimes.any(sortedTimes, after: lastTime, through: t), !ChangeTimes.any(factsTimes, after: lastTime, through: t) {
            self.lastTime = t
            return (lastStep, false)
        }
        dirty = false
        lastTime = t
        guard let view = M.view(of: state, facts: facts, at: t, policy: policy) else {
            lastStep = TimelineStep(view: FlatView(pairs: []), rules: [:])
            return (lastStep, true)
        }
        let previous = last
        last = view
        let leaves = FlatView(pairs: FlatView.flatten(view.json).pairs.filter { !M.View.restatedFields.contains($0.0) })
        var rules: [String: String] = [:]
        for (field, _) in leaves.pairs {
            rules[field] = previous.map { view.rule(for: field, since: $0) } ?? view.rule(for: field)
        }
        lastStep = TimelineStep(view: leaves, rules: rules, timeChange: previous.flatMap { view.timeChange(since: $0) })
        return (lastStep, true)
    }
}

/// A view's leaves by dotted path, in order.
public struct FlatView: Sequence, Sendable {
    public var pairs: [(String, JSON)]

    public init(pairs: [(String, JSON)]) { self.pairs = pairs }

    /// A view's JSON as its leaves: nested objects by dotted path.
    public static func flatten(_ object: JSONObject, prefix: String = "") -> FlatView {
        var leaves: [(String, JSON)] = []
        for member in object.members {
            if case .object(let inner) = member.value, !inner.members.isEmpty {
                leaves += flatten(inner, prefix: prefix + member.key + ".").pairs
            } else {
                leaves.append((prefix + member.key, member.value))
            }
        }
        return FlatView(pairs: leaves)
    }

    public subscript(field: String) -> JSON? { pairs.first { $0.0 == field }?.1 }

    /// The fields that differ from `old`, in this view's order then `old`'s: a field one side
    /// lacks (an object that became `null`, or the reverse) counts as `null` there.
    public func changes(since old: FlatView) -> [(field: String, from: JSON, to: JSON)] {
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

    public func makeIterator() -> IndexingIterator<[(String, JSON)]> { pairs.makeIterator() }
}

import LedgerCore
import LedgerStore

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

    public var json: JSON {
        ["subject": .string(subject), "at": .string(at.description), "knownAt": knownAt?.json ?? .null,
         "entries": .array(entries.map(\.json))]
    }
}

extension Ledger {
    /// The audit of `subject` at `t` (default now), from the events recorded by `knownAt`
    /// (default: all), under the store's policy. A subject with no events has an empty timeline.
    public func audit(of subject: String, at t: Timestamp = .now(), knownAt: KnownAt? = nil) throws(LedgerError) -> AuditReport {
        let stored = try log.events(subject: subject).collect().filter { knownAt?.includes($0) ?? true }
        let events = try stored.map { event throws(LedgerError) in try RecordedEvent(event) }
        return Audit.report(subject: subject, events: events, at: t, knownAt: knownAt, models: engine.models, policy: try policy())
    }
}

extension Ledger {
    /// The time zone of `subject`'s latest session at or before `t`, `nil` when it has none:
    /// how the command line shows its times locally.
    public func timeZone(of subject: String, at t: Timestamp = .now()) throws(LedgerError) -> String? {
        let sessions = try log.events(subject: subject).collect().filter { $0.type == SessionStarted.type }
        return BadgeProjection.sessionZone(in: try sessions.map { event throws(LedgerError) in try RecordedEvent(event) }, at: t)
    }
}

extension BadgeProjection {
    /// The zone of the latest session start at or before `t` among `events`, `nil` with none:
    /// the badge's own rule for "today", folded from the events alone.
    static func sessionZone(in events: [RecordedEvent], at t: Timestamp) -> String? {
        var state = State()
        for event in events where event.type == SessionStarted.type { apply(event, to: &state) }
        return BadgeRules.sessionZone(state, at: t)
    }
}

/// The audit's walk through one subject's history, as a pure function of the events.
enum Audit {
    static func report(subject: String, events: [RecordedEvent], at t: Timestamp, knownAt: KnownAt?,
                       models: [ModelRunner], policy: Policy) -> AuditReport {
        let timeline = events.filter { $0.occurredAt <= t }.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
        let folds = models.filter { $0.isServed(policy) }.map { (name: $0.name, fold: $0.makeTimeline()) }
        var entries: [AuditEntry] = []
        let start = timeline.first?.occurredAt ?? t
        var previous = folds.map { $0.fold.step(to: start, policy: policy) }

        /// The views at `time`, how they differ from the previous ones, and the models' words
        /// for it (used when no event caused it).
        func step(to time: Timestamp) -> (changes: [AuditChange], summary: String) {
            let current = folds.map { $0.fold.step(to: time, policy: policy) }
            var changes: [AuditChange] = []
            var sentences: [String] = []
            for (index, model) in folds.enumerated() {
                let changed = diff(model: model.name, from: previous[index], to: current[index])
                changes += changed
                if !changed.isEmpty, let sentence = current[index].timeChange { sentences.append(sentence) }
            }
            previous = current
            if sentences.isEmpty, let first = changes.first {
                sentences.append("\(first.model).\(first.field) \(label(first.from)) → \(label(first.to))")
            }
            return (changes, sentences.joined(separator: "; "))
        }

        /// Time entries for the changes strictly between `after` and `before` (or through `t`).
        func timeEntries(after: Timestamp, before: Timestamp?) {
            let candidates = Set(folds.flatMap { $0.fold.changeTimes(policy: policy) })
                .filter { time in time > after && (before.map { time < $0 } ?? (time <= t)) }
                .sorted()
            for time in candidates {
                let (changes, summary) = step(to: time)
                guard !changes.isEmpty else { continue }
                entries.append(AuditEntry(position: nil, type: "time", occurredAt: time, recordedAt: nil, source: nil,
                                          summary: summary, changes: changes))
            }
        }

        var last: Timestamp?
        for event in timeline {
            if let last { timeEntries(after: last, before: event.occurredAt) }
            for model in folds { model.fold.apply(event) }
            entries.append(AuditEntry(position: event.position, type: event.type, occurredAt: event.occurredAt, recordedAt: event.recordedAt,
                                      source: event.event.source.rawValue, summary: EventSummary.line(event), changes: step(to: event.occurredAt).changes))
            last = event.occurredAt
        }
        if let last { timeEntries(after: last, before: nil) }
        return AuditReport(subject: subject, at: t, knownAt: knownAt, entries: entries, laterEvents: events.count - timeline.count,
                           timeZone: BadgeProjection.sessionZone(in: timeline, at: t))
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

import LedgerCore
import LedgerModels

/// How far a rebuild (or verify) has got, for a progress bar.
public struct RebuildProgress: Sendable, Hashable {
    /// What it is doing.
    public enum Phase: String, Sendable {
        /// Reading the log and folding every event in memory.
        case folding
        /// Writing the new generation's states.
        case writing
        /// Applying the events appended meanwhile, then swapping.
        case catchingUp
    }

    public var phase: Phase
    /// Events (folding) or states (writing) done.
    public var done: UInt64
    /// Of how many.
    public var total: UInt64
    /// The rate so far, per second.
    public var perSecond: Double
    /// Seconds left at that rate, `nil` before there is a rate.
    public var secondsLeft: Double? {
        guard perSecond > 0 else { return nil }
        return Double(total - min(done, total)) / perSecond
    }
}

/// One field of one model's view that differs between two builds, for one subject.
public struct ViewChange: Sendable, Hashable {
    public var subject: String
    public var model: String
    public var field: String
    public var from: JSON
    public var to: JSON

    public init(subject: String, model: String, field: String, from: JSON, to: JSON) {
        self.subject = subject
        self.model = model
        self.field = field
        self.from = from
        self.to = to
    }

    /// As `rebuild --json` prints it.
    public var json: JSON {
        ["subject": .string(subject), "model": .string(model), "field": .string(field), "from": from, "to": to]
    }

    /// A value as the summary names it: strings bare, anything else as JSON.
    static func label(_ value: JSON) -> String {
        if case .string(let text) = value { return text }
        return value.serialized()
    }
}

/// What a rebuild found and did.
public struct RebuildReport: Sendable {
    /// The time the views were compared at.
    public var at: Timestamp
    /// Nothing was swapped.
    public var dryRun: Bool
    /// The models rebuilt.
    public var models: [String]
    /// The policy hash served before, and the one the rebuild used.
    public var policyFrom: String
    public var policyTo: String
    /// Every field that changes, by subject, model and field.
    public var changes: [ViewChange]
    /// Models whose served build this code cannot read (made by another code version, or
    /// damaged): their views could not be compared, so `changes` may miss some of theirs.
    public var notCompared: [String] = []
    /// Events folded.
    public var events: UInt64
    /// Events appended while it ran, applied before the swap.
    public var caughtUp: UInt64
    /// Seconds spent folding the log.
    public var foldSeconds: Double
    /// Seconds spent comparing the new views with the served ones, after the fold: each key's
    /// new states are checked against its stored ones, and views are worked out where they
    /// differ (or everywhere, under a new policy).
    public var compareSeconds: Double = 0
    /// Seconds spent after the fold: writing the new states, catching up and swapping them in,
    /// and deleting the old ones (0 for a dry run).
    public var writeSeconds: Double = 0

    /// Per `model.field`, how many subjects went from each value to each other (`free→pro`).
    /// A time moves `earlier` or `later`, or goes `null→time` or `time→null`: each subject's
    /// times differ, so counting them one by one would say nothing. Fields that cite an event's
    /// position (`reason.position`) are left out: a position names one subject's event, not a
    /// state shared by many; `changes` lists them.
    public var summary: [String: [String: Int]] {
        var summary: [String: [String: Int]] = [:]
        for change in changes where !change.field.hasSuffix("position") {
            summary["\(change.model).\(change.field)", default: [:]][Self.transition(change.from, change.to), default: 0] += 1
        }
        return summary
    }

    /// `from→to`, or for times `earlier`, `later`, `null→time`, `time→null`.
    static func transition(_ from: JSON, _ to: JSON) -> String {
        func time(_ value: JSON) -> Timestamp? {
            if case .string(let text) = value { return Timestamp(rfc3339: text) }
            return nil
        }
        switch (time(from), time(to)) {
        case (let a?, let b?): return a < b ? "later" : "earlier"
        case (nil, _?) where from == .null: return "null→time"
        case (_?, nil) where to == .null: return "time→null"
        default: return "\(ViewChange.label(from))→\(ViewChange.label(to))"
        }
    }

    /// The `rebuild --json` shape of SPEC §5.
    public var json: JSON {
        let summary = self.summary
        return [
            "at": .string(at.description), "dryRun": .bool(dryRun),
            "policy": ["from": .string(policyFrom), "to": .string(policyTo)],
            "changes": .array(changes.map(\.json)),
            "summary": .object(JSONObject(summary.keys.sorted().map { field in
                let counts = summary[field] ?? [:]
                return (field, JSON.object(JSONObject(counts.keys.sorted().map { ($0, JSON.integer(Int64(counts[$0] ?? 0))) })))
            })),
            "notCompared": .array(notCompared.map(JSON.string)),
        ]
    }
}

@_spi(Storage) import LedgerCore

/// Where an account deletion stands (SPEC §4).
public enum DeletionState: String, Sendable, Hashable, Encodable {
    case none, requested, inProgress, failed, completed
}

/// The deletion view of one subject at a time (SPEC §4–§5).
public struct DeletionView: ModelView, Hashable {
    public struct Export: Sendable, Hashable, Encodable {
        public enum State: String, Sendable, Hashable, Encodable { case none, requested, completed }
        public var state: State
        public var location: String?

        public init(state: State, location: String?) { (self.state, self.location) = (state, location) }

        /// Both keys always, `null` for no location.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(state, forKey: .state)
            try container.encode(location, forKey: .location)
        }

        enum CodingKeys: String, CodingKey { case state, location }
    }

    public var state: DeletionState
    /// The request in force (kept once the deletion completed).
    public var requestedAt: Timestamp?
    /// When the deletion falls due: the request (hard), or the request + softGraceDays (soft).
    public var scheduledAt: Timestamp?
    public var completedSteps: [String]
    public var failedSteps: [String]
    /// A store transaction covers the time: deleting the account does not cancel it.
    public var subscriptionWarning: Bool
    public var export: Export
    /// The rule behind the state: `deletionRequested`, `deletionSteps`,
    /// `deletion.softGraceDays` (a cancellation honoured), `accountDeleted`, or `none`. For the
    /// audit; not in the JSON.
    public var rule: String
    /// Whether the covering subscription renews at the store (for the card's words).
    public var renews: Bool

    enum CodingKeys: String, CodingKey {
        case state, requestedAt, scheduledAt, completedSteps, failedSteps, subscriptionWarning, export
    }

    public init(state: DeletionState, requestedAt: Timestamp? = nil, scheduledAt: Timestamp? = nil, completedSteps: [String] = [],
                failedSteps: [String] = [], subscriptionWarning: Bool = false, export: Export = Export(state: .none, location: nil),
                rule: String = "none", renews: Bool = false) {
        (self.state, self.requestedAt, self.scheduledAt) = (state, requestedAt, scheduledAt)
        (self.completedSteps, self.failedSteps, self.subscriptionWarning, self.export) = (completedSteps, failedSteps, subscriptionWarning, export)
        (self.rule, self.renews) = (rule, renews)
    }

    public static let personalFields: [String: String] = ["export.location": "/data/location"]

    public func revealing<E: Error>(_ reveal: (String, String) throws(E) -> String) throws(E) -> DeletionView {
        var view = self
        if let location = export.location { view.export.location = try reveal(location, "/data/location") }
        return view
    }

    public func rule(for field: String) -> String? {
        switch field {
        case "subscriptionWarning": "storeCoverage"
        case "export.state", "export.location": "export"
        case "scheduledAt": state == .none || state == .completed ? rule : "deletion.mode"
        default: rule
        }
    }

    /// "failed at step photos — retry", "requested; due T", then the subscription in words.
    public var card: ViewCard {
        var headline: [ViewCard.Part]
        switch state {
        case .none: headline = [.text("none")]
        case .requested:
            headline = [.text("requested")]
            if let scheduledAt { headline += [.text("; due "), .value(.string(scheduledAt.description))] }
        case .inProgress: headline = [.text("in progress: \(completedSteps.count) step\(completedSteps.count == 1 ? "" : "s") done")]
        case .failed: headline = [.text("failed at step \(failedSteps.joined(separator: ", ")) — retry")]
        case .completed: headline = [.text("completed")]
        }
        var rows: [(label: String, value: JSON)] = []
        if !completedSteps.isEmpty || !failedSteps.isEmpty {
            var words: [String] = []
            if !completedSteps.isEmpty { words.append("done: " + completedSteps.joined(separator: ", ")) }
            if !failedSteps.isEmpty { words.append("failed: " + failedSteps.joined(separator: ", ")) }
            rows.append(("steps", .string(words.joined(separator: "; "))))
        }
        let subscription = !subscriptionWarning ? "no App Store subscription in force"
            : renews ? "still renews at Apple: tell the customer how to cancel"
            : "in force at Apple until it expires (auto-renew off)"
        rows.append(("subscription", .string(subscription)))
        let exportWords: String
        switch export.state {
        case .none: exportWords = "none"
        case .requested: exportWords = "requested"
        case .completed: exportWords = "completed" + (export.location.map { " (\($0))" } ?? "")
        }
        rows.append(("export", .string(exportWords)))
        return ViewCard(headline: headline, rows: rows)
    }
}

/// SPEC §4's deletion sequence, as a pure function of the events that happened by t. A soft
/// policy without `softGraceDays` (the decoder refuses one; a policy made in code can hold it)
/// has no grace: nothing can be cancelled and the deletion falls due at the request.
package enum DeletionRules {
    /// Step names in UTF-8 byte order.
    static func sorted(_ names: some Sequence<String>) -> [String] { names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } }

    static func view(of state: DeletionModel.State, facts: SubjectFacts, at t: Timestamp, policy: Policy.Deletion) -> DeletionView {
        let walk = DeletionWalk.through(state.steps.known(at: t), policy: policy, kept: state.walked)
        let (current, requestedAt, outcomes, rule) = (walk.current, walk.requestedAt, walk.outcomes, walk.rule)
        var scheduledAt: Timestamp?
        if let requestedAt, current != .none, current != .completed {
            scheduledAt = policy.mode == .soft ? requestedAt.adding(days: policy.softGraceDays ?? 0) : requestedAt
        }
        let coverage = facts.subscription.coverage(at: t)
        let export: DeletionView.Export
        switch state.exports.known(at: t).last?.value {
        case nil: export = .init(state: .none, location: nil)
        case let last? where last.completed: export = .init(state: .completed, location: last.location)
        case _?: export = .init(state: .requested, location: nil)
        }
        return DeletionView(state: current, requestedAt: requestedAt, scheduledAt: scheduledAt,
                            completedSteps: sorted(outcomes.filter(\.value).keys), failedSteps: sorted(outcomes.filter { !$0.value }.keys),
                            subscriptionWarning: coverage != nil, export: export, rule: rule,
                            renews: coverage != nil && facts.subscription.autoRenewing(at: t) == true)
    }
}

@_spi(Storage) import LedgerCore

/// Due (SPEC §4, seeds 000 and 004 CH27): what falls due when, across subjects — the
/// trial-ending reminder, the payment-failure alert, the retention e-mails and tier changes, a
/// queued deletion — as entries of the
/// engine's time-ordered index (`Ledger.due(from:to:)`, `ledger due`). It has no view of its
/// own in `status`.
///
/// Each item is decided on the subject's events that happened by its time, as a status then
/// would be: an item in the future is a prediction, which a late fact (a refund, a
/// cancellation) moves or removes. The state keeps the deletion's events and the retention
/// model's own facts (each folded by that model's reducer: one rule, folded twice) and the
/// billing notification preference; the rest is the subject's facts.
public enum DueModel: ReadModel {
    public static let name = "due"
    public static let version: UInt32 = 4

    public struct State: ModelState {
        public var deletion = DeletionModel.State()
        /// Recovery passes and family organizers' cancellations (a family member's grace).
        public var retention = RetentionModel.State()
        /// `notification.preferences_changed`: a category turned on or off.
        public var preferences: [Dated<Preference>] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&deletion)
            try coder.code(&retention)
            try coder.code(&preferences)
        }
    }

    public static let reads = DeletionModel.reads.union(RetentionModel.reads).union([NotificationPreferencesChanged.type])

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        if case .notificationPreferencesChanged(let p) = event.data {
            state.preferences.insertDated(Dated(at: event.occurredAt, position: event.position, value: Preference(category: p.category, enabled: p.enabled)))
            return
        }
        if RetentionModel.reads.contains(event.type) {
            RetentionModel.apply(event, to: &state.retention)
        } else {
            DeletionModel.apply(event, to: &state.deletion)
        }
    }

    public static var shownInStatus: Bool { false }

    /// The kinds of item it writes (`IndexEntry.kind`, `DueItem.kind`).
    public enum Kind: String, Sendable, CaseIterable {
        case trialEndingSoon, paymentFailed, retentionEmail, tierChanged, deletionQueued
    }

    /// A notification category turned on or off.
    public struct Preference: StateRecord, Equatable {
        public var category = ""
        public var enabled = true

        public init() {}
        public init(category: String, enabled: Bool) { (self.category, self.enabled) = (category, enabled) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&category)
            try coder.code(&enabled)
        }
    }

    /// Due has no view: `status` does not show it.
    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> DueView? { nil }

    public static var isIndexed: Bool { true }

    public static func indexEntries(of state: State, facts: SubjectFacts, policy: Policy) -> [IndexEntry] {
        DueRules.items(of: state, facts: facts, policy: policy)
    }
}

/// Due has no view of its own (the protocol asks for a type).
public struct DueView: ModelView, Hashable {}

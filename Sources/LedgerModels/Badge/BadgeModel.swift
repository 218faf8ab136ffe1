import LedgerCore

/// Badge (SPEC §4, seed 004 CH27 L229): the app icon's count and what makes it up. The state
/// keeps messages and reads by id, maintenance tasks with their local due dates, the time zones
/// of session starts and security flags; the billing issue is the subject's facts' (the one
/// rule the entitlement shares).
public enum BadgeModel: ReadModel {
    public static let name = "badge"
    public static let version: UInt32 = 4

    /// A maintenance task due on a local date.
    public struct Task: StateRecord, Equatable {
        public var id = ""
        /// Days since 1970-01-01 of its `dueDate`.
        public var dueDay: Int64 = 0

        public init() {}
        public init(id: String, dueDay: Int64) { (self.id, self.dueDay) = (id, dueDay) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&id); try coder.code(&dueDay) }
    }

    /// A security flag raised (true) or cleared (false).
    public struct Flag: StateRecord, Equatable {
        public var name = ""
        public var raised = false

        public init() {}
        public init(name: String, raised: Bool) { (self.name, self.raised) = (name, raised) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&name); try coder.code(&raised) }
    }

    public struct State: ModelState {
        public var delivered: [Dated<String>] = []
        public var read: [Dated<String>] = []
        public var scheduled: [Dated<Task>] = []
        public var completed: [Dated<String>] = []
        /// The time zone of each `session.started`.
        public var zones: [Dated<String>] = []
        public var flags: [Dated<Flag>] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&delivered)
            try coder.code(&read)
            try coder.code(&scheduled)
            try coder.code(&completed)
            try coder.code(&zones)
            try coder.code(&flags)
        }
    }

    public static let reads: Set<String> = [
        InboxMessageDelivered.type, InboxMessageRead.type, MaintenanceScheduled.type, MaintenanceCompleted.type,
        SessionStarted.type, SecurityFlagRaised.type, SecurityFlagCleared.type,
    ]

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        let at = event.occurredAt, position = event.position
        switch event.data {
        case .inboxMessageDelivered(let m):
            state.delivered.insertDated(Dated(at: at, position: position, value: m.messageId))
        case .inboxMessageRead(let m):
            state.read.insertDated(Dated(at: at, position: position, value: m.messageId))
        case .maintenanceScheduled(let m):
            // The catalog checked the date; an unreadable one could never be today.
            guard let day = LocalTime.day(of: m.dueDate) else { return }
            state.scheduled.insertDated(Dated(at: at, position: position, value: Task(id: m.taskId, dueDay: day)))
        case .maintenanceCompleted(let m):
            state.completed.insertDated(Dated(at: at, position: position, value: m.taskId))
        case .sessionStarted(let s):
            state.zones.insertDated(Dated(at: at, position: position, value: s.timeZone))
        case .securityFlagRaised(let f):
            state.flags.insertDated(Dated(at: at, position: position, value: Flag(name: f.flag, raised: true)))
        case .securityFlagCleared(let f):
            state.flags.insertDated(Dated(at: at, position: position, value: Flag(name: f.flag, raised: false)))
        case .subscriptionPurchased, .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionAutoRenewChanged, .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .purchaseStarted, .purchasePending, .purchaseFailed, .entitlementVerified, .entitlementVerificationFailed,
             .restoreRequested, .restoreSucceeded, .restoreFailed, .oneOffPurchased, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled,
             .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
             .notificationPreferencesChanged, .notificationSent:
            break
        }
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> BadgeView? {
        BadgeRules.view(of: state, facts: facts, at: t, policy: policy)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        BadgeRules.changeTimes(of: state, facts: facts, policy: policy)
    }
}

@_spi(Storage) import LedgerCore

/// Badge (SPEC §4, seed 004 CH27 L229): the app icon's count and what makes it up. The state
/// keeps the count of unread messages (each message, by id, is an item: delivered, read), the
/// maintenance tasks with their local due dates and the security flags; the billing issue and
/// the latest session start's time zone are the subject's facts' (`SubjectActivity`). The
/// count and the latest zone answer for the present: the state answers from its latest inbox
/// fact and the facts from their latest session start on (`answersFrom`), and the engine
/// replays the events for an earlier time.
public enum BadgeModel: ReadModel {
    public static let name = "badge"
    public static let version: UInt32 = 7

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
        /// Messages delivered and not read, each id once (a read before its delivery counts).
        public var unread: Int64 = 0
        public var scheduled: [Dated<Task>] = []
        public var completed: [Dated<String>] = []
        public var flags: [Dated<Flag>] = []
        /// The flags' names, sorted, each once, and how many flags they name, kept as flags are
        /// folded: a look back at the flags stops once each is decided, when they name every one.
        var flagNames: [String] = []
        var flagsNamed: Int64 = 0
        /// The latest occurredAt of the inbox events folded.
        public var latest: Timestamp?

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&unread)
            try coder.code(&scheduled)
            try coder.code(&completed)
            try coder.code(&flags)
            try coder.code(&flagNames)
            try coder.code(&flagsNamed)
            try coder.code(&latest)
        }
    }

    /// One inbox message, by id: whether it was delivered, and read.
    public struct Message: ModelState {
        public var delivered = false
        public var read = false

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&delivered)
            try coder.code(&read)
        }
    }
    public typealias Item = Message

    public static let reads: Set<String> = [
        InboxMessageDelivered.type, InboxMessageRead.type, MaintenanceScheduled.type, MaintenanceCompleted.type,
        SecurityFlagRaised.type, SecurityFlagCleared.type,
    ]

    public static func item(for event: RecordedEvent) -> String? {
        switch event.data {
        case .inboxMessageDelivered(let m): m.messageId
        case .inboxMessageRead(let m): m.messageId
        default: nil
        }
    }

    public static func apply(_ event: RecordedEvent, to state: inout State, item message: inout Message) {
        switch event.data {
        case .inboxMessageDelivered where !message.delivered:
            message.delivered = true
            if !message.read { state.unread += 1 }
        case .inboxMessageRead where !message.read:
            message.read = true
            if message.delivered { state.unread -= 1 }
        default:
            break
        }
        state.latest = max(state.latest ?? event.occurredAt, event.occurredAt)
    }

    public static func answersFrom(_ state: State, facts: SubjectFacts) -> Timestamp? {
        [state.latest, facts.activity.zone?.at].compactMap { $0 }.max()
    }

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        let at = event.occurredAt, position = event.position
        switch event.data {
        case .inboxMessageDelivered, .inboxMessageRead:
            // Items: `apply(_:to:item:)`.
            break
        case .maintenanceScheduled(let m):
            // The catalog checked the date; an unreadable one could never be today.
            guard let day = LocalTime.day(of: m.dueDate) else { return }
            state.scheduled.insertDated(Dated(at: at, position: position, value: Task(id: m.taskId, dueDay: day)))
        case .maintenanceCompleted(let m):
            state.completed.insertDated(Dated(at: at, position: position, value: m.taskId))
        case .securityFlagRaised(let f):
            state.flags.insertDated(Dated(at: at, position: position, value: Flag(name: f.flag, raised: true)))
            state.noteFlag(f.flag)
        case .securityFlagCleared(let f):
            state.flags.insertDated(Dated(at: at, position: position, value: Flag(name: f.flag, raised: false)))
            state.noteFlag(f.flag)
        case .subscriptionPurchased, .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionAutoRenewChanged, .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .purchaseStarted, .purchasePending, .purchaseFailed, .entitlementVerified, .entitlementVerificationFailed,
             .restoreRequested, .restoreSucceeded, .restoreFailed, .oneOffPurchased, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled,
             .sessionStarted, .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
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

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy, in window: ChangeWindow) -> [Timestamp] {
        BadgeRules.changeTimes(of: state, facts: facts, policy: policy, in: window)
    }
}

extension BadgeModel.State {
    /// Adds a flag's name to `flagNames` where its order puts it, unless it is there.
    mutating func noteFlag(_ name: String) {
        flagsNamed += 1
        var (low, high) = (flagNames.startIndex, flagNames.endIndex)
        while low < high {
            let middle = (low + high) / 2
            if flagNames[middle] < name { low = middle + 1 } else { high = middle }
        }
        if low < flagNames.endIndex && flagNames[low] == name { return }
        flagNames.insert(name, at: low)
    }
}

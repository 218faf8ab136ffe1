import LedgerCore

/// Access (SPEC §4, seed 002): Careguide's once-per-day sessions for free users, per device and
/// local calendar day, and the signals of abuse that inform support without blocking anyone.
///
/// The state keeps the facts the rules read, with their times — each device's session events,
/// the usage recorded, the subscription purchases and cancellations, and the events recorded
/// before they occurred — and the view builds the sessions from those that happened by t, in
/// business-time order (`AccessRules`). Sessions are not folded as they arrive: whether a start
/// continues a paused session depends on the policy's `resumeWithinSeconds`, which a reducer
/// does not see, and telemetry arrives out of order.
public enum AccessModel: ReadModel {
    public static let name = "access"
    public static let version: UInt32 = 1

    /// What one session event did, on its device.
    public enum SessionAction: UInt8, StateValue, Equatable, Sendable {
        case started, backgrounded, foregrounded
        /// `session.ended` with reason `crash`: a pause (002: a crash is not a session end).
        case crashed
        /// `session.ended` with reason `user` or `timeout`.
        case ended
    }

    /// A session event: its device, what it did, and (a start) the zone it reported.
    public struct SessionFact: StateRecord, Equatable {
        public var device = ""
        public var action = SessionAction.started
        /// The IANA zone of a start; empty otherwise.
        public var zone = ""

        public init() {}
        public init(device: String, action: SessionAction, zone: String = "") { (self.device, self.action, self.zone) = (device, action, zone) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&device)
            try coder.code(&action)
            try coder.code(&zone)
        }
    }

    /// A `usage.recorded`: a feature used `count` times.
    public struct Usage: StateRecord, Equatable {
        public var feature = ""
        public var count: Int64 = 0

        public init() {}
        public init(feature: String, count: Int64) { (self.feature, self.count) = (feature, count) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&feature)
            try coder.code(&count)
        }
    }

    /// A `subscription.purchased`: its original transaction, and when it said it expires.
    public struct Purchase: StateRecord, Equatable {
        public var originalTransactionId = ""
        public var expiresAt = Timestamp(milliseconds: 0)

        public init() {}
        public init(originalTransactionId: String, expiresAt: Timestamp) { (self.originalTransactionId, self.expiresAt) = (originalTransactionId, expiresAt) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&originalTransactionId)
            try coder.code(&expiresAt)
        }
    }

    public struct State: ModelState {
        /// Every device's session events, in business-time order.
        public var sessions: [Dated<SessionFact>] = []
        public var usage: [Dated<Usage>] = []
        public var purchases: [Dated<Purchase>] = []
        /// `auto_renew_changed(false)`, by original transaction id.
        public var cancellations: [Dated<String>] = []
        /// Events whose occurredAt is later than their recordedAt: by how many milliseconds.
        public var skews: [Dated<Int64>] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&sessions)
            try coder.code(&usage)
            try coder.code(&purchases)
            try coder.code(&cancellations)
            try coder.code(&skews)
        }
    }

    /// Every type: any event recorded before it occurred is a clock-tampering signal.
    public static let reads = Set(EventCatalog.typeNames)

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        let at = event.occurredAt, position = event.position
        let skew = at.milliseconds - event.recordedAt.milliseconds
        if skew > 0 { state.skews.insertDated(Dated(at: at, position: position, value: skew)) }
        switch event.data {
        case .sessionStarted(let s):
            state.sessions.insertDated(Dated(at: at, position: position, value: SessionFact(device: s.deviceId, action: .started, zone: s.timeZone)))
        case .sessionBackgrounded(let s):
            state.sessions.insertDated(Dated(at: at, position: position, value: SessionFact(device: s.deviceId, action: .backgrounded)))
        case .sessionForegrounded(let s):
            state.sessions.insertDated(Dated(at: at, position: position, value: SessionFact(device: s.deviceId, action: .foregrounded)))
        case .sessionEnded(let s):
            let action: SessionAction = s.reason == .crash ? .crashed : .ended
            state.sessions.insertDated(Dated(at: at, position: position, value: SessionFact(device: s.deviceId, action: action)))
        case .usageRecorded(let u):
            state.usage.insertDated(Dated(at: at, position: position, value: Usage(feature: u.feature, count: u.count)))
        case .subscriptionPurchased(let p):
            state.purchases.insertDated(Dated(at: at, position: position, value: Purchase(originalTransactionId: p.originalTransactionId, expiresAt: p.expiresAt)))
        case .subscriptionAutoRenewChanged(let c):
            guard !c.enabled else { return }
            state.cancellations.insertDated(Dated(at: at, position: position, value: c.originalTransactionId))
        case .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .purchaseStarted, .purchasePending, .purchaseFailed, .entitlementVerified, .entitlementVerificationFailed,
             .restoreRequested, .restoreSucceeded, .restoreFailed, .oneOffPurchased, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            return
        }
    }

    /// `nil` under a policy without an `access` section: it has no daily limit (SPEC §4).
    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> AccessView? {
        guard let access = policy.access else { return nil }
        return AccessRules.view(of: state, facts: facts, at: t, policy: policy, access: access)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        guard let access = policy.access else { return [] }
        return AccessRules.changeTimes(of: state, policy: access)
    }
}

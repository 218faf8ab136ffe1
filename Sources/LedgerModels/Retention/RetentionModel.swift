@_spi(Storage) import LedgerCore

/// Retention (SPEC §4, seed 000): what happens to a subject's data once paid access ends —
/// the tier, its capabilities, and what reactivating costs. The tier depends on the plan,
/// which the subject's facts decide (`Plan`); the model's own state is the recovery passes
/// bought and the family organizers' cancellations.
public enum RetentionModel: ReadModel {
    public static let name = "retention"
    public static let version: UInt32 = 4

    public struct State: ModelState {
        /// Recovery passes bought (their transaction ids).
        public var recoveryPasses: [Dated<String>] = []
        /// Family organizers who cancelled the plan this subject shared.
        public var organizerCancellations: [Dated<String>] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&recoveryPasses)
            try coder.code(&organizerCancellations)
        }
    }

    public static let reads: Set<String> = [OneOffPurchased.type, FamilyOrganizerCancelled.type]

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        switch event.data {
        case .oneOffPurchased(let p):
            guard p.kind == .recoveryPass else { return }
            state.recoveryPasses.insertDated(Dated(at: event.occurredAt, position: event.position, value: p.transactionId))
        case .familyOrganizerCancelled(let c):
            state.organizerCancellations.insertDated(Dated(at: event.occurredAt, position: event.position, value: c.organizer))
        case .subscriptionPurchased, .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionAutoRenewChanged, .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .purchaseStarted, .purchasePending, .purchaseFailed, .entitlementVerified, .entitlementVerificationFailed,
             .restoreRequested, .restoreSucceeded, .restoreFailed, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded,
             .sessionStarted, .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            break
        }
    }

    /// `nil` under a policy without a `retention` section: it has no retention flow (SPEC §4).
    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> RetentionView? {
        guard policy.retention != nil else { return nil }
        return RetentionRules.view(of: RetentionSubject(own: state, access: facts, policy: policy.subscription), at: t, policy: policy)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        RetentionRules.changeTimes(of: RetentionSubject(own: state, access: facts, policy: policy.subscription), policy: policy)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy, in window: ChangeWindow) -> [Timestamp] {
        RetentionRules.changeTimes(of: RetentionSubject(own: state, access: facts, policy: policy.subscription), policy: policy, in: window)
    }
}

@_spi(Storage) import LedgerCore

/// Who holds a store transaction: the subjects whose events name a `transactionId` (a
/// purchase, a renewal, a refund, a one-off…), kept under that id rather than under a subject
/// (`keyedBySubject` is false), like `HoldersModel` for the subscription's original id. What
/// `Ledger.subjects(holdingTransaction:)` and the server's `/v1/lookup` read, by key, never by
/// a scan. Not in `status` or the audit, which are about one subject.
public enum TransactionsModel: ReadModel {
    public static let name = "transactions"
    public static let version: UInt32 = 1

    public struct State: ModelState {
        /// Each subject, in the order its first event naming the transaction was appended.
        public var subjects: [String] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&subjects)
        }
    }

    public struct View: ModelView {
        /// Every subject whose events name the transaction, in the order they came.
        public var subjects: [String]
    }

    public static let reads: Set<String> = [
        SubscriptionPurchased.type, SubscriptionRenewed.type, SubscriptionRefunded.type, SubscriptionRefundReversed.type,
        SubscriptionRevoked.type, SubscriptionProductChanged.type, SubscriptionRenewalExtended.type, OneOffPurchased.type,
    ]

    public static var keyedBySubject: Bool { false }
    public static var shownInStatus: Bool { false }

    /// The `transactionId` an event names.
    public static func key(for event: RecordedEvent) -> String? {
        switch event.data {
        case .subscriptionPurchased(let e): e.transactionId
        case .subscriptionRenewed(let e): e.transactionId
        case .subscriptionRefunded(let e): e.transactionId
        case .subscriptionRefundReversed(let e): e.transactionId
        case .subscriptionRevoked(let e): e.transactionId
        case .subscriptionProductChanged(let e): e.transactionId
        case .subscriptionRenewalExtended(let e): e.transactionId
        case .oneOffPurchased(let e): e.transactionId
        case .subscriptionRenewalFailed, .subscriptionGraceExpired, .subscriptionAutoRenewChanged, .subscriptionExpired,
             .purchaseStarted, .purchasePending, .purchaseFailed,
             .entitlementVerified, .entitlementVerificationFailed, .restoreRequested, .restoreSucceeded, .restoreFailed,
             .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled,
             .sessionStarted, .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            nil
        }
    }

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        guard key(for: event) != nil, !state.subjects.contains(event.subject) else { return }
        state.subjects.append(event.subject)
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> View? {
        View(subjects: state.subjects)
    }
}

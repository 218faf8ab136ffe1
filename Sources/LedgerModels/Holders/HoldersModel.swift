@_spi(Storage) import LedgerCore

/// Who holds a store subscription: the subjects whose events name an `originalTransactionId`,
/// kept under that id rather than under a subject (`keyedBySubject` is false). It is the index
/// the App Store's notifications are put under their subject by (SPEC §2.2 "Subject": the
/// subject that reported the purchase), read by key, never by a scan. Not in `status` or the
/// audit, which are about one subject.
public enum HoldersModel: ReadModel {
    public static let name = "holders"
    public static let version: UInt32 = 1

    public struct State: ModelState {
        /// Each subject, in the order its first event naming the id was appended.
        public var subjects: [String] = []
        /// The subject of the latest such event (by position).
        public var latest = ""
        /// That event's position.
        public var latestPosition: UInt64 = 0
        /// The holding subjects (`appstore:<id>`) whose events an `appstore.subject_bound`
        /// has attributed to a subject.
        public var bound: [String] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&subjects)
            try coder.code(&latest)
            try coder.code(&latestPosition)
            try coder.code(&bound)
        }
    }

    public struct View: ModelView {
        /// Every subject that holds the subscription, in the order they came.
        public var subjects: [String]
        /// The one whose event naming it came last: where the App Store's next notification goes.
        public var latest: String?
        /// Holding subjects already attributed to a subject (`appstore.subject_bound`).
        public var bound: [String]
    }

    public static let reads: Set<String> = [
        SubscriptionPurchased.type, SubscriptionRenewed.type, SubscriptionRenewalFailed.type, SubscriptionGraceExpired.type,
        SubscriptionAutoRenewChanged.type, SubscriptionExpired.type, SubscriptionRefunded.type, SubscriptionRefundReversed.type,
        SubscriptionRevoked.type, SubscriptionProductChanged.type, SubscriptionRenewalExtended.type, AppStoreSubjectBound.type,
    ]

    public static var keyedBySubject: Bool { false }
    public static var shownInStatus: Bool { false }

    /// The `originalTransactionId` an event names.
    public static func key(for event: RecordedEvent) -> String? {
        switch event.data {
        case .subscriptionPurchased(let e): e.originalTransactionId
        case .subscriptionRenewed(let e): e.originalTransactionId
        case .subscriptionRenewalFailed(let e): e.originalTransactionId
        case .subscriptionGraceExpired(let e): e.originalTransactionId
        case .subscriptionAutoRenewChanged(let e): e.originalTransactionId
        case .subscriptionExpired(let e): e.originalTransactionId
        case .subscriptionRefunded(let e): e.originalTransactionId
        case .subscriptionRefundReversed(let e): e.originalTransactionId
        case .subscriptionRevoked(let e): e.originalTransactionId
        case .subscriptionProductChanged(let e): e.originalTransactionId
        case .subscriptionRenewalExtended(let e): e.originalTransactionId
        case .appStoreSubjectBound(let e): e.originalTransactionId
        case .purchaseStarted, .purchasePending, .purchaseFailed,
             .entitlementVerified, .entitlementVerificationFailed, .restoreRequested, .restoreSucceeded, .restoreFailed,
             .oneOffPurchased, .appStoreNotification,
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
        guard key(for: event) != nil else { return }
        if case .appStoreSubjectBound(let binding) = event.data, !state.bound.contains(binding.from) { state.bound.append(binding.from) }
        if !state.subjects.contains(event.subject) { state.subjects.append(event.subject) }
        if event.position >= state.latestPosition {
            state.latest = event.subject
            state.latestPosition = event.position
        }
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> View? {
        View(subjects: state.subjects, latest: state.latest.isEmpty ? nil : state.latest, bound: state.bound)
    }
}

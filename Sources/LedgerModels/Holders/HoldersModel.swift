@_spi(Storage) import LedgerCore

/// Who holds a store subscription: the subjects whose events name an `originalTransactionId`,
/// kept under that id rather than under a subject (`keyedBySubject` is false). It is the index
/// the App Store's notifications are put under their subject by (SPEC §2.2 "Subject": the
/// subject that reported the purchase), read by key, never by a scan. Not in `status` or the
/// audit, which are about one subject.
public enum HoldersModel: ReadModel {
    public static let name = "holders"
    public static let version: UInt32 = 3

    public struct State: ModelState {
        /// Each subject, in the order its first event naming the id was appended.
        public var subjects: [String] = []
        /// The subject of the latest such event (by position), a bound holding subject's aside.
        public var latest = ""
        /// That event's position.
        public var latestPosition: UInt64 = 0
        /// The holding subjects (`appstore:<id>`) whose events an `appstore.subject_bound`
        /// has attributed to a subject.
        public var bound: [String] = []
        /// The subject each of `bound` is attributed to (the first binding's).
        public var boundTo: [String] = []
        /// The positions of the holding subject's events naming the subscription, in order:
        /// what a bound subject's index folds onto its own states.
        public var waiting: [UInt64] = []

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&subjects)
            try coder.code(&latest)
            try coder.code(&latestPosition)
            try coder.code(&bound)
            try coder.code(&boundTo)
            try coder.code(&waiting)
        }
    }

    public struct View: ModelView {
        /// Every subject that holds the subscription, in the order they came.
        public var subjects: [String]
        /// The one whose event naming it came last: where the App Store's next notification goes.
        public var latest: String?
        /// Holding subjects already attributed to a subject (`appstore.subject_bound`).
        public var bound: [String]
        /// The subject each holding subject of `bound` is attributed to.
        public var boundTo: [String: String]
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
        guard let original = key(for: event) else { return }
        if event.subject == AppStoreSubjectBound.holdingSubject(of: original) {
            state.waiting.insert(event.position, at: state.waiting.firstIndex { $0 > event.position } ?? state.waiting.endIndex)
        }
        if case .appStoreSubjectBound(let binding) = event.data, let holding = binding.holding(attributedTo: event.subject),
           !state.bound.contains(holding) {
            state.bound.append(holding)
            state.boundTo.append(event.subject)
        }
        if !state.subjects.contains(event.subject) { state.subjects.append(event.subject) }
        // A notification that reached a holding subject once it was bound counts for its
        // subject; the next goes to that subject.
        if event.position >= state.latestPosition, !state.bound.contains(event.subject) {
            state.latest = event.subject
            state.latestPosition = event.position
        }
    }

    /// The binding `event` calls for, given the holders of its subscription after it (SPEC §2.2
    /// "Subject"): once the subscription's App Store events wait under its holding subject
    /// (`appstore:<originalTransactionId>`) and another subject names it too — the app
    /// reported the purchase, a notification carried a token — an `appstore.subject_bound` in
    /// that subject's stream attributes them to it, once. Whichever of the two comes first, the
    /// binding follows the second (the other subject: the event's, or the last to name the
    /// subscription), at its time, with an id of the holding subject and the subject. The engine
    /// appends it in the event's transaction.
    public static func binding(after event: RecordedEvent, holders state: State) -> LedgerEvent? {
        guard let original = key(for: event) else { return nil }
        if case .appStoreSubjectBound = event.data { return nil }
        let holding = AppStoreSubjectBound.holdingSubject(of: original)
        guard state.subjects.contains(holding), !state.bound.contains(holding) else { return nil }
        let prefix = AppStoreSubjectBound.holdingPrefix
        let named = event.subject.hasPrefix(prefix) ? state.subjects.last { !$0.hasPrefix(prefix) } : event.subject
        guard let subject = named else { return nil }
        let binding = AppStoreSubjectBound(originalTransactionId: original, from: holding)
        return LedgerEvent(id: EventIdentity.derive(named: "appstore.subject_bound/\(holding)/\(subject)"), subject: subject,
                           occurredAt: event.occurredAt, source: .system, data: binding.eventData)
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> View? {
        View(subjects: state.subjects, latest: state.latest.isEmpty ? nil : state.latest, bound: state.bound,
             boundTo: Dictionary(zip(state.bound, state.boundTo), uniquingKeysWith: { first, _ in first }))
    }
}

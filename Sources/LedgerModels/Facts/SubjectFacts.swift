@_spi(Storage) import LedgerCore

/// What decides a subject's plan, folded once per subject: its store subscription, support
/// grants, device snapshots, sign-ins and deletion. Every model's view receives it, so that
/// the plan at t — which retention, limits, deletion and due depend on — is
/// decided by one rule over one copy of the facts (`Plan`), and no model holds another's state.
///
/// Facts keep their business times, not running answers, so an event that arrives late lands
/// where its occurredAt puts it, and the same events in any order give the same facts.
public struct SubjectFacts: StateRecord, Equatable {
    /// A device's StoreKit check: the plan it verified (with its end, if any), or a failure.
    public enum Snapshot: StateValue, Equatable {
        case verified(plan: VerifiedPlan, expiresAt: Timestamp?)
        case failed

        public static func encode(_ value: Self, to encoder: inout StateEncoder) {
            switch value {
            case .verified(let plan, let expiresAt):
                encoder.write(UInt8(0))
                VerifiedPlan.encode(plan, to: &encoder)
                Timestamp?.encode(expiresAt, to: &encoder)
            case .failed:
                encoder.write(UInt8(1))
            }
        }

        public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
            switch try decoder.byte() {
            case 0: return .verified(plan: try VerifiedPlan.decode(from: &decoder), expiresAt: try Timestamp?.decode(from: &decoder))
            case 1: return .failed
            case let other: throw StateDecoder.Damaged(what: "unknown snapshot kind \(other)")
            }
        }
    }

    /// What every event tells (the first event, the latest session's zone, clocks ahead):
    /// stored first, the plan's facts after it as a part of their own.
    public var activity = SubjectActivity()
    public var subscription = SubscriptionFacts()
    /// Support grants, with their end.
    public var grants: [Dated<Timestamp>] = []
    public var snapshots: [Dated<Snapshot>] = []
    /// Signed in (true) or out (false), from account.created, .signed_in and .signed_out.
    public var signIns: [Dated<Bool>] = []
    /// `account.deleted` (its value is always true).
    public var deletions: [Dated<Bool>] = []
    /// The holding subjects (`appstore:<originalTransactionId>`) whose App Store events count
    /// for this subject (`appstore.subject_bound`), sorted: its views fold their events with its
    /// own, so the engine answers them by replay (`AppStoreSubjectBound`).
    public var bound: [String] = []
    /// The plan's times, when a walk keeps them (`keepPlanTimes`); never stored.
    var kept = KeptPlanTimes()
    /// What bounds the grants' ends (`GrantReach`); never stored.
    var grantReach = GrantReach()

    public init() {}

    public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
        try coder.code(&activity)
        try coder.nested { coder throws(StateDecoder.Damaged) in try codePlan(&coder) }
    }

    /// The plan's facts, the part an event of a type outside `planReads` leaves as it is.
    mutating func codePlan(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
        try coder.code(&subscription)
        try coder.code(&grants)
        if coder.isDecoding { grantReach = GrantReach(grants) }
        try coder.code(&snapshots)
        try coder.code(&signIns)
        try coder.code(&deletions)
        try coder.code(&bound)
    }

    /// The event types `apply` reads: every type (`activity`).
    public static let reads = Set(EventCatalog.typeNames)

    /// Folds one event under `policy`: into the activity, and into the plan's facts when it
    /// is of one of `planReads`.
    public mutating func apply(_ event: RecordedEvent, policy: Policy) {
        activity.apply(event, policy: policy)
        if Self.planReads.contains(event.type) {
            applyPlan(event)
            keepTimes(after: event)
        }
    }

    /// The event types that change the plan's facts (all but `activity`).
    public static let planReads: Set<String> = [
        SubscriptionPurchased.type, SubscriptionRenewed.type, SubscriptionProductChanged.type, SubscriptionRenewalExtended.type,
        SubscriptionRefunded.type, SubscriptionRefundReversed.type, SubscriptionRevoked.type, SubscriptionRenewalFailed.type,
        SubscriptionExpired.type, SubscriptionGraceExpired.type, SubscriptionAutoRenewChanged.type,
        SupportEntitlementGranted.type, EntitlementVerified.type, EntitlementVerificationFailed.type,
        AccountCreated.type, AccountSignedIn.type, AccountSignedOut.type, AccountDeleted.type, AppStoreSubjectBound.type,
    ]

    /// Folds one event of `planReads` into the plan's facts.
    mutating func applyPlan(_ event: RecordedEvent) {
        let at = event.occurredAt, position = event.position
        typealias Transaction = SubscriptionFacts.Transaction
        let transactionsBefore = subscription.transactions.count
        defer {
            if subscription.transactions.count > transactionsBefore,
               let added = subscription.transactions.lastIndex(where: { $0.position == position }) {
                if subscription.transactions[added].value.purchasedAt <= subscription.transactions[added].at {
                    subscription.purchasedByTheirTime += 1
                }
                subscription.counted(transactionAt: added)
            }
        }
        switch event.data {
        case .subscriptionPurchased(let p):
            subscription.transactions.insertDated(Dated(at: at, position: position, value: Transaction(
                kind: .purchase, id: p.transactionId, originalId: p.originalTransactionId, productId: p.productId,
                purchasedAt: p.purchasedAt, expiresAt: p.expiresAt, isTrial: p.offer == .freeTrial)))
        case .subscriptionRenewed(let r):
            subscription.transactions.insertDated(Dated(at: at, position: position, value: Transaction(
                kind: .renewal, id: r.transactionId, originalId: r.originalTransactionId, productId: r.productId,
                purchasedAt: r.purchasedAt, expiresAt: r.expiresAt, isTrial: false)))
        case .subscriptionProductChanged(let c):
            // A change at the next renewal changes nothing until that renewal, which carries its product.
            guard c.effective == .immediate, let id = c.transactionId, let purchasedAt = c.purchasedAt, let expiresAt = c.expiresAt else { return }
            subscription.transactions.insertDated(Dated(at: at, position: position, value: Transaction(
                kind: .productChange, id: id, originalId: c.originalTransactionId, productId: c.toProductId,
                purchasedAt: purchasedAt, expiresAt: expiresAt, isTrial: false)))
            subscription.upgrades.insertDated(Dated(at: at, position: position, value: SubscriptionFacts.Upgrade(
                originalId: c.originalTransactionId, newTransactionId: id, startsAt: purchasedAt)))
        case .subscriptionRenewalExtended(let e):
            subscription.extensions.insertDated(Dated(at: at, position: position, value: .init(transactionId: e.transactionId, expiresAt: e.expiresAt)))
            subscription.latestExtensionEnd = max(subscription.latestExtensionEnd ?? e.expiresAt, e.expiresAt)
            subscription.extensionsFolded += 1
            subscription.counted(SubscriptionFacts.Extension(transactionId: e.transactionId, expiresAt: e.expiresAt))
        case .subscriptionRefunded(let r):
            subscription.marks.insertDated(Dated(at: at, position: position, value: .init(kind: .refund, transactionId: r.transactionId)))
            subscription.refundsFolded += 1
            subscription.marked.add(r.transactionId)
        case .subscriptionRefundReversed(let r):
            subscription.marks.insertDated(Dated(at: at, position: position, value: .init(kind: .reversal, transactionId: r.transactionId)))
            subscription.reversalsFolded += 1
            subscription.marked.add(r.transactionId)
        case .subscriptionRevoked(let r):
            subscription.marks.insertDated(Dated(at: at, position: position, value: .init(kind: .revoke, transactionId: r.transactionId)))
            subscription.revocationsFolded += 1
            subscription.marked.add(r.transactionId)
        case .subscriptionRenewalFailed(let f):
            subscription.failures.insertDated(Dated(at: at, position: position, value: .init(originalId: f.originalTransactionId, graceExpiresAt: f.gracePeriodExpiresAt)))
            if let end = f.gracePeriodExpiresAt { subscription.latestStoreGraceEnd = max(subscription.latestStoreGraceEnd ?? end, end) }
            subscription.failuresFolded += 1
        case .subscriptionExpired(let e):
            subscription.ends.insertDated(Dated(at: at, position: position, value: .init(originalId: e.originalTransactionId, graceOnly: false)))
        case .subscriptionGraceExpired(let e):
            subscription.ends.insertDated(Dated(at: at, position: position, value: .init(originalId: e.originalTransactionId, graceOnly: true)))
        case .subscriptionAutoRenewChanged(let c):
            subscription.autoRenew.insertDated(Dated(at: at, position: position, value: .init(originalId: c.originalTransactionId, enabled: c.enabled)))
        case .supportEntitlementGranted(let g):
            let grant = Dated(at: at, position: position, value: g.until)
            grants.insertDated(grant)
            grantReach.add(grant, to: grants)
        case .entitlementVerified(let v):
            snapshots.insertDated(Dated(at: at, position: position, value: .verified(plan: v.plan, expiresAt: v.expiresAt)))
        case .entitlementVerificationFailed:
            snapshots.insertDated(Dated(at: at, position: position, value: .failed))
        case .accountCreated(let c):
            signIns.insertDated(Dated(at: at, position: position, value: c.signedIn))
        case .accountSignedIn:
            signIns.insertDated(Dated(at: at, position: position, value: true))
        case .accountSignedOut:
            signIns.insertDated(Dated(at: at, position: position, value: false))
        case .accountDeleted:
            deletions.insertDated(Dated(at: at, position: position, value: true))
        case .appStoreSubjectBound(let binding):
            guard let holding = binding.holding(attributedTo: event.subject), !bound.contains(holding) else { return }
            bound.insert(holding, at: bound.firstIndex { $0 > holding } ?? bound.endIndex)
        case .purchaseStarted, .purchasePending, .purchaseFailed, .restoreRequested, .restoreSucceeded, .restoreFailed,
             .oneOffPurchased, .appStoreNotification,
             .accountDeletionRequested, .accountDeletionCancelled, .accountDeletionStepCompleted, .accountDeletionStepFailed,
             .accountExportRequested, .accountExportCompleted, .supportNoteAdded, .familyOrganizerCancelled,
             .sessionStarted, .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            break
        }
    }
}

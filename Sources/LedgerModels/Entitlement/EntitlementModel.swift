@_spi(Storage) import LedgerCore

/// Entitlement (SPEC §4, seed 004): what a subject may use at a time, and why. The plan comes
/// from the subject's facts (`Plan`); the model's own state is the client-side purchase
/// attempts, for `purchasePending`.
public enum EntitlementModel: ReadModel {
    public static let name = "entitlement"
    public static let version: UInt32 = 4

    /// A client-side purchase attempt.
    public enum Attempt: UInt8, StateValue, Equatable {
        case started = 0, pending = 1, failed = 2
    }

    public struct State: ModelState {
        public var attempts: [Dated<Attempt>] = []
        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&attempts) }
    }

    public static let reads: Set<String> = [PurchaseStarted.type, PurchasePending.type, PurchaseFailed.type]

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        let attempt: Attempt
        switch event.data {
        case .purchaseStarted: attempt = .started
        case .purchasePending: attempt = .pending
        case .purchaseFailed: attempt = .failed
        case .subscriptionPurchased, .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionAutoRenewChanged, .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .entitlementVerified, .entitlementVerificationFailed, .restoreRequested, .restoreSucceeded, .restoreFailed,
             .oneOffPurchased, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled,
             .sessionStarted, .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            return
        }
        state.attempts.insertDated(Dated(at: event.occurredAt, position: event.position, value: attempt))
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> EntitlementView? {
        let store = facts.subscription
        let rules = policy.subscription
        let decision = Plan.decide(facts, at: t, policy: rules)
        let billingIssue = store.billingIssue(at: t, policy: rules)
        let autoRenew = store.autoRenewing(at: t)
        // After `account.deleted` the store facts still give every field but the plan: the
        // App Store subscription goes on (CH34 L719, L771).
        let coverage = decision.reason.rule == "deleted" ? store.coverage(at: t) : decision.coverage
        // Banners in SPEC §4's order: billingIssue, cantVerify, checkingStatus.
        var banners = billingIssue ? ["billingIssue"] : []
        if let banner = decision.banner { banners.append(banner) }
        if decision.planState == .free || decision.planState == .guest, Plan.deviceSnapshot(facts, at: t, policy: rules) == .void {
            banners.append("checkingStatus")
        }
        return EntitlementView(
            planState: decision.planState, trialEligible: !store.hasTransactions(at: t),
            expiresAt: coverage.map(\.end) ?? store.latestEnd(at: t),
            renewsAt: coverage.flatMap { autoRenew == true ? $0.end : nil },
            autoRenew: autoRenew, billingIssue: billingIssue, purchasePending: purchasePending(state, facts, at: t),
            productId: coverage.map(\.transaction.value.productId) ?? store.latestTransaction(at: t)?.value.productId,
            banners: banners, reason: decision.reason)
    }

    /// A `purchase.started` or `.pending` not yet followed by a purchase or `purchase.failed`.
    static func purchasePending(_ state: State, _ facts: SubjectFacts, at t: Timestamp) -> Bool {
        guard let attempt = state.attempts.known(at: t).last, attempt.value != .failed else { return false }
        // The transactions after the attempt, found by halving: the list is in (occurredAt,
        // position) order, and a walk over all of them at every view grows with the history.
        let known = facts.subscription.transactions.known(at: t)
        return !known[known.firstIndex(after: attempt.at, position: attempt.position)...].contains { $0.value.kind == .purchase }
    }

    /// Beyond the facts' own: the purchase attempts (`purchasePending`).
    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        state.attempts.map(\.at)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy, in window: ChangeWindow) -> [Timestamp] {
        var times: [Timestamp] = []
        window.appendShifted(state.attempts.lazy.map(\.at), byDays: 0, to: &times)
        return times
    }
}

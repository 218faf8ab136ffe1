import LedgerCore

/// The plan a subject is on at a time.
public enum PlanState: String, Sendable, Hashable, CaseIterable {
    case guest, free, trial, pro
    case proGrace = "pro_grace"
}

/// The entitlement of one subject at a time (SPEC §4–§5).
public struct EntitlementView: ProjectionView, Hashable {
    /// Which rule decided the plan, the policy key it used and the event that decided it.
    public struct Reason: Sendable, Hashable {
        public var rule: String
        public var policyKey: String?
        public var position: UInt64?

        public init(rule: String, policyKey: String?, position: UInt64?) {
            self.rule = rule
            self.policyKey = policyKey
            self.position = position
        }
    }

    public var planState: PlanState
    public var trialEligible: Bool
    public var expiresAt: Timestamp?
    public var renewsAt: Timestamp?
    public var autoRenew: Bool?
    public var billingIssue: Bool
    public var purchasePending: Bool
    public var productId: String?
    /// `billingIssue`, `cantVerify`, `checkingStatus`.
    public var banners: [String]
    public var reason: Reason

    public init(planState: PlanState, trialEligible: Bool, expiresAt: Timestamp?, renewsAt: Timestamp?, autoRenew: Bool?,
                billingIssue: Bool, purchasePending: Bool, productId: String?, banners: [String], reason: Reason) {
        self.planState = planState
        self.trialEligible = trialEligible
        self.expiresAt = expiresAt
        self.renewsAt = renewsAt
        self.autoRenew = autoRenew
        self.billingIssue = billingIssue
        self.purchasePending = purchasePending
        self.productId = productId
        self.banners = banners
        self.reason = reason
    }

    public func rule(for field: String) -> String? {
        switch field {
        case "billingIssue": "billingIssue"
        case "trialEligible": "trialEligible"
        case "autoRenew": "autoRenew"
        case "purchasePending": "purchasePending"
        default: reason.rule
        }
    }

    /// A plan given by a rule of higher precedence and now decided by a lower one was lost:
    /// the change cites the rule that gave it (the period a refund cut short, the trial or the
    /// billing grace that ran out), not the fallback that decides now. The billing-issue
    /// banner's changes cite `billingIssue`.
    public func rule(for field: String, since previous: EntitlementView) -> String? {
        if field == "banners" && previous.billingIssue != billingIssue { return "billingIssue" }
        let own = rule(for: field)
        guard own == reason.rule, Self.precedence(reason.rule) > Self.precedence(previous.reason.rule) else { return own }
        return previous.reason.rule
    }

    public func timeChange(since previous: EntitlementView) -> String? {
        if planState != previous.planState {
            let what = switch previous.reason.rule {
            case "storeCoverage": previous.planState == .trial ? "the trial ran out" : "the paid period ended"
            case "billingGrace": "billing grace ended"
            case "supportGrant": "the support grant ended"
            case "deviceVerified": "the device's verification is due again"
            case "offlineGrace": "the offline grace ended"
            default: "the plan changed"
            }
            return "\(what): \(previous.planState.rawValue) → \(planState.rawValue)"
        }
        if previous.billingIssue && !billingIssue { return "the billing retry window closed" }
        return nil
    }

    /// SPEC §4's step number of a rule.
    static func precedence(_ rule: String) -> Int {
        switch rule {
        case "deleted": 1
        case "storeCoverage": 2
        case "billingGrace": 3
        case "supportGrant": 4
        case "deviceVerified", "offlineGrace": 5
        default: 6
        }
    }

    public static var restatedFields: Set<String> { ["reason.rule", "reason.policyKey", "reason.position"] }

    public var json: JSONObject {
        [
            "planState": .string(planState.rawValue),
            "trialEligible": .bool(trialEligible),
            "expiresAt": expiresAt.map { .string($0.description) } ?? .null,
            "renewsAt": renewsAt.map { .string($0.description) } ?? .null,
            "autoRenew": autoRenew.map(JSON.bool) ?? .null,
            "billingIssue": .bool(billingIssue),
            "purchasePending": .bool(purchasePending),
            "productId": productId.map(JSON.string) ?? .null,
            "banners": .array(banners.map(JSON.string)),
            "reason": [
                "rule": .string(reason.rule),
                "policyKey": reason.policyKey.map(JSON.string) ?? .null,
                "position": reason.position.map { .integer(Int64($0)) } ?? .null,
            ],
        ]
    }
}

/// The six-step precedence of SPEC §4, as one pure function of the facts, t and the policy.
enum EntitlementRules {
    /// What the precedence decides at a time: the plan, the rule that decided it, and what that
    /// rule sets beyond the plan. The view is built around it; the retention model asks only
    /// this (it visits many times of a history, and needs no other field).
    struct Decision {
        var planState: PlanState
        var reason: EntitlementView.Reason
        /// Rule 2's coverage: the product and the end the view shows.
        var coverage: Coverage?
        /// `cantVerify`, when rule 5 gives `pro_grace`.
        var banner: String?

        /// Whether the plan gives paid access (trial, pro or pro in grace).
        var isPaid: Bool { planState == .trial || planState == .pro || planState == .proGrace }
    }

    /// Rules 1–6 in order at `t`, over the facts known at `known` (default `t`; see
    /// `SubscriptionFacts`' rules): the first that applies decides.
    static func decide(_ state: EntitlementProjection.State, at t: Timestamp, known: Timestamp? = nil,
                       policy: Policy.Subscription) -> Decision {
        let known = known ?? t
        let happened = min(t, known)
        let facts = state.subscription
        // 1. Deleted.
        if let deleted = state.deletions.known(at: happened).first {
            return Decision(planState: .guest, reason: .init(rule: "deleted", policyKey: nil, position: deleted.position))
        }
        // 2. Store coverage. Cancelling changes nothing until the period ends.
        if let coverage = facts.coverage(at: t, known: known) {
            return Decision(planState: coverage.transaction.value.isTrial ? .trial : .pro,
                            reason: .init(rule: "storeCoverage", policyKey: nil, position: coverage.transaction.position), coverage: coverage)
        }
        // 3. Billing grace after a failed renewal.
        if let episode = facts.billingEpisode(at: t, known: known, policy: policy), !episode.recovered, t < episode.graceEnd {
            return Decision(planState: .pro, reason: .init(rule: "billingGrace",
                                                           policyKey: episode.graceFromStore ? "subscription.billingGraceSource" : "subscription.billingGraceDays",
                                                           position: episode.failure.position))
        }
        // 4. A support grant.
        if let grant = state.grants.known(at: happened).last(where: { t < $0.value }) {
            return Decision(planState: .pro, reason: .init(rule: "supportGrant", policyKey: nil, position: grant.position))
        }
        // 5. The latest device snapshot.
        switch deviceSnapshot(state, at: t, known: known, policy: policy) {
        case .verified(let plan, let position):
            return Decision(planState: plan, reason: .init(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: position))
        case .offlineGrace(let position):
            return Decision(planState: .proGrace, reason: .init(rule: "offlineGrace", policyKey: "subscription.offlineGraceHours", position: position),
                            banner: "cantVerify")
        case .void, nil:
            break
        }
        // 6. Signed in or not.
        if let sign = state.signIns.known(at: happened).last {
            return Decision(planState: sign.value ? .free : .guest,
                            reason: .init(rule: sign.value ? "signedIn" : "noAccount", policyKey: nil, position: sign.position))
        }
        return Decision(planState: .guest, reason: .init(rule: "noAccount", policyKey: nil, position: nil))
    }

    static func view(of state: EntitlementProjection.State, at t: Timestamp, policy: Policy.Subscription) -> EntitlementView {
        let facts = state.subscription
        let decision = decide(state, at: t, policy: policy)
        let billingIssue = facts.billingIssue(at: t, policy: policy)
        let autoRenew = facts.autoRenewing(at: t)
        // After `account.deleted` the store facts still give every field but the plan: the
        // App Store subscription goes on (CH34 L719, L771).
        let coverage = decision.reason.rule == "deleted" ? facts.coverage(at: t) : decision.coverage
        // Banners in SPEC §4's order: billingIssue, cantVerify, checkingStatus.
        var banners = billingIssue ? ["billingIssue"] : []
        if let banner = decision.banner { banners.append(banner) }
        if decision.planState == .free || decision.planState == .guest, deviceSnapshot(state, at: t, policy: policy) == .void {
            banners.append("checkingStatus")
        }
        // Each field worked out first, the view made once: a view built and then changed was
        // copied whole on the way out.
        return EntitlementView(
            planState: decision.planState, trialEligible: !facts.hasTransactions(at: t),
            expiresAt: coverage.map(\.end) ?? facts.latestEnd(at: t),
            renewsAt: coverage.flatMap { autoRenew == true ? $0.end : nil },
            autoRenew: autoRenew, billingIssue: billingIssue, purchasePending: purchasePending(state, at: t),
            productId: coverage.map(\.transaction.value.productId) ?? facts.latestTransaction(at: t)?.value.productId,
            banners: banners, reason: decision.reason)
    }

    /// Rule by rule, the times the view may change with no new event (see
    /// `Projection.changeTimes`): store periods and billing windows, grant ends, and each
    /// device snapshot's verification and offline windows.
    static func changeTimes(of state: EntitlementProjection.State, policy: Policy.Subscription) -> [Timestamp] {
        // Appended one by one: an array literal or a mapped array per fact is an allocation
        // (the retention look back gathers these on every query of an active subject).
        var times = state.subscription.changeTimes(policy: policy)
        times.reserveCapacity(times.count + 2 * state.grants.count + 4 * state.snapshots.count
                              + state.signIns.count + state.deletions.count + state.attempts.count)
        for g in state.grants {
            times.append(g.at)
            times.append(g.value)
        }
        for s in state.snapshots {
            times.append(s.at)
            guard case .verified(_, let expiresAt) = s.value else { continue }
            times.append(s.at.adding(seconds: policy.verificationIntervalHours * 3600))
            times.append(s.at.adding(seconds: policy.offlineGraceHours * 3600))
            if let expiresAt { times.append(expiresAt) }
        }
        for s in state.signIns { times.append(s.at) }
        for d in state.deletions { times.append(d.at) }
        for a in state.attempts { times.append(a.at) }
        return times
    }

    enum SnapshotOutcome: Equatable {
        case verified(PlanState, position: UInt64)
        case offlineGrace(position: UInt64)
        /// A paid snapshot that gives nothing now: its windows or its expiresAt passed, or a
        /// store fact after it voided it (the app is checking: `checkingStatus`).
        case void
    }

    /// Rule 5: the latest `entitlement.verified` at or before t (`nil` when there is none, or
    /// it said `free`), and what it gives at t. "After v" is later in (occurredAt, position)
    /// order; each window is half-open.
    static func deviceSnapshot(_ state: EntitlementProjection.State, at t: Timestamp, known: Timestamp? = nil,
                               policy: Policy.Subscription) -> SnapshotOutcome? {
        let happened = min(t, known ?? t)
        let snapshots = state.snapshots.known(at: happened)
        guard let index = snapshots.lastIndex(where: { if case .verified = $0.value { true } else { false } }),
              case .verified(let plan, let expiresAt) = snapshots[index].value, plan != .free
        else { return nil }
        let v = snapshots[index]
        if let expiresAt, expiresAt <= t { return .void }
        let facts = state.subscription
        let voided = facts.ends.known(at: happened).contains { ($0.at, $0.position) > (v.at, v.position) && !$0.value.graceOnly }
            || facts.marks.known(at: happened).contains { ($0.at, $0.position) > (v.at, v.position) && $0.value.kind != .reversal }
        if voided { return .void }
        let failedSince = snapshots[(index + 1)...].contains { $0.value == .failed }
        if !failedSince && t < v.at.adding(seconds: policy.verificationIntervalHours * 3600) {
            return .verified(plan == .trial ? .trial : .pro, position: v.position)
        }
        if t < v.at.adding(seconds: policy.offlineGraceHours * 3600) { return .offlineGrace(position: v.position) }
        return .void
    }

    /// A `purchase.started` or `.pending` not yet followed by a purchase or `purchase.failed`.
    static func purchasePending(_ state: EntitlementProjection.State, at t: Timestamp) -> Bool {
        guard let attempt = state.attempts.known(at: t).last, attempt.value != .failed else { return false }
        let purchased = state.subscription.transactions.known(at: t).contains { $0.value.kind == .purchase && ($0.at, $0.position) > (attempt.at, attempt.position) }
        return !purchased
    }
}

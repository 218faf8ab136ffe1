@_spi(Storage) import LedgerCore

/// The plan a subject is on at a time.
public enum PlanState: String, Sendable, Hashable, CaseIterable, Encodable {
    case guest, free, trial, pro
    case proGrace = "pro_grace"

    /// Whether the plan gives paid access (trial, pro or pro in grace).
    public var isPaid: Bool { self == .trial || self == .pro || self == .proGrace }
}

/// SPEC §4's six-step precedence over a subject's facts: one pure function that every model
/// needing the plan at a time asks (the entitlement's view is built around it; retention asks it
/// at many times of a history).
public enum Plan {
    /// Which rule decided, the policy key it used and the event that decided it.
    public struct Reason: Sendable, Hashable, Encodable {
        public var rule: String
        public var policyKey: String?
        public var position: UInt64?

        public init(rule: String, policyKey: String?, position: UInt64?) {
            self.rule = rule
            self.policyKey = policyKey
            self.position = position
        }
    }

    /// What the precedence decides at a time: the plan, the rule and what that rule sets beyond it.
    public struct Decision: Sendable {
        public var planState: PlanState
        public var reason: Reason
        /// Rule 2's coverage: the product and the end the view shows.
        public var coverage: Coverage?
        /// `cantVerify`, when rule 5 gives `pro_grace`.
        public var banner: String?

        public var isPaid: Bool { planState.isPaid }
    }

    /// Rules 1–6 in order at `t`, over the facts known at `known` (default `t`; see
    /// `SubscriptionFacts`' rules): the first that applies decides.
    public static func decide(_ facts: SubjectFacts, at t: Timestamp, known: Timestamp? = nil, policy: Policy.Subscription) -> Decision {
        let known = known ?? t
        let happened = min(t, known)
        let store = facts.subscription
        // 1. Deleted.
        if let deleted = facts.deletions.known(at: happened).first {
            return Decision(planState: .guest, reason: Reason(rule: "deleted", policyKey: nil, position: deleted.position))
        }
        // 2. Store coverage. Cancelling changes nothing until the period ends.
        if let coverage = store.coverage(at: t, known: known) {
            return Decision(planState: coverage.transaction.value.isTrial ? .trial : .pro,
                            reason: Reason(rule: "storeCoverage", policyKey: nil, position: coverage.transaction.position), coverage: coverage)
        }
        // 3. Billing grace after a failed renewal.
        if let episode = store.billingGrace(at: t, known: known, policy: policy) {
            return Decision(planState: .pro, reason: Reason(rule: "billingGrace",
                                                            policyKey: episode.graceFromStore ? "subscription.billingGraceSource" : "subscription.billingGraceDays",
                                                            position: episode.failure.position))
        }
        // 4. A support grant.
        if let grant = facts.grantReach.running(at: t, in: facts.grants.known(at: happened), of: facts.grants) {
            return Decision(planState: .pro, reason: Reason(rule: "supportGrant", policyKey: nil, position: grant.position))
        }
        // 5. The latest device snapshot.
        switch deviceSnapshot(facts, at: t, known: known, policy: policy) {
        case .verified(let plan, let position):
            return Decision(planState: plan, reason: Reason(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: position))
        case .offlineGrace(let position):
            return Decision(planState: .proGrace, reason: Reason(rule: "offlineGrace", policyKey: "subscription.offlineGraceHours", position: position),
                            banner: "cantVerify")
        case .void, nil:
            break
        }
        // 6. Signed in or not.
        if let sign = facts.signIns.known(at: happened).last {
            return Decision(planState: sign.value ? .free : .guest,
                            reason: Reason(rule: sign.value ? "signedIn" : "noAccount", policyKey: nil, position: sign.position))
        }
        return Decision(planState: .guest, reason: Reason(rule: "noAccount", policyKey: nil, position: nil))
    }

    /// What rule 5's latest snapshot gives at a time.
    public enum SnapshotOutcome: Sendable, Equatable {
        case verified(PlanState, position: UInt64)
        case offlineGrace(position: UInt64)
        /// A paid snapshot that gives nothing now: its windows or its expiresAt passed, or a
        /// store fact after it voided it (the app is checking: `checkingStatus`).
        case void
    }

    /// Rule 5: the latest `entitlement.verified` at or before t (`nil` when there is none, or
    /// it said `free`), and what it gives at t. "After v" is later in (occurredAt, position)
    /// order; each window is half-open.
    public static func deviceSnapshot(_ facts: SubjectFacts, at t: Timestamp, known: Timestamp? = nil,
                                      policy: Policy.Subscription) -> SnapshotOutcome? {
        let happened = min(t, known ?? t)
        let snapshots = facts.snapshots.known(at: happened)
        guard let index = snapshots.lastIndex(where: { if case .verified = $0.value { true } else { false } }),
              case .verified(let plan, let expiresAt) = snapshots[index].value, plan != .free
        else { return nil }
        let v = snapshots[index]
        if let expiresAt, expiresAt <= t { return .void }
        let store = facts.subscription
        let (ends, marks) = (store.ends.known(at: happened), store.marks.known(at: happened))
        let voided = ends[ends.firstIndex(after: v.at, position: v.position)...].contains { !$0.value.graceOnly }
            || marks[marks.firstIndex(after: v.at, position: v.position)...].contains { $0.value.kind != .reversal }
        if voided { return .void }
        let failedSince = snapshots[(index + 1)...].contains { $0.value == .failed }
        if !failedSince && t < v.at.adding(hours: policy.verificationIntervalHours) {
            return .verified(plan == .trial ? .trial : .pro, position: v.position)
        }
        if t < v.at.adding(hours: policy.offlineGraceHours) { return .offlineGrace(position: v.position) }
        return .void
    }

    /// Rule by rule, the times the plan may change with no new event (a superset; see
    /// `ReadModel.changeTimes`): store periods and billing windows, grant ends, each device
    /// snapshot's windows, and every fact's own time. Without `signIns`, the sign-ins' and
    /// outs' times are left out: the times paid access may start or end (rule 6 gives only
    /// `free` or `guest`), which is all retention asks — a subject signing in a thousand
    /// times has a thousand plan change times and none of them moves a tier.
    public static func changeTimes(of facts: SubjectFacts, policy: Policy.Subscription, signIns: Bool = true) -> [Timestamp] {
        var times = facts.subscription.changeTimes(policy: policy)
        times.reserveCapacity(times.count + 2 * facts.grants.count + 7 * facts.snapshots.count + facts.signIns.count + facts.deletions.count)
        appendOwnChanges(of: facts, policy: policy, to: &times)
        if signIns { for s in facts.signIns { times.append(s.at) } }
        return times
    }

    /// The change times of the grants, device snapshots and deletions: each fact's of its own
    /// alone (with the store fact that voids a snapshot), which `PlanTimes` adds one by one.
    static func appendOwnChanges(of facts: SubjectFacts, policy: Policy.Subscription, to times: inout [Timestamp]) {
        for g in facts.grants { times.append(g.at) }
        // A failed verification's arrival (a verified one's is among the ends).
        for s in facts.snapshots where s.value == .failed { times.append(s.at) }
        appendEnds(of: facts, policy: policy, to: &times)
    }

    /// The times at which paid access may end with no new event (a superset, and a subset of
    /// `changeTimes`): a store period or billing grace ending (`SubscriptionFacts.endTimes`),
    /// a grant running out, a verified device snapshot arriving, its windows passing or the
    /// first refund, revocation or expiry after it voiding it, a deletion.
    /// A look back for where access ended visits these alone: a subject failing to renew every
    /// hour has a change time an hour and none of them ends anything.
    public static func endTimes(of facts: SubjectFacts, policy: Policy.Subscription) -> [Timestamp] {
        var times = facts.subscription.endTimes(policy: policy)
        appendEnds(of: facts, policy: policy, to: &times)
        return times
    }

    /// The times beyond the subscription's at which paid access may end.
    static func appendEnds(of facts: SubjectFacts, policy: Policy.Subscription, to times: inout [Timestamp]) {
        for g in facts.grants { times.append(g.value) }
        // The first refund, revocation or store expiry after a snapshot voids it
        // (`deviceSnapshot`): the lists are in (occurredAt, position) order, so the one after
        // each snapshot is found walking each list once, from the first fact not before the
        // first snapshot (found by halving).
        let (marks, ends) = (facts.subscription.marks, facts.subscription.ends)
        let before = facts.snapshots.first.map { $0.at.adding(milliseconds: -1) } ?? Timestamp(milliseconds: .min)
        var (void, end) = (marks.known(at: before).endIndex, ends.known(at: before).endIndex)
        // A failed verification moves the latest verified snapshot to its offline grace: it
        // ends nothing, unless a policy's offline grace is shorter than the interval. A
        // verified one replaces the latest (with `free`, or expired).
        let failuresEnd = policy.offlineGraceHours < policy.verificationIntervalHours
        // Kind by kind, each mostly in order: the sort after takes each as one run.
        for s in facts.snapshots where failuresEnd || s.value != .failed { times.append(s.at) }
        for s in facts.snapshots {
            guard case .verified = s.value else { continue }
            while void < marks.endIndex && ((marks[void].at, marks[void].position) <= (s.at, s.position) || marks[void].value.kind == .reversal) {
                void += 1
            }
            if void < marks.endIndex { times.append(marks[void].at) }
        }
        for s in facts.snapshots {
            guard case .verified = s.value else { continue }
            while end < ends.endIndex && ((ends[end].at, ends[end].position) <= (s.at, s.position) || ends[end].value.graceOnly) {
                end += 1
            }
            if end < ends.endIndex { times.append(ends[end].at) }
        }
        for s in facts.snapshots where s.value != .failed { times.append(s.at.adding(hours: policy.verificationIntervalHours)) }
        for s in facts.snapshots where s.value != .failed { times.append(s.at.adding(hours: policy.offlineGraceHours)) }
        for s in facts.snapshots {
            if case .verified(_, let expiresAt?) = s.value { times.append(expiresAt) }
        }
        for d in facts.deletions { times.append(d.at) }
    }
}

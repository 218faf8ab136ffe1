@_spi(Storage) import LedgerCore

/// SPEC §4's due items, each a pure function of the subject's facts and the due state,
/// decided at its own time on the events that happened by then.
package enum DueRules {
    package static let trialEndingSoon = DueModel.Kind.trialEndingSoon.rawValue
    package static let paymentFailed = DueModel.Kind.paymentFailed.rawValue
    package static let deletionQueued = DueModel.Kind.deletionQueued.rawValue
    package static let retentionEmail = DueModel.Kind.retentionEmail.rawValue
    package static let tierChanged = DueModel.Kind.tierChanged.rawValue

    static func items(of state: DueModel.State, facts: SubjectFacts, policy: Policy) -> [IndexEntry] {
        var items: [IndexEntry] = []
        if let notifications = policy.notifications { items += trialsEnding(state, facts, lead: notifications.trialEndingLeadHours) }
        items += paymentsFailed(state, facts, policy: policy.subscription)
        if let deletion = policy.deletion { items += deletionsQueued(state, facts, policy: deletion) }
        if let retention = policy.retention { items += retentionFlows(state, facts, policy: policy, retention: retention) }
        return items
    }

    /// The retention e-mails (day 0 + n days for each n of retentionEmailDays) and the tier
    /// changes (into browseOnly, archived, pendingDeletion) of every flow the subject entered,
    /// each kept only when, decided at its time, the subject is in the flow with that day 0
    /// (and, for a tier, enters that tier then).
    ///
    /// A flow's day 0 is where a stretch of access ended, or with `startsAt = cancellation` an
    /// auto-renew turned off: the retention rules (`RetentionRules.place`) say which, at each
    /// such time.
    static func retentionFlows(_ state: DueModel.State, _ facts: SubjectFacts, policy: Policy, retention: Policy.Retention) -> [IndexEntry] {
        let subject = RetentionSubject(own: state.retention, access: facts, policy: policy.subscription)
        var candidates = stretchEnds(subject, policy: policy.subscription)
        // A transaction reported after its purchase covers from then once known, and a refund
        // reversed later never ended its coverage: the flows everything known describes, as a
        // status then looks back on them, are candidates too.
        let reportedLate = facts.subscription.transactions.contains { $0.at > $0.value.purchasedAt }
            || facts.subscription.marks.contains { $0.value.kind == .reversal }
        if reportedLate { candidates += stretchEnds(subject, known: Timestamp(milliseconds: .max), policy: policy.subscription) }
        if retention.startsAt == .cancellation {
            candidates += facts.subscription.autoRenew.filter { !$0.value.enabled }.map(\.at)
        }
        var items: [IndexEntry] = []
        var flows: Set<Timestamp> = []
        var placer = Placer(subject: subject, policy: policy, retention: retention)
        for candidate in candidates {
            let knowing = reportedLate ? [nil, Timestamp(milliseconds: .max)] : [nil]
            for known in knowing {
                let zero = known.map { RetentionRules.place(subject, at: candidate, known: $0, policy: policy).dayZero } ?? placer.place(at: candidate).dayZero
                guard let zero, flows.insert(zero).inserted else { continue }
                items += flowItems(&placer, zero: zero)
            }
        }
        return items
    }

    /// `RetentionRules.place` at times of one subject, each over the facts known then: the
    /// rules' basis is worked out once per stretch between the subject's change times, and a
    /// flow's items mostly fall in one (none comes after a lapse).
    struct Placer {
        let subject: RetentionSubject
        let policy: Policy
        let retention: Policy.Retention
        /// Each stretch's basis, as the items read it: a settled tier, or a flow (`stages` set)
        /// counted from `zero`.
        private var stretches: [(number: Int, zero: Timestamp?, tier: RetentionTier, since: Timestamp?, stages: RetentionRules.Stages?)] = []

        /// Each retention e-mail's day and detail, written once for every flow of the subject.
        let emailDetails: [(day: Int64, detail: String)]

        init(subject: RetentionSubject, policy: Policy, retention: Policy.Retention) {
            (self.subject, self.policy, self.retention) = (subject, policy, retention)
            emailDetails = (policy.notifications?.retentionEmailDays ?? []).map { ($0, DueRules.emailDetail($0)) }
        }

        /// What the items read of the placement at `t`: its flow's day 0, its tier and since when
        /// (as `RetentionRules.place` has them).
        mutating func place(at t: Timestamp) -> (dayZero: Timestamp?, tier: RetentionTier, since: Timestamp?) {
            let number = subject.stretch(containing: t)
            let index: Int
            if let known = stretches.firstIndex(where: { $0.number == number }) {
                index = known
            } else {
                switch RetentionRules.basis(subject, at: t, policy: policy) {
                case .settled(let placement): stretches.append((number, placement.dayZero, placement.tier, placement.since, nil))
                case .flow(let zero, _, let family, _):
                    // The rule that started the flow names only its first tier's reason, which
                    // the items do not read.
                    stretches.append((number, zero, .grace, nil, RetentionRules.stages(family: family, rule: "", retention)))
                }
                index = stretches.count - 1
            }
            let stretch = stretches[index]
            guard let stages = stretch.stages, let zero = stretch.zero else { return (stretch.zero, stretch.tier, stretch.since) }
            // As `RetentionRules.inFlow` counts the day and finds its stage.
            let stage = stages.stage(onDay: max(0, t.milliseconds(since: zero) / (RetentionRules.day * 1000)))
            return (zero, stage.tier, zero.adding(days: stage.from))
        }
    }

    /// A retention e-mail's detail: the JSON of `{"day": n}`.
    package static func emailDetail(_ n: Int64) -> String { "{\"day\":\(n)}" }

    /// The tier changes' details, by tier (`RetentionTier.allCases` order): the same few for
    /// every subject.
    private static let tierDetails = RetentionTier.allCases.map { JSON.object(["tier": .string($0.rawValue)]).serialized() }

    /// One flow's e-mails and tier changes, each kept when the retention rules at its time put
    /// the subject in the flow with day 0 `zero`.
    static func flowItems(_ placer: inout Placer, zero: Timestamp) -> [IndexEntry] {
        var items: [IndexEntry] = []
        items.reserveCapacity(placer.emailDetails.count + 6)
        for (n, detail) in placer.emailDetails {
            let at = zero.adding(days: n)
            guard placer.place(at: at).dayZero == zero else { continue }
            items.append(IndexEntry(at: at, kind: retentionEmail, serializedDetail: detail, anchor: zero))
        }
        var entered: [Timestamp] = []
        for family in [false, true] {
            for (tier, from, _) in RetentionRules.stages(family: family, rule: "", placer.retention) where tier != .grace {
                let at = zero.adding(days: from)
                guard !entered.contains(at) else { continue }
                let then = placer.place(at: at)
                guard then.dayZero == zero, then.tier == tier, then.since == at else { continue }
                entered.append(at)
                let detail = RetentionTier.allCases.firstIndex(of: tier).map { tierDetails[$0] } ?? JSON.object(["tier": .string(tier.rawValue)]).serialized()
                items.append(IndexEntry(at: at, kind: tierChanged, serializedDetail: detail, anchor: zero))
            }
        }
        return items
    }

    /// The times a stretch of access (planState trial, pro or pro_grace) ended: each time the
    /// plan may change at which it is paid just before and not at.
    static func stretchEnds(_ subject: RetentionSubject, known: Timestamp? = nil, policy: Policy.Subscription) -> [Timestamp] {
        let facts = subject.access
        var ends: [Timestamp] = []
        // The plan changes only at change times: just before one it is what it was at the one
        // before (and before the first, what it was then).
        var paidBefore: Bool?
        for c in subject.times {
            let before = paidBefore ?? Plan.decide(facts, at: c.adding(milliseconds: -1), known: known, policy: policy).isPaid
            let paid = Plan.decide(facts, at: c, known: known, policy: policy).isPaid
            paidBefore = paid
            if before && !paid { ends.append(c) }
        }
        return ends
    }

    /// `inApp` when the latest billing preference by `t` turned it off, else `push` (CH27
    /// L203–204: billing reminders still show in-app, never dropped).
    static func channel(_ state: DueModel.State, at t: Timestamp) -> JSON {
        state.preferences.known(at: t).last { $0.value.category == "billing" }?.value.enabled == false ? "inApp" : "push"
    }

    /// Once per free trial: at its end (as extended) − the lead, or when the trial was
    /// reported if later; not when by then its coverage ended or the account was deleted.
    /// An extension reported after the reminder was due does not add another.
    static func trialsEnding(_ state: DueModel.State, _ facts: SubjectFacts, lead: Int64) -> [IndexEntry] {
        let store = facts.subscription
        var items: [IndexEntry] = []
        // A transaction reported twice (the app's purchase and the store's notification) is
        // one trial: its earliest report counts.
        var seen: Set<String> = []
        for trial in store.transactions where trial.value.isTrial && seen.insert(trial.value.id).inserted {
            // The trial's end as each extension known in turn made it, with when it became known.
            var candidates = [(end: trial.value.expiresAt, known: trial.at)]
            for e in store.extensions where e.value.transactionId == trial.value.id { candidates.append((e.value.expiresAt, e.at)) }
            for (end, known) in candidates {
                let at = max(end.adding(hours: lead == .min ? .max : -lead), known, trial.at)
                // Decided at `at`: the end then known must be this one.
                let endThen = store.extensions.known(at: at).last { $0.value.transactionId == trial.value.id }?.value.expiresAt ?? trial.value.expiresAt
                guard endThen == end else { continue }
                if store.end(of: trial.value, at: at) <= at || !facts.deletions.known(at: at).isEmpty { break }
                items.append(IndexEntry(at: at, kind: trialEndingSoon, detail: [
                    "transactionId": .string(trial.value.id), "trialEndsAt": .string(end.description), "channel": channel(state, at: at),
                ]))
                break
            }
        }
        return items
    }

    /// At the first `renewal_failed` of each billing-issue episode: a failure while the
    /// subject's billing issue is already on adds nothing.
    static func paymentsFailed(_ state: DueModel.State, _ facts: SubjectFacts, policy: Policy.Subscription) -> [IndexEntry] {
        var items: [IndexEntry] = []
        let store = facts.subscription
        for (index, failure) in store.failures.enumerated() {
            // The billing issue just before this failure, from the failures before it.
            var before = store
            before.failures = Array(store.failures[..<index])
            guard !before.billingIssue(at: failure.at, policy: policy) else { continue }
            items.append(IndexEntry(at: failure.at, kind: paymentFailed, detail: [
                "originalTransactionId": .string(failure.value.originalId), "channel": channel(state, at: failure.at),
            ]))
        }
        return items
    }

    /// At each deletion's scheduledAt, unless it was cancelled or completed by then.
    static func deletionsQueued(_ state: DueModel.State, _ facts: SubjectFacts, policy: Policy.Deletion) -> [IndexEntry] {
        var items: [IndexEntry] = []
        var seen: Set<Timestamp> = []
        for request in state.deletion.steps where request.value == .requested {
            let asked = DeletionRules.view(of: state.deletion, facts: facts, at: request.at, policy: policy)
            guard asked.requestedAt == request.at, let due = asked.scheduledAt, seen.insert(due).inserted else { continue }
            let then = DeletionRules.view(of: state.deletion, facts: facts, at: due, policy: policy)
            guard then.requestedAt == request.at, then.state != .none, then.state != .completed else { continue }
            items.append(IndexEntry(at: due, kind: deletionQueued, detail: ["mode": .string(policy.mode.rawValue)]))
        }
        return items
    }
}

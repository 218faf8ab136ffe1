import LedgerCore

/// SPEC §4's due items, each a pure function of the subject's facts and the due state,
/// decided at its own time on the events that happened by then.
public enum DueRules {
    public static let trialEndingSoon = "trialEndingSoon"
    public static let paymentFailed = "paymentFailed"
    public static let deletionQueued = "deletionQueued"

    static func items(of state: DueModel.State, facts: SubjectFacts, policy: Policy) -> [IndexEntry] {
        var items: [IndexEntry] = []
        if let notifications = policy.notifications { items += trialsEnding(state, facts, lead: notifications.trialEndingLeadHours) }
        items += paymentsFailed(state, facts, policy: policy.subscription)
        if let deletion = policy.deletion { items += deletionsQueued(state, facts, policy: deletion) }
        return items
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
                let at = max(end.adding(seconds: -lead * 3600), known, trial.at)
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

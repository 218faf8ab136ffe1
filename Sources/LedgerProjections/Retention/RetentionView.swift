import LedgerCore

/// Where a subject's data stands (000's timeline).
public enum RetentionTier: String, Sendable, Hashable, CaseIterable {
    case active, free, grace, browseOnly, archived, pendingDeletion, deleted
}

/// What a subject may do with their data in a tier (SPEC §4's table).
public struct Capabilities: Sendable, Hashable {
    public var viewThumbnails: Bool
    public var downloadOriginals: Bool
    public var upload: Bool
    public var retrieveArchive: Bool
    public var earnCredits: Bool

    public init(viewThumbnails: Bool, downloadOriginals: Bool, upload: Bool, retrieveArchive: Bool, earnCredits: Bool) {
        self.viewThumbnails = viewThumbnails
        self.downloadOriginals = downloadOriginals
        self.upload = upload
        self.retrieveArchive = retrieveArchive
        self.earnCredits = earnCredits
    }

    public static let all = Capabilities(viewThumbnails: true, downloadOriginals: true, upload: true, retrieveArchive: true, earnCredits: true)
    public static let none = Capabilities(viewThumbnails: false, downloadOriginals: false, upload: false, retrieveArchive: false, earnCredits: false)
    public static let thumbnails = Capabilities(viewThumbnails: true, downloadOriginals: false, upload: false, retrieveArchive: false, earnCredits: false)
    /// Grace, or a recovery pass: look and take away, add nothing.
    public static let readOnly = Capabilities(viewThumbnails: true, downloadOriginals: true, upload: false, retrieveArchive: true, earnCredits: false)

    var json: JSONObject {
        ["viewThumbnails": .bool(viewThumbnails), "downloadOriginals": .bool(downloadOriginals), "upload": .bool(upload),
         "retrieveArchive": .bool(retrieveArchive), "earnCredits": .bool(earnCredits)]
    }
}

/// The retention view of one subject at a time (SPEC §4–§5).
public struct RetentionView: ProjectionView, Hashable {
    public var tier: RetentionTier
    /// When the current tier began (`nil` for `free`).
    public var enteredAt: Timestamp?
    /// The tier that follows with no new event, and when (`nil`: none ahead).
    public var nextTier: RetentionTier?
    public var nextTierAt: Timestamp?
    public var capabilities: Capabilities
    /// Whether the subject can reactivate, and the fee (`nil`: free, or not available).
    public var reactivationAvailable: Bool
    public var reactivationFee: Policy.Money?
    /// Why the tier is what it is: the entitlement rule giving access (`storeCoverage`…),
    /// `neverPaid`, `deleted`, what started the flow (`expiry`, `billingGrace`, `refund`,
    /// `revocation`, `cancellation`) or the policy day that moved it on (`graceDays`,
    /// `familyMemberGraceDays`, `browseOnlyUntilDay`, `pendingDeletionFromDay`).
    public var rule: String
    /// Day 0 of the flow and the day number at the time (`nil` outside the flow).
    public var dayZero: Timestamp?
    public var day: Int64?
    /// A recovery pass in force widens the capabilities until this time.
    public var recoveryPassUntil: Timestamp?

    public init(tier: RetentionTier, enteredAt: Timestamp?, nextTier: RetentionTier?, nextTierAt: Timestamp?, capabilities: Capabilities,
                reactivationAvailable: Bool, reactivationFee: Policy.Money?, rule: String, dayZero: Timestamp? = nil, day: Int64? = nil,
                recoveryPassUntil: Timestamp? = nil) {
        self.tier = tier
        self.enteredAt = enteredAt
        self.nextTier = nextTier
        self.nextTierAt = nextTierAt
        self.capabilities = capabilities
        self.reactivationAvailable = reactivationAvailable
        self.reactivationFee = reactivationFee
        self.rule = rule
        self.dayZero = dayZero
        self.day = day
        self.recoveryPassUntil = recoveryPassUntil
    }

    public var json: JSONObject {
        [
            "tier": .string(tier.rawValue),
            "enteredAt": enteredAt.map { .string($0.description) } ?? .null,
            "nextTier": nextTier.map { .string($0.rawValue) } ?? .null,
            "nextTierAt": nextTierAt.map { .string($0.description) } ?? .null,
            "capabilities": .object(capabilities.json),
            "reactivation": [
                "available": .bool(reactivationAvailable),
                "fee": reactivationFee.map { ["amount": .string($0.amount), "currency": .string($0.currency)] } ?? .null,
            ],
        ]
    }

    public func rule(for field: String) -> String? {
        if field.hasPrefix("capabilities."), recoveryPassUntil != nil { return "recoveryPass" }
        return rule
    }

    /// A recovery pass running out narrows the capabilities again: the pass's rule ended it.
    public func rule(for field: String, since previous: RetentionView) -> String? {
        if field.hasPrefix("capabilities."), tier == previous.tier, previous.recoveryPassUntil != nil { return "recoveryPass" }
        return rule(for: field)
    }

    public func timeChange(since previous: RetentionView) -> String? {
        if tier != previous.tier { return "retention \(previous.tier.rawValue) → \(tier.rawValue)" + (day.map { " (day \($0))" } ?? "") }
        if previous.recoveryPassUntil != nil && recoveryPassUntil == nil { return "the recovery pass ran out" }
        return nil
    }

    public static var restatedFields: Set<String> { ["enteredAt", "nextTier", "nextTierAt"] }
}

/// The tier rules of SPEC §4 (seed 000) as pure functions of the facts, t and the policy.
enum RetentionRules {
    /// The tier at a time without the look back (`enteredAt`) and ahead (`nextTier`).
    struct Placement {
        var tier: RetentionTier
        var rule: String
        var since: Timestamp?
        var next: (tier: RetentionTier, at: Timestamp)?
        var dayZero: Timestamp?
        var day: Int64?
        /// The entitlement's decision at the time, when the tier needed it.
        var plan: EntitlementRules.Decision?
    }

    static let day: Int64 = 86_400

    static func view(of state: RetentionProjection.State, at t: Timestamp, policy: Policy) -> RetentionView {
        let placement = place(state, at: t, policy: policy)
        // Each field worked out first, the view made once (as `EntitlementRules.view`).
        var capabilities = Capabilities.thumbnails
        var enteredAt = placement.since
        var next = placement.next
        var recoveryPassUntil: Timestamp?
        switch placement.tier {
        case .active:
            capabilities = .all
            let run = activeRun(state, at: t, plan: placement.plan, policy: policy)
            enteredAt = run.since
            next = run.next
        case .free:
            enteredAt = nil
        case .deleted:
            capabilities = .none
        case .grace:
            capabilities = .readOnly
        case .browseOnly, .archived, .pendingDeletion:
            if let retention = policy.retention,
               let pass = state.recoveryPasses.known(at: t).last(where: { t < $0.at.adding(seconds: retention.recoveryPassDays * day) }) {
                capabilities = .readOnly
                recoveryPassUntil = pass.at.adding(seconds: retention.recoveryPassDays * day)
            }
        }
        var reactivationAvailable = false
        var reactivationFee: Policy.Money?
        if let retention = policy.retention, let d = placement.day {
            // Reactivation: free through browseOnlyUntilDay, for the fee until pendingDeletionFromDay.
            if d <= retention.browseOnlyUntilDay {
                reactivationAvailable = true
            } else if d < retention.pendingDeletionFromDay {
                reactivationAvailable = true
                reactivationFee = retention.reactivationFee
            }
        }
        return RetentionView(tier: placement.tier, enteredAt: enteredAt, nextTier: next?.tier, nextTierAt: next?.at,
                             capabilities: capabilities, reactivationAvailable: reactivationAvailable, reactivationFee: reactivationFee,
                             rule: placement.rule, dayZero: placement.dayZero, day: placement.day, recoveryPassUntil: recoveryPassUntil)
    }

    /// Deleted, active, never paid, or in the flow at a day number.
    static func place(_ state: RetentionProjection.State, at t: Timestamp, policy: Policy) -> Placement {
        let access = state.access
        if let deleted = access.deletions.known(at: t).first {
            return Placement(tier: .deleted, rule: "deleted", since: deleted.at)
        }
        let facts = access.subscription
        let entitlement = EntitlementRules.decide(access, at: t, policy: policy.subscription)
        let isActive = entitlement.isPaid
        guard let retention = policy.retention, hasPaid(facts, at: t) else {
            return isActive ? Placement(tier: .active, rule: entitlement.reason.rule, plan: entitlement) : Placement(tier: .free, rule: "neverPaid")
        }
        var start: (at: Timestamp, rule: String)?
        if let cancelled = cancellation(facts, at: t, retention) {
            start = (cancelled, "cancellation")
        } else if isActive {
            return Placement(tier: .active, rule: entitlement.reason.rule, plan: entitlement)
        } else {
            start = accessEnd(facts, at: t, policy: policy.subscription)
        }
        guard let start else { return Placement(tier: .free, rule: "neverPaid") }
        return inFlow(dayZero: start.at, rule: start.rule, family: isFamilyMember(state, at: t), at: t, retention)
    }

    /// The flow's tier `d` days after day 0, with when it began and what comes next.
    static func inFlow(dayZero: Timestamp, rule: String, family: Bool, at t: Timestamp, _ r: Policy.Retention) -> Placement {
        let d = max(0, (t.milliseconds - dayZero.milliseconds) / (day * 1000))
        let stages = stages(family: family, rule: rule, r)
        let index = stages.lastIndex { $0.1 <= d } ?? 0
        let (tier, from, why) = stages[index]
        let next = stages[(index + 1)...].first { $0.1 > from }
        return Placement(tier: tier, rule: why, since: dayZero.adding(seconds: from * day),
                         next: next.map { ($0.0, dayZero.adding(seconds: $0.1 * day)) }, dayZero: dayZero, day: d)
    }

    /// The flow's tiers with the day number each starts on and the rule that starts it: grace
    /// while d ≤ graceDays, browseOnly while d ≤ browseOnlyUntilDay, archived while d <
    /// pendingDeletionFromDay, then pendingDeletion (a tier a policy leaves no days for is skipped).
    static func stages(family: Bool, rule: String, _ r: Policy.Retention) -> [(RetentionTier, Int64, String)] {
        let graceDays = family ? r.familyMemberGraceDays : r.graceDays
        return [
            (.grace, 0, rule),
            (.browseOnly, graceDays + 1, family ? "familyMemberGraceDays" : "graceDays"),
            (.archived, max(r.browseOnlyUntilDay + 1, graceDays + 1), "browseOnlyUntilDay"),
            (.pendingDeletion, max(r.pendingDeletionFromDay, r.browseOnlyUntilDay + 1, graceDays + 1), "pendingDeletionFromDay"),
        ]
    }

    /// When paid access ended, known at `t`: the latest end of a period (expiry, refund,
    /// revocation) or of billing grace after a failed payment.
    static func accessEnd(_ facts: SubscriptionFacts, at t: Timestamp, policy: Policy.Subscription) -> (at: Timestamp, rule: String)? {
        var best: (at: Timestamp, rule: String)?
        let known = facts.transactions.known(at: t)
        for i in known.indices where known[i].value.purchasedAt <= t {
            let end = facts.endWithCause(ofTransactionAt: i, in: known, at: t)
            guard best == nil || end.at > best?.at ?? end.at else { continue }
            best = (end.at, end.cause == .upgrade ? "expiry" : end.cause.rawValue)
        }
        if let episode = facts.billingEpisode(at: t, policy: policy), !episode.recovered, episode.graceEnd <= t,
           best == nil || episode.graceEnd > best?.at ?? episode.graceEnd {
            best = (episode.graceEnd, "billingGrace")
        }
        return best
    }

    /// A family member whose organizer cancelled after the member's latest transaction began.
    static func isFamilyMember(_ state: RetentionProjection.State, at t: Timestamp) -> Bool {
        guard let cancel = state.organizerCancellations.known(at: t).last else { return false }
        let latest = state.access.subscription.latestTransaction(at: t)?.value.purchasedAt
        return latest.map { cancel.at >= $0 } ?? true
    }

    /// The unbroken active run that includes `t`: when it began, walking back while the
    /// subject stays active, and the first tier after it with no new event — none while a
    /// store period renews by itself (the renewal, not the clock, decides), otherwise the first
    /// change ahead where the tier differs (a cancelled period ending, billing grace, a grant
    /// or an offline window running out). Whether a subject is active changes only when its
    /// plan or its auto-renew does, so the entitlement's change times are the ones to visit.
    static func activeRun(_ state: RetentionProjection.State, at t: Timestamp, plan: EntitlementRules.Decision?,
                          policy: Policy) -> (since: Timestamp?, next: (tier: RetentionTier, at: Timestamp)?) {
        // Sorted, then each time once, in place (cheaper than hashing every time into a set,
        // and no second array).
        var times = EntitlementRules.changeTimes(of: state.access, policy: policy.subscription)
        times.sort()
        var kept = 0
        for i in times.indices where kept == 0 || times[i] != times[kept - 1] {
            times[kept] = times[i]
            kept += 1
        }
        times.removeLast(times.count - kept)
        let now = times.firstIndex { $0 > t } ?? times.endIndex
        var since: Timestamp?
        for c in times[..<now].reversed() {
            guard isActive(state, at: c, policy: policy) else { break }
            since = c
        }
        if plan?.reason.rule == "storeCoverage" && state.access.subscription.autoRenewing(at: t) == true { return (since, nil) }
        for c in times[now...] where !isActive(state, at: c, policy: policy) {
            return (since, (place(state, at: c, policy: policy).tier, c))
        }
        return (since, nil)
    }

    /// Whether `place` puts the subject in `active` at `t`, without placing it anywhere else:
    /// the look back asks this at every change time, and only the first time it is `false`
    /// needs the tier (and the flow's day 0, found from every transaction).
    static func isActive(_ state: RetentionProjection.State, at t: Timestamp, policy: Policy) -> Bool {
        let access = state.access
        guard access.deletions.known(at: t).isEmpty, EntitlementRules.decide(access, at: t, policy: policy.subscription).isPaid else { return false }
        // Paid access keeps the subject active unless a cancellation starts the flow for a
        // subject who has paid.
        guard let retention = policy.retention, cancellation(access.subscription, at: t, retention) != nil else { return true }
        return !hasPaid(access.subscription, at: t)
    }

    /// Whether a transaction other than a free trial had begun by `t`: the flow is for those
    /// who paid; the others are `free` (`neverPaid`).
    static func hasPaid(_ facts: SubscriptionFacts, at t: Timestamp) -> Bool {
        facts.transactions.known(at: t).contains { !$0.value.isTrial && $0.value.purchasedAt <= t }
    }

    /// 000's "Day 0: User cancels": under a policy whose flow starts at cancellation, when
    /// auto-renew is off at `t`, the latest time it was turned off; the flow then starts while
    /// the paid period runs out. `nil` otherwise.
    static func cancellation(_ facts: SubscriptionFacts, at t: Timestamp, _ retention: Policy.Retention) -> Timestamp? {
        guard retention.startsAt == .cancellation, facts.autoRenewing(at: t) == false else { return nil }
        return facts.autoRenew.known(at: t).last { !$0.value.enabled }?.at
    }

    /// The times the tier can change with no new event: the entitlement's, each day 0 a flow
    /// could count from plus each tier boundary after it, and recovery passes running out.
    static func changeTimes(of state: RetentionProjection.State, policy: Policy) -> [Timestamp] {
        var times = EntitlementRules.changeTimes(of: state.access, policy: policy.subscription)
        times += state.organizerCancellations.map(\.at)
        guard let r = policy.retention else { return times }
        for pass in state.recoveryPasses { times += [pass.at, pass.at.adding(seconds: r.recoveryPassDays * day)] }
        let boundaries = Set((stages(family: false, rule: "", r) + stages(family: true, rule: "", r)).map(\.1)).subtracting([0])
        for zero in Set(times) {
            times += boundaries.map { zero.adding(seconds: $0 * day) }
        }
        return times
    }
}

@_spi(Storage) import LedgerCore

/// Where a subject's data stands (000's timeline).
public enum RetentionTier: String, Sendable, Hashable, CaseIterable, Encodable {
    case active, free, grace, browseOnly, archived, pendingDeletion, deleted
}

/// What a subject may do with their data in a tier (SPEC §4's table).
public struct Capabilities: Sendable, Hashable, Encodable {
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
}

/// The retention view of one subject at a time (SPEC §4–§5).
public struct RetentionView: ModelView, Hashable {
    /// Whether the subject can reactivate, and the fee (`nil`: free, or not available).
    public struct Reactivation: Sendable, Hashable, Encodable {
        public var available: Bool
        public var fee: Policy.Money?
    }

    public var tier: RetentionTier
    /// When the current tier began (`nil` for `free`).
    public var enteredAt: Timestamp?
    /// The tier that follows with no new event, and when (`nil`: none ahead).
    public var nextTier: RetentionTier?
    public var nextTierAt: Timestamp?
    public var capabilities: Capabilities
    public var reactivation: Reactivation
    /// Why the tier is what it is: the entitlement rule giving access (`storeCoverage`…),
    /// `neverPaid`, `deleted`, what started the flow (`expiry`, `billingGrace`, `refund`,
    /// `revocation`, `supportGrant`, `deviceVerified`, `offlineGrace`, `cancellation`) or the
    /// policy day that moved it on (`graceDays`, `familyMemberGraceDays`, `browseOnlyUntilDay`,
    /// `pendingDeletionFromDay`). For the audit; not in the JSON.
    public var rule: String
    /// Day 0 of the flow and the day number at the time (`nil` outside the flow).
    public var dayZero: Timestamp?
    public var day: Int64?
    /// A recovery pass in force widens the capabilities until this time.
    public var recoveryPassUntil: Timestamp?

    /// The JSON's fields (SPEC §5); the others are the audit's.
    enum CodingKeys: String, CodingKey {
        case tier, enteredAt, nextTier, nextTierAt, capabilities, reactivation
    }

    public init(tier: RetentionTier, enteredAt: Timestamp?, nextTier: RetentionTier?, nextTierAt: Timestamp?, capabilities: Capabilities,
                reactivationAvailable: Bool, reactivationFee: Policy.Money?, rule: String, dayZero: Timestamp? = nil, day: Int64? = nil,
                recoveryPassUntil: Timestamp? = nil) {
        self.tier = tier
        self.enteredAt = enteredAt
        self.nextTier = nextTier
        self.nextTierAt = nextTierAt
        self.capabilities = capabilities
        self.reactivation = Reactivation(available: reactivationAvailable, fee: reactivationFee)
        self.rule = rule
        self.dayZero = dayZero
        self.day = day
        self.recoveryPassUntil = recoveryPassUntil
    }

    public var reactivationAvailable: Bool { reactivation.available }
    public var reactivationFee: Policy.Money? { reactivation.fee }

    /// "grace since T; browseOnly from T", then what the customer can do and reactivating.
    public var card: ViewCard {
        var headline: [ViewCard.Part] = [.value(.string(tier.rawValue))]
        if let enteredAt { headline += [.text(" since "), .value(.string(enteredAt.description))] }
        if let nextTier, let nextTierAt { headline += [.text("; \(nextTier.rawValue) from "), .value(.string(nextTierAt.description))] }
        let abilities = capabilities.members
        let can = abilities.filter(\.1).map(\.0), cannot = abilities.filter { !$0.1 }.map(\.0)
        let capabilitiesText = "can " + (can.isEmpty ? "nothing" : can.joined(separator: ", ")) + (cannot.isEmpty ? "" : "; not " + cannot.joined(separator: ", "))
        let reactivationText = !reactivation.available ? "not available"
            : reactivation.fee.map { "available for \($0.amount) \($0.currency)" } ?? "available, free"
        return ViewCard(headline: headline, rows: [("capabilities", .string(capabilitiesText)), ("reactivation", .string(reactivationText))])
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

extension Capabilities {
    /// Each capability by name, in the JSON's order.
    var members: [(String, Bool)] {
        [("viewThumbnails", viewThumbnails), ("downloadOriginals", downloadOriginals), ("upload", upload),
         ("retrieveArchive", retrieveArchive), ("earnCredits", earnCredits)]
    }
}

/// A subject as the retention rules read it: the model's own facts and the subject's.
struct RetentionSubject {
    let own: RetentionModel.State
    let access: SubjectFacts
    /// The times paid access may start or end under the policy (the plan's change times but
    /// sign-ins), in order, each once: worked out once for every look back at the subject's
    /// stretches of access (the due list asks a dozen per flow).
    let times: [Timestamp]

    private let policy: Policy.Subscription
    private let endTimes = EndTimes()
    /// The times the facts keep, when they do (the audit's walk: `PlanTimes`).
    let kept: PlanTimes?

    init(own: RetentionModel.State, access: SubjectFacts, policy: Policy.Subscription) {
        (self.own, self.access, self.policy) = (own, access, policy)
        kept = access.keptPlanTimes(policy: policy)
        // Ascending, each once (the times come list by list, each mostly in order already:
        // runs the sort takes whole).
        times = kept?.changes ?? ChangeTimes.sorted(Plan.changeTimes(of: access, policy: policy, signIns: false), after: nil)
    }

    /// The times paid access may end (`Plan.endTimes`), in order, each once: worked out the
    /// first time a look back for where access ended asks, then kept for the others (the due
    /// list asks one per stretch). Costs a reader a reference in a value: the subject's facts
    /// never change under it.
    var ends: [Timestamp] {
        if let kept { return kept.ends }
        if let sorted = endTimes.sorted { return sorted }
        let sorted = ChangeTimes.sorted(Plan.endTimes(of: access, policy: policy), after: nil)
        endTimes.sorted = sorted
        return sorted
    }

    private final class EndTimes {
        var sorted: [Timestamp]?
    }

    /// Which stretch between the subject's change times `t` falls in: the number of the
    /// plan's change times and organizer cancellations at or before `t`. Two times with the
    /// same stretch have the same `RetentionRules.basis` over the facts known at each.
    func stretch(containing t: Timestamp) -> Int {
        // The number of times at or before t: the index of the first one after it.
        var low = 0, high = times.count
        while low < high {
            let middle = (low + high) / 2
            if times[middle] <= t { low = middle + 1 } else { high = middle }
        }
        return low + own.organizerCancellations.count { $0.at <= t }
    }

    var recoveryPasses: [Dated<String>] { own.recoveryPasses }
    var organizerCancellations: [Dated<String>] { own.organizerCancellations }
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
        var plan: Plan.Decision?
    }

    static let day: Int64 = 86_400

    static func view(of state: RetentionSubject, at t: Timestamp, policy: Policy) -> RetentionView {
        let placement = place(state, at: t, policy: policy)
        // Each field worked out first, the view made once.
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
               let pass = state.recoveryPasses.known(at: t).last(where: { t < $0.at.adding(days: retention.recoveryPassDays) }) {
                capabilities = .readOnly
                recoveryPassUntil = pass.at.adding(days: retention.recoveryPassDays)
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

    /// Deleted, active, never paid, or in the flow at a day number: the tier at `t` as the
    /// facts known at `known` (default `t`) describe it.
    static func place(_ state: RetentionSubject, at t: Timestamp, known: Timestamp? = nil, policy: Policy) -> Placement {
        place(basis(state, at: t, known: known, policy: policy), at: t)
    }

    /// The tier at `t` on a basis worked out at `t`, or at any time of the same stretch
    /// between change times (`RetentionSubject.stretch(containing:)`).
    static func place(_ basis: Basis, at t: Timestamp) -> Placement {
        switch basis {
        case .settled(let placement): placement
        case .flow(let zero, let rule, let family, let retention): inFlow(dayZero: zero, rule: rule, family: family, at: t, retention)
        }
    }

    /// What `place` decides before it counts the flow's day: a tier outside any flow, or the
    /// flow the subject is in. It reads the facts only at their own times and at the plan's
    /// change times, so it is the same at every time between two of the subject's change times
    /// (over the facts known then): the due list works it out once for the items of a flow that
    /// fall in one such stretch.
    enum Basis {
        case settled(Placement)
        /// Day 0, what started the flow, and whether a family member's grace applies.
        case flow(dayZero: Timestamp, rule: String, family: Bool, Policy.Retention)
    }

    /// `place`'s basis at `t` over the facts known at `known` (default `t`).
    static func basis(_ state: RetentionSubject, at t: Timestamp, known: Timestamp? = nil, policy: Policy) -> Basis {
        let known = known ?? t
        let access = state.access
        if let deleted = access.deletions.known(at: min(t, known)).first {
            return .settled(Placement(tier: .deleted, rule: "deleted", since: deleted.at))
        }
        let entitlement = Plan.decide(access, at: t, known: known, policy: policy.subscription)
        guard let retention = policy.retention, hadPaidAccess(state, at: t, known: known) else {
            return .settled(entitlement.isPaid ? Placement(tier: .active, rule: entitlement.reason.rule, plan: entitlement) : Placement(tier: .free, rule: "neverPaid"))
        }
        if entitlement.isPaid {
            // With startsAt = cancellation, turning auto-renew off starts the flow while the
            // paid period still runs (000's "Day 0: User cancels").
            if retention.startsAt == .cancellation, let cancelled = cancellationInForce(access.subscription, at: t, known: known) {
                return .flow(dayZero: cancelled, rule: "cancellation", family: isFamilyMember(state, at: t, known: known), retention)
            }
            return .settled(Placement(tier: .active, rule: entitlement.reason.rule, plan: entitlement))
        }
        guard var start = accessEnd(state, at: t, known: known, policy: policy) else { return .settled(Placement(tier: .free, rule: "neverPaid")) }
        if retention.startsAt == .cancellation, let period = start.period,
           let cancelled = cancellation(during: period, facts: access.subscription, known: known) {
            start = (cancelled, "cancellation", period)
        }
        return .flow(dayZero: start.at, rule: start.rule, family: isFamilyMember(state, at: t, known: known), retention)
    }

    /// The flow's tier `d` days after day 0, with when it began and what comes next.
    static func inFlow(dayZero: Timestamp, rule: String, family: Bool, at t: Timestamp, _ r: Policy.Retention) -> Placement {
        let d = max(0, t.milliseconds(since: dayZero) / (day * 1000))
        let stages = stages(family: family, rule: rule, r)
        let index = stages.lastIndex { $0.1 <= d } ?? 0
        let (tier, from, why) = stages[index]
        let next = stages[(index + 1)...].first { $0.1 > from }
        return Placement(tier: tier, rule: why, since: dayZero.adding(days: from),
                         next: next.map { ($0.0, dayZero.adding(days: $0.1)) }, dayZero: dayZero, day: d)
    }

    /// The flow's tiers with the day number each starts on and the rule that starts it: grace
    /// while d ≤ graceDays, browseOnly while d ≤ browseOnlyUntilDay, archived while d <
    /// pendingDeletionFromDay, then pendingDeletion (a tier a policy leaves no days for is skipped).
    static func stages(family: Bool, rule: String, _ r: Policy.Retention) -> Stages {
        // The day after, saturating: a policy built in code is not bounded by the decoder.
        let afterGrace = (family ? r.familyMemberGraceDays : r.graceDays).addingClamped(1)
        let afterBrowsing = r.browseOnlyUntilDay.addingClamped(1)
        return Stages(rule: rule, family: family, browseOnly: afterGrace, archived: max(afterBrowsing, afterGrace),
                      pendingDeletion: max(r.pendingDeletionFromDay, afterBrowsing, afterGrace))
    }

    /// The four stages of a flow (`stages(family:rule:_:)`), held inline: every placement in
    /// a flow counts its day against them, and an array would be allocated each time.
    struct Stages: RandomAccessCollection {
        let rule: String
        let family: Bool
        let browseOnly: Int64, archived: Int64, pendingDeletion: Int64

        var startIndex: Int { 0 }
        var endIndex: Int { 4 }

        /// The stage day `d` (≥ 0) falls in: its tier and the day it starts on. The same as
        /// the last stage starting on or before `d`, without the rules' names.
        func stage(onDay d: Int64) -> (tier: RetentionTier, from: Int64) {
            if d >= pendingDeletion { return (.pendingDeletion, pendingDeletion) }
            if d >= archived { return (.archived, archived) }
            if d >= browseOnly { return (.browseOnly, browseOnly) }
            return (.grace, 0)
        }

        subscript(index: Int) -> (RetentionTier, Int64, String) {
            switch index {
            case 0: (.grace, 0, rule)
            case 1: (.browseOnly, browseOnly, family ? "familyMemberGraceDays" : "graceDays")
            case 2: (.archived, archived, "browseOnlyUntilDay")
            default: (.pendingDeletion, pendingDeletion, "pendingDeletionFromDay")
            }
        }
    }

    /// Day 0 of a flow with startsAt = accessEnd (SPEC §4): the end of the latest stretch of
    /// access (planState trial, pro or pro_grace) at or before `t`, in the history the facts
    /// known at `known` describe, with the rule that ended it — the expiry, refund or
    /// revocation of the last covered period, or the end of billing grace, of a support grant
    /// or of a device's snapshot — and the store period whose end it was, if it was one.
    /// `nil` when no stretch of access ended by `t`.
    ///
    /// Asked when the subject has no access at `t`: the latest stretch then ends at the latest
    /// of the times access may end (`Plan.endTimes`) `c` ≤ t with access just before `c` (any
    /// later one has none just before it, being inside the gap that runs to `t`; and access
    /// that stops at a change time stops at one of those).
    static func accessEnd(_ state: RetentionSubject, at t: Timestamp, known: Timestamp,
                          policy: Policy) -> (at: Timestamp, rule: String, period: Coverage?)? {
        // A walk that keeps the plan's times (the audit) keeps what the last look found: this
        // one looks only at the end times since.
        let kept = state.kept?.accessEnd.withLock { found in
            found.flatMap { $0.through <= t && $0.known <= known ? $0 : nil }
        }.flatMap { state.access.subscription.reachesBack(to: $0.through, knownAt: known) ? nil : $0 }
        func found(_ end: (at: Timestamp, rule: String, period: Coverage?)) -> (at: Timestamp, rule: String, period: Coverage?) {
            if let times = state.kept, known >= t {
                times.accessEnd.withLock { $0 = PlanTimes.AccessEnd(found: end, through: t, known: known) }
            }
            return end
        }
        for c in state.ends.reversed() where c <= t {
            if let kept, c <= kept.through { return found(kept.found) }
            let before = Plan.decide(state.access, at: c.adding(milliseconds: -1), known: known, policy: policy.subscription)
            guard before.isPaid else { continue }
            guard before.reason.rule == "storeCoverage", let coverage = before.coverage else { return found((c, before.reason.rule, nil)) }
            let cause = state.access.subscription.endWithCause(of: coverage.transaction.value, at: c, known: known).cause
            return found((c, cause == .upgrade ? "expiry" : cause.rawValue, coverage))
        }
        // A paid transaction that never covered a moment (refunded as it was bought) still
        // ended its access when its coverage did.
        let facts = state.access.subscription
        let described = facts.transactions.known(at: known)
        var latest: (at: Timestamp, cause: SubscriptionFacts.EndCause)?
        for i in described.indices where !described[i].value.isTrial && described[i].value.purchasedAt <= t {
            let end = facts.endWithCause(ofTransactionAt: i, in: described, at: t, known: known)
            if end.at <= t, latest == nil || end.at > latest?.at ?? end.at { latest = end }
        }
        return latest.map { ($0.at, $0.cause == .upgrade ? "expiry" : $0.cause.rawValue, nil) }
    }

    /// A family member whose organizer cancelled after the member's latest store transaction's
    /// purchasedAt (strictly after; any cancellation, with no transaction), at or before `t`.
    static func isFamilyMember(_ state: RetentionSubject, at t: Timestamp, known: Timestamp) -> Bool {
        guard let cancel = state.organizerCancellations.known(at: min(t, known)).last else { return false }
        let described = state.access.subscription.transactions.known(at: known)
        var latest: Timestamp?
        for i in described.indices where described[i].value.purchasedAt <= t {
            latest = max(latest ?? described[i].value.purchasedAt, described[i].value.purchasedAt)
        }
        return latest.map { cancel.at > $0 } ?? true
    }

    /// The unbroken active run that includes `t`: when it began, walking back while the
    /// subject stays active, and the first tier after it with no new event — none while a
    /// store period renews by itself (the renewal, not the clock, decides), otherwise the first
    /// change ahead where the tier differs (a cancelled period ending, billing grace, a grant
    /// or an offline window running out). Whether a subject is active changes only when its
    /// plan or its auto-renew does, so the entitlement's change times are the ones to visit,
    /// each over the facts known at `t`.
    static func activeRun(_ state: RetentionSubject, at t: Timestamp, plan: Plan.Decision?,
                          policy: Policy) -> (since: Timestamp?, next: (tier: RetentionTier, at: Timestamp)?) {
        let times = state.times
        let now = ChangeWindow.firstIndex(in: times) { $0 > t }
        var since: Timestamp?
        var index = now
        var near: Int?
        let lookBack = LookBack(state, known: t, policy: policy)
        // A walk that keeps the plan's times (the audit) keeps what the last look back found:
        // this one stops where that one began.
        let startsAtCancellation = policy.retention?.startsAt == .cancellation
        let found = state.kept?.run.withLock { found in
            found.flatMap { $0.through <= t && $0.startsAtCancellation == startsAtCancellation ? $0 : nil }
        }.flatMap { state.access.subscription.reachesBack(to: $0.through, knownAt: t) ? nil : $0 }
        while index > times.startIndex {
            let c = times[index - 1]
            if let found, c <= found.through {
                since = found.since
                break
            }
            let activity = lookBack.activity(at: c, near: near)
            if case .inactive = activity { break }
            since = c
            index -= 1
            // Covered by a store period: so is every time of it before `c` (found by halving:
            // a period extended a thousand times has a thousand times in it).
            guard case .covered(let covering, let purchasedAt) = activity else { continue }
            near = covering
            let first = ChangeWindow.firstIndex(in: times[..<index]) { $0 >= purchasedAt }
            if first < index { (since, index) = (times[first], first) }
        }
        if let kept = state.kept, let since {
            kept.run.withLock { $0 = PlanTimes.ActiveRun(since: since, through: t, startsAtCancellation: startsAtCancellation) }
        }
        if plan?.reason.rule == "storeCoverage" && state.access.subscription.autoRenewing(at: t) == true { return (since, nil) }
        for c in times[now...] where !isActive(state, at: c, known: t, policy: policy) {
            return (since, (place(state, at: c, known: t, policy: policy).tier, c))
        }
        return (since, nil)
    }

    /// What the look back needs of a change time: not active, active, or active and covered
    /// by a store transaction (its index in the transactions known, and its purchasedAt).
    enum Activity {
        case inactive, active
        case covered(index: Int, purchasedAt: Timestamp)
    }

    /// `isActive(state, at: c, known:)` at the change times a look back visits, over the
    /// facts known at one time: what every visit reads is worked out once.
    struct LookBack {
        let state: RetentionSubject
        let known: Timestamp
        let policy: Policy
        /// Whether a store period covering a time keeps the subject active (no cancellation
        /// can start a flow: startsAt is not `cancellation`).
        let coveredIsActive: Bool
        /// The first deletion known (the subject is active at no time after it).
        let deletedAt: Timestamp?
        let transactions: SubscriptionFacts.KnownTransactions

        init(_ state: RetentionSubject, known: Timestamp, policy: Policy) {
            (self.state, self.known, self.policy) = (state, known, policy)
            coveredIsActive = policy.retention?.startsAt != .cancellation
            deletedAt = state.access.deletions.known(at: known).first?.at
            transactions = state.access.subscription.knownTransactions(at: known)
        }

        /// When a store transaction covers `c` (and no deletion happened by then), that
        /// transaction (found from `near` down: `SubscriptionFacts.covering`): the subject is
        /// then active at every time from its purchasedAt to `c` over the same facts known —
        /// no deletion happened by then, and a refund or revocation that happened by then,
        /// fewer than by `c`, ends it no earlier.
        func activity(at c: Timestamp, near: Int?) -> Activity {
            guard coveredIsActive, deletedAt.map({ $0 > c }) ?? true,
                  let covered = state.access.subscription.covering(c, in: transactions, near: near) else {
                return isActive(state, at: c, known: known, policy: policy) ? .active : .inactive
            }
            return .covered(index: covered.index, purchasedAt: covered.purchasedAt)
        }
    }

    /// Whether `place` puts the subject in `active` at `t`, without placing it anywhere else:
    /// the look back asks this at every change time, and only the first time it is `false`
    /// needs the tier (and the flow's day 0, found from every transaction).
    static func isActive(_ state: RetentionSubject, at t: Timestamp, known: Timestamp? = nil, policy: Policy) -> Bool {
        let known = known ?? t
        let access = state.access
        guard access.deletions.known(at: min(t, known)).isEmpty,
              Plan.decide(access, at: t, known: known, policy: policy.subscription).isPaid else { return false }
        // Paid access keeps the subject active unless a cancellation starts the flow for a
        // subject who has paid.
        guard let retention = policy.retention, retention.startsAt == .cancellation,
              cancellationInForce(access.subscription, at: t, known: known) != nil else { return true }
        return !hadPaidAccess(state, at: t, known: known)
    }

    /// Whether the subject had paid access at or before `t` (SPEC §4's `free` is the
    /// opposite): a store transaction other than a free trial purchased by then (refunded or
    /// revoked later or not), a support grant, or a device's verified `pro`. The flow is for
    /// those who had it; the others are `free` (`neverPaid`).
    static func hadPaidAccess(_ state: RetentionSubject, at t: Timestamp, known: Timestamp) -> Bool {
        let happened = min(t, known)
        let access = state.access
        if access.subscription.transactions.known(at: known).contains(where: { !$0.value.isTrial && $0.value.purchasedAt <= t }) { return true }
        if access.grants.known(at: happened).contains(where: { $0.value > $0.at }) { return true }
        return access.snapshots.known(at: happened).contains { snapshot in
            guard case .verified(.pro, let expiresAt) = snapshot.value else { return false }
            return expiresAt.map { $0 > snapshot.at } ?? true
        }
    }

    /// With startsAt = cancellation, for a subject who still has access: the cancellation in
    /// force at `t` during the store period covering `t` (see `cancellation(during:)`), which
    /// starts the flow while the period runs. `nil` with none, or no store period.
    static func cancellationInForce(_ facts: SubscriptionFacts, at t: Timestamp, known: Timestamp) -> Timestamp? {
        guard let period = facts.coverage(at: t, known: known) else { return nil }
        return cancellation(during: period, facts: facts, known: min(t, known))
    }

    /// With startsAt = cancellation: the latest `auto_renew_changed` of a store period's
    /// subscription during the period (purchasedAt ≤ c < its end) known at `known`, when it
    /// turned auto-renew off; an un-cancel (`true`) after it withdraws it. Asked of the period
    /// whose end ended the access, or of the one still running.
    static func cancellation(during period: Coverage, facts: SubscriptionFacts, known: Timestamp) -> Timestamp? {
        let start = period.transaction.value.purchasedAt
        let original = period.transaction.value.originalId
        let latest = facts.autoRenew.known(at: known).last {
            $0.value.originalId == original && $0.at >= start && $0.at < period.end
        }
        guard let latest, !latest.value.enabled else { return nil }
        return latest.at
    }

    /// The times the tier can change with no new event: the entitlement's, each day 0 a flow
    /// could count from plus each tier boundary after it, and recovery passes running out.
    static func changeTimes(of state: RetentionSubject, policy: Policy,
                            in window: ChangeWindow = ChangeWindow(after: nil, through: Timestamp(milliseconds: .max))) -> [Timestamp] {
        // A sign-in moves no tier (it starts or ends no paid access), nor any day 0: the
        // subject's times (`RetentionSubject.times`), each once.
        let cancellations = state.organizerCancellations.lazy.map(\.at)
        var times: [Timestamp] = []
        window.appendShifted(state.times, byDays: 0, to: &times)
        window.appendShifted(cancellations, byDays: 0, to: &times)
        guard let r = policy.retention else { return times }
        let passes = state.recoveryPasses.lazy.map(\.at)
        let passEnds = passes.lazy.map { $0.adding(days: r.recoveryPassDays) }
        // Each of these times may be a day 0, and so may begin each of the tiers' days, and the
        // reactivation's own (free through browseOnlyUntilDay, for the fee until
        // pendingDeletionFromDay), which a long grace can put inside another tier.
        let boundaries = Set((Array(stages(family: false, rule: "", r)) + stages(family: true, rule: "", r)).map(\.1)
                             + [r.browseOnlyUntilDay + 1, r.pendingDeletionFromDay]).subtracting([0])
        for days in [0] + boundaries {
            if days != 0 {   // the times themselves are in already
                window.appendShifted(state.times, byDays: days, to: &times)
                window.appendShifted(cancellations, byDays: days, to: &times)
            }
            window.appendShifted(passes, byDays: days, to: &times)
            window.appendShifted(passEnds, byDays: days, to: &times)
        }
        return times
    }
}

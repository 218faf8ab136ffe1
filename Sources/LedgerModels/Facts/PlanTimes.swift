import Synchronization
@_spi(Storage) import LedgerCore

/// The plan's change and end times (`Plan.changeTimes`, `Plan.endTimes`), sorted and each
/// once, kept while a subject's facts are folded one event after another and asked after every
/// one: the audit's walk (`SubjectFacts.keepPlanTimes`). Worked out afresh, they cost each step
/// as much as the history; kept, a step costs what its event adds.
///
/// A grant, a device snapshot, a sign-in, a deletion or an auto-renew change adds times of its
/// own alone (its own time and windows, the first store fact after it that voids it), and
/// changes no rule's answer at any time before it happened: those are added to the lists in
/// place. So is a failed renewal, but the first, or one followed by a store end of its
/// subscription (which may then cut a grace short); a purchase or renewal, unless a failure
/// of its subscription follows it (whose windows may then count from its period), which
/// changes answers from its purchasedAt on; an extension (its expiresAt and the windows from
/// it); and a refund, reversal, revocation or store end that is the latest of its kind (its
/// time, when it cuts coverage or a grace short or voids a snapshot). One that lands before
/// another of its kind may change which of those after it cut, and an upgrade may move times
/// already listed, so the lists are then worked out again.
///
/// Costs a reader a reference inside a value: `SubjectFacts` carries it, and `SubjectFacts.apply`
/// changes its lists in place only where that value is the one holder (a copy is made
/// otherwise); views read them, and note what a look back found under its lock. Only `apply`
/// keeps them: facts changed through `applyPlan` or their fields leave them behind, so only
/// a walk that folds through `apply` (the audit) keeps times.
final class PlanTimes: @unchecked Sendable {
    /// The policy the times were worked out under; asked under another, they are worked out afresh.
    let policy: Policy.Subscription
    /// `Plan.changeTimes` without the sign-ins.
    private(set) var changes: [Timestamp]
    /// `Plan.endTimes`.
    private(set) var ends: [Timestamp]
    /// The sign-ins' and outs' times (with `changes`, `Plan.changeTimes`).
    private(set) var signIns: [Timestamp]
    /// What retention's look back last found (`RetentionRules.activeRun`).
    let run: Mutex<ActiveRun?>
    /// Where retention last found the latest stretch of access ended (`RetentionRules.accessEnd`).
    let accessEnd: Mutex<AccessEnd?>

    init(_ facts: SubjectFacts, policy: Policy.Subscription) {
        self.policy = policy
        changes = ChangeTimes.sorted(Plan.changeTimes(of: facts, policy: policy, signIns: false), after: nil)
        ends = ChangeTimes.sorted(Plan.endTimes(of: facts, policy: policy), after: nil)
        signIns = ChangeTimes.sorted(facts.signIns.map(\.at), after: nil)
        run = Mutex(nil)
        accessEnd = Mutex(nil)
    }

    private init(copying other: PlanTimes) {
        (policy, changes, ends, signIns) = (other.policy, other.changes, other.ends, other.signIns)
        run = Mutex(other.run.withLock { $0 })
        accessEnd = Mutex(other.accessEnd.withLock { $0 })
    }

    func copy() -> PlanTimes { PlanTimes(copying: self) }

    /// The times one fact adds alone.
    struct Added {
        var changes: [Timestamp] = []
        var ends: [Timestamp] = []
        var signIns: [Timestamp] = []
    }

    /// Adds the own times (`SubjectFacts.ownTimes(of:policy:)`) of a fact that happened at `at`.
    func add(_ added: Added, at: Timestamp) {
        for time in added.changes { Self.insert(time, into: &changes) }
        for time in added.ends { Self.insert(time, into: &ends) }
        for time in added.signIns { Self.insert(time, into: &signIns) }
        // The look back's answer holds for the times before the fact happened, no later (a
        // purchase that happened after it but covers earlier times: `reachesBack`).
        run.withLock { found in
            if let through = found?.through, at <= through { found = nil }
        }
        accessEnd.withLock { found in
            if let through = found?.through, at <= through { found = nil }
        }
    }

    /// `Plan.changeTimes` after `after` (every one with `nil`), sorted, each once.
    func changeTimes(after: Timestamp?) -> [Timestamp] {
        let first = after.map { bound in ChangeWindow.firstIndex(in: changes) { $0 > bound } } ?? changes.startIndex
        let firstSign = after.map { bound in ChangeWindow.firstIndex(in: signIns) { $0 > bound } } ?? signIns.startIndex
        guard firstSign < signIns.endIndex else { return Array(changes[first...]) }
        return ChangeTimes.sorted(Array(changes[first...]) + signIns[firstSign...], after: nil)
    }

    private static func insert(_ time: Timestamp, into sorted: inout [Timestamp]) {
        let index = ChangeWindow.firstIndex(in: sorted) { $0 >= time }
        if index < sorted.endIndex && sorted[index] == time { return }
        sorted.insert(time, at: index)
    }

    /// Retention's look back at `through` (`RetentionRules.activeRun`): the subject active at
    /// every change time from `since` through `through` and at none just before `since`, over
    /// the facts known at `through`, under a policy whose retention starts at a cancellation
    /// or not. It holds at a later time over the facts known then while no fact that can
    /// change an answer by `through` is added (`add` forgets it; other store facts make the
    /// times afresh) and none among the facts already there is known by then
    /// (`SubscriptionFacts.reachesBack(to:knownAt:)`).
    struct ActiveRun: Sendable {
        var since: Timestamp
        var through: Timestamp
        var startsAtCancellation: Bool
    }

    /// Retention's look for the latest stretch of access at `through` over the facts known at
    /// `known` (no earlier than `through`): it ended at `found`'s time, the latest end time by
    /// `through` with access just before it. It holds for a later time over the facts known
    /// then, as `ActiveRun` does, when no end time between has access just before it: a walk
    /// asking hour after hour, long after the access ended, looks only at the end times since
    /// its last ask instead of every one back to the stretch.
    struct AccessEnd: Sendable {
        var found: (at: Timestamp, rule: String, period: Coverage?)
        var through: Timestamp
        var known: Timestamp
    }
}

/// `SubjectFacts`' place for the times it keeps: one that every copy's `==` passes over (two
/// subjects with the same facts are equal, whichever keeps its times).
struct KeptPlanTimes: Sendable, Equatable {
    var times: PlanTimes?

    static func == (lhs: Self, rhs: Self) -> Bool { true }
}

extension SubjectFacts {
    /// From now on, keep the plan's times under `policy` as events are applied (`PlanTimes`):
    /// for a walk that asks them after each event.
    package mutating func keepPlanTimes(policy: Policy.Subscription) {
        kept.times = PlanTimes(self, policy: policy)
    }

    /// The kept times, when they were kept under `policy`.
    func keptPlanTimes(policy: Policy.Subscription) -> PlanTimes? {
        guard let times = kept.times, times.policy == policy else { return nil }
        return times
    }

    /// After `applyPlan` folded `event`: its times added to the kept ones, or all worked out again.
    mutating func keepTimes(after event: RecordedEvent) {
        guard var times = kept.times else { return }
        kept.times = nil
        guard let added = ownTimes(of: event, policy: times.policy) else {
            kept.times = PlanTimes(self, policy: times.policy)
            return
        }
        if !isKnownUniquelyReferenced(&times) { times = times.copy() }
        times.add(added, at: event.occurredAt)
        kept.times = times
    }

    /// The times the fact `event` stated adds to the plan's alone, as `Plan` lists them: `nil`
    /// for a fact that may move times already listed (see `PlanTimes`).
    func ownTimes(of event: RecordedEvent, policy: Policy.Subscription) -> PlanTimes.Added? {
        let at = event.occurredAt, position = event.position
        var one = SubjectFacts()
        one.subscription = subscription
        switch event.data {
        case .supportEntitlementGranted:
            guard let grant = Self.fact(in: grants, at: at, position: position) else { return nil }
            one.grants = [grant]
        case .entitlementVerified, .entitlementVerificationFailed:
            guard let snapshot = Self.fact(in: snapshots, at: at, position: position) else { return nil }
            one.snapshots = [snapshot]
        case .accountCreated, .accountSignedIn, .accountSignedOut:
            guard let sign = Self.fact(in: signIns, at: at, position: position) else { return nil }
            return PlanTimes.Added(signIns: [sign.at])
        case .accountDeleted:
            guard let deletion = Self.fact(in: deletions, at: at, position: position) else { return nil }
            one.deletions = [deletion]
        case .appStoreSubjectBound:
            return PlanTimes.Added()
        case .subscriptionRenewalFailed:
            guard let failure = Self.fact(in: subscription.failures, at: at, position: position),
                  let ends = subscription.endTimes(addedBy: failure, policy: policy) else { return nil }
            return PlanTimes.Added(changes: [at] + ends, ends: ends)
        case .subscriptionPurchased, .subscriptionRenewed:
            guard let transaction = Self.fact(in: subscription.transactions, at: at, position: position),
                  let ends = subscription.endTimes(addedBy: transaction, policy: policy) else { return nil }
            return PlanTimes.Added(changes: [at] + ends, ends: ends)
        case .subscriptionAutoRenewChanged:
            return PlanTimes.Added(changes: [at])
        case .subscriptionRenewalExtended:
            guard let extended = Self.fact(in: subscription.extensions, at: at, position: position) else { return nil }
            let ends = subscription.endTimes(addedBy: extended, policy: policy)
            return PlanTimes.Added(changes: [at] + ends, ends: ends)
        case .subscriptionRefunded, .subscriptionRefundReversed, .subscriptionRevoked:
            guard let latest = subscription.marks.last, latest.at == at, latest.position == position else { return nil }
            var ends = subscription.endTimesAddedByLatestMark(policy: policy)
            if voidsSnapshot(latestOf: subscription.marks, voids: { $0.kind != .reversal }) { ends.append(at) }
            return PlanTimes.Added(changes: [at] + ends, ends: ends)
        case .subscriptionExpired, .subscriptionGraceExpired:
            guard let latest = subscription.ends.last, latest.at == at, latest.position == position else { return nil }
            var ends: [Timestamp] = subscription.latestEndCutsGrace() ? [at] : []
            if voidsSnapshot(latestOf: subscription.ends, voids: { !$0.graceOnly }) { ends.append(at) }
            return PlanTimes.Added(changes: [at] + ends, ends: ends)
        default:
            return nil
        }
        var added = PlanTimes.Added()
        Plan.appendOwnChanges(of: one, policy: policy, to: &added.changes)
        Plan.appendEnds(of: one, policy: policy, to: &added.ends)
        return added
    }

    /// Whether the latest fact of `list` voids a verified device snapshot (`Plan.appendEnds`):
    /// it `voids`, and a verified snapshot came after the latest one before it that does.
    private func voidsSnapshot<V>(latestOf list: [Dated<V>], voids: (V) -> Bool) -> Bool {
        guard let latest = list.last, voids(latest.value) else { return false }
        let before = snapshots[..<snapshots.firstIndex(after: latest.at, position: latest.position)]
        guard let verified = before.last(where: { if case .verified = $0.value { true } else { false } }) else { return false }
        guard let previous = list.dropLast().last(where: { voids($0.value) }) else { return true }
        return (verified.at, verified.position) > (previous.at, previous.position)
    }

    /// The fact of `list` at `at` stated by the event at `position`, found by halving.
    private static func fact<V>(in list: [Dated<V>], at: Timestamp, position: UInt64) -> Dated<V>? {
        let upTo = list.known(at: at)
        for index in upTo.indices.reversed() {
            guard upTo[index].at == at else { return nil }
            if upTo[index].position == position { return upTo[index] }
        }
        return nil
    }
}

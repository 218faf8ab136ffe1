@_spi(Storage) import LedgerCore
@testable import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// The plan's times kept while events are folded (`PlanTimes`, the audit's walk) must be the
/// times worked out afresh, and retention read over them, with what its last look back found,
/// must be retention read over the facts alone.
@Suite struct PlanTimesTests {
    /// The reference policy, and one whose offline grace ends before the interval (a failed
    /// verification then ends access, and its time is an end).
    static let subscriptionPolicies: [Policy.Subscription] = {
        var short = Policy.reference.subscription
        short.offlineGraceHours = 2
        short.verificationIntervalHours = 24
        return [Policy.reference.subscription, short]
    }()

    /// Each subject's events of a random history, as recorded events in the order drawn.
    static func histories(seed: UInt64, shuffled: Bool) throws -> [String: [RecordedEvent]] {
        var history = RandomHistory(seed: seed)
        var drawn = history.events(subjects: 3, perSubject: 10...40) + markedHistory(&history.random, count: 40)
        if shuffled { drawn.shuffle(using: &history.random) }
        var subjects: [String: [RecordedEvent]] = [:]
        for (position, event) in drawn.enumerated() {
            let recorded = try event.recorded(at: UInt64(position + 1))
            subjects[recorded.subject, default: []].append(recorded)
        }
        return subjects
    }

    /// A subject whose store marks two transactions again and again, each fact an hour or a
    /// few apart: refunds, reversals and revocations, ends of either kind, failures (some with
    /// the store's grace end), extensions, device snapshots verified and failed — the facts
    /// whose times `PlanTimes` adds in place only when each is the latest of its kind.
    static func markedHistory(_ random: inout DataGenerator, count: Int) -> [LedgerEvent] {
        let subject = "marked"
        var at = ts("2026-01-01T00:00:00Z")
        var events = [
            Make.purchase(subject, at: at, txn: "t1", original: "o1", expires: days(30, after: at)),
            Make.purchase(subject, at: at.adding(hours: 1), txn: "t2", original: "o2", expires: days(7, after: at)),
        ]
        for _ in 0 ..< count {
            at = at.adding(hours: Int64(random.int(1...30)))
            let (txn, original) = random.pick([("t1", "o1"), ("t2", "o2")])
            switch random.int(0...9) {
            case 0, 1: events.append(Make.refund(subject, at: at, txn: txn, original: original))
            case 2: events.append(Make.refundReversed(subject, at: at, txn: txn, original: original))
            case 3:
                var revoked = SubscriptionRevoked()
                (revoked.transactionId, revoked.originalTransactionId) = (txn, original)
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: revoked.eventData))
            case 4: events.append(Make.expired(subject, at: at, original: original))
            case 5: events.append(Make.graceExpired(subject, at: at, original: original))
            case 6: events.append(Make.renewalFailed(subject, at: at, original: original, graceExpiresAt: random.int(0...1) == 0 ? days(3, after: at) : nil))
            case 7:
                var extended = SubscriptionRenewalExtended()
                (extended.transactionId, extended.originalTransactionId) = (txn, original)
                extended.expiresAt = days(Int64(random.int(1...40)), after: at)
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: extended.eventData))
            case 8: events.append(Make.verified(subject, at: at, expires: random.int(0...1) == 0 ? days(2, after: at) : nil))
            default: events.append(LedgerEvent(subject: subject, occurredAt: at, source: .app, data: EntitlementVerificationFailed().eventData))
            }
        }
        return events
    }

    /// The facts without the times they keep.
    static func plain(_ facts: SubjectFacts) -> SubjectFacts {
        var plain = facts
        plain.kept = KeptPlanTimes()
        return plain
    }

    /// After every event, in business-time order as the audit folds them (each fact the latest
    /// of its kind) or in any order (late facts land in the past), the kept lists are
    /// `Plan.changeTimes` and `Plan.endTimes` sorted, each once.
    @Test func keptTimesAreTheTimesWorkedOutAfresh() async {
        await checkProperty(count: 30, input: Gen.uint64()) { seed in
            var compared = 0
            for shuffled in [false, true] {
            for (subject, drawn) in try Self.histories(seed: seed, shuffled: shuffled) {
                let events = shuffled ? drawn : drawn.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
                for policy in Self.subscriptionPolicies {
                    var facts = SubjectFacts()
                    facts.keepPlanTimes(policy: policy)
                    for event in events {
                        facts.apply(event, policy: .reference)
                        let kept = try #require(facts.keptPlanTimes(policy: policy))
                        let place: Comment = "seed \(seed), \(subject) after position \(event.position)"
                        #expect(kept.changes == ChangeTimes.sorted(Plan.changeTimes(of: facts, policy: policy, signIns: false), after: nil), place)
                        #expect(kept.ends == ChangeTimes.sorted(Plan.endTimes(of: facts, policy: policy), after: nil), place)
                        let all = ChangeTimes.sorted(Plan.changeTimes(of: facts, policy: policy), after: nil)
                        #expect(kept.changeTimes(after: nil) == all, place)
                        if let middle = all.dropFirst(all.count / 2).first {
                            #expect(kept.changeTimes(after: middle) == all.filter { $0 > middle }, place)
                        }
                        compared += 1
                    }
                    #expect(facts.keptPlanTimes(policy: Self.subscriptionPolicies[0] == policy ? Self.subscriptionPolicies[1] : Self.subscriptionPolicies[0]) == nil)
                }
            }
            }
            #expect(compared > 0)
        }
    }

    /// Folded in business-time order as the audit folds them, or in any order, and read after
    /// each event at the latest time folded and at times around it: retention over the kept
    /// times (each look back starting from the last one's answer) is retention over the facts.
    @Test func retentionOverKeptTimesIsRetentionOverTheFacts() async {
        await checkProperty(count: 30, input: Gen.uint64()) { seed in
            var compared = 0
            for shuffled in [false, true] {
                for (subject, events) in try Self.histories(seed: seed, shuffled: shuffled) {
                    let ordered = shuffled ? events : events.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
                    // One walk asked under every flow start by turns (they share the
                    // subscription policy, so the kept times and what a look back found).
                    var facts = SubjectFacts()
                    var own = RetentionModel.State()
                    facts.keepPlanTimes(policy: Policy.reference.subscription)
                    var latest: Timestamp?
                    for event in ordered {
                        facts.apply(event, policy: .reference)
                        if RetentionModel.reads.contains(event.type) { RetentionModel.apply(event, to: &own) }
                        let now = max(latest ?? event.occurredAt, event.occurredAt)
                        latest = now
                        for t in [now, now.adding(hours: 1), now.adding(days: 40), now, now.adding(days: -3)] {
                            for policy in RetentionLookBackTests.policies {
                                let kept = RetentionModel.view(of: own, facts: facts, at: t, policy: policy)
                                let fresh = RetentionModel.view(of: own, facts: Self.plain(facts), at: t, policy: policy)
                                #expect(kept == fresh, "seed \(seed), \(subject) after position \(event.position) at \(t), \(policy.retention?.startsAt.rawValue ?? "no retention")")
                                compared += 1
                            }
                        }
                    }
                }
            }
            #expect(compared > 0)
        }
    }

    /// Two support grants with a gap between them (days 0–10 and 12–20): on day 13 active
    /// since day 12. A purchase recorded on day 14 whose period began on day 9 covers the gap
    /// over the facts known from then: active since day 0, though the last look back found 12.
    @Test func aPurchaseRecordedAfterItsPeriodBeganJoinsTheRunsBeforeIt() throws {
        let start = ts("2026-01-01T00:00:00Z")
        var walk = KeptWalk()
        try walk.fold(Make.grant("u", at: start, until: days(10, after: start)))
        try walk.fold(Make.grant("u", at: days(12, after: start), until: days(20, after: start)))
        #expect(try walk.activeSince(at: days(13, after: start)) == days(12, after: start))
        var purchase = SubscriptionPurchased()
        purchase.productId = "pro.monthly"
        (purchase.transactionId, purchase.originalTransactionId) = ("t1", "t1")
        (purchase.purchasedAt, purchase.expiresAt) = (days(9, after: start), days(40, after: start))
        try walk.fold(LedgerEvent(subject: "u", occurredAt: days(14, after: start), source: .appstore, data: purchase.eventData))
        #expect(try walk.activeSince(at: days(14, after: start)) == start)
        #expect(try walk.activeSince(at: days(15, after: start)) == start)
    }

    /// A purchase on day 0 for 11 days, refunded on day 5, and a grant from day 10 to 20: on
    /// day 11 active since day 10. The refund reversed on day 12 undoes the cut over the facts
    /// known from then (the period covered days 0–11): active since day 0, though the last
    /// look back found day 10. A second refund on day 14 cuts from its own time on, after the
    /// period: still active since day 0.
    @Test func aRefundReversedAfterAGrantJoinsTheRunsBeforeIt() throws {
        let start = ts("2026-01-01T00:00:00Z")
        var walk = KeptWalk()
        try walk.fold(Make.purchase("u", at: start, txn: "t1", original: "t1", expires: days(11, after: start)))
        try walk.fold(Make.refund("u", at: days(5, after: start), txn: "t1", original: "t1"))
        try walk.fold(Make.grant("u", at: days(10, after: start), until: days(20, after: start)))
        #expect(try walk.activeSince(at: days(11, after: start)) == days(10, after: start))
        try walk.fold(Make.refundReversed("u", at: days(12, after: start), txn: "t1", original: "t1"))
        #expect(try walk.activeSince(at: days(12, after: start)) == start)
        #expect(try walk.activeSince(at: days(13, after: start)) == start)
        try walk.fold(Make.refund("u", at: days(14, after: start), txn: "t1", original: "t1"))
        #expect(try walk.activeSince(at: days(15, after: start)) == start)
    }

    /// A device verified every hour for 40 days, each snapshot good for a day: the look back
    /// over kept times starts from where the last one began, and still finds the first
    /// snapshot's time (active since then); a failed verification among them (offline grace)
    /// does not break the run. A millisecond before the last snapshot's day runs out, still
    /// active since the first; at it, grace from it.
    @Test func aDeviceVerifiedHourlyIsActiveSinceItsFirstSnapshot() throws {
        let start = ts("2026-01-01T00:00:00Z")
        var walk = KeptWalk()
        for hour in Int64(0) ..< 40 * 24 {
            let at = start.adding(hours: hour)
            var verified = EntitlementVerified()
            verified.plan = .pro
            verified.expiresAt = at.adding(days: 1)
            let data = hour == 500 ? EntitlementVerificationFailed().eventData : verified.eventData
            try walk.fold(LedgerEvent(subject: "u", occurredAt: at, source: .app, data: data))
            let view = try #require(walk.view(at: at))
            #expect(view.tier == .active && view.enteredAt == start, "at hour \(hour)")
        }
        let end = start.adding(hours: 40 * 24 - 1).adding(days: 1)
        let after = try #require(walk.view(at: end))
        #expect(after.tier == .grace && after.enteredAt == end && after.dayZero == end)
        let before = try #require(walk.view(at: end.adding(milliseconds: -1)))
        #expect(before.tier == .active && before.enteredAt == start)
    }
}

/// One subject's events folded one after another into facts that keep their plan times (the
/// audit's walk), each at the next position, and retention read over them.
struct KeptWalk {
    var facts = SubjectFacts()
    private var position: UInt64 = 0

    init() { facts.keepPlanTimes(policy: Policy.reference.subscription) }

    mutating func fold(_ event: LedgerEvent) throws {
        position += 1
        facts.apply(try event.recorded(at: position), policy: .reference)
    }

    /// Retention at `t` under the reference policy (its own state holds nothing these read).
    func view(at t: Timestamp) -> RetentionView? {
        RetentionModel.view(of: RetentionModel.State(), facts: facts, at: t, policy: .reference)
    }

    /// When the active run holding `t` began (the view's enteredAt), expecting `t` active.
    func activeSince(at t: Timestamp) throws -> Timestamp? {
        let view = try #require(self.view(at: t))
        #expect(view.tier == .active, "at \(t)")
        return view.enteredAt
    }
}

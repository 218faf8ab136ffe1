@_spi(Storage) import LedgerCore
@testable import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// The retention tier's look back asks `RetentionRules.isActive` at each change time instead
/// of placing the subject: the two must agree everywhere.
@Suite struct RetentionLookBackTests {
    /// Every flow start the policy knows, with and without the retention flow.
    static let policies: [Policy] = {
        var policies = Policy.Retention.Start.allCases.map { start in
            var policy = Policy.reference
            policy.retention?.startsAt = start
            return policy
        }
        var none = Policy.reference
        none.retention = nil
        policies.append(none)
        return policies
    }()

    /// A random history of four subjects, folded: each subject's retention state and facts.
    static func folded(seed: UInt64) throws -> (own: [String: RetentionModel.State], facts: [String: SubjectFacts]) {
        var history = RandomHistory(seed: seed)
        var own: [String: RetentionModel.State] = [:]
        var facts: [String: SubjectFacts] = [:]
        for (position, event) in history.events(subjects: 4, perSubject: 4...24).enumerated() {
            let stored = StoredEvent(position: UInt64(position + 1), version: 1, recordedAt: event.occurredAt, hash: [], draft: try event.draft())
            let recorded = RecordedEvent(stored, data: event.data)
            facts[recorded.subject, default: SubjectFacts()].apply(recorded, policy: .reference)
            if RetentionModel.reads.contains(recorded.type) { RetentionModel.apply(recorded, to: &own[recorded.subject, default: RetentionModel.State()]) }
        }
        return (own, facts)
    }

    /// Every subject of a random history as the retention rules read it, under each of
    /// `policies`.
    static func subjects(seed: UInt64) throws -> [(policy: Policy, subject: String, state: RetentionSubject)] {
        let (own, facts) = try folded(seed: seed)
        return policies.flatMap { policy in
            facts.map { subject, facts in
                (policy, subject, RetentionSubject(own: own[subject] ?? RetentionModel.State(), access: facts, policy: policy.subscription))
            }
        }
    }

    /// Each time the subject's tier can change with no new event, and the second before it.
    static func aroundChangeTimes(_ state: RetentionSubject, policy: Policy) -> [Timestamp] {
        Set(RetentionRules.changeTimes(of: state, policy: policy)).flatMap { [$0, $0.adding(seconds: -1)] }
    }

    /// Where a failure happened: the seed, the subject and time, and the policy's flow start.
    static func place(_ seed: UInt64, _ subject: String, _ t: Timestamp, _ policy: Policy) -> Comment {
        "seed \(seed), \(subject) at \(t), flow from \(policy.retention?.startsAt.rawValue ?? "none")"
    }

    /// `SubscriptionFacts.coverage(at:)` and `latestEnd(at:)` pass over a transaction that
    /// `endBound` rules out without working out its end: they still find what SPEC §4's
    /// "covered" and `expiresAt` find over every transaction, at every change time of random
    /// histories.
    @Test func coverageAndTheLatestEndFindWhatEveryTransactionsEndFinds() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            var history = RandomHistory(seed: seed)
            var subjects: [String: SubjectFacts] = [:]
            for (position, event) in history.events(subjects: 4, perSubject: 4...24).enumerated() {
                let stored = StoredEvent(position: UInt64(position + 1), version: 1, recordedAt: event.occurredAt, hash: [], draft: try event.draft())
                subjects[event.subject, default: SubjectFacts()].apply(RecordedEvent(stored, data: event.data), policy: .reference)
            }
            let facts = subjects.mapValues(\.subscription)
            for (subject, facts) in facts {
                for t in Set(facts.changeTimes(policy: Policy.reference.subscription)).flatMap({ [$0, $0.adding(seconds: -1)] }) {
                    let covering = facts.transactions.filter { $0.at <= t && $0.value.purchasedAt <= t && t < facts.end(of: $0.value, at: t) }
                        .max { ($0.value.purchasedAt, $0.position) < ($1.value.purchasedAt, $1.position) }
                    let expected = covering.map { Coverage(transaction: $0, end: facts.end(of: $0.value, at: t)) }
                    #expect(facts.coverage(at: t) == expected, "seed \(seed), \(subject) at \(t)")
                    let latest = facts.transactions.filter { $0.at <= t }.map { facts.end(of: $0.value, at: t) }.max()
                    #expect(facts.latestEnd(at: t) == latest, "seed \(seed), \(subject) at \(t)")
                }
            }
            #expect(!facts.isEmpty)
        }
    }

    @Test func isActiveAgreesWithPlaceAtEveryChangeTime() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            let subjects = try Self.subjects(seed: seed)
            #expect(!subjects.isEmpty)
            for (policy, subject, state) in subjects {
                for t in Self.aroundChangeTimes(state, policy: policy) {
                    let placed = RetentionRules.place(state, at: t, policy: policy).tier == .active
                    #expect(RetentionRules.isActive(state, at: t, policy: policy) == placed, Self.place(seed, subject, t, policy))
                }
            }
        }
    }

    /// The active run's start (`RetentionRules.activeRun`), which passes over the rest of a
    /// store period once a transaction covers one of its change times, and looks for that
    /// transaction beside the one found before, is where a walk back asking `isActive` at
    /// every change time stops: at every change time (and just before it) of random histories,
    /// under every flow start.
    @Test func theActiveRunStartsWhereTheWalkOverEveryChangeTimeStops() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            let subjects = try Self.subjects(seed: seed)
            #expect(!subjects.isEmpty)
            for (policy, subject, state) in subjects {
                let ascending = state.times
                for t in Self.aroundChangeTimes(state, policy: policy) {
                    var walked: Timestamp?
                    for c in ascending.filter({ $0 <= t }).reversed() {
                        guard RetentionRules.isActive(state, at: c, known: t, policy: policy) else { break }
                        walked = c
                    }
                    #expect(RetentionRules.activeRun(state, at: t, plan: nil, policy: policy).since == walked, Self.place(seed, subject, t, policy))
                }
            }
        }
    }

    /// The comparison above is not empty: the random histories have active runs reaching back
    /// over store periods.
    @Test func theRandomHistoriesHaveActiveRunsOverStorePeriods() throws {
        var covered = 0
        for seed: UInt64 in 1...10 {
            for (policy, _, state) in try Self.subjects(seed: seed) {
                for t in Self.aroundChangeTimes(state, policy: policy) {
                    guard let since = RetentionRules.activeRun(state, at: t, plan: nil, policy: policy).since, since < t else { continue }
                    if state.access.subscription.coverage(at: since, known: t) != nil { covered += 1 }
                }
            }
        }
        #expect(covered > 100)
    }

    /// `SubscriptionFacts.covering` finds a transaction exactly when `coverage` does, and the one
    /// it finds covers the time, from wherever it starts looking.
    @Test func coveringFindsACoveringTransactionWhenCoverageDoes() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            let (_, facts) = try Self.folded(seed: seed)
            #expect(!facts.isEmpty)
            for (subject, facts) in facts {
                let store = facts.subscription
                let times = Set(store.changeTimes(policy: Policy.reference.subscription)).flatMap { [$0, $0.adding(seconds: -1)] }
                for t in times {
                    for known in [t, Timestamp(milliseconds: .max)] {
                        let count = store.transactions.known(at: known).count
                        for near in [nil] + (0 ... count).map(Optional.some) {
                            let found = store.covering(t, in: store.knownTransactions(at: known), near: near)
                            #expect((found != nil) == (store.coverage(at: t, known: known) != nil), "seed \(seed), \(subject) at \(t)")
                            if let found {
                                let transaction = store.transactions[found.index]
                                #expect(transaction.value.purchasedAt == found.purchasedAt && found.purchasedAt <= t)
                                #expect(t < store.endWithCause(of: transaction.value, at: t, known: known).at, "seed \(seed), \(subject) at \(t)")
                            }
                        }
                    }
                }
            }
        }
    }

    /// A year of monthly renewals: active since the first purchase; with a day's lapse before
    /// the seventh period, since that period's purchase.
    @Test func aLongSubscriptionIsActiveSinceItsStretchBegan() throws {
        let start = ts("2026-01-01T00:00:00Z")
        func year(lapseBefore lapsed: Int64?) -> [LedgerEvent] {
            var events = [Make.purchase("u", at: start, txn: "t0", expires: days(30, after: start))]
            for month in Int64(1)...11 {
                let at = days(30 * month + (lapsed.map { month >= $0 ? 1 : 0 } ?? 0), after: start)
                events.append(Make.renewal("u", at: at, txn: "t\(month)", original: "t0", expires: days(30, after: at)))
            }
            return events
        }
        let t = days(340, after: start)
        let continuous = try #require(try Folded(year(lapseBefore: nil)).view(RetentionModel.self, at: t))
        #expect(continuous.tier == .active)
        #expect(continuous.enteredAt == start)
        let lapsing = try Folded(year(lapseBefore: 6))
        let lapsed = try #require(try lapsing.view(RetentionModel.self, at: t))
        #expect(lapsed.tier == .active)
        #expect(lapsed.enteredAt == days(181, after: start))
        // Around the lapse: active since the start until its last second, then in the flow
        // from day 0, then active anew.
        let before = try #require(try lapsing.view(RetentionModel.self, at: days(180, after: start).adding(seconds: -1)))
        #expect(before.tier == .active && before.enteredAt == start)
        let during = try #require(try lapsing.view(RetentionModel.self, at: days(180, after: start)))
        #expect(during.tier == .grace && during.dayZero == days(180, after: start))
        let after = try #require(try lapsing.view(RetentionModel.self, at: days(181, after: start)))
        #expect(after.tier == .active && after.enteredAt == days(181, after: start))
    }

    /// A device verifying `pro` every 20 hours, and support grants of 12 days every 10: active
    /// since the first; after a gap longer than the snapshot's 24 hours or a grant's days, since
    /// the one after it.
    @Test func snapshotsAndGrantsAreActiveSinceTheirStretchBegan() throws {
        let start = ts("2026-01-01T00:00:00Z")
        func snapshots(gapBefore gap: Int64?) -> [LedgerEvent] {
            (Int64(0)..<36).map { k in Make.verified("u", at: start.adding(hours: 20 * k + (gap.map { k >= $0 ? 10 : 0 } ?? 0))) }
        }
        func grants(gapBefore gap: Int64?) -> [LedgerEvent] {
            (Int64(0)..<12).map { k in
                let at = days(10 * k + (gap.map { k >= $0 ? 5 : 0 } ?? 0), after: start)
                return Make.grant("u", at: at, until: days(12, after: at))
            }
        }
        let cases: [(events: (Int64?) -> [LedgerEvent], gapBefore: Int64, resumed: Timestamp, t: Timestamp)] = [
            (snapshots, 20, start.adding(hours: 410), start.adding(hours: 711)),
            (grants, 5, days(55, after: start), days(120, after: start)),
        ]
        for (events, gapBefore, resumed, t) in cases {
            let continuous = try #require(try Folded(events(nil)).view(RetentionModel.self, at: t))
            #expect(continuous.tier == .active && continuous.enteredAt == start)
            let gap = try #require(try Folded(events(gapBefore)).view(RetentionModel.self, at: t))
            #expect(gap.tier == .active && gap.enteredAt == resumed)
        }
    }

    /// `Stages.stage(onDay:)`, which the due list asks for each item, finds the stage the
    /// flow's own rule finds: the last one starting on or before the day. Any numbers a
    /// policy may hold (from 0, a grace longer than browsing, a deletion day before either),
    /// each day from 0 to past the last stage.
    @Test func aDaysStageIsTheLastStageStartingByThen() async {
        await checkProperty(count: 300, input: Gen.int64(in: 0...40).array(of: 4...4), Gen.bool) { days, family in
            var retention = try #require(Policy.reference.retention)
            (retention.graceDays, retention.familyMemberGraceDays, retention.browseOnlyUntilDay, retention.pendingDeletionFromDay) = (days[0], days[1], days[2], days[3])
            let stages = RetentionRules.stages(family: family, rule: "", retention)
            for d in 0 ... 45 as ClosedRange<Int64> {
                let found = stages.stage(onDay: d)
                let last = stages[stages.lastIndex { $0.1 <= d } ?? 0]
                #expect(found.tier == last.0 && found.from == last.1, "\(days), family \(family), day \(d)")
            }
        }
    }

    /// The due list places a flow's items on a basis worked out once per stretch between the
    /// subject's change times (`RetentionSubject.stretch(containing:)`): at the start of every
    /// stretch, inside it and at its last millisecond, placing on the basis of any other of
    /// those times gives what placing at the time itself gives.
    @Test func theBasisOfAnyTimeOfAStretchPlacesEveryTimeOfIt() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            let subjects = try Self.subjects(seed: seed)
            #expect(!subjects.isEmpty)
            for (policy, subject, state) in subjects {
                let starts = Array(Set(state.times + state.organizerCancellations.map(\.at))).sorted()
                guard let first = starts.first else { continue }
                // Each stretch: from a change time to the millisecond before the next.
                var stretches = [(first.adding(days: -3), first.adding(milliseconds: -1))]
                for (index, start) in starts.enumerated() {
                    let end = index + 1 < starts.count ? starts[index + 1].adding(milliseconds: -1) : start.adding(days: 400)
                    stretches.append((start, end))
                }
                for (start, end) in stretches {
                    let times = [start, Timestamp(milliseconds: start.milliseconds + (end.milliseconds - start.milliseconds) / 2), end]
                    #expect(Set(times.map(state.stretch(containing:))).count == 1, "seed \(seed), \(subject) from \(start)")
                    for t in times {
                        let expected = RetentionRules.place(state, at: t, policy: policy)
                        for other in times {
                            let placed = RetentionRules.place(RetentionRules.basis(state, at: other, policy: policy), at: t)
                            #expect(placed.tier == expected.tier && placed.rule == expected.rule && placed.since == expected.since
                                    && placed.dayZero == expected.dayZero && placed.day == expected.day
                                    && placed.next?.tier == expected.next?.tier && placed.next?.at == expected.next?.at,
                                    "seed \(seed), \(subject) at \(t) on the basis of \(other), flow from \(policy.retention?.startsAt.rawValue ?? "none")")
                        }
                    }
                }
            }
        }
    }

    /// The due list's retention items, worked out as SPEC §4 reads: each stretch's end found by
    /// asking the plan just before and at every change time, each item placed at its own time.
    static func itemsPlacedOneByOne(_ subject: RetentionSubject, facts: SubjectFacts, policy: Policy, retention: Policy.Retention) -> [IndexEntry] {
        func ends(known: Timestamp?) -> [Timestamp] {
            subject.times.filter { c in
                !Plan.decide(facts, at: c, known: known, policy: policy.subscription).isPaid
                    && Plan.decide(facts, at: c.adding(milliseconds: -1), known: known, policy: policy.subscription).isPaid
            }
        }
        // A transaction reported after its purchase, or a refund reversed: the history as
        // everything known describes it is looked at too (`DueRules.retentionFlows`).
        let late = Timestamp(milliseconds: .max)
        let reportedLate = facts.subscription.transactions.contains { $0.at > $0.value.purchasedAt }
            || facts.subscription.marks.contains { $0.value.kind == .reversal }
        var times = ends(known: nil) + (reportedLate ? ends(known: late) : [])
        if retention.startsAt == .cancellation { times += facts.subscription.autoRenew.filter { !$0.value.enabled }.map(\.at) }
        let knowing: [Timestamp?] = reportedLate ? [nil, late] : [nil]
        let zeros = Set(times.flatMap { t in knowing.compactMap { RetentionRules.place(subject, at: t, known: $0, policy: policy).dayZero } })
        var items: [IndexEntry] = []
        for zero in zeros {
            for n in policy.notifications?.retentionEmailDays ?? [] where RetentionRules.place(subject, at: zero.adding(days: n), policy: policy).dayZero == zero {
                items.append(IndexEntry(at: zero.adding(days: n), kind: DueRules.retentionEmail, detail: ["day": .integer(n)], anchor: zero))
            }
            var entered: Set<Timestamp> = []
            for family in [false, true] {
                for (tier, from, _) in RetentionRules.stages(family: family, rule: "", retention) where tier != .grace {
                    let at = zero.adding(days: from)
                    let then = RetentionRules.place(subject, at: at, policy: policy)
                    guard !entered.contains(at), then.dayZero == zero, then.tier == tier, then.since == at else { continue }
                    entered.insert(at)
                    items.append(IndexEntry(at: at, kind: DueRules.tierChanged, detail: ["tier": .string(tier.rawValue)], anchor: zero))
                }
            }
        }
        return items
    }

    /// The due list places a flow's items on one basis per stretch and finds where stretches of
    /// access end with one decision per change time: it files exactly the items that placing
    /// each at its own time files, over random histories, under every flow start.
    @Test func theDueListsRetentionItemsAreThoseEachPlacedAtItsOwnTime() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            _ = try Self.compareRetentionItems(seed: seed)
        }
    }

    /// The comparison above is not empty: the random histories enter flows.
    @Test func theRandomHistoriesEnterFlows() throws {
        var filed = 0
        for seed: UInt64 in 1...10 { filed += try Self.compareRetentionItems(seed: seed) }
        #expect(filed > 100)
    }

    /// Compares the due list's retention items with `itemsPlacedOneByOne` for every subject of
    /// a random history, under every policy with a flow; returns how many items were filed.
    static func compareRetentionItems(seed: UInt64) throws -> Int {
        let (own, facts) = try folded(seed: seed)
        var filed = 0
        for policy in policies {
            guard let retention = policy.retention else { continue }
            for (subject, facts) in facts {
                var state = DueModel.State()
                state.retention = own[subject] ?? RetentionModel.State()
                let items = DueRules.retentionFlows(state, facts, policy: policy, retention: retention)
                let expected = itemsPlacedOneByOne(RetentionSubject(own: state.retention, access: facts, policy: policy.subscription),
                                                   facts: facts, policy: policy, retention: retention)
                #expect(items.count == Set(items).count, "seed \(seed), \(subject): an item filed twice")
                #expect(Set(items) == Set(expected), "seed \(seed), \(subject), flow from \(retention.startsAt.rawValue)")
                filed += items.count
            }
        }
        return filed
    }
}

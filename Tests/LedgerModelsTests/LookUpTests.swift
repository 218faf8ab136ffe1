@_spi(Storage) import LedgerCore
@testable import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// The rules' shortcuts give what the plain walks they replace give: `known(at:)` halves a
/// sorted list, `billingGrace`/`billingIssue` pass over failures a bound shows shut, and the
/// times access may end leave out what ends nothing.
@Suite struct LookUpTests {
    let day: Int64 = 86_400_000

    /// Every list of up to six facts at times 0–3 (ties included), asked at −1 … 4.
    @Test func knownAtHalvesToWhatAWalkFinds() {
        var lists: [[Dated<Bool>]] = [[]]
        for _ in 0 ..< 6 {
            lists += lists.filter { $0.count == lists.map(\.count).max() }.flatMap { list in
                (Int64(list.last.map { $0.at.milliseconds } ?? 0) ... 3).map { at in
                    list + [Dated(at: Timestamp(milliseconds: at), position: UInt64(list.count + 1), value: true)]
                }
            }
        }
        #expect(lists.count > 200)
        for list in lists {
            for t in -1 ... 4 {
                let at = Timestamp(milliseconds: Int64(t))
                #expect(Array(list.known(at: at)) == list.filter { $0.at <= at }, "\(list.map(\.at.milliseconds)) at \(t)")
            }
        }
    }

    /// A change window holds the shifted times after its start through its end: each end on
    /// both sides, a shift of days, and a window open at its start.
    @Test func aWindowHoldsTheShiftedTimesAfterItsStartThroughItsEnd() {
        let zeros = [0, 10, 20, 30].map { Timestamp(milliseconds: $0) }
        func shifted(after: Int64?, through: Int64, days: Int64 = 0) -> [Int64] {
            var times: [Timestamp] = []
            let window = ChangeWindow(after: after.map { Timestamp(milliseconds: $0 + days * day) }, through: Timestamp(milliseconds: through + days * day))
            window.appendShifted(zeros, byDays: days, to: &times)
            return times.map { $0.milliseconds - days * day }
        }
        #expect(shifted(after: 10, through: 30) == [20, 30])
        #expect(shifted(after: 9, through: 30) == [10, 20, 30])
        #expect(shifted(after: 11, through: 29) == [20])
        #expect(shifted(after: 10, through: 30, days: 3) == [20, 30])
        #expect(shifted(after: 9, through: 29, days: 3) == [10, 20])
        #expect(shifted(after: nil, through: 19) == [0, 10])
        #expect(shifted(after: 30, through: 40) == [])
        #expect(shifted(after: 20, through: 10) == [])
    }

    /// Facts built by hand, not folded, keep no latest store grace end: a failure's store grace
    /// end (day 16, after a period that ended on day 0) still holds it in grace on day 10 under
    /// billingGraceSource `store`, past billingGraceDays (3), behind a later failure without one
    /// that is shut by then (where a walk down may stop when no store end can be open).
    @Test func aHandBuiltFailuresStoreGraceEndStillHolds() {
        var facts = SubscriptionFacts()
        facts.transactions = [Dated(at: Timestamp(milliseconds: 0), position: 1,
                                    value: .init(kind: .purchase, id: "t0", originalId: "o", productId: "p",
                                                 purchasedAt: Timestamp(milliseconds: -30 * day), expiresAt: Timestamp(milliseconds: 0), isTrial: false))]
        facts.failures = [Dated(at: Timestamp(milliseconds: 0), position: 2, value: .init(originalId: "o", graceExpiresAt: Timestamp(milliseconds: 16 * day))),
                          Dated(at: Timestamp(milliseconds: day), position: 3, value: .init(originalId: "o", graceExpiresAt: nil))]
        var policy = Policy.reference.subscription
        policy.billingGraceSource = .store
        #expect(facts.billingGrace(at: Timestamp(milliseconds: 10 * day), policy: policy)?.failure.position == 2)
        #expect(facts.billingGrace(at: Timestamp(milliseconds: 16 * day), policy: policy) == nil)
    }

    /// Coverage is the latest purchased transaction covering a time. Folded transactions each
    /// purchased by their own time let the look stop early; one recorded on day 1 for a period
    /// from day 10 (announced ahead) is still found on day 15 behind one recorded on day 2 for
    /// a period from day 2, and the facts say they no longer let it stop.
    @Test func aTransactionAnnouncedAheadStillCoversWhenItsPeriodComes() throws {
        let start = ts("2026-01-01T00:00:00Z")
        var ahead = SubscriptionRenewed()
        (ahead.productId, ahead.transactionId, ahead.originalTransactionId) = ("pro.monthly", "t2", "o")
        (ahead.purchasedAt, ahead.expiresAt) = (days(10, after: start), days(40, after: start))
        let first = [Make.purchase("u", at: start, txn: "t1", original: "o", expires: days(60, after: start)),
                     Make.renewal("u", at: days(2, after: start), txn: "t3", original: "o", expires: days(30, after: start))]
        let byItsTime = try Folded(first).facts().subscription
        #expect(byItsTime.eachPurchasedByItsTime)
        #expect(byItsTime.coverage(at: days(15, after: start))?.transaction.value.id == "t3")
        for order in [first + [LedgerEvent(subject: "u", occurredAt: days(1, after: start), source: .appstore, data: ahead.eventData)],
                      [LedgerEvent(subject: "u", occurredAt: days(1, after: start), source: .appstore, data: ahead.eventData)] + first] {
            let store = try Folded(order).facts().subscription
            #expect(!store.eachPurchasedByItsTime)
            #expect(store.coverage(at: days(15, after: start))?.transaction.value.id == "t2")
            #expect(store.coverage(at: days(9, after: start))?.transaction.value.id == "t3")
        }
    }

    /// A subscription bought on day 0 for 30 days, failing to renew on each day of `failing`
    /// (every third with the store's grace end 5 days on), asked every 12 hours for 120 days
    /// under both grace sources: the grace and the issue are what asking every failure gives.
    @Test func shutWindowsPassedOverChangeNothing() {
        var facts = SubscriptionFacts()
        facts.transactions = [Dated(at: Timestamp(milliseconds: 0), position: 1,
                                    value: .init(kind: .purchase, id: "t0", originalId: "o", productId: "p", purchasedAt: Timestamp(milliseconds: 0),
                                                 expiresAt: Timestamp(milliseconds: 30 * day), isTrial: false))]
        for (i, failed) in [10, 29, 30, 31, 33, 40, 41, 60, 61, 62, 90].enumerated() {
            let at = Timestamp(milliseconds: Int64(failed) * day)
            facts.failures.append(Dated(at: at, position: UInt64(i + 2),
                                        value: .init(originalId: "o", graceExpiresAt: i % 3 == 0 ? at.adding(days: 5) : nil)))
        }
        for source in [Policy.Subscription.GraceSource.store, .policy] {
            var policy = Policy.reference.subscription
            policy.billingGraceSource = source
            var asked = 0
            for half in 0 ... 240 {
                let t = Timestamp(milliseconds: Int64(half) * day / 2)
                let grace = facts.failures.known(at: t).reversed().lazy.map { facts.episode(of: $0, at: t, known: t, policy: policy) }
                    .first { !$0.recovered && t < $0.graceEnd }
                #expect(facts.billingGrace(at: t, policy: policy) == grace, "\(source) at day \(Double(half) / 2)")
                let issue = facts.failures.known(at: t).contains { failure in
                    let episode = facts.episode(of: failure, at: t, known: t, policy: policy)
                    return !episode.recovered && t < episode.issueEnd
                }
                #expect(facts.billingIssue(at: t, policy: policy) == issue, "\(source) at day \(Double(half) / 2)")
                if grace != nil { asked += 1 }
            }
            // Both sides of the windows are asked: some times in grace, most not.
            #expect(asked > 5 && asked < 200)
        }
    }

    /// A transaction's coverage is cut by its first revocation and by its first refund, or the
    /// first after a reversal: only those marks' times can end access.
    @Test func theMarksThatCutAreTheFirstRevocationAndTheFirstRefundAfterEachReversal() {
        var facts = SubscriptionFacts()
        let marks: [(Int64, SubscriptionFacts.Mark.Kind, String)] = [
            (1, .refund, "t0"), (2, .refund, "t0"), (3, .reversal, "t0"), (4, .refund, "t0"), (5, .revoke, "t0"), (6, .revoke, "t0"),
            (7, .revoke, "t1"), (8, .reversal, "t1"), (9, .refund, "t1"), (10, .reversal, "t2"), (11, .refund, "t2"),
            // Back to t0, refunded since its reversal: a refund cuts again only after another reversal.
            (12, .refund, "t0"), (13, .reversal, "t0"), (14, .refund, "t0"),
        ]
        for (on, kind, id) in marks {
            facts.marks.append(Dated(at: Timestamp(milliseconds: on * day), position: UInt64(on), value: .init(kind: kind, transactionId: id)))
        }
        #expect(facts.cuttingMarks() == [1, 4, 5, 7, 9, 11, 14].map { Timestamp(milliseconds: $0 * day) })
    }

    /// A failure's windows count from its subscription's last period purchased by then: its own
    /// time opens windows only when no period of it was purchased and known by then — a day
    /// before the period's purchase (or before it was reported), not on that day or after.
    @Test func aFailureOpensWindowsOfItsOwnOnlyWithoutAPeriodBefore() {
        var policy = Policy.reference.subscription
        (policy.billingGraceDays, policy.billingRetryDays) = (16, 60)
        func at(_ n: Int64) -> Timestamp { Timestamp(milliseconds: n * day) }
        var facts = SubscriptionFacts()
        // "o" bought on day 10 and reported then; "late" bought on day 10, reported on day 20.
        for (position, (original, reported)) in [("o", Int64(10)), ("late", 20)].enumerated() {
            facts.transactions.append(Dated(at: at(reported), position: UInt64(position + 1),
                                            value: .init(kind: .purchase, id: original, originalId: original, productId: "p",
                                                         purchasedAt: at(10), expiresAt: at(40), isTrial: false)))
        }
        facts.transactions.sort { ($0.at, $0.position) < ($1.at, $1.position) }
        for (position, (original, failed)) in [("o", Int64(9)), ("o", 10), ("o", 11), ("late", 19), ("late", 20), ("none", 12)].enumerated() {
            facts.failures.insertDated(Dated(at: at(failed), position: UInt64(position + 10), value: .init(originalId: original, graceExpiresAt: nil)))
        }
        let periods: [Int64] = [10, 40, 40 + 16, 40 + 60]
        let ownWindows: [Int64] = [9, 19, 12].flatMap { [$0 + 16, $0 + 60] }
        #expect(Set(facts.endTimes(policy: policy)) == Set((periods + ownWindows).map(at)))
        #expect(Set(facts.endTimes(policy: policy)).isSubset(of: Set(facts.changeTimes(policy: policy))))
    }

    /// A store end cuts a billing grace short only as its subscription's first end after a
    /// failure of it: ends with no failure between cut nothing, whichever subscription ends.
    @Test func theEndsThatCutAreEachSubscriptionsFirstAfterAFailure() {
        var facts = SubscriptionFacts()
        // (day, position, failure or end, subscription); a failure and an end on day 7, the
        // failure first; the ends of days 3 and 10 end a grace only.
        let facts7: [(Int64, UInt64, Bool, String)] = [
            (1, 1, true, "o"), (2, 2, false, "o"), (3, 3, false, "o"), (4, 4, true, "x"), (5, 5, false, "o"), (6, 6, false, "x"),
            (7, 7, true, "o"), (7, 8, false, "o"), (8, 9, false, "x"),
            // A grace's end from the store cuts it too.
            (9, 10, true, "x"), (10, 11, false, "x"),
        ]
        for (on, position, failed, original) in facts7 {
            let at = Timestamp(milliseconds: on * day)
            if failed {
                facts.failures.append(Dated(at: at, position: position, value: .init(originalId: original, graceExpiresAt: nil)))
            } else {
                facts.ends.append(Dated(at: at, position: position, value: .init(originalId: original, graceOnly: on == 3 || on == 10)))
            }
        }
        #expect(facts.graceCuttingEnds() == [2, 6, 7, 10].map { Timestamp(milliseconds: $0 * day) })
    }

    /// A transaction's end read from the side where each cut ends soonest (`cuts`, the kinds
    /// and the marked transactions counted or not) is the end read walking every extension and
    /// mark in order, as the rule reads: for every list of up to five marks of three kinds over
    /// two transactions, with and without an extension, for each transaction, asked at every
    /// day and known at every day from it on.
    @Test func aTransactionsCutsReadFromEitherSideAreTheMarksReadInOrder() {
        typealias Mark = SubscriptionFacts.Mark
        let kinds: [(Mark.Kind, String)] = [(.refund, "t0"), (.reversal, "t0"), (.revoke, "t0"), (.refund, "t1"), (.reversal, "t1")]
        var lists: [[(Mark.Kind, String)]] = [[]]
        for length in 1 ... 5 { lists += lists.filter { $0.count == length - 1 }.flatMap { list in kinds.map { list + [$0] } } }
        #expect(lists.count > 3_000)
        var (compared, differing) = (0, [String]())
        for list in lists {
            for extended in [false, true] {
                var counted = SubscriptionFacts()
                counted.extensions = extended ? [Dated(at: Timestamp(milliseconds: 2 * day), position: 0, value: .init(transactionId: "t0", expiresAt: Timestamp(milliseconds: 4 * day)))] : []
                if extended { counted.extended.add("t0") }
                for (index, mark) in list.enumerated() {
                    counted.marks.append(Dated(at: Timestamp(milliseconds: Int64(index + 1) * day), position: UInt64(index + 1), value: Mark(kind: mark.0, transactionId: mark.1)))
                    counted.marked.add(mark.1)
                    switch mark.0 {
                    case .refund: counted.refundsFolded += 1
                    case .reversal: counted.reversalsFolded += 1
                    case .revoke: counted.revocationsFolded += 1
                    }
                }
                var handBuilt = SubscriptionFacts()
                (handBuilt.marks, handBuilt.extensions) = (counted.marks, counted.extensions)
                for id in ["t0", "t1"] {
                    let transaction = SubscriptionFacts.Transaction(kind: .purchase, id: id, originalId: "o", productId: "p",
                                                                    purchasedAt: Timestamp(milliseconds: 0), expiresAt: Timestamp(milliseconds: 5 * day), isTrial: false)
                    for t in 0 ... 6 {
                        for known in t ... 7 {
                            let (at, seen) = (Timestamp(milliseconds: Int64(t) * day), Timestamp(milliseconds: Int64(known) * day))
                            let expected = Self.endReadInOrder(counted, of: transaction, at: at, known: seen)
                            for facts in [counted, handBuilt] {
                                let end = facts.endWithCause(of: transaction, at: at, known: seen)
                                if end.at != expected.at || end.cause != expected.cause { differing.append("\(list) \(id) extended \(extended) at \(t) known \(known)") }
                                compared += 1
                            }
                        }
                    }
                }
            }
        }
        #expect(compared > 400_000)
        #expect(differing.isEmpty, "\(differing.count) differ, first \(differing.prefix(5))")
    }

    /// The transactions with marks and with extensions, which the rules look for no mark or
    /// extension of any other, are those the folded events name — and so again once the facts
    /// are decoded, as the store reads them.
    @Test func theTransactionsNamedByMarksAndExtensionsAreKeptAndDecoded() throws {
        let t = Timestamp(milliseconds: 0)
        let history = try Folded([
            Make.purchase("u", at: t, txn: "t0", original: "o", expires: t.adding(days: 30)),
            Make.purchase("u", at: t.adding(days: 1), txn: "t1", original: "o", expires: t.adding(days: 31)),
            Make.refund("u", at: t.adding(days: 2), txn: "t1", original: "o"),
            Make.refund("u", at: t.adding(days: 3), txn: "t1", original: "o"),
            Make.extended("u", at: t.adding(days: 4), txn: "t0", original: "o", until: t.adding(days: 40)),
        ])
        let folded = history.facts().subscription
        var encoder = StateEncoder()
        SubscriptionFacts.encode(folded, to: &encoder)
        let decoded = try encoder.bytes.withUnsafeBytes { buffer in
            var decoder = StateDecoder(buffer)
            return try SubscriptionFacts.decode(from: &decoder)
        }
        for facts in [folded, decoded] {
            #expect(facts.marks.count == 2 && facts.extensions.count == 1)
            #expect(["t0", "t1", "t2"].map { facts.marked.mayName($0, among: facts.marks.count) } == [false, true, false])
            #expect(["t0", "t1", "t2"].map { facts.extended.mayName($0, among: facts.extensions.count) } == [true, false, false])
        }
        // Facts whose lists were set directly are counted by no index: any transaction may be named.
        var handBuilt = SubscriptionFacts()
        handBuilt.marks = folded.marks
        #expect(handBuilt.marked.mayName("t0", among: handBuilt.marks.count))
    }

    /// SPEC §4's end of a transaction read as the rule says it: its latest extension, then
    /// every mark in order — a refund that happened counts from the first since a reversal
    /// known, a revocation that happened from the first.
    static func endReadInOrder(_ facts: SubscriptionFacts, of transaction: SubscriptionFacts.Transaction,
                               at t: Timestamp, known: Timestamp) -> (at: Timestamp, cause: SubscriptionFacts.EndCause) {
        var (end, cause) = (transaction.expiresAt, SubscriptionFacts.EndCause.expiry)
        for e in facts.extensions where e.at <= known && e.value.transactionId == transaction.id { end = e.value.expiresAt }
        var refundedAt: Timestamp?
        let happened = min(t, known)
        for m in facts.marks where m.at <= known && m.value.transactionId == transaction.id {
            switch m.value.kind {
            case .refund where m.at <= happened: refundedAt = refundedAt ?? m.at
            case .refund: break
            case .reversal: refundedAt = nil
            case .revoke where m.at <= happened && m.at < end: (end, cause) = (m.at, .revocation)
            case .revoke: break
            }
        }
        if let refundedAt, refundedAt < end { (end, cause) = (refundedAt, .refund) }
        return (end, cause)
    }

    /// The grant running at a time (rule 4) is found from the latest down, stopping where no
    /// earlier grant runs past it (`SubjectFacts.GrantReach`): the same plan as the same grants
    /// set by hand (which count no bound and ask every grant), for random grants folded in any
    /// order (ties included, late ones among them) and read back from their encoding, at each
    /// grant's start and end, a millisecond either side, over the facts known then and all.
    @Test func theRunningGrantFoundFromItsReachIsTheOneEveryGrantGives() throws {
        var rng = DataGenerator(state: 5)
        let base = ts("2026-03-01T00:00:00Z")
        func at(_ hours: UInt64) -> Timestamp { base.adding(hours: Int64(hours)) }
        var granted = 0
        for _ in 0 ..< 300 {
            let events = [Make.created("u", at: base)] + (0 ..< rng.next() % 7).map { _ in
                let start = at(1 + rng.next() % 8)
                return Make.grant("u", at: start, until: start.adding(hours: Int64(1 + rng.next() % 6)))
            }
            let folded = try Folded(events).facts()
            let decoded = try folded.encoded.withUnsafeBytes { bytes in try SubjectFacts.decode(bytes) }
            var everyGrant = SubjectFacts()
            (everyGrant.signIns, everyGrant.grants) = (folded.signIns, folded.grants)
            let times = folded.grants.flatMap { [$0.at, $0.value] }.flatMap { [$0.adding(milliseconds: -1), $0, $0.adding(milliseconds: 1)] }
            for t in times {
                for known in [t, Timestamp(milliseconds: .max)] {
                    let expected = Plan.decide(everyGrant, at: t, known: known, policy: Policy.reference.subscription)
                    if expected.reason.rule == "supportGrant" { granted += 1 }
                    for facts in [folded, decoded] {
                        let decision = Plan.decide(facts, at: t, known: known, policy: Policy.reference.subscription)
                        #expect(decision.planState == expected.planState && decision.reason == expected.reason, "\(events) at \(t) known \(known)")
                    }
                }
            }
        }
        #expect(granted > 100)
    }
}

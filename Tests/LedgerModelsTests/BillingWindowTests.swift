@_spi(Storage) import LedgerCore
@testable import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// Billing grace and the billing issue ask only the latest failure of each subscription
/// (`SubscriptionFacts.LatestFailures`) and pass over windows `WindowBound` rules out: they
/// must find what asking every failure finds (SPEC §4: each failure keeps its own window).
@Suite struct BillingWindowTests {
    /// At every change time of random histories and a second before it, over the facts known
    /// then and over all of them, under both grace sources.
    @Test func theLatestFailureOfEachSubscriptionDecidesAsEveryFailureDoes() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            let (_, subjects) = try RetentionLookBackTests.folded(seed: seed)
            #expect(!subjects.isEmpty)
            for (subject, facts) in subjects {
                let store = facts.subscription
                for source in Policy.Subscription.GraceSource.allCases {
                    var policy = Policy.reference.subscription
                    policy.billingGraceSource = source
                    for t in Set(store.changeTimes(policy: policy)).flatMap({ [$0, $0.adding(seconds: -1)] }) {
                        for known in [t, Timestamp(milliseconds: .max)] {
                            let episodes = store.failures.known(at: min(t, known)).map { store.episode(of: $0, at: t, known: known, policy: policy) }
                            let grace = episodes.last { !$0.recovered && t < $0.graceEnd }
                            #expect(store.billingGrace(at: t, known: known, policy: policy) == grace, "seed \(seed), \(subject) at \(t), \(source)")
                        }
                        let issue = store.failures.known(at: t).contains { failure in
                            let episode = store.episode(of: failure, at: t, known: t, policy: policy)
                            return !episode.recovered && t < episode.issueEnd
                        }
                        #expect(store.billingIssue(at: t, policy: policy) == issue, "seed \(seed), \(subject) at \(t), \(source)")
                    }
                }
            }
        }
    }

    /// A folded subscription reads each failure's episode from the transactions purchased
    /// around it (`SubscriptionFacts.EndReach`): the same lists set by hand, which count no
    /// bound and so walk every transaction, give the same episode — for every failure, at every
    /// change time of random histories and a second before it, over the facts known then and
    /// over all of them. So do the same facts read back from their encoding, which work the
    /// bound out again.
    @Test func anEpisodeReadAroundItsFailureIsTheEpisodeOfEveryTransaction() async {
        var reached = 0
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            let (_, subjects) = try RetentionLookBackTests.folded(seed: seed)
            for (subject, facts) in subjects {
                let folded = facts.subscription
                let decoded = try folded.encoded.withUnsafeBytes { bytes in try SubscriptionFacts.decode(bytes) }
                var everyTransaction = SubscriptionFacts()
                (everyTransaction.transactions, everyTransaction.extensions, everyTransaction.marks) = (folded.transactions, folded.extensions, folded.marks)
                (everyTransaction.failures, everyTransaction.ends, everyTransaction.upgrades) = (folded.failures, folded.ends, folded.upgrades)
                let policy = Policy.reference.subscription
                for t in Set(folded.changeTimes(policy: policy)).flatMap({ [$0, $0.adding(seconds: -1)] }) {
                    for known in [t, Timestamp(milliseconds: .max)] {
                        let described = folded.transactions.known(at: known)
                        if folded.reach.purchased(by: t, in: described, of: folded) != nil { reached += 1 }
                        // (Of no transactions, the bound is exact.)
                        #expect(described.isEmpty || everyTransaction.reach.purchased(by: t, in: described, of: everyTransaction) == nil)
                        #expect(decoded.reach.purchased(by: t, in: described, of: decoded) == folded.reach.purchased(by: t, in: described, of: folded))
                        for failure in folded.failures.known(at: min(t, known)) {
                            let episode = everyTransaction.episode(of: failure, at: t, known: known, policy: policy)
                            #expect(folded.episode(of: failure, at: t, known: known, policy: policy) == episode,
                                    "seed \(seed), \(subject), failure at \(failure.at), at \(t) known \(known)")
                            #expect(decoded.episode(of: failure, at: t, known: known, policy: policy) == episode,
                                    "decoded: seed \(seed), \(subject), failure at \(failure.at), at \(t) known \(known)")
                        }
                    }
                }
            }
        }
        // Most histories keep their bound (some are purchased out of order).
        #expect(reached > 100)
    }

    /// The store's grace ends are each failure's own: a failure with the store's date, then a
    /// later one without it (billingGraceDays, 3, from the period end: over before it came),
    /// keep the subscription in grace until the earlier one's date under billingGraceSource
    /// `store`, a millisecond before and not at it. Under `policy`, both end on day 3.
    @Test func anEarlierFailuresLaterStoreGraceEndStillHolds() throws {
        let start = ts("2026-01-01T00:00:00Z")
        let store = try Folded([
            Make.purchase("u", at: days(-30, after: start), txn: "t0", expires: start),
            Make.renewalFailed("u", at: days(1, after: start), original: "t0", graceExpiresAt: days(30, after: start)),
            Make.renewalFailed("u", at: days(5, after: start), original: "t0"),
        ]).facts().subscription
        var policy = Policy.reference.subscription
        policy.billingGraceSource = .store
        for t in [days(2, after: start), days(6, after: start), days(30, after: start).adding(milliseconds: -1)] {
            #expect(store.billingGrace(at: t, policy: policy)?.failure.at == days(1, after: start), "at \(t)")
        }
        #expect(store.billingGrace(at: days(30, after: start), policy: policy) == nil)
        policy.billingGraceSource = .policy
        #expect(store.billingGrace(at: days(3, after: start).adding(milliseconds: -1), policy: policy)?.failure.at == days(1, after: start))
        #expect(store.billingGrace(at: days(3, after: start), policy: policy) == nil)
        #expect(store.billingGrace(at: days(6, after: start), policy: policy) == nil)
    }

    /// One subscription failing every hour for 80 days with no period to count from: each
    /// failure's windows count from itself, so the latest's end last. Under billingGraceSource
    /// `policy`, its grace ends billingGraceDays (3) after the latest failure, its billing
    /// issue billingRetryDays (60) after: a millisecond before each and at it.
    @Test func aSubscriptionFailingEveryHourIsInGraceUntilItsLatestFailuresWindowEnds() throws {
        let start = ts("2026-01-01T00:00:00Z")
        var policy = Policy.reference.subscription
        policy.billingGraceSource = .policy
        let failures = (Int64(0) ..< 80 * 24).map { hour in Make.renewalFailed("u", at: start.adding(hours: hour), original: "t0") }
        let latest = start.adding(hours: 80 * 24 - 1)
        let store = try Folded(failures).facts().subscription
        #expect(store.billingGrace(at: latest.adding(days: policy.billingGraceDays).adding(milliseconds: -1), policy: policy)?.failure.at == latest)
        #expect(store.billingGrace(at: latest.adding(days: policy.billingGraceDays), policy: policy) == nil)
        #expect(store.billingIssue(at: latest.adding(days: policy.billingRetryDays).adding(milliseconds: -1), policy: policy))
        #expect(!store.billingIssue(at: latest.adding(days: policy.billingRetryDays), policy: policy))
    }
}

@_spi(Storage) import LedgerCore
@testable import LedgerModels
import Testing

/// The rules' shortcuts give what the plain walks they replace give: `known(at:)` halves a
/// sorted list, and `billingGrace`/`billingIssue` pass over failures a bound shows shut.
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
}

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
            var history = RandomHistory(seed: seed)
            var own: [String: RetentionModel.State] = [:]
            var facts: [String: SubjectFacts] = [:]
            for (position, event) in history.events(subjects: 4, perSubject: 4...24).enumerated() {
                let stored = StoredEvent(position: UInt64(position + 1), version: 1, recordedAt: event.occurredAt, hash: [], draft: try event.draft())
                let recorded = RecordedEvent(stored, data: event.data)
                facts[recorded.subject, default: SubjectFacts()].apply(recorded, policy: .reference)
                if RetentionModel.reads.contains(recorded.type) { RetentionModel.apply(recorded, to: &own[recorded.subject, default: RetentionModel.State()]) }
            }
            #expect(!facts.isEmpty)
            for policy in Self.policies {
                for (subject, facts) in facts {
                    let state = RetentionSubject(own: own[subject] ?? RetentionModel.State(), access: facts, policy: policy.subscription)
                    let times = Set(RetentionRules.changeTimes(of: state, policy: policy)).flatMap { [$0, $0.adding(seconds: -1)] }
                    for t in times {
                        let placed = RetentionRules.place(state, at: t, policy: policy).tier == .active
                        #expect(RetentionRules.isActive(state, at: t, policy: policy) == placed,
                                "seed \(seed), \(subject) at \(t), flow from \(policy.retention?.startsAt.rawValue ?? "none")")
                    }
                }
            }
        }
    }
}

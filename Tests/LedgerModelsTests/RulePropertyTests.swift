@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// SPEC §4's rules over random histories, folded in memory (the rules are pure: no store).
@Suite struct RulePropertyTests {
    /// One subject's events, each with its position, and the states the models fold from them.
    struct Subject {
        var events: [RecordedEvent] = []

        func state<M: ReadModel>(_ model: M.Type, through t: Timestamp? = nil) -> M.State {
            var state = M.State()
            var items: [[UInt8]: M.Item] = [:]
            for event in events where M.reads.contains(event.type) && t.map({ event.occurredAt <= $0 }) ?? true {
                M.fold(event, into: &state, items: &items, policy: .reference)
            }
            return state
        }

        func facts(through t: Timestamp? = nil) -> SubjectFacts {
            var facts = SubjectFacts()
            for event in events where t.map({ event.occurredAt <= $0 }) ?? true {
                facts.apply(event, policy: .reference)
            }
            return facts
        }

        /// The view at `t` of the events through `cut` (default all; the ledger replays those
        /// that happened by `t` for a state that does not answer at `t`).
        func view<M: ReadModel>(_ model: M.Type, at t: Timestamp, through cut: Timestamp? = nil) -> M.View? {
            var cut = cut
            if cut == nil, let from = M.answersFrom(state(model), facts: facts()), from > t { cut = t }
            return M.view(of: state(model, through: cut), facts: facts(through: cut), at: t, policy: .reference)
        }
    }

    /// `RandomHistory`'s subjects, positioned in the order generated.
    static func subjects(seed: UInt64, count: Int, perSubject: ClosedRange<Int>) throws -> [String: Subject] {
        var history = RandomHistory(seed: seed)
        var subjects: [String: Subject] = [:]
        for (index, event) in history.events(subjects: count, perSubject: perSubject).enumerated() {
            let stored = StoredEvent(position: UInt64(index + 1), version: 1, recordedAt: event.occurredAt, hash: [], draft: try event.draft())
            subjects[event.subject, default: Subject()].events.append(RecordedEvent(stored, data: event.data))
        }
        return subjects
    }

    /// Times to look at: just after each event, and days and weeks on.
    static func times(of subject: Subject) -> [Timestamp] {
        let offsets: [Int64] = [60, 86_400 + 7, 5 * 86_400 + 3, 20 * 86_400 + 11, 35 * 86_400 + 13, 100 * 86_400 + 17]
        var times: [Timestamp] = []
        for event in subject.events {
            for seconds in offsets { times.append(event.occurredAt.adding(seconds: seconds)) }
        }
        return times
    }

    /// Every instant the history names — each event's occurredAt and every time in its data —
    /// and each of them plus the policy's windows that count from such a time (billing grace,
    /// a device's verification and offline grace): the entitlement's plan can change only at
    /// these, so between two of them it is what it is at the first.
    static func instants(of subject: Subject, policy: Policy.Subscription) -> [Timestamp] {
        var named: [Timestamp] = []
        for event in subject.events {
            named.append(event.occurredAt)
            switch event.data {
            case .subscriptionPurchased(let p): named += [p.purchasedAt, p.expiresAt]
            case .subscriptionRenewed(let r): named += [r.purchasedAt, r.expiresAt]
            case .subscriptionProductChanged(let c): named += [c.purchasedAt, c.expiresAt].compactMap { $0 }
            case .subscriptionRenewalExtended(let e): named.append(e.expiresAt)
            case .subscriptionRenewalFailed(let f): named += [f.gracePeriodExpiresAt].compactMap { $0 }
            case .supportEntitlementGranted(let g): named.append(g.until)
            case .entitlementVerified(let v): named += [v.expiresAt].compactMap { $0 }
            default: break
            }
        }
        let windows = [0, policy.billingGraceDays * 86_400, policy.verificationIntervalHours * 3600, policy.offlineGraceHours * 3600]
        return Set(named.flatMap { t in windows.map { t.adding(seconds: $0) } }).sorted()
    }

    /// Whether a plan gives access.
    static func isPaid(_ plan: PlanState) -> Bool { plan == .trial || plan == .pro || plan == .proGrace }

    /// SPEC §4 Retention: in the flow (startsAt = accessEnd), day 0 is exactly where the latest
    /// stretch of trial, pro or pro_grace ends — found here by asking the entitlement's plan at
    /// every instant of the history up to t, and taking the instant after the last one with
    /// access. And a subject is `active` exactly when its plan gives access.
    @Test func theFlowStartsWhereTheLastStretchOfAccessEnds() async {
        var inFlow = 0, active = 0
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            for (name, subject) in try Self.subjects(seed: seed, count: 4, perSubject: 2...16) {
                let facts = subject.facts()
                let instants = Self.instants(of: subject, policy: Policy.reference.subscription)
                let plan = { (t: Timestamp) -> PlanState in
                    EntitlementModel.view(of: subject.state(EntitlementModel.self), facts: facts, at: t, policy: .reference)?.planState ?? .guest
                }
                for t in Self.times(of: subject) {
                    // The stretches of access are those the events visible at t describe: a
                    // renewal extension reported later moves a past period's end.
                    let paid = instants.map { Self.isPaid(Plan.decide(facts, at: $0, known: t, policy: Policy.reference.subscription).planState) }
                    let view = try #require(subject.view(RetentionModel.self, at: t))
                    let hasAccess = Self.isPaid(plan(t))
                    switch view.tier {
                    case .active:
                        active += 1
                        #expect(hasAccess, "seed \(seed), \(name) at \(t)")
                    case .grace, .browseOnly, .archived, .pendingDeletion:
                        inFlow += 1
                        #expect(!hasAccess, "seed \(seed), \(name) at \(t)")
                        let lastPaid = instants.indices.last { instants[$0] <= t && paid[$0] }
                        let end = lastPaid.flatMap { $0 + 1 < instants.count ? instants[$0 + 1] : nil }
                        #expect(view.dayZero == end, "seed \(seed), \(name) at \(t): day 0 \(view.dayZero?.description ?? "none"), last access ended \(end?.description ?? "never")")
                    case .free, .deleted:
                        break
                    }
                }
            }
        }
        // The histories reach both sides often.
        #expect(inFlow > 500 && active > 500, "in the flow \(inFlow) times, active \(active)")
    }

    /// The look back for where access ended visits only `Plan.endTimes`: wherever the plan
    /// goes from access to none, over the facts known at any time of the history, it does so
    /// at one of them — under the reference policy, and one whose offline grace is shorter
    /// than its verification interval (a failed verification then ends a device's access).
    @Test func paidAccessEndsOnlyAtAnEndTime() async {
        var shortOffline = Policy.reference.subscription
        shortOffline.offlineGraceHours = 6
        var ends = 0
        await checkProperty(count: 30, input: Gen.uint64()) { seed in
            for (name, subject) in try Self.subjects(seed: seed, count: 4, perSubject: 2...16) {
                let facts = subject.facts()
                for policy in [Policy.reference.subscription, shortOffline] {
                    let endTimes = Set(Plan.endTimes(of: facts, policy: policy))
                    let instants = Self.instants(of: subject, policy: policy)
                    for known in Self.times(of: subject) {
                        let paid = instants.map { Plan.decide(facts, at: $0, known: known, policy: policy).isPaid }
                        for i in instants.indices.dropLast() where paid[i] && !paid[i + 1] {
                            ends += 1
                            #expect(endTimes.contains(instants[i + 1]),
                                    "seed \(seed), \(name): access ends at \(instants[i + 1]) known at \(known), offline grace \(policy.offlineGraceHours) h")
                        }
                    }
                }
            }
        }
        #expect(ends > 400, "access ended \(ends) times")
    }

    /// SPEC §4: "the view at t uses only events whose occurredAt ≤ t" — every model's view at
    /// t of the whole history equals its view of the history cut at t, what comes after t
    /// included (a later grant, renewal or refund must not show in `nextTier`).
    @Test func aViewAtTDependsOnlyOnTheEventsByT() async {
        await checkProperty(count: 30, input: Gen.uint64()) { seed in
            for (name, subject) in try Self.subjects(seed: seed, count: 3, perSubject: 2...16) {
                for t in Self.times(of: subject) {
                    #expect(subject.view(EntitlementModel.self, at: t) == subject.view(EntitlementModel.self, at: t, through: t), "seed \(seed), \(name) at \(t)")
                    #expect(subject.view(RetentionModel.self, at: t) == subject.view(RetentionModel.self, at: t, through: t), "seed \(seed), \(name) at \(t)")
                    #expect(subject.view(BadgeModel.self, at: t) == subject.view(BadgeModel.self, at: t, through: t), "seed \(seed), \(name) at \(t)")
                }
            }
        }
    }
}

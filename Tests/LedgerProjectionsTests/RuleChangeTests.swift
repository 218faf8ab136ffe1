@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// Changing a rule: dry runs, rebuilds under a new policy, staleness.
@Suite struct RuleChangeTests {
    let jan1 = ts("2026-01-01T00:00:00Z")
    let jan31 = ts("2026-01-31T00:00:00Z")
    let feb5 = ts("2026-02-05T00:00:00Z")

    /// Three subjects at Feb 5: one whose renewal failed on Jan 31 (3 days of grace are over,
    /// 10 are not), one covered until next year, one whose failure is too old for either.
    func seeded(_ ledger: Ledger) throws {
        try ledger.append([
            Make.created("grace", at: jan1),
            Make.purchase("grace", at: jan1, txn: "g1", expires: jan31),
            Make.renewalFailed("grace", at: jan31, original: "g1"),
            Make.created("steady", at: jan1),
            Make.purchase("steady", at: jan1, txn: "s1", expires: ts("2027-01-01T00:00:00Z")),
            Make.created("old", at: ts("2025-10-01T00:00:00Z")),
            Make.purchase("old", at: ts("2025-10-01T00:00:00Z"), txn: "o1", expires: ts("2025-11-01T00:00:00Z")),
            Make.renewalFailed("old", at: ts("2025-11-01T00:00:00Z"), original: "o1"),
        ])
    }

    var longerGrace: Policy {
        var policy = Policy.reference
        policy.subscription.billingGraceDays = 10
        return policy
    }

    /// Two free sessions a day instead of one (seed 002's rule as a policy number): the dry run
    /// names exactly the free customer on its second session of the day, not the one on its
    /// first, nor the paid one on its third.
    @Test func aDryRunWithTwoFreeSessionsADayNamesWhoCanStartAgain() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let noon = ts("2026-03-01T12:00:00Z")
            func session(_ subject: String, _ n: Int64) -> [LedgerEvent] {
                let at = noon.adding(seconds: n * 3600)
                return [Make.session(subject, at: at, zone: "UTC"), Make.device(subject, at: at.adding(seconds: 600), .ended)]
            }
            try ledger.append([Make.created("first", at: jan1), Make.created("second", at: jan1), Make.created("paid", at: jan1),
                               Make.purchase("paid", at: jan1, txn: "p1", expires: ts("2027-01-01T00:00:00Z"))]
                              + session("first", 0) + session("second", 0) + session("second", 1) + (0 ..< 3).flatMap { session("paid", $0) })
            var two = Policy.reference
            two.access?.freeSessionsPerDay = 2
            let report = try ledger.rebuild(["access"], policy: two, dryRun: true, at: ts("2026-03-01T18:00:00Z"))
            #expect(report.changes == [
                ViewChange(subject: "first", model: "access", field: "canStartSession", from: false, to: true),
                ViewChange(subject: "first", model: "access", field: "nextAccessAt", from: "2026-03-02T00:00:00.000Z", to: nil),
                ViewChange(subject: "first", model: "access", field: "devices", from: [["deviceId": "d1", "sessionActive": false, "sessionsToday": 1, "canStartSession": false, "nextAccessAt": "2026-03-02T00:00:00.000Z"]],
                           to: [["deviceId": "d1", "sessionActive": false, "sessionsToday": 1, "canStartSession": true, "nextAccessAt": nil]]),
            ])
        }
    }

    /// resumeWithinSeconds is folded into the sessions: a rebuild under 60 s instead of 300
    /// folds them again, and a pause of two minutes then ends the session — a second one today.
    @Test func aRebuildUnderAShorterResumeFoldsTheSessionsAgain() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let noon = ts("2026-03-01T12:00:00Z")
            try ledger.append([Make.created("u", at: jan1), Make.session("u", at: noon, zone: "UTC"),
                               Make.device("u", at: noon.adding(seconds: 600), .backgrounded),
                               Make.session("u", at: noon.adding(seconds: 720), zone: "UTC"),
                               Make.device("u", at: noon.adding(seconds: 900), .ended)])
            var short = Policy.reference
            short.access?.resumeWithinSeconds = 60
            let t = ts("2026-03-01T18:00:00Z")
            let report = try ledger.rebuild(["access"], policy: short, dryRun: true, at: t)
            #expect(report.changes.contains(ViewChange(subject: "u", model: "access", field: "sessionsToday", from: 1, to: 2)))
            try ledger.rebuild(policy: short, at: t)
            #expect(try ledger.view(AccessModel.self, of: "u", at: t)?.current.sessionsToday == 2)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A dry run with a longer billing grace names exactly the subject whose view changes, with
    /// each changed field from → to and the summary of SPEC §5, and changes nothing served.
    @Test func aDryRunWithALongerBillingGraceNamesExactlyTheSubjectsThatChange() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            let before = try ledger.stats().models
            let report = try ledger.rebuild(["entitlement"], policy: longerGrace, dryRun: true, at: feb5)
            #expect(report.changes == [
                ViewChange(subject: "grace", model: "entitlement", field: "planState", from: "free", to: "pro"),
                ViewChange(subject: "grace", model: "entitlement", field: "reason.rule", from: "signedIn", to: "billingGrace"),
                ViewChange(subject: "grace", model: "entitlement", field: "reason.policyKey", from: nil, to: "subscription.billingGraceDays"),
                ViewChange(subject: "grace", model: "entitlement", field: "reason.position", from: 1, to: 3),
            ])
            #expect(report.summary == [
                "entitlement.planState": ["free→pro": 1],
                "entitlement.reason.rule": ["signedIn→billingGrace": 1],
                "entitlement.reason.policyKey": ["null→subscription.billingGraceDays": 1],
            ])
            #expect(report.policyFrom == Policy.reference.hash)
            #expect(report.policyTo == longerGrace.hash)
            // Nothing served changed.
            #expect(try ledger.stats().models == before)
            #expect(try ledger.policy() == .reference)
            #expect(try ledger.view(EntitlementModel.self, of: "grace", at: feb5)?.planState == .free)
        }
    }

    /// A rebuild's report times the fold and, apart, the comparison of the views and what came
    /// after it (writing the new states, swapping them in, deleting the old); a dry run writes
    /// nothing.
    @Test func aRebuildReportsTheTimeItSpentComparingAndWritingApartFromTheFold() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            let dry = try ledger.rebuild(policy: longerGrace, dryRun: true, at: feb5)
            #expect(dry.foldSeconds > 0)
            #expect(dry.compareSeconds > 0)
            #expect(dry.writeSeconds == 0)
            let real = try ledger.rebuild(policy: longerGrace, at: feb5)
            #expect(real.foldSeconds > 0)
            #expect(real.compareSeconds > 0)
            #expect(real.writeSeconds > 0)
        }
    }

    /// A status query, and a typed view, keep what they read besides the states (policy, head,
    /// served generations) for the read snapshot they ran in; the next query after the
    /// rebuild's commit reads the new policy and the new generations.
    @Test func aStatusQueryAfterARebuildReadsTheNewPolicyAndGenerations() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            func planState() throws -> JSON? {
                try ledger.status(of: "grace", at: feb5).answers.first { $0.model == EntitlementModel.name }?.view?.json["planState"]
            }
            #expect(try planState() == .string("free"))
            #expect(try ledger.view(EntitlementModel.self, of: "grace", at: feb5)?.planState == .free)
            try ledger.rebuild(policy: longerGrace, at: feb5)
            #expect(try planState() == .string("pro"))
            #expect(try ledger.view(EntitlementModel.self, of: "grace", at: feb5)?.planState == .pro)
            #expect(try ledger.status(of: "grace", at: feb5).stale == [])
        }
    }

    /// The real rebuild swaps the model in, and its policy becomes the store's.
    @Test func theRebuildAppliesTheNewPolicy() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            let report = try ledger.rebuild(policy: longerGrace, at: feb5)
            #expect(report.dryRun == false)
            // "grace" is pro again; "old"'s retention day 0 (the end of its billing grace) moves
            // a week later, from archived (day 93) back to browseOnly (day 86).
            #expect(Set(report.changes.map(\.subject)) == ["grace", "old"])
            #expect(report.changes.contains(ViewChange(subject: "old", model: "retention", field: "tier", from: "archived", to: "browseOnly")))
            #expect(report.changes.contains(ViewChange(subject: "grace", model: "retention", field: "tier", from: "grace", to: "active")))
            #expect(try ledger.policy() == longerGrace)
            #expect(try ledger.view(EntitlementModel.self, of: "grace", at: feb5)?.planState == .pro)
            let status = try #require(try ledger.stats().models.first)
            #expect(status.policyHash == longerGrace.hash)
            #expect(status.stale == false)
            #expect(status.rebuilding == false)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A store whose policy changed without a rebuild serves models built under the old one:
    /// they are reported stale, by `statuses` and by `verify`, until rebuilt.
    @Test func aModelBuiltUnderAnotherPolicyIsStale() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            try ledger.log.setPolicy(longerGrace)
            let status = try #require(try ledger.stats().models.first)
            #expect(status.stale)
            #expect(status.staleReason?.contains("built under policy") == true)
            #expect(try ledger.verifyModels().map(\.message).contains { $0.hasPrefix("stale: built under policy") })
            try ledger.rebuild()
            #expect(try ledger.stats().models.first?.stale == false)
        }
    }

    /// A store whose `counting` model (code version 1) has folded u1's two usages, closed.
    func buildCounting(at path: String) throws {
        let ledger = try Ledger(path: path, models: [Counting.self])
        defer { ledger.close() }
        try ledger.append([Make.usage("u1", at: jan1), Make.usage("u1", at: jan31)])
    }

    /// A model whose code version changed is stale until rebuilt, appends leave it as it is,
    /// and the rebuild uses the new code.
    @Test func aModelBuiltByAnotherCodeVersionIsStale() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            let ledger = try Ledger(path: path, models: [CountingTwice.self])
            defer { ledger.close() }
            let status = try #require(try ledger.stats().models.first)
            #expect(status.stale)
            #expect(status.staleReason == "built by version 1, this ledger has 2; run `ledger rebuild`")
            #expect(try ledger.view(CountingTwice.self, of: "u1", at: feb5) == Counting.View(count: 2))
            // An append does not advance the old build with the new code (its states might not
            // even decode): it keeps its checkpoint and its answer until the rebuild.
            try ledger.append([Make.usage("u1", at: feb5)])
            #expect(try ledger.stats().models.first?.checkpoint == 2)
            #expect(try ledger.catchUp() == 0)
            #expect(try ledger.view(CountingTwice.self, of: "u1", at: feb5) == Counting.View(count: 2))
            try ledger.rebuild()
            #expect(try ledger.stats().models.first?.stale == false)
            #expect(try ledger.view(CountingTwice.self, of: "u1", at: feb5) == Counting.View(count: 6))
        }
    }

    /// New code that stores its state another way cannot read the old build: status answers
    /// null for the model (naming it stale), the typed view says to rebuild, and the rebuild (which
    /// cannot compare views with the old build, and says so) mends both.
    @Test func aModelWhoseEncodingChangedIsNullUntilRebuilt() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            let ledger = try Ledger(path: path, models: [CountingInText.self])
            defer { ledger.close() }
            let status = try ledger.status(of: "u1", at: feb5)
            #expect(status.answers.map(\.model) == ["counting"])
            #expect(status.answers.first.map { $0.view == nil } == true)
            #expect(status.json == ["subject": "u1", "at": .string(feb5.description), "counting": .null])
            #expect(status.stale == ["counting"])
            do throws(LedgerError) {
                _ = try ledger.view(CountingInText.self, of: "u1", at: feb5)
                Issue.record("an unreadable old build answered")
            } catch {
                #expect(error.code == .unsupportedFormat)
                #expect(error.message == "read model counting was built by version 1, whose states this ledger (version 3) cannot read; run `ledger rebuild`")
            }
            let report = try ledger.rebuild(at: feb5)
            #expect(report.notCompared == ["counting"])
            #expect(report.changes.isEmpty)
            let rebuilt = try ledger.status(of: "u1", at: feb5)
            #expect(rebuilt.stale == [])
            #expect(rebuilt.answers.map(\.model) == ["counting"])
            #expect(rebuilt.answers.first?.view?.json == ["count": .integer(2)])
        }
    }

    /// A key the served build holds and the new code no longer does is compared too: its view
    /// goes from the served state's to an empty state's. (The comparison looks the new states
    /// up among the served ones, and then the served keys left over.)
    @Test func aServedKeyTheNewCodeNoLongerHoldsShowsAsAChange() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            do {
                let ledger = try Ledger(path: path, models: [Counting.self])
                defer { ledger.close() }
                try ledger.append([Make.usage("u2", at: jan1), Make.usage("u3", at: jan31)])
            }
            let ledger = try Ledger(path: path, models: [CountingButNotU2.self])
            defer { ledger.close() }
            let report = try ledger.rebuild(dryRun: true, at: feb5)
            #expect(report.changes == [ViewChange(subject: "u2", model: "counting", field: "count", from: .integer(1), to: .integer(0))])
            #expect(report.notCompared.isEmpty)
        }
    }

    /// A state that does not decode under the code version that built it is damage, not an old
    /// encoding: status fails and names the model, instead of leaving it out; the rebuild it
    /// asks for says it could not compare that model's views, and mends the state.
    @Test func aStateThatDoesNotDecodeUnderItsOwnCodeVersionIsDamage() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            let ledger = try Ledger(path: path, models: [CountingInTextAsVersionOne.self])
            defer { ledger.close() }
            let status = #expect(throws: LedgerError.self) { _ = try ledger.status(of: "u1", at: feb5) }
            #expect(status?.code == .corruptRecord)
            #expect(status?.message == "read model counting is damaged for u1 (truncated string at byte 1); run `ledger rebuild`")
            let report = try ledger.rebuild(at: feb5)
            #expect(report.notCompared == ["counting"])
            #expect(try ledger.status(of: "u1", at: feb5).answers.first?.view?.json == ["count": .integer(2)])
        }
    }
}

/// The same model with its state stored another way: the count as a decimal string.
enum CountingInText: ReadModel {
    struct State: ModelState {
        var count = "0"
        init() {}
        mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&count) }
    }
    static let name = "counting"
    static let version: UInt32 = 3
    static let reads = Counting.reads
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count = String((UInt64(state.count) ?? 0) + 1) }
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> Counting.View? {
        Counting.View(count: UInt64(state.count) ?? 0)
    }
}

/// `CountingInText` claiming `Counting`'s version: what a damaged state looks like to the
/// code that built it.
enum CountingInTextAsVersionOne: ReadModel {
    typealias State = CountingInText.State
    static let name = "counting"
    static let version: UInt32 = 1
    static let reads = Counting.reads
    static func apply(_ event: RecordedEvent, to state: inout State) { CountingInText.apply(event, to: &state) }
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> Counting.View? {
        CountingInText.view(of: state, facts: facts, at: t, policy: policy)
    }
}

/// A minimal model: how many usage events a subject recorded.
enum Counting: ReadModel {
    struct State: ModelState {
        var count: UInt64 = 0
        init() {}
        mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&count) }
    }

    struct View: ModelView {
        var count: UInt64
    }

    static let name = "counting"
    static let version: UInt32 = 1
    static let reads: Set<String> = [UsageRecorded.type]
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> View? { View(count: state.count) }
}

/// The same model with changed code: it leaves subject u2 out.
enum CountingButNotU2: ReadModel {
    typealias State = Counting.State
    static let name = "counting"
    static let version: UInt32 = 1
    static let reads = Counting.reads
    static func key(for event: RecordedEvent) -> String? { event.subject == "u2" ? nil : event.subject }
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> Counting.View? { Counting.View(count: state.count) }
}

/// The same model with changed code: it counts each event twice.
enum CountingTwice: ReadModel {
    typealias State = Counting.State
    static let name = "counting"
    static let version: UInt32 = 2
    static let reads = Counting.reads
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 2 }
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> Counting.View? { Counting.View(count: state.count) }
}

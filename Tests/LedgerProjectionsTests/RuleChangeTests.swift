import LedgerCore
import LedgerProjections
import LedgerStore
import LedgerTestSupport
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

    /// A dry run with a longer billing grace names exactly the subject whose view changes, with
    /// each changed field from → to and the summary of SPEC §5, and changes nothing served.
    @Test func aDryRunWithALongerBillingGraceNamesExactlyTheSubjectsThatChange() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            let before = try ledger.engine.statuses()
            let report = try ledger.engine.rebuild(["entitlement"], policy: longerGrace, dryRun: true, at: feb5)
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
            #expect(try ledger.engine.statuses() == before)
            #expect(try ledger.policy() == .reference)
            #expect(try ledger.view(EntitlementProjection.self, of: "grace", at: feb5).planState == .free)
        }
    }

    /// A rebuild's report times the fold and, apart, the comparison of the views and what came
    /// after it (writing the new states, swapping them in, deleting the old); a dry run writes
    /// nothing, and a rebuild told not to compare compares nothing.
    @Test func aRebuildReportsTheTimeItSpentComparingAndWritingApartFromTheFold() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            let dry = try ledger.engine.rebuild(policy: longerGrace, dryRun: true, at: feb5)
            #expect(dry.foldSeconds > 0)
            #expect(dry.compareSeconds > 0)
            #expect(dry.writeSeconds == 0)
            let real = try ledger.engine.rebuild(policy: longerGrace, at: feb5)
            #expect(real.foldSeconds > 0)
            #expect(real.compareSeconds > 0)
            #expect(real.writeSeconds > 0)
            let uncompared = try ledger.engine.rebuild(at: feb5, compare: false)
            #expect(uncompared.compareSeconds == 0)
            #expect(uncompared.writeSeconds > 0)
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
                try ledger.engine.views(of: "grace", at: feb5).views.first { $0.model == EntitlementProjection.name }?.view?["planState"]
            }
            #expect(try planState() == .string("free"))
            #expect(try ledger.view(EntitlementProjection.self, of: "grace", at: feb5).planState == .free)
            try ledger.engine.rebuild(policy: longerGrace, at: feb5)
            #expect(try planState() == .string("pro"))
            #expect(try ledger.view(EntitlementProjection.self, of: "grace", at: feb5).planState == .pro)
            #expect(try ledger.engine.views(of: "grace", at: feb5).stale == [])
        }
    }

    /// The real rebuild swaps the model in, and its policy becomes the store's.
    @Test func theRebuildAppliesTheNewPolicy() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try seeded(ledger)
            let report = try ledger.engine.rebuild(policy: longerGrace, at: feb5)
            #expect(report.dryRun == false)
            // "grace" is pro again; "old"'s retention day 0 (the end of its billing grace) moves
            // a week later, from archived (day 93) back to browseOnly (day 86).
            #expect(Set(report.changes.map(\.subject)) == ["grace", "old"])
            #expect(report.changes.contains(ViewChange(subject: "old", model: "retention", field: "tier", from: "archived", to: "browseOnly")))
            #expect(report.changes.contains(ViewChange(subject: "grace", model: "retention", field: "tier", from: "grace", to: "active")))
            #expect(try ledger.policy() == longerGrace)
            #expect(try ledger.view(EntitlementProjection.self, of: "grace", at: feb5).planState == .pro)
            let status = try #require(try ledger.engine.statuses().first)
            #expect(status.served?.policyHash == longerGrace.hash)
            #expect(status.stale == false)
            #expect(status.shadow == nil)
            #expect(try ledger.engine.verify() == [])
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
            let status = try #require(try ledger.engine.statuses().first)
            #expect(status.stale)
            #expect(status.staleReason?.contains("built under policy") == true)
            #expect(try ledger.engine.verify().map(\.message).contains { $0.hasPrefix("stale: built under policy") })
            try ledger.engine.rebuild(compare: false)
            #expect(try ledger.engine.statuses().first?.stale == false)
        }
    }

    /// A store whose `counting` model (code version 1) has folded u1's two usages, closed.
    func buildCounting(at path: String) throws {
        let ledger = try Ledger(path: path, projections: [Counting.self])
        defer { ledger.close() }
        try ledger.append([Make.usage("u1", at: jan1), Make.usage("u1", at: jan31)])
    }

    /// A model whose code version changed is stale until rebuilt, appends leave it as it is,
    /// and the rebuild uses the new code.
    @Test func aModelBuiltByAnotherCodeVersionIsStale() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            let ledger = try Ledger(path: path, projections: [CountingTwice.self])
            defer { ledger.close() }
            let status = try #require(try ledger.engine.statuses().first)
            #expect(status.stale)
            #expect(status.staleReason == "built by code version 1, this ledger has 2; run `ledger rebuild counting`")
            #expect(try ledger.view(CountingTwice.self, of: "u1", at: feb5) == Counting.View(count: 2))
            // An append does not advance the old build with the new code (its states might not
            // even decode): it keeps its checkpoint and its answer until the rebuild.
            try ledger.append([Make.usage("u1", at: feb5)])
            #expect(try ledger.engine.statuses().first?.served?.checkpoint == 2)
            #expect(try ledger.engine.catchUp() == 0)
            #expect(try ledger.view(CountingTwice.self, of: "u1", at: feb5) == Counting.View(count: 2))
            try ledger.engine.rebuild(compare: false)
            #expect(try ledger.engine.statuses().first?.stale == false)
            #expect(try ledger.view(CountingTwice.self, of: "u1", at: feb5) == Counting.View(count: 6))
        }
    }

    /// New code that stores its state another way cannot read the old build: status leaves the
    /// model out (naming it stale), the typed view says to rebuild, and the rebuild (which
    /// cannot compare views with the old build, and says so) mends both.
    @Test func aModelWhoseEncodingChangedIsLeftOutUntilRebuilt() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            let ledger = try Ledger(path: path, projections: [CountingInText.self])
            defer { ledger.close() }
            let (views, stale) = try ledger.engine.views(of: "u1", at: feb5)
            #expect(views.isEmpty)
            #expect(stale == ["counting"])
            do throws(LedgerError) {
                _ = try ledger.view(CountingInText.self, of: "u1", at: feb5)
                Issue.record("an unreadable old build answered")
            } catch {
                #expect(error.code == .unsupportedFormat)
                #expect(error.message == "read model counting was built by code version 1, whose states this ledger (code version 3) cannot read; run `ledger rebuild counting`")
            }
            let report = try ledger.engine.rebuild(at: feb5)
            #expect(report.notCompared == ["counting"])
            #expect(report.changes.isEmpty)
            let rebuilt = try ledger.engine.views(of: "u1", at: feb5)
            #expect(rebuilt.stale == [])
            #expect(rebuilt.views.map(\.model) == ["counting"])
            #expect(rebuilt.views.first?.view == ["count": .integer(2)])
        }
    }

    /// A key the served build holds and the new code no longer does is compared too: its view
    /// goes from the served state's to an empty state's. (The comparison looks the new states
    /// up among the served ones, and then the served keys left over.)
    @Test func aServedKeyTheNewCodeNoLongerHoldsShowsAsAChange() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            do {
                let ledger = try Ledger(path: path, projections: [Counting.self])
                defer { ledger.close() }
                try ledger.append([Make.usage("u2", at: jan1), Make.usage("u3", at: jan31)])
            }
            let ledger = try Ledger(path: path, projections: [CountingButNotU2.self])
            defer { ledger.close() }
            let report = try ledger.engine.rebuild(dryRun: true, at: feb5)
            #expect(report.changes == [ViewChange(subject: "u2", model: "counting", field: "count", from: .integer(1), to: .integer(0))])
            #expect(report.notCompared.isEmpty)
        }
    }

    /// A state that does not decode under the code version that built it is damage, not an old
    /// encoding: status and a comparing rebuild fail and name the model, instead of leaving it out.
    @Test func aStateThatDoesNotDecodeUnderItsOwnCodeVersionIsDamage() throws {
        try withStorePath { path in
            try buildCounting(at: path)
            let ledger = try Ledger(path: path, projections: [CountingInTextAsVersionOne.self])
            defer { ledger.close() }
            let message = "read model counting is damaged (truncated string at byte 1); run `ledger rebuild counting`"
            let status = #expect(throws: LedgerError.self) { _ = try ledger.engine.views(of: "u1", at: feb5) }
            #expect(status?.code == .corruptRecord)
            #expect(status?.message == message)
            let rebuild = #expect(throws: LedgerError.self) { try ledger.engine.rebuild(at: feb5) }
            #expect(rebuild?.code == .corruptRecord)
            #expect(rebuild?.message == message)
        }
    }
}

/// The same model with its state stored another way: the count as a decimal string.
enum CountingInText: Projection {
    struct State: ProjectionState {
        var count: UInt64 = 0
        init() {}
        func encode(to writer: inout StateWriter) { writer.write(String(count)) }
        init(from reader: inout StateReader) throws(StateReader.Damaged) {
            guard let count = UInt64(try reader.string()) else { throw StateReader.Damaged(what: "not a count") }
            self.count = count
        }
    }
    static let name = "counting"
    static let codeVersion: UInt32 = 3
    static let eventTypes = Counting.eventTypes
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> Counting.View { Counting.View(count: state.count) }
}

/// `CountingInText` claiming `Counting`'s code version: what a damaged state looks like to the
/// code that built it.
enum CountingInTextAsVersionOne: Projection {
    typealias State = CountingInText.State
    static let name = "counting"
    static let codeVersion: UInt32 = 1
    static let eventTypes = Counting.eventTypes
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> Counting.View { Counting.View(count: state.count) }
}

/// A minimal projection: how many usage events a subject recorded.
enum Counting: Projection {
    struct State: ProjectionState {
        var count: UInt64 = 0
        init() {}
        func encode(to writer: inout StateWriter) { writer.write(count) }
        init(from reader: inout StateReader) throws(StateReader.Damaged) { count = try reader.uint() }
    }

    struct View: ProjectionView {
        var count: UInt64
        var json: JSONObject { ["count": .integer(Int64(count))] }
    }

    static let name = "counting"
    static let codeVersion: UInt32 = 1
    static let eventTypes: Set<String> = ["usage.recorded"]
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> View { View(count: state.count) }
}

/// The same model with changed code: it leaves subject u2 out.
enum CountingButNotU2: Projection {
    typealias State = Counting.State
    static let name = "counting"
    static let codeVersion: UInt32 = 1
    static let eventTypes = Counting.eventTypes
    static func key(for event: RecordedEvent) -> String? { event.subject == "u2" ? nil : event.subject }
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> Counting.View { Counting.View(count: state.count) }
}

/// The same model with changed code: it counts each event twice.
enum CountingTwice: Projection {
    typealias State = Counting.State
    static let name = "counting"
    static let codeVersion: UInt32 = 2
    static let eventTypes = Counting.eventTypes
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 2 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> Counting.View { Counting.View(count: state.count) }
}

@_spi(Storage) import LedgerCore
@testable import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// Deletion rules of SPEC §4 (seeds 003, 004 CH34), one rule per test with the exact view, at
/// and on both sides of each boundary.
@Suite struct DeletionRuleTests {
    let mar1 = ts("2026-03-01T12:00:00Z")

    var soft: Policy {
        var policy = Policy.reference
        policy.deletion = .init(mode: .soft, softGraceDays: 30)
        return policy
    }

    /// The view at `t` as SPEC §5's JSON, compact.
    func view(_ events: [LedgerEvent], at t: Timestamp, policy: Policy = .reference) throws -> String {
        let view = try #require(try Folded(events).view(DeletionModel.self, at: t, policy: policy))
        return JSON.object(view.json).serialized()
    }

    func expected(state: String, requestedAt: String? = nil, scheduledAt: String? = nil, completed: [String] = [], failed: [String] = [],
                  warning: Bool = false, export: String = "none", location: String? = nil) -> String {
        func time(_ text: String?) -> String { text.map { "\"\($0)\"" } ?? "null" }
        func list(_ names: [String]) -> String { "[" + names.map { "\"\($0)\"" }.joined(separator: ",") + "]" }
        return #"{"state":"\#(state)","requestedAt":\#(time(requestedAt)),"scheduledAt":\#(time(scheduledAt)),"completedSteps":\#(list(completed)),"failedSteps":\#(list(failed)),"subscriptionWarning":\#(warning),"export":{"state":"\#(export)","location":\#(time(location))}}"#
    }

    @Test func noEventsIsNone() throws {
        #expect(try view([Make.created("u", at: mar1)], at: mar1) == expected(state: "none"))
    }

    /// A policy without a `deletion` section has no deletion model.
    @Test func noSectionNoModel() throws {
        var policy = Policy.reference
        policy.deletion = nil
        #expect(try Folded([Make.deletionRequested("u", at: mar1)]).view(DeletionModel.self, at: mar1, policy: policy) == nil)
    }

    /// Hard mode: the request itself is when the deletion falls due.
    @Test func aHardRequestFallsDueAtOnce() throws {
        let events = [Make.deletionRequested("u", at: mar1)]
        #expect(try view(events, at: mar1.adding(seconds: -1)) == expected(state: "none"))
        #expect(try view(events, at: mar1) == expected(state: "requested", requestedAt: "2026-03-01T12:00:00.000Z", scheduledAt: "2026-03-01T12:00:00.000Z"))
    }

    /// Soft mode: the request + softGraceDays × 24 h.
    @Test func aSoftRequestFallsDueAfterItsGrace() throws {
        #expect(try view([Make.deletionRequested("u", at: mar1)], at: mar1, policy: soft)
                == expected(state: "requested", requestedAt: "2026-03-01T12:00:00.000Z", scheduledAt: "2026-03-31T12:00:00.000Z"))
    }

    /// A step makes it in progress; a failed step makes it failed until a later completion of
    /// that step clears it.
    @Test func aFailedStepIsRetriedByItsLaterCompletion() throws {
        let events = [Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "profile"),
                      Make.step("u", at: days(2, after: mar1), "photos", failed: true), Make.step("u", at: days(3, after: mar1), "photos")]
        let requested = "2026-03-01T12:00:00.000Z"
        #expect(try view(events, at: days(1, after: mar1)) == expected(state: "inProgress", requestedAt: requested, scheduledAt: requested, completed: ["profile"]))
        #expect(try view(events, at: days(2, after: mar1)) == expected(state: "failed", requestedAt: requested, scheduledAt: requested, completed: ["profile"], failed: ["photos"]))
        #expect(try view(events, at: days(3, after: mar1).adding(seconds: -1)) == expected(state: "failed", requestedAt: requested, scheduledAt: requested, completed: ["profile"], failed: ["photos"]))
        #expect(try view(events, at: days(3, after: mar1)) == expected(state: "inProgress", requestedAt: requested, scheduledAt: requested, completed: ["photos", "profile"]))
    }

    /// `account.deleted` completes for good: the request is kept, nothing is due, a later
    /// request is ignored; and it completes from any state, none included.
    @Test func accountDeletedCompletesForGood() throws {
        let events = [Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "auth"),
                      Make.deleted("u", at: days(2, after: mar1)), Make.deletionRequested("u", at: days(3, after: mar1))]
        #expect(try view(events, at: days(3, after: mar1)) == expected(state: "completed", requestedAt: "2026-03-01T12:00:00.000Z", completed: ["auth"]))
        #expect(try view([Make.deleted("u", at: mar1)], at: mar1) == expected(state: "completed"))
    }

    /// Soft mode: a cancellation less than softGraceDays × 24 h after the request, before any
    /// step, goes back to none; at the grace's end it is ignored.
    @Test func aSoftCancellationIsHonouredWithinTheGrace() throws {
        let end = days(30, after: mar1)
        let inTime = [Make.deletionRequested("u", at: mar1), Make.deletionCancelled("u", at: end.adding(seconds: -1))]
        #expect(try view(inTime, at: end, policy: soft) == expected(state: "none"))
        let late = [Make.deletionRequested("u", at: mar1), Make.deletionCancelled("u", at: end)]
        #expect(try view(late, at: end, policy: soft) == expected(state: "requested", requestedAt: "2026-03-01T12:00:00.000Z", scheduledAt: "2026-03-31T12:00:00.000Z"))
    }

    /// A cancellation is ignored in hard mode, and once a step has run.
    @Test func aCancellationIsIgnoredInHardModeAndAfterAStep() throws {
        let requested = "2026-03-01T12:00:00.000Z"
        let hard = [Make.deletionRequested("u", at: mar1), Make.deletionCancelled("u", at: days(1, after: mar1))]
        #expect(try view(hard, at: days(1, after: mar1)) == expected(state: "requested", requestedAt: requested, scheduledAt: requested))
        let stepped = [Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "profile"), Make.deletionCancelled("u", at: days(2, after: mar1))]
        #expect(try view(stepped, at: days(2, after: mar1), policy: soft)
                == expected(state: "inProgress", requestedAt: requested, scheduledAt: "2026-03-31T12:00:00.000Z", completed: ["profile"]))
    }

    /// A request while another is in force is ignored; one after a cancellation starts over.
    @Test func aSecondRequestIsIgnoredUntilTheFirstIsCancelled() throws {
        let events = [Make.deletionRequested("u", at: mar1), Make.deletionRequested("u", at: days(1, after: mar1)),
                      Make.deletionCancelled("u", at: days(2, after: mar1)), Make.deletionRequested("u", at: days(3, after: mar1))]
        #expect(try view(events, at: days(1, after: mar1), policy: soft)
                == expected(state: "requested", requestedAt: "2026-03-01T12:00:00.000Z", scheduledAt: "2026-03-31T12:00:00.000Z"))
        #expect(try view(events, at: days(3, after: mar1), policy: soft)
                == expected(state: "requested", requestedAt: "2026-03-04T12:00:00.000Z", scheduledAt: "2026-04-03T12:00:00.000Z"))
    }

    /// A request while a failed deletion is in force is ignored; `account.deleted` completes
    /// it from there.
    @Test func aFailedDeletionIsNotRequestedAgainButCompletes() throws {
        let events = [Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "photos", failed: true),
                      Make.deletionRequested("u", at: days(2, after: mar1)), Make.deleted("u", at: days(3, after: mar1))]
        let requested = "2026-03-01T12:00:00.000Z"
        #expect(try view(events, at: days(2, after: mar1)) == expected(state: "failed", requestedAt: requested, scheduledAt: requested, failed: ["photos"]))
        #expect(try view(events, at: days(3, after: mar1)) == expected(state: "completed", requestedAt: requested, failed: ["photos"]))
    }

    /// A step with no request in force is ignored.
    @Test func aStepWithNoRequestIsIgnored() throws {
        #expect(try view([Make.step("u", at: mar1, "profile", failed: true)], at: mar1) == expected(state: "none"))
    }

    /// CH34 L719, L771: deleting does not cancel the App Store subscription; the warning holds
    /// while a store transaction covers t, deleted account or not.
    @Test func theSubscriptionWarningHoldsWhileTheStoreCovers() throws {
        let expires = days(30, after: mar1)
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: expires), Make.deletionRequested("u", at: mar1), Make.deleted("u", at: days(1, after: mar1))]
        let requested = "2026-03-01T12:00:00.000Z"
        #expect(try view(events, at: expires.adding(seconds: -1)) == expected(state: "completed", requestedAt: requested, warning: true))
        #expect(try view(events, at: expires) == expected(state: "completed", requestedAt: requested, warning: false))
        let card = try #require(try Folded(events).view(DeletionModel.self, at: days(2, after: mar1))).card
        #expect(card.rows.first { $0.label == "subscription" }?.value == "still renews at Apple: tell the customer how to cancel")
    }

    /// The latest export request or completion, with the completion's location.
    @Test func theExportFollowsItsLatestEvent() throws {
        let events = [Make.exportRequested("u", at: mar1), Make.exportCompleted("u", at: days(1, after: mar1), location: "s3://exports/u.zip")]
        #expect(try view(events, at: mar1) == expected(state: "none", export: "requested"))
        #expect(try view(events, at: days(1, after: mar1)) == expected(state: "none", export: "completed", location: "s3://exports/u.zip"))
    }

    /// The audit cites the rule of each change: a failed step fails the deletion.
    @Test func theAuditSaysAFailedStepFailsTheDeletion() throws {
        let events = [Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "photos", failed: true)]
        let report = try Folded(events).audit(at: days(1, after: mar1))
        let failed = try #require(report.entries.last)
        #expect(failed.summary == "deletion step photos failed (timeout)")
        #expect(failed.changes.filter { $0.model == "deletion" } == [
            AuditChange(model: "deletion", field: "state", from: "requested", to: "failed", rule: "deletionSteps"),
            AuditChange(model: "deletion", field: "failedSteps", from: [], to: ["photos"], rule: "deletionSteps"),
        ])
    }

    /// An export asked for again after one completed is requested, with no location.
    @Test func anExportAskedForAgainHasNoLocation() throws {
        let events = [Make.exportRequested("u", at: mar1), Make.exportCompleted("u", at: days(1, after: mar1), location: "s3://exports/u.zip"),
                      Make.exportRequested("u", at: days(2, after: mar1))]
        #expect(try view(events, at: days(2, after: mar1)) == expected(state: "none", export: "requested"))
    }

    /// The card says a failed step in words.
    @Test func theCardSaysWhichStepToRetry() throws {
        let events = [Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "photos", failed: true)]
        let card = try #require(try Folded(events).view(DeletionModel.self, at: days(1, after: mar1))).card
        #expect(card.headline == [.text("failed at step photos — retry")])
    }

    /// A view goes on from where the last view's walk over the steps got to (the audit asks
    /// after every event): after each event of a random history of requests, cancellations,
    /// steps done and failed and deletions — in business-time order or any (a step landing
    /// before those walked) — asked now, earlier and later under hard and soft policies by
    /// turns, it is the view of a state walked from the first step.
    @Test func aWalkGoneOnFromTheLastIsTheWalkFromTheFirst() async {
        await checkProperty(count: 40, input: Gen.uint64()) { seed in
            var random = DataGenerator(state: seed)
            var at = mar1
            var events: [LedgerEvent] = []
            for _ in 0 ..< 60 {
                at = at.adding(hours: Int64(random.int(1 ... 200)))
                switch random.int(0 ... 9) {
                case 0, 1: events.append(Make.deletionRequested("u", at: at))
                case 2: events.append(Make.deletionCancelled("u", at: at))
                case 3: events.append(Make.deleted("u", at: at))
                default: events.append(Make.step("u", at: at, random.pick(["photos", "profile"]), failed: random.int(0 ... 2) > 0))
                }
            }
            var compared = 0
            for shuffled in [false, true] {
                var order = events
                if shuffled { order.shuffle(using: &random) }
                var state = DeletionModel.State()
                var latest = mar1
                for (index, event) in order.enumerated() {
                    DeletionModel.apply(try event.recorded(at: UInt64(index + 1)), to: &state)
                    latest = max(latest, event.occurredAt)
                    var fresh = state
                    fresh.walked = KeptDeletionWalk()
                    for (turn, t) in [latest, latest.adding(days: -3), latest, latest.adding(days: 40)].enumerated() {
                        let policy = (turn + index) % 2 == 0 ? Policy.reference : soft
                        let kept = DeletionModel.view(of: state, facts: SubjectFacts(), at: t, policy: policy)
                        #expect(kept == DeletionModel.view(of: fresh, facts: SubjectFacts(), at: t, policy: policy), "seed \(seed) after \(index) at \(t)")
                        compared += 1
                    }
                }
            }
            #expect(compared == 480)
        }
    }

    /// Two copies of one state given different steps each go on from their own walk: one with
    /// a failure walked first must not lend its walk to the other, whose cancellation (soft,
    /// within the grace, no step yet) returns it to none.
    @Test func copiesGivenDifferentStepsKeepTheirOwnWalks() throws {
        func fold(_ event: LedgerEvent, _ position: UInt64, into state: inout DeletionModel.State) throws {
            DeletionModel.apply(try event.recorded(at: position), to: &state)
        }
        var shared = DeletionModel.State()
        try fold(Make.deletionRequested("u", at: mar1), 1, into: &shared)
        try fold(Make.step("u", at: days(4, after: mar1), "photos"), 2, into: &shared)
        var (failed, cancelled) = (shared, shared)
        try fold(Make.step("u", at: days(2, after: mar1), "profile", failed: true), 3, into: &failed)
        let late = days(10, after: mar1)
        #expect(DeletionModel.view(of: failed, facts: SubjectFacts(), at: late, policy: soft)?.state == .failed)
        try fold(Make.deletionCancelled("u", at: days(1, after: mar1)), 4, into: &cancelled)
        #expect(try view([Make.deletionRequested("u", at: mar1), Make.deletionCancelled("u", at: days(1, after: mar1)),
                          Make.step("u", at: days(4, after: mar1), "photos")], at: late, policy: soft) == expected(state: "none"))
        let view = try #require(DeletionModel.view(of: cancelled, facts: SubjectFacts(), at: late, policy: soft))
        #expect(view.state == .none && view.rule == "deletion.softGraceDays")
    }
}

@_spi(Storage) import LedgerCore
@testable import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// Badge rules of SPEC §4 (seed 004 CH27 L229, L232), one rule per test with complete views.
@Suite struct BadgeRuleTests {
    let mar1 = ts("2026-03-01T12:00:00Z")

    /// Views of `subject` at each time of `events`, folded in memory in the order given.
    func views(_ events: [LedgerEvent], of subject: String = "u", at times: [Timestamp]) throws -> [BadgeView] {
        let history = try Folded(events)
        return try times.map { t in try #require(history.view(BadgeModel.self, of: subject, at: t)) }
    }

    func badge(unread: Int64 = 0, maintenance: Bool = false, billing: Bool = false, security: Bool = false) -> BadgeView {
        BadgeView(unreadInbox: unread, maintenanceDueToday: maintenance, billingIssue: billing, securityFlag: security)
    }

    /// CH27 L229: unread messages count by id — a message delivered twice is one message.
    @Test func unreadMessagesCountById() throws {
        let events = [Make.delivered("u", at: mar1, message: "m1"), Make.delivered("u", at: days(1, after: mar1), message: "m1"),
                      Make.delivered("u", at: days(1, after: mar1), message: "m2"), Make.read("u", at: days(2, after: mar1), message: "m2")]
        #expect(try views(events, at: [days(1, after: mar1), days(2, after: mar1)]) == [badge(unread: 2), badge(unread: 1)])
    }

    /// SPEC §4: a read recorded before its delivery (devices' clocks, late delivery receipts)
    /// still counts as read.
    @Test func aReadBeforeItsDeliveryCountsAsRead() throws {
        let events = [Make.read("u", at: mar1, message: "m1"), Make.delivered("u", at: days(1, after: mar1), message: "m1")]
        #expect(try views(events, at: [days(1, after: mar1)]) == [badge()])
    }

    /// The same two rules over a large inbox, which the count hashes instead of comparing
    /// pairwise: 20 messages, five delivered twice, five read (one of them before its
    /// delivery), and a read of a message never delivered.
    @Test func aLargeInboxCountsByIdWithReadsBeforeDelivery() throws {
        var events = (0 ..< 20).map { Make.delivered("u", at: days(1, after: mar1), message: "m\($0)") }
        events += (0 ..< 5).map { Make.delivered("u", at: days(2, after: mar1), message: "m\($0)") }
        events += (5 ..< 9).map { Make.read("u", at: days(3, after: mar1), message: "m\($0)") }
        events += [Make.read("u", at: mar1, message: "m9"), Make.read("u", at: days(3, after: mar1), message: "other")]
        #expect(try views(events, at: [days(2, after: mar1), days(3, after: mar1)]) == [badge(unread: 19), badge(unread: 15)])
    }

    /// SPEC §4: a task is due on its local date in the zone of the latest session start. The
    /// US switches to daylight time on 2026-03-08, so that local day is 23 hours long: it begins
    /// at 08:00Z (PST) and ends at 07:00Z the next day (PDT).
    @Test func maintenanceIsDueOnTheLocalDateAcrossADSTChange() throws {
        let events = [Make.session("u", at: ts("2026-03-02T17:00:00Z"), zone: "America/Los_Angeles"),
                      Make.scheduled("u", at: ts("2026-03-02T17:00:00Z"), task: "backup", due: "2026-03-08")]
        let times = [ts("2026-03-08T07:59:59.999Z"), ts("2026-03-08T08:00:00Z"), ts("2026-03-09T06:59:59.999Z"), ts("2026-03-09T07:00:00Z")]
        #expect(try views(events, at: times) == [badge(), badge(maintenance: true), badge(maintenance: true), badge()])
    }

    /// SPEC §4: the zone is the latest session start's at t; with none, UTC. The same instant
    /// is March 8 in Tokyo and March 7 in UTC.
    @Test func theLocalDateFollowsTheLatestSessionsZone() throws {
        let scheduled = Make.scheduled("u", at: mar1, task: "backup", due: "2026-03-08")
        let t = ts("2026-03-07T20:00:00Z")
        let tokyo = Make.session("u", at: ts("2026-03-07T19:00:00Z"), zone: "Asia/Tokyo")
        let berlin = Make.session("u", at: ts("2026-03-07T19:30:00Z"), zone: "Europe/Berlin")
        #expect(try views([scheduled], at: [t]) == [badge()])
        #expect(try views([scheduled, tokyo], at: [t]) == [badge(maintenance: true)])
        #expect(try views([scheduled, tokyo, berlin], at: [t]) == [badge()])
    }

    /// SPEC §4: a completed task is no longer due.
    @Test func aCompletedTaskIsNotDue() throws {
        let events = [Make.scheduled("u", at: mar1, task: "backup", due: "2026-03-08"),
                      Make.completed("u", at: ts("2026-03-08T09:00:00Z"), task: "backup")]
        #expect(try views(events, at: [ts("2026-03-08T08:00:00Z"), ts("2026-03-08T10:00:00Z")]) == [badge(maintenance: true), badge()])
    }

    /// A task scheduled again is due on its latest date alone: moved off March 8 it is not due
    /// then, moved onto March 9 it is; each view before the move sees the first date.
    @Test func aRescheduledTaskIsDueOnItsLatestDate() throws {
        let events = [Make.scheduled("u", at: mar1, task: "backup", due: "2026-03-08"),
                      Make.scheduled("u", at: ts("2026-03-08T10:00:00Z"), task: "backup", due: "2026-03-09")]
        let times = [ts("2026-03-08T09:59:59.999Z"), ts("2026-03-08T10:00:00Z"), ts("2026-03-08T23:59:59.999Z"), ts("2026-03-09T00:00:00Z")]
        #expect(try views(events, at: times) == [badge(maintenance: true), badge(), badge(), badge(maintenance: true)])
    }

    /// CH27 L232: the billing component is the entitlement's billingIssue (one shared rule):
    /// on from the failed renewal, off at the renewal that recovers it.
    @Test func theBillingComponentIsTheSharedBillingIssue() throws {
        let apr1 = ts("2026-04-01T12:00:00Z")
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: apr1), Make.renewalFailed("u", at: apr1, original: "t1"),
                      Make.renewal("u", at: days(5, after: apr1), txn: "t2", original: "t1", expires: ts("2026-05-06T12:00:00Z"))]
        #expect(try views(events, at: [apr1.adding(seconds: -1), days(1, after: apr1), days(5, after: apr1)]) == [
            badge(), badge(billing: true), badge(),
        ])
    }

    /// SPEC §4: the billing issue also ends when the retry window (billingRetryDays) closes.
    @Test func theBillingComponentEndsWithTheRetryWindow() throws {
        let apr1 = ts("2026-04-01T12:00:00Z")
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: apr1), Make.renewalFailed("u", at: apr1, original: "t1")]
        #expect(try views(events, at: [days(60, after: apr1).adding(seconds: -1), days(60, after: apr1)]) == [badge(billing: true), badge()])
    }

    /// SPEC §4 `billingIssue`, 004 CH27 L232: the store's `GRACE_PERIOD_EXPIRED` ends the
    /// billing grace, not the unresolved billing issue, so the badge keeps counting it until
    /// the retry window closes.
    @Test func theBillingComponentOutlivesTheStoresGraceExpiry() throws {
        let apr1 = ts("2026-04-01T12:00:00Z"), graceExpired = days(16, after: apr1)
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: apr1),
                      Make.renewalFailed("u", at: apr1, original: "t1", graceExpiresAt: graceExpired),
                      Make.graceExpired("u", at: graceExpired, original: "t1")]
        let retryEnd = days(60, after: apr1)
        #expect(try views(events, at: [graceExpired.adding(seconds: -1), graceExpired, retryEnd.adding(seconds: -1), retryEnd]) == [
            badge(billing: true), badge(billing: true), badge(billing: true), badge(),
        ])
    }

    /// SPEC §4: a security flag counts while raised and not cleared, whatever its name.
    @Test func aSecurityFlagCountsUntilCleared() throws {
        let events = [Make.flag("u", at: mar1, "newDevice", raised: true), Make.flag("u", at: days(1, after: mar1), "passwordLeak", raised: true),
                      Make.flag("u", at: days(2, after: mar1), "newDevice", raised: false),
                      Make.flag("u", at: days(3, after: mar1), "passwordLeak", raised: false)]
        #expect(try views(events, at: [days(2, after: mar1), days(3, after: mar1)]) == [badge(security: true), badge()])
    }

    /// Each flag's latest fact decides it: a flag cleared and raised again counts, one raised
    /// again and cleared does not, whatever another flag's facts in between.
    @Test func aFlagsLatestFactDecidesIt() throws {
        let events = [Make.flag("u", at: mar1, "newDevice", raised: true), Make.flag("u", at: days(1, after: mar1), "newDevice", raised: false),
                      Make.flag("u", at: days(2, after: mar1), "passwordLeak", raised: false),
                      Make.flag("u", at: days(3, after: mar1), "newDevice", raised: true),
                      Make.flag("u", at: days(4, after: mar1), "passwordLeak", raised: true),
                      Make.flag("u", at: days(5, after: mar1), "newDevice", raised: false),
                      Make.flag("u", at: days(6, after: mar1), "passwordLeak", raised: false)]
        let times = (1 ... 6).map { days($0, after: mar1) }
        #expect(try views(events, at: times) == [badge(), badge(), badge(security: true), badge(security: true), badge(security: true), badge()])
    }

    /// The look back stops once every flag's name is decided, by the names folded: a flag put
    /// in the state without them (built by hand) still has its name asked, and a raised flag
    /// before it still counts.
    @Test func aFlagTheNamesDoNotCountLeavesTheLookBackWhole() throws {
        var state = BadgeModel.State()
        let raised = try Folded([Make.flag("u", at: mar1, "newDevice", raised: true)]).events[0]
        BadgeModel.apply(raised, to: &state)
        #expect(BadgeRules.securityFlag(state, at: days(2, after: mar1)))
        state.flags.append(Dated(at: days(1, after: mar1), position: 9, value: BadgeModel.Flag(name: "passwordLeak", raised: false)))
        #expect(BadgeRules.securityFlag(state, at: days(2, after: mar1)))
    }

    /// CH27 L229: count = unreadInbox + maintenanceDueToday + billingIssue + securityFlag.
    @Test func theCountAddsEveryComponent() throws {
        let apr1 = ts("2026-04-01T12:00:00Z")
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: apr1), Make.renewalFailed("u", at: apr1, original: "t1"),
                      Make.delivered("u", at: apr1, message: "m1"), Make.delivered("u", at: apr1, message: "m2"),
                      Make.scheduled("u", at: apr1, task: "backup", due: "2026-04-02"), Make.flag("u", at: apr1, "newDevice", raised: true)]
        let view = try #require(try views(events, at: [ts("2026-04-02T10:00:00Z")]).first)
        #expect(view == badge(unread: 2, maintenance: true, billing: true, security: true))
        #expect(view.count == 5)
        #expect(view.json["count"] == .integer(5))
    }
}

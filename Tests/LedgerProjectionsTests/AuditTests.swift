import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// The audit of SPEC §4: entries in business-time order with what each changed and why, time
/// entries, `--at` and `--known-at`.
@Suite struct AuditTests {
    let mar1 = ts("2026-03-01T09:30:00Z")
    let mar8 = ts("2026-03-08T09:30:00Z")

    func audit(_ batches: [[LedgerEvent]], at t: Timestamp, knownAt: KnownAt? = nil, policy: Policy = .reference) throws -> AuditReport {
        try withStorePath { path in
            let ledger = try Ledger(path: path, policy: policy)
            defer { ledger.close() }
            for batch in batches { try ledger.append(batch) }
            return try ledger.audit(of: "u", at: t, knownAt: knownAt)
        }
    }

    func change(_ model: String, _ field: String, _ from: JSON, _ to: JSON, _ rule: String) -> AuditChange {
        AuditChange(model: model, field: field, from: from, to: to, rule: rule)
    }

    /// Entries follow occurredAt, not append order; each lists every field it changed in each
    /// model with the rule that changed it.
    @Test func entriesAreInBusinessTimeOrderWithWhatTheyChanged() throws {
        let purchase = Make.purchase("u", at: mar1, txn: "t1", expires: mar8, trial: true)
        let created = Make.created("u", at: mar1.adding(seconds: -60))
        let report = try audit([[purchase], [created]], at: days(1, after: mar1))
        #expect(report.entries.map(\.type) == ["account.created", "subscription.purchased"])
        #expect(report.entries.map(\.position) == [2, 1])
        let bought = try #require(report.entries.last)
        #expect(bought.summary == "purchased pro.monthly with a free trial, transaction t1, until 2026-03-08T09:30:00.000Z")
        #expect(bought.source == "appstore")
        #expect(bought.changes.filter { $0.model == "entitlement" } == [
            change("entitlement", "planState", "free", "trial", "storeCoverage"),
            change("entitlement", "trialEligible", true, false, "trialEligible"),
            change("entitlement", "expiresAt", nil, "2026-03-08T09:30:00.000Z", "storeCoverage"),
            change("entitlement", "renewsAt", nil, "2026-03-08T09:30:00.000Z", "storeCoverage"),
            change("entitlement", "autoRenew", nil, true, "autoRenew"),
            change("entitlement", "productId", nil, "pro.monthly", "storeCoverage"),
        ])
        #expect(bought.changes.filter { $0.model == "retention" }.first == change("retention", "tier", "free", "active", "storeCoverage"))
        #expect(bought.changes.filter { $0.model == "badge" } == [])
    }

    /// SPEC §4: events of the same occurredAt are in position order, whatever their types.
    @Test func positionBreaksTiesBetweenEventsOfTheSameTime() throws {
        let report = try audit([[Make.delivered("u", at: mar1, message: "m1")], [Make.created("u", at: mar1)],
                                [Make.read("u", at: mar1, message: "m1")]], at: mar8)
        #expect(report.entries.map(\.position) == [1, 2, 3])
        #expect(report.entries.map(\.type) == ["inbox.message_delivered", "account.created", "inbox.message_read"])
        #expect(report.entries.map { $0.changes.filter { $0.model == "badge" && $0.field == "unreadInbox" }.map(\.to) } == [[1], [], [0]])
    }

    /// A trial that runs out with no event is a time entry at its end, with no position,
    /// citing the rule whose window closed.
    @Test func aTrialRunningOutIsATimeEntry() throws {
        let events = [Make.created("u", at: mar1.adding(seconds: -60)), Make.purchase("u", at: mar1, txn: "t1", expires: mar8, trial: true),
                      Make.autoRenew("u", at: days(2, after: mar1), original: "t1", enabled: false)]
        let report = try audit([events], at: days(2, after: mar8))
        let last = try #require(report.entries.last)
        #expect(last.type == "time")
        #expect(last.position == nil)
        #expect(last.recordedAt == nil)
        #expect(last.occurredAt == mar8)
        #expect(last.summary == "the trial ran out: trial → free; retention active → free")
        #expect(last.changes.filter { $0.model == "entitlement" } == [change("entitlement", "planState", "trial", "free", "storeCoverage")])
        #expect(last.changes.first { $0.model == "retention" } == change("retention", "tier", "active", "free", "neverPaid"))
        #expect(report.json.serialized().contains(#""position":null,"type":"time","occurredAt":"2026-03-08T09:30:00.000Z","recordedAt":null,"source":null"#))
    }

    /// Retention boundaries are time entries on the day the policy says: day 0, 31 and 91.
    @Test func retentionBoundariesAreTimeEntries() throws {
        let jan1 = ts("2026-01-01T00:00:00Z"), feb1 = ts("2026-02-01T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.autoRenew("u", at: ts("2026-01-15T00:00:00Z"), original: "t1", enabled: false)]
        let report = try audit([events], at: days(100, after: feb1))
        let tiers = report.entries.filter { $0.type == "time" }.compactMap { entry in
            entry.changes.first { $0.model == "retention" && $0.field == "tier" }.map { (entry.occurredAt, $0.to, $0.rule) }
        }
        #expect(tiers.map(\.0) == [feb1, days(31, after: feb1), days(91, after: feb1)])
        #expect(tiers.map(\.1) == ["grace", "browseOnly", "archived"])
        #expect(tiers.map(\.2) == ["expiry", "graceDays", "browseOnlyUntilDay"])
    }

    /// A recovery pass running out is a time entry of its own, citing the pass.
    @Test func aRecoveryPassRunningOutIsATimeEntry() throws {
        let jan1 = ts("2026-01-01T00:00:00Z"), feb1 = ts("2026-02-01T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.autoRenew("u", at: ts("2026-01-15T00:00:00Z"), original: "t1", enabled: false),
                      Make.recoveryPass("u", at: days(40, after: feb1))]
        let report = try audit([events], at: days(50, after: feb1))
        let last = try #require(report.entries.last)
        #expect(last.type == "time")
        #expect(last.occurredAt == days(47, after: feb1))
        #expect(last.summary == "the recovery pass ran out")
        #expect(last.changes == [
            change("retention", "capabilities.downloadOriginals", true, false, "recoveryPass"),
            change("retention", "capabilities.retrieveArchive", true, false, "recoveryPass"),
        ])
        let bought = try #require(report.entries.first { $0.type == "oneoff.purchased" })
        #expect(bought.changes.map(\.rule) == ["recoveryPass", "recoveryPass"])
    }

    /// `--at` cuts the timeline: later events and later time entries are left out.
    @Test func atLeavesOutWhatHappenedLater() throws {
        let events = [Make.created("u", at: mar1.adding(seconds: -60)), Make.purchase("u", at: mar1, txn: "t1", expires: mar8, trial: true),
                      Make.renewal("u", at: mar8, txn: "t2", original: "t1", expires: ts("2026-04-08T09:30:00Z"))]
        let report = try audit([events], at: days(1, after: mar1))
        #expect(report.entries.map(\.type) == ["account.created", "subscription.purchased"])
        #expect(report.laterEvents == 1)
    }

    /// Bitemporal: a refund that happened on Mar 20 but was recorded (appended) later. Known at
    /// the position before it, the audit at Mar 25 shows pro and no refund; with everything
    /// recorded it shows the refund at Mar 20, where it happened, ending pro.
    @Test func knownAtShowsWhatTheLedgerHadRecordedThen() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), mar20 = ts("2026-03-20T09:30:00Z"), mar25 = ts("2026-03-25T09:30:00Z")
        let first = [Make.created("u", at: mar1.adding(seconds: -60)), Make.purchase("u", at: mar1, txn: "t1", expires: apr1)]
        let refund = [Make.refund("u", at: mar20, txn: "t1", original: "t1")]
        let then = try audit([first, refund], at: mar25, knownAt: .position(2))
        #expect(then.entries.map(\.type) == ["account.created", "subscription.purchased"])
        #expect(then.knownAt == .position(2))
        #expect(then.json.serialized().contains(#""knownAt":2"#))
        let now = try audit([first, refund], at: mar25)
        let refunded = try #require(now.entries.last)
        #expect(refunded.type == "subscription.refunded")
        #expect(refunded.occurredAt == mar20)
        #expect(refunded.changes.first == change("entitlement", "planState", "pro", "free", "storeCoverage"))
        #expect(refunded.changes.contains(change("retention", "tier", "active", "grace", "refund")))
    }

    /// A subject the store has never seen has an empty timeline, not an error.
    @Test func anUnknownSubjectHasAnEmptyTimeline() throws {
        let report = try audit([[Make.created("someone-else", at: mar1)]], at: mar8)
        #expect(report.entries == [])
        #expect(report.json.serialized() == #"{"subject":"u","at":"2026-03-08T09:30:00.000Z","knownAt":null,"entries":[]}"#)
    }

    /// SPEC §4: a support grant that outlasts the store period ends the latest stretch of
    /// access; the time entry at its end cites the grant for the plan and the tier alike.
    @Test func theEndOfAGrantThatOutlastsTheStoreIsWhereTheFlowStarts() throws {
        let jan1 = ts("2026-01-01T00:00:00Z"), feb1 = ts("2026-02-01T00:00:00Z"), feb10 = ts("2026-02-10T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.autoRenew("u", at: ts("2026-01-15T00:00:00Z"), original: "t1", enabled: false),
                      Make.grant("u", at: ts("2026-01-20T00:00:00Z"), until: feb10)]
        let report = try audit([events], at: ts("2026-03-01T00:00:00Z"))
        let planTimes = report.entries.filter { $0.type == "time" && $0.changes.contains { ["entitlement", "retention"].contains($0.model) } }
        #expect(planTimes.map(\.occurredAt) == [feb10])
        let end = try #require(report.entries.last)
        #expect(end.summary == "the support grant ended: pro → free; retention active → grace (day 0)")
        #expect(end.changes.filter { ["entitlement", "retention"].contains($0.model) } == [
            change("entitlement", "planState", "pro", "free", "supportGrant"),
            change("retention", "tier", "active", "grace", "supportGrant"),
            change("retention", "capabilities.upload", true, false, "supportGrant"),
            change("retention", "capabilities.earnCredits", true, false, "supportGrant"),
            change("retention", "reactivation.available", false, true, "supportGrant"),
        ])
    }

    /// SPEC §4: the store's `grace_expired` ends the billing grace (the plan change cites it)
    /// and leaves the billing issue on; the retry window's close ends the issue later, as a
    /// time entry.
    @Test func graceExpiredChangesThePlanAndNotTheBillingIssue() throws {
        let jan1 = ts("2026-01-01T00:00:00Z"), feb1 = ts("2026-02-01T00:00:00Z"), feb17 = ts("2026-02-17T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.renewalFailed("u", at: feb1, original: "t1", graceExpiresAt: feb17), Make.graceExpired("u", at: feb17, original: "t1")]
        let report = try audit([events], at: ts("2026-06-01T00:00:00Z"))
        let expiry = try #require(report.entries.first { $0.type == "subscription.grace_expired" })
        #expect(expiry.changes.filter { $0.model == "entitlement" } == [change("entitlement", "planState", "pro", "free", "billingGrace")])
        #expect(expiry.changes.first { $0.model == "retention" } == change("retention", "tier", "active", "grace", "billingGrace"))
        let closed = try #require(report.entries.first { $0.summary == "the billing retry window closed" })
        #expect(closed.type == "time")
        #expect(closed.occurredAt == days(60, after: feb1))
        #expect(closed.changes.filter { ["entitlement", "badge"].contains($0.model) }.map(\.field) == ["billingIssue", "banners", "count", "billingIssue"])
    }
}

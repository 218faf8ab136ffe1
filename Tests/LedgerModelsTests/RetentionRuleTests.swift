import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// Retention rules of SPEC §4 (seed 000), one rule per test, each asserting complete views.
@Suite struct RetentionRuleTests {
    let jan1 = ts("2026-01-01T00:00:00Z")
    let jan15 = ts("2026-01-15T00:00:00Z")
    let feb1 = ts("2026-02-01T00:00:00Z")

    /// Views of `subject` at each time of `events`, folded in memory in the order given.
    func views(_ events: [LedgerEvent], of subject: String = "u", at times: [Timestamp], policy: Policy = .reference) throws -> [RetentionView] {
        let history = try Folded(events)
        return try times.map { t in try #require(history.view(RetentionModel.self, of: subject, at: t, policy: policy)) }
    }

    /// A paying subscriber (Jan 1 → Feb 1) who cancelled on Jan 15: paid access ends Feb 1.
    func cancelled() -> [LedgerEvent] {
        [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
         Make.autoRenew("u", at: jan15, original: "t1", enabled: false)]
    }

    /// The time `n` days after day 0 (Feb 1), less `ms` milliseconds.
    func day(_ n: Int64, less ms: Int64 = 0) -> Timestamp { Timestamp(milliseconds: days(n, after: feb1).milliseconds - ms) }

    func grace(day d: Int64, since: Timestamp, zero: Timestamp, rule: String, next: Timestamp) -> RetentionView {
        RetentionView(tier: .grace, enteredAt: since, nextTier: .browseOnly, nextTierAt: next, capabilities: .readOnly,
                      reactivationAvailable: true, reactivationFee: nil, rule: rule, dayZero: zero, day: d)
    }

    func browseOnly(day d: Int64, rule: String = "graceDays") -> RetentionView {
        RetentionView(tier: .browseOnly, enteredAt: day(31), nextTier: .archived, nextTierAt: day(91), capabilities: .thumbnails,
                      reactivationAvailable: true, reactivationFee: nil, rule: rule, dayZero: feb1, day: d)
    }

    func archived(day d: Int64) -> RetentionView {
        RetentionView(tier: .archived, enteredAt: day(91), nextTier: .pendingDeletion, nextTierAt: day(365), capabilities: .thumbnails,
                      reactivationAvailable: true, reactivationFee: Policy.reference.retention?.reactivationFee, rule: "browseOnlyUntilDay",
                      dayZero: feb1, day: d)
    }

    /// 000 "Day 0": the flow counts from when paid access ends; until then the subject is active
    /// and the grace tier is what comes next (the period was cancelled, so no renewal is due).
    @Test func dayZeroIsWhenPaidAccessEnds() throws {
        #expect(try views(cancelled(), at: [day(0, less: 1), day(0)]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: feb1, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "storeCoverage"),
            grace(day: 0, since: feb1, zero: feb1, rule: "expiry", next: day(31)),
        ])
    }

    /// SPEC §4: day 0 is the expiry of the last covered period: a subscriber who renewed once
    /// (Dec 1 → Jan 1, then Jan 1 → Feb 1) and turned auto-renew off counts from Feb 1, not from
    /// the first period's end.
    @Test func dayZeroIsTheEndOfTheLastCoveredPeriod() throws {
        let dec1 = ts("2025-12-01T00:00:00Z")
        let events = [Make.created("u", at: dec1.adding(seconds: -60)), Make.purchase("u", at: dec1, txn: "t1", expires: jan1),
                      Make.renewal("u", at: jan1, txn: "t2", original: "t1", expires: feb1),
                      Make.autoRenew("u", at: jan15, original: "t1", enabled: false)]
        #expect(try views(events, at: [day(0)]) == [grace(day: 0, since: feb1, zero: feb1, rule: "expiry", next: day(31))])
    }

    /// SPEC §4: a refund reversed at or before t never ended its transaction's coverage in any
    /// stretch the view at t looks back on, even when the reversal came after the period
    /// ended. Refunded on Jan 15, reversed on Feb 10: until the reversal the flow counts from
    /// the refund; from it, from the period's end (Feb 1).
    @Test func aRefundReversedAfterThePeriodNeverEndedTheStretch() throws {
        let feb10 = ts("2026-02-10T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.refund("u", at: jan15, txn: "t1", original: "t1"), Make.refundReversed("u", at: feb10, txn: "t1", original: "t1")]
        #expect(try views(events, at: [feb10.adding(seconds: -1), feb10, day(20)]) == [
            grace(day: 25, since: jan15, zero: jan15, rule: "refund", next: days(31, after: jan15)),
            grace(day: 9, since: feb1, zero: feb1, rule: "expiry", next: day(31)),
            grace(day: 20, since: feb1, zero: feb1, rule: "expiry", next: day(31)),
        ])
    }

    /// 000 "0-30 days: Full access (grace period)": day 30 is still grace, day 31 browse only.
    @Test func graceLastsThroughDay30() throws {
        #expect(try views(cancelled(), at: [day(31, less: 1), day(31)]) == [
            grace(day: 30, since: feb1, zero: feb1, rule: "expiry", next: day(31)),
            browseOnly(day: 31),
        ])
    }

    /// 000 "31-90 days: Browse only, can reactivate": day 90 is browse only, day 91 archived.
    @Test func browseOnlyLastsThroughDay90() throws {
        #expect(try views(cancelled(), at: [day(91, less: 1), day(91)]) == [browseOnly(day: 90), archived(day: 91)])
    }

    /// 000 "365+ days: Data queued for deletion": day 364 is archived, day 365 pending deletion.
    @Test func pendingDeletionFromDay365() throws {
        #expect(try views(cancelled(), at: [day(365, less: 1), day(365)]) == [
            archived(day: 364),
            RetentionView(tier: .pendingDeletion, enteredAt: day(365), nextTier: nil, nextTierAt: nil, capabilities: .thumbnails,
                          reactivationAvailable: false, reactivationFee: nil, rule: "pendingDeletionFromDay", dayZero: feb1, day: 365),
        ])
    }

    /// 000 "Recovery Options": reactivation is free through day 90, costs the fee through day
    /// 364, and is gone from day 365.
    @Test func theReactivationFeeByDay() throws {
        let fee = Policy.reference.retention?.reactivationFee
        let seen = try views(cancelled(), at: [day(0), day(90), day(91), day(364), day(365)]).map { [$0.reactivationAvailable ? "yes" : "no", $0.reactivationFee?.amount ?? "free"] }
        #expect(fee?.amount == "19.99")
        #expect(seen == [["yes", "free"], ["yes", "free"], ["yes", "19.99"], ["yes", "19.99"], ["no", "free"]])
    }

    /// 000 "Recovery Pass: 7 days full access … no uploads, no new credits": downloads and
    /// archive retrieval open for recoveryPassDays after buying one, then close again.
    @Test func aRecoveryPassOpensDownloadsForSevenDays() throws {
        let events = cancelled() + [Make.recoveryPass("u", at: day(40))]
        var open = browseOnly(day: 46)
        open.capabilities = .readOnly
        open.recoveryPassUntil = day(47)
        #expect(try views(events, at: [day(47, less: 1), day(47)]) == [open, browseOnly(day: 47)])
    }

    /// 000 "Shared/Family Plans: 60-day grace period for members": a member whose organizer
    /// cancelled stays in grace through day 60.
    @Test func aFamilyMemberWhoseOrganizerCancelledHasSixtyDaysOfGrace() throws {
        let events = cancelled() + [Make.organizerCancelled("u", at: jan15.adding(seconds: 60))]
        var afterGrace = browseOnly(day: 61, rule: "familyMemberGraceDays")
        afterGrace.enteredAt = day(61)
        #expect(try views(events, at: [day(61, less: 1), day(61)]) == [
            grace(day: 60, since: feb1, zero: feb1, rule: "expiry", next: day(61)),
            afterGrace,
        ])
    }

    /// SPEC §4: a refund ends paid access at once, and the flow counts from the refund.
    @Test func aRefundStartsTheFlowAtTheRefund() throws {
        let jan10 = ts("2026-01-10T12:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.refund("u", at: jan10, txn: "t1", original: "t1")]
        #expect(try views(events, at: [days(1, after: jan10)]) == [
            grace(day: 1, since: jan10, zero: jan10, rule: "refund", next: days(31, after: jan10)),
        ])
    }

    /// 000 "Day 61+: Subscription terminated — enters same flow": after a failed payment the
    /// subject stays active through the billing grace, and day 0 is the grace's end.
    @Test func aFailedPaymentEntersTheFlowWhenBillingGraceEnds() throws {
        let graceEnd = days(3, after: feb1)
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.renewalFailed("u", at: feb1, original: "t1")]
        #expect(try views(events, at: [graceEnd.adding(seconds: -1), graceEnd]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: graceEnd, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "billingGrace"),
            grace(day: 0, since: graceEnd, zero: graceEnd, rule: "billingGrace", next: days(31, after: graceEnd)),
        ])
    }

    /// Photolala's pack (000 "Day 0: User cancels subscription"): with startsAt = cancellation
    /// the flow counts from turning auto-renew off, while the paid period still runs.
    @Test func withStartsAtCancellationDayZeroIsTheCancellation() throws {
        var policy = Policy.reference
        policy.retention?.startsAt = .cancellation
        #expect(try views(cancelled(), at: [days(5, after: jan15)], policy: policy) == [
            grace(day: 5, since: jan15, zero: jan15, rule: "cancellation", next: days(31, after: jan15)),
        ])
    }

    /// SPEC §3: Photolala's own pack, as shipped: 60 days of billing grace (Apple's retry
    /// window, 000) keep a failed payer active and out of the flow; day 0 is the grace's end.
    @Test func photolalasPackKeepsAFailedPayerActiveForSixtyDays() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Schemas/policies/photolala.json")
        let policy = try Policy.decode(Array(try String(contentsOf: file, encoding: .utf8).utf8)).get()
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.renewalFailed("u", at: feb1, original: "t1")]
        let graceEnd = days(60, after: feb1)
        #expect(try views(events, at: [days(59, after: feb1), graceEnd], policy: policy) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: graceEnd, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "billingGrace"),
            grace(day: 0, since: graceEnd, zero: graceEnd, rule: "billingGrace", next: days(31, after: graceEnd)),
        ])
    }

    /// SPEC §4: `active` while the plan is trial, pro or pro_grace — a device's offline grace
    /// (the verification failed, the 24 hours still run) keeps the subject active; a verified
    /// `pro` is paid access, so when the grace runs out the flow begins there.
    @Test func proGraceIsActiveAndItsEndIsDayZero() throws {
        let graceEnd = jan1.adding(seconds: 24 * 3600)
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.verified("u", at: jan1),
                      Make.verificationFailed("u", at: jan1.adding(seconds: 3600))]
        #expect(try views(events, at: [jan1.adding(seconds: 2 * 3600), Timestamp(milliseconds: graceEnd.milliseconds - 1), graceEnd]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: graceEnd, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "offlineGrace"),
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: graceEnd, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "offlineGrace"),
            grace(day: 0, since: graceEnd, zero: graceEnd, rule: "offlineGrace", next: days(31, after: graceEnd)),
        ])
    }

    /// SPEC §4: "a trial-only history counts as never paid" — the subject is free, not in the flow.
    @Test func aTrialOnlyHistoryIsFree() throws {
        let events = [Make.created("u", at: jan1.adding(seconds: -60)),
                      Make.purchase("u", at: jan1, txn: "t1", expires: days(7, after: jan1), trial: true),
                      Make.autoRenew("u", at: days(2, after: jan1), original: "t1", enabled: false)]
        #expect(try views(events, at: [days(10, after: jan1)]) == [
            RetentionView(tier: .free, enteredAt: nil, nextTier: nil, nextTierAt: nil, capabilities: .thumbnails,
                          reactivationAvailable: false, reactivationFee: nil, rule: "neverPaid"),
        ])
    }

    /// SPEC §4: `deleted` after account.deleted, with no capability left.
    @Test func aDeletedAccountHasNothingLeft() throws {
        let gone = days(3, after: feb1)
        #expect(try views(cancelled() + [Make.deleted("u", at: gone)], at: [days(1, after: gone)]) == [
            RetentionView(tier: .deleted, enteredAt: gone, nextTier: nil, nextTierAt: nil, capabilities: .none,
                          reactivationAvailable: false, reactivationFee: nil, rule: "deleted"),
        ])
    }

    /// A subscription that renews by itself has no tier change ahead: the renewal decides, not the clock.
    @Test func anAutoRenewingSubscriberHasNoTierAhead() throws {
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1)]
        #expect(try views(events, at: [jan15]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: nil, nextTierAt: nil, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "storeCoverage"),
        ])
    }

    // MARK: SPEC §4's clarified retention rules, each at its boundary and on both sides

    /// The millisecond before `t`.
    func justBefore(_ t: Timestamp) -> Timestamp { Timestamp(milliseconds: t.milliseconds - 1) }

    /// SPEC §4: a policy without a `retention` section has no retention model: its view is
    /// `nil` (`status` reports `null`), the other models answer as usual.
    @Test func aPolicyWithoutRetentionHasNoRetentionView() throws {
        var policy = Policy.reference
        policy.retention = nil
        let history = try Folded(cancelled())
        #expect(history.view(RetentionModel.self, at: day(40), policy: policy) == nil)
        #expect(history.view(RetentionModel.self, at: day(40)) != nil)
        #expect(history.view(EntitlementModel.self, at: day(40), policy: policy)?.planState == .free)
    }

    /// SPEC §4 `free`: a support grant is paid access, so a subject who only ever had one is
    /// in the flow once it ends, counted from its end.
    @Test func aSupportGrantIsPaidAccess() throws {
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.grant("u", at: jan1, until: feb1)]
        #expect(try views(events, at: [day(0, less: 1), day(0)]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: feb1, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "supportGrant"),
            grace(day: 0, since: feb1, zero: feb1, rule: "supportGrant", next: day(31)),
        ])
    }

    /// SPEC §4: day 0 is the end of the latest stretch of access, here a support grant that
    /// outlasted the store period (cancelled, ending Feb 1) by nine days.
    @Test func aSupportGrantThatOutlastsTheStoreMovesDayZero() throws {
        let feb10 = days(9, after: feb1)
        let events = cancelled() + [Make.grant("u", at: ts("2026-01-20T00:00:00Z"), until: feb10)]
        #expect(try views(events, at: [feb1, justBefore(feb10), feb10]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: feb10, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "supportGrant"),
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: feb10, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "supportGrant"),
            grace(day: 0, since: feb10, zero: feb10, rule: "supportGrant", next: days(31, after: feb10)),
        ])
    }

    /// SPEC §4: a device's verification that outlasted the store period is part of the
    /// latest stretch: day 0 is where its window closes.
    @Test func aDeviceVerificationThatOutlastsTheStoreMovesDayZero() throws {
        let verifiedAt = feb1.adding(seconds: -3600), windowEnd = feb1.adding(seconds: 23 * 3600)
        let events = cancelled() + [Make.verified("u", at: verifiedAt)]
        #expect(try views(events, at: [justBefore(windowEnd), windowEnd]) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: windowEnd, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "deviceVerified"),
            grace(day: 0, since: windowEnd, zero: windowEnd, rule: "deviceVerified", next: days(31, after: windowEnd)),
        ])
    }

    /// SPEC §4: the stretches are those the events known at t describe — a purchase reported
    /// a month late covers from its purchasedAt once it is known, and the flow counts from
    /// its end; before it was known the subject had never paid.
    @Test func aPurchaseReportedLateCoversFromItsPurchasedAtOnceKnown() throws {
        let mar1 = ts("2026-03-01T00:00:00Z")
        var late = Make.purchase("u", at: jan1, txn: "t1", expires: feb1)
        late.occurredAt = mar1
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), late]
        #expect(try views(events, at: [justBefore(mar1), mar1]) == [
            RetentionView(tier: .free, enteredAt: nil, nextTier: nil, nextTierAt: nil, capabilities: .thumbnails,
                          reactivationAvailable: false, reactivationFee: nil, rule: "neverPaid"),
            grace(day: 28, since: feb1, zero: feb1, rule: "expiry", next: day(31)),
        ])
    }

    /// SPEC §4 with startsAt = cancellation: an un-cancel withdraws the cancellation — the
    /// subject is in the flow from the cancellation, and active again from the un-cancel.
    @Test func anUnCancelWithdrawsTheCancellation() throws {
        var policy = Policy.reference
        policy.retention?.startsAt = .cancellation
        let jan10 = ts("2026-01-10T00:00:00Z"), jan12 = ts("2026-01-12T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.autoRenew("u", at: jan10, original: "t1", enabled: false), Make.autoRenew("u", at: jan12, original: "t1", enabled: true)]
        #expect(try views(events, at: [justBefore(jan12), jan12], policy: policy) == [
            grace(day: 1, since: jan10, zero: jan10, rule: "cancellation", next: days(31, after: jan10)),
            RetentionView(tier: .active, enteredAt: jan12, nextTier: nil, nextTierAt: nil, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "storeCoverage"),
        ])
    }

    /// SPEC §4 with startsAt = cancellation: day 0 is the latest cancellation in force during
    /// the store period whose end ended the access — the latest of several — and once the
    /// period ends the flow goes on from it.
    @Test func withStartsAtCancellationDayZeroIsTheLatestCancellationOfTheEndedPeriod() throws {
        var policy = Policy.reference
        policy.retention?.startsAt = .cancellation
        let jan10 = ts("2026-01-10T00:00:00Z"), jan12 = ts("2026-01-12T00:00:00Z")
        let events = [Make.created("u", at: jan1.adding(seconds: -60)), Make.purchase("u", at: jan1, txn: "t1", expires: feb1),
                      Make.autoRenew("u", at: jan10, original: "t1", enabled: false), Make.autoRenew("u", at: jan12, original: "t1", enabled: true),
                      Make.autoRenew("u", at: jan15, original: "t1", enabled: false)]
        #expect(try views(events, at: [justBefore(feb1), feb1], policy: policy) == [
            grace(day: 16, since: jan15, zero: jan15, rule: "cancellation", next: days(31, after: jan15)),
            grace(day: 17, since: jan15, zero: jan15, rule: "cancellation", next: days(31, after: jan15)),
        ])
    }

    /// SPEC §4 with startsAt = cancellation: only a cancellation during the period that ended
    /// counts. One turned off in an earlier period put that period in the flow; a renewal
    /// after it makes the renewed period active again (from its start), and its end is day 0.
    @Test func aCancellationOfAnEarlierPeriodDoesNotCount() throws {
        var policy = Policy.reference
        policy.retention?.startsAt = .cancellation
        let dec1 = ts("2025-12-01T00:00:00Z"), dec10 = ts("2025-12-10T00:00:00Z")
        let events = [Make.created("u", at: dec1.adding(seconds: -60)), Make.purchase("u", at: dec1, txn: "t1", expires: jan1),
                      Make.autoRenew("u", at: dec10, original: "t1", enabled: false),
                      Make.renewal("u", at: jan1, txn: "t2", original: "t1", expires: feb1)]
        #expect(try views(events, at: [jan15, feb1], policy: policy) == [
            RetentionView(tier: .active, enteredAt: jan1, nextTier: .grace, nextTierAt: feb1, capabilities: .all,
                          reactivationAvailable: false, reactivationFee: nil, rule: "storeCoverage"),
            grace(day: 0, since: feb1, zero: feb1, rule: "expiry", next: day(31)),
        ])
    }

    /// SPEC §4: the family rule needs the organizer's cancellation to lie strictly after the
    /// member's latest store transaction's purchasedAt: at that very instant it does not.
    @Test func anOrganizerCancellationMustComeAfterTheLatestPurchase() throws {
        let atThePurchase = try views(cancelled() + [Make.organizerCancelled("u", at: jan1)], at: [day(31)])
        let justAfter = try views(cancelled() + [Make.organizerCancelled("u", at: jan1.adding(seconds: 1))], at: [day(31)])
        #expect(atThePurchase == [browseOnly(day: 31)])
        #expect(justAfter == [grace(day: 31, since: feb1, zero: feb1, rule: "expiry", next: day(61))])
    }

    /// SPEC §4: a recovery pass bought at b widens the capabilities for b ≤ t < b + 7 days,
    /// from the millisecond it is bought.
    @Test func aRecoveryPassOpensWhenBought() throws {
        let events = cancelled() + [Make.recoveryPass("u", at: day(40))]
        var open = browseOnly(day: 40)
        open.capabilities = .readOnly
        open.recoveryPassUntil = day(47)
        #expect(try views(events, at: [day(40, less: 1), day(40)]) == [browseOnly(day: 39), open])
    }

    /// SPEC §4: a recovery pass applies to browseOnly, archived and pendingDeletion; bought in
    /// grace it adds nothing there, and what is left of it carries into browseOnly.
    @Test func aRecoveryPassBoughtInGraceCountsOnlyFromBrowseOnly() throws {
        let events = cancelled() + [Make.recoveryPass("u", at: day(28))]
        var carried = browseOnly(day: 31)
        carried.capabilities = .readOnly
        carried.recoveryPassUntil = day(35)
        #expect(try views(events, at: [day(29), day(31), day(35)]) == [
            grace(day: 29, since: feb1, zero: feb1, rule: "expiry", next: day(31)), carried, browseOnly(day: 35),
        ])
    }
}

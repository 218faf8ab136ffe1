@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// Entitlement rules of SPEC §4, one rule per test, each asserting the complete view.
@Suite struct EntitlementRuleTests {
    let mar1 = ts("2026-03-01T09:30:00Z")
    let mar8 = ts("2026-03-08T09:30:00Z")

    /// The view of `subject` at `t` of `events`, folded in memory in the order given.
    func view(_ events: [LedgerEvent], of subject: String = "u", at t: Timestamp) throws -> EntitlementView {
        try #require(try Folded(events).view(EntitlementModel.self, of: subject, at: t))
    }

    /// The views of `subject` at each time of `events`, folded in memory in the order given.
    func views(_ events: [LedgerEvent], of subject: String = "u", at times: [Timestamp], policy: Policy = .reference) throws -> [EntitlementView] {
        let history = try Folded(events)
        return try times.map { t in try #require(history.view(EntitlementModel.self, of: subject, at: t, policy: policy)) }
    }

    /// The millisecond before `t`.
    func justBefore(_ t: Timestamp) -> Timestamp { Timestamp(milliseconds: t.milliseconds - 1) }

    /// A signed-in subject's view with no store transaction: the plan, the rule and banners given.
    func unsubscribed(_ plan: PlanState, _ reason: EntitlementView.Reason, banners: [String] = []) -> EntitlementView {
        EntitlementView(planState: plan, trialEligible: true, expiresAt: nil, renewsAt: nil, autoRenew: nil, billingIssue: false,
                        purchasePending: false, productId: nil, banners: banners, reason: reason)
    }

    func trial() -> [LedgerEvent] {
        [Make.created("u", at: mar1.adding(seconds: -60)), Make.purchase("u", at: mar1, txn: "t1", expires: mar8, trial: true)]
    }

    /// 004 CH25 L582: a free trial is store coverage with the `freeTrial` offer.
    @Test func aTrialPurchaseStartsTheTrial() throws {
        #expect(try view(trial(), at: days(1, after: mar1)) == EntitlementView(
            planState: .trial, trialEligible: false, expiresAt: mar8, renewsAt: mar8, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2)))
    }

    /// 004 CH25 L590: cancelling (auto-renew off) changes nothing until the period ends.
    @Test func cancellingDuringTheTrialKeepsTheTrialToItsEnd() throws {
        let events = trial() + [Make.autoRenew("u", at: days(2, after: mar1), original: "t1", enabled: false)]
        #expect(try view(events, at: days(5, after: mar1)) == EntitlementView(
            planState: .trial, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: false, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2)))
    }

    /// 002: the trial runs out at its expiresAt; a signed-in subject is then free.
    @Test func theTrialRunsOutAtItsEnd() throws {
        let events = trial() + [Make.autoRenew("u", at: days(2, after: mar1), original: "t1", enabled: false)]
        #expect(try view(events, at: mar8) == EntitlementView(
            planState: .free, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: false, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1)))
    }

    /// 004: a renewal after the trial converts it to pro.
    @Test func aRenewalAfterTheTrialIsAConversionToPro() throws {
        let apr8 = ts("2026-04-08T09:30:00Z")
        let events = trial() + [Make.renewal("u", at: mar8, txn: "t2", original: "t1", expires: apr8)]
        #expect(try view(events, at: days(1, after: mar8)) == EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: apr8, renewsAt: apr8, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 3)))
    }

    /// 004 SK-D01: after a failed renewal the subject keeps pro for billingGraceDays past the
    /// period end, with the billing-issue banner.
    @Test func aFailedRenewalGivesProWithABillingIssueDuringTheGrace() throws {
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1")]
        #expect(try view(events, at: days(2, after: mar8)) == EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true,
            purchasePending: false, productId: "pro.monthly", banners: ["billingIssue"],
            reason: .init(rule: "billingGrace", policyKey: "subscription.billingGraceDays", position: 3)))
    }

    /// 004 SK-D01, 000: past the grace the subject is free, and the billing issue stays until
    /// the retry window (billingRetryDays) ends.
    @Test func pastTheBillingGraceTheSubjectIsFreeWithTheIssueStill() throws {
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1")]
        #expect(try view(events, at: days(3, after: mar8)) == EntitlementView(
            planState: .free, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true,
            purchasePending: false, productId: "pro.monthly", banners: ["billingIssue"], reason: .init(rule: "signedIn", policyKey: nil, position: 1)))
        #expect(try view(events, at: days(60, after: mar8)).billingIssue == false)
    }

    /// SPEC §4 (000 "Days 1-60: Apple retries"): the billing issue ends when the retry window
    /// (billingRetryDays after the last covered period end) closes, with no renewal.
    @Test func theRetryWindowEndsTheBillingIssue() throws {
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1")]
        let windowEnd = days(60, after: mar8)
        #expect(try view(events, at: windowEnd.adding(seconds: -1)).banners == ["billingIssue"])
        #expect(try view(events, at: windowEnd) == EntitlementView(
            planState: .free, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1)))
    }

    /// 004 SK-D01: the store's gracePeriodExpiresAt wins over billingGraceDays (reference policy,
    /// billingGraceSource `store`).
    @Test func theStoresGracePeriodEndOverridesThePolicy() throws {
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1", graceExpiresAt: days(16, after: mar8))]
        #expect(try view(events, at: days(10, after: mar8)).reason == .init(rule: "billingGrace", policyKey: "subscription.billingGraceSource", position: 3))
        #expect(try view(events, at: days(16, after: mar8)).planState == .free)
    }

    /// 000: a renewal purchased after the failure recovers it: pro again, no billing issue.
    @Test func aRenewalAfterTheFailureRecoversIt() throws {
        let apr10 = ts("2026-04-10T09:30:00Z")
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1"),
                                Make.renewal("u", at: days(2, after: mar8), txn: "t2", original: "t1", expires: apr10)]
        #expect(try view(events, at: days(4, after: mar8)) == EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: apr10, renewsAt: apr10, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 4)))
    }

    /// SPEC §4 rule 3: a `subscription.expired` ends the grace (and the issue) at once.
    @Test func anExpiryEndsTheBillingGrace() throws {
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1"), Make.expired("u", at: days(1, after: mar8), original: "t1")]
        let after = try view(events, at: days(1, after: mar8))
        #expect(after.planState == .free)
        #expect(after.billingIssue == false)
    }

    /// 004: a refund ends coverage at once: free now, the end of access at the refund.
    @Test func aRefundEndsCoverageNow() throws {
        let refundAt = days(3, after: mar1)
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: ts("2026-04-01T09:30:00Z")),
                      Make.refund("u", at: refundAt, txn: "t1", original: "t1")]
        #expect(try view(events, at: days(4, after: mar1)) == EntitlementView(
            planState: .free, trialEligible: false, expiresAt: refundAt, renewsAt: nil, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1)))
        #expect(try view(events, at: days(2, after: mar1)).planState == .pro, "before the refund happened, the subject was pro")
    }

    /// SPEC §4: a support grant gives pro until its end.
    @Test func aSupportGrantGivesProUntilItsEnd() throws {
        let events = [Make.created("u", at: mar1), Make.grant("u", at: mar1, until: mar8)]
        #expect(try view(events, at: days(1, after: mar1)) == EntitlementView(
            planState: .pro, trialEligible: true, expiresAt: nil, renewsAt: nil, autoRenew: nil, billingIssue: false,
            purchasePending: false, productId: nil, banners: [], reason: .init(rule: "supportGrant", policyKey: nil, position: 2)))
        #expect(try view(events, at: mar8).planState == .free)
    }

    /// SPEC §4 rule 6: a guest becomes free when signing in.
    @Test func aGuestIsFreeOnceSignedIn() throws {
        let events = [Make.created("u", at: mar1, signedIn: false),
                      LedgerEvent(subject: "u", occurredAt: days(1, after: mar1), source: .app, data: AccountSignedIn().eventData)]
        #expect(try view(events, at: mar1).planState == .guest)
        #expect(try view(events, at: days(1, after: mar1)) == EntitlementView(
            planState: .free, trialEligible: true, expiresAt: nil, renewsAt: nil, autoRenew: nil, billingIssue: false,
            purchasePending: false, productId: nil, banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 2)))
    }

    /// 004 SK-D03/D04: a device's verified pro holds for verificationIntervalHours; after a failed
    /// verification it is pro_grace until offlineGraceHours; then it gives nothing (checkingStatus).
    @Test func aDeviceSnapshotGivesProThenProGraceThenNothing() throws {
        var verified = EntitlementVerified()
        verified.plan = .pro
        var failed = EntitlementVerificationFailed()
        failed.reason = .network
        let events = [Make.created("u", at: mar1), LedgerEvent(subject: "u", occurredAt: mar1, source: .app, data: verified.eventData),
                      LedgerEvent(subject: "u", occurredAt: mar1.adding(seconds: 3600), source: .app, data: failed.eventData)]
        #expect(try view(events, at: mar1.adding(seconds: 1800)).reason == .init(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: 2))
        let grace = try view(events, at: mar1.adding(seconds: 2 * 3600))
        #expect(grace.planState == .proGrace)
        #expect(grace.banners == ["cantVerify"])
        #expect(grace.reason == .init(rule: "offlineGrace", policyKey: "subscription.offlineGraceHours", position: 2))
        let after = try view(events, at: mar1.adding(seconds: 24 * 3600))
        #expect(after.planState == .free)
        #expect(after.banners == ["checkingStatus"])
    }

    /// CH08 L343: a purchase started is pending until the purchase (or its failure) arrives;
    /// it never changes the plan.
    @Test func aStartedPurchaseIsPendingUntilItCompletes() throws {
        var started = PurchaseStarted()
        started.productId = "pro.monthly"
        let events = [Make.created("u", at: mar1), LedgerEvent(subject: "u", occurredAt: mar1, source: .app, data: started.eventData),
                      Make.purchase("u", at: days(1, after: mar1), txn: "t1", expires: mar8)]
        let pending = try view(events, at: mar1.adding(seconds: 60))
        #expect(pending.purchasePending)
        #expect(pending.planState == .free)
        #expect(try view(events, at: days(1, after: mar1)).purchasePending == false)
    }

    /// CH08 L343: only a purchase after the attempt, in (occurredAt, position) order, ends it:
    /// not one before it, not a renewal after it; at the same instant, the later position.
    @Test func onlyAPurchaseAfterTheAttemptEndsIt() throws {
        var started = PurchaseStarted()
        started.productId = "pro.monthly"
        let (day1, day2, day3) = (days(1, after: mar1), days(2, after: mar1), days(3, after: mar1))
        let attempt = LedgerEvent(subject: "u", occurredAt: day1, source: .app, data: started.eventData)
        let apr1 = ts("2026-04-01T09:30:00Z")
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: mar8), attempt,
                      Make.renewal("u", at: day2, txn: "t2", original: "t1", expires: apr1),
                      Make.purchase("u", at: day3, txn: "t3", expires: apr1, product: "pro.yearly")]
        #expect(try views(events, at: [justBefore(day1), day1, day2, justBefore(day3), day3]).map(\.purchasePending) == [false, true, true, true, false])
        // The same instant: the purchase after the attempt ends it, the one before does not.
        let purchase = Make.purchase("u", at: day1, txn: "t1", expires: mar8)
        #expect(try view([Make.created("u", at: mar1), attempt, purchase], at: day1).purchasePending == false)
        #expect(try view([Make.created("u", at: mar1), purchase, attempt], at: day1).purchasePending == true)
    }

    /// 002: once a subject has had any subscription transaction, no second trial.
    @Test func aSubjectWhoHadATrialIsNotEligibleForAnother() throws {
        #expect(try view(trial(), at: mar1.adding(seconds: -1)).trialEligible == true)
        #expect(try view(trial(), at: ts("2027-01-01T00:00:00Z")).trialEligible == false)
    }

    /// 004: a reversed refund restores the coverage it had cut.
    @Test func aReversedRefundRestoresCoverage() throws {
        let apr1 = ts("2026-04-01T09:30:00Z")
        var reversal = SubscriptionRefundReversed()
        reversal.transactionId = "t1"
        reversal.originalTransactionId = "t1"
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1),
                      Make.refund("u", at: days(3, after: mar1), txn: "t1", original: "t1"),
                      LedgerEvent(subject: "u", occurredAt: days(5, after: mar1), source: .appstore, data: reversal.eventData)]
        #expect(try view(events, at: days(4, after: mar1)).planState == .free)
        #expect(try view(events, at: days(6, after: mar1)) == EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: apr1, renewsAt: apr1, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2)))
    }

    /// SPEC §4 `billingIssue`: it is true while any failure's window is open. Subscription a
    /// fails on Apr 1; b fails on Apr 5 and recovers on Apr 6 (to Jul 6): a's issue stays until its retry
    /// window closes (60 days after Apr 1), though the latest failure was recovered.
    @Test func anotherSubscriptionsRecoveryLeavesAnEarlierFailureOpen() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), apr5 = ts("2026-04-05T09:30:00Z"), jul6 = ts("2026-07-06T09:30:00Z")
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "a1", expires: apr1),
                      Make.purchase("u", at: mar8, txn: "b1", expires: apr5, product: "extra.monthly"),
                      Make.renewalFailed("u", at: apr1, original: "a1"),
                      Make.renewalFailed("u", at: apr5, original: "b1"),
                      Make.renewal("u", at: days(1, after: apr5), txn: "b2", original: "b1", expires: jul6, product: "extra.monthly")]
        let open = EntitlementView(planState: .pro, trialEligible: false, expiresAt: jul6, renewsAt: jul6, autoRenew: true, billingIssue: true,
                                   purchasePending: false, productId: "extra.monthly", banners: ["billingIssue"],
                                   reason: .init(rule: "storeCoverage", policyKey: nil, position: 6))
        var closed = open
        closed.billingIssue = false
        closed.banners = []
        #expect(try views(events, at: [days(10, after: apr1), justBefore(days(60, after: apr1)), days(60, after: apr1)])
                == [open, open, closed])
    }

    /// SPEC §4 rule 3: each failure keeps its own grace window. A failure on Apr 1 with the
    /// store's grace until Apr 17, then a second failure of the same subscription on Apr 3
    /// without one (the policy's 3 days from Apr 1): the first failure's grace still holds to
    /// Apr 17, the earlier failure deciding.
    @Test func aLaterFailureWithoutTheStoresDateLeavesAnEarlierGraceOpen() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), apr17 = ts("2026-04-17T09:30:00Z")
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1),
                      Make.renewalFailed("u", at: apr1, original: "t1", graceExpiresAt: apr17),
                      Make.renewalFailed("u", at: days(2, after: apr1), original: "t1")]
        let grace = EntitlementView(planState: .pro, trialEligible: false, expiresAt: apr1, renewsAt: nil, autoRenew: true, billingIssue: true,
                                    purchasePending: false, productId: "pro.monthly", banners: ["billingIssue"],
                                    reason: .init(rule: "billingGrace", policyKey: "subscription.billingGraceSource", position: 3))
        var lapsed = grace
        lapsed.planState = .free
        lapsed.reason = .init(rule: "signedIn", policyKey: nil, position: 1)
        #expect(try views(events, at: [days(10, after: apr1), justBefore(apr17), apr17]) == [grace, grace, lapsed])
    }

    /// 004: a revocation (family sharing removed) ends coverage for good.
    @Test func aRevocationEndsCoverage() throws {
        var revoke = SubscriptionRevoked()
        revoke.transactionId = "t1"
        revoke.originalTransactionId = "t1"
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: ts("2026-04-01T09:30:00Z")),
                      LedgerEvent(subject: "u", occurredAt: days(2, after: mar1), source: .appstore, data: revoke.eventData)]
        let after = try view(events, at: days(3, after: mar1))
        #expect(after.planState == .free)
        #expect(after.expiresAt == days(2, after: mar1))
    }

    /// A monthly subscription from March 1 (t1, to April 1), upgraded at once to yearly on
    /// March 11 (t2, to `until`).
    func upgradedOnMarch11(until: Timestamp) -> [LedgerEvent] {
        var change = SubscriptionProductChanged()
        change.originalTransactionId = "t1"
        change.fromProductId = "pro.monthly"
        change.toProductId = "pro.yearly"
        change.effective = .immediate
        change.transactionId = "t2"
        change.purchasedAt = days(10, after: mar1)
        change.expiresAt = until
        return [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: ts("2026-04-01T09:30:00Z")),
                LedgerEvent(subject: "u", occurredAt: days(10, after: mar1), source: .appstore, data: change.eventData)]
    }

    /// 004 SK-D07: an immediate upgrade switches the product at once; the old transaction's
    /// coverage ends where the new one starts.
    @Test func anImmediateUpgradeSwitchesTheProductAtOnce() throws {
        let events = upgradedOnMarch11(until: ts("2027-03-11T09:30:00Z"))
        #expect(try view(events, at: days(11, after: mar1)) == EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: ts("2027-03-11T09:30:00Z"), renewsAt: ts("2027-03-11T09:30:00Z"), autoRenew: true,
            billingIssue: false, purchasePending: false, productId: "pro.yearly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 3)))
    }

    /// Auto-renew is the later of a purchase (on) and a change: buying again after turning it
    /// off turns it on.
    @Test func aNewPurchaseAfterAutoRenewWasTurnedOffRenews() throws {
        let mar20 = days(19, after: mar1), apr20 = days(50, after: mar1)
        let events = trial() + [Make.autoRenew("u", at: days(2, after: mar1), original: "t1", enabled: false),
                                Make.purchase("u", at: mar20, txn: "t2", expires: apr20)]
        #expect(try view(events, at: days(1, after: mar20)) == EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: apr20, renewsAt: apr20, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 4)))
    }

    /// Once nothing covers the subject, the view names the latest transaction's product (by
    /// purchase time), here the upgrade's, and the latest end.
    @Test func aLapsedSubjectsProductIsTheLatestTransactions() throws {
        let events = upgradedOnMarch11(until: ts("2026-06-01T09:30:00Z"))
        #expect(try view(events, at: ts("2026-07-01T00:00:00Z")) == EntitlementView(
            planState: .free, trialEligible: false, expiresAt: ts("2026-06-01T09:30:00Z"), renewsAt: nil, autoRenew: true,
            billingIssue: false, purchasePending: false, productId: "pro.yearly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1)))
    }

    /// 004 SK-D07: a downgrade at the next renewal changes nothing until that renewal.
    @Test func aDowngradeWaitsForTheNextRenewal() throws {
        let apr1 = ts("2026-04-01T09:30:00Z")
        var change = SubscriptionProductChanged()
        change.originalTransactionId = "t1"
        change.fromProductId = "pro.yearly"
        change.toProductId = "pro.monthly"
        change.effective = .nextRenewal
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1, product: "pro.yearly"),
                      LedgerEvent(subject: "u", occurredAt: days(10, after: mar1), source: .appstore, data: change.eventData),
                      Make.renewal("u", at: apr1, txn: "t2", original: "t1", expires: ts("2026-05-01T09:30:00Z"), product: "pro.monthly")]
        #expect(try view(events, at: days(11, after: mar1)).productId == "pro.yearly")
        #expect(try view(events, at: days(1, after: apr1)).productId == "pro.monthly")
    }

    /// 004: a renewal date extension moves the period's end.
    @Test func aRenewalExtensionMovesTheEnd() throws {
        var extended = SubscriptionRenewalExtended()
        extended.transactionId = "t1"
        extended.originalTransactionId = "t1"
        extended.expiresAt = days(14, after: mar8)
        let events = trial() + [LedgerEvent(subject: "u", occurredAt: days(2, after: mar1), source: .appstore, data: extended.eventData)]
        let later = try view(events, at: days(10, after: mar8))
        #expect(later.planState == .trial)
        #expect(later.expiresAt == days(14, after: mar8))
    }

    /// 004 SK-D04: a store fact beats a device snapshot: an expiry after the verification
    /// voids it.
    @Test func aStoreFactBeatsADeviceSnapshot() throws {
        var verified = EntitlementVerified()
        verified.plan = .pro
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: mar8),
                      LedgerEvent(subject: "u", occurredAt: mar8.adding(seconds: -600), source: .app, data: verified.eventData),
                      Make.expired("u", at: mar8, original: "t1")]
        let after = try view(events, at: mar8.adding(seconds: 600))
        #expect(after.planState == .free)
        #expect(after.reason.rule == "signedIn")
    }

    /// SPEC §4 rule 1: after `account.deleted` the subject is a guest, whatever it paid for;
    /// the other fields still come from the store facts, since deleting the account does not
    /// cancel the App Store subscription (CH34 L719, L771): it still renews.
    @Test func aDeletedAccountIsAGuestWhoseSubscriptionStillRenews() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), gone = days(2, after: mar1)
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1), Make.deleted("u", at: gone)]
        let covered = EntitlementView(planState: .pro, trialEligible: false, expiresAt: apr1, renewsAt: apr1, autoRenew: true, billingIssue: false,
                                      purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2))
        var deleted = covered
        deleted.planState = .guest
        deleted.reason = .init(rule: "deleted", policyKey: nil, position: 3)
        #expect(try views(events, at: [justBefore(gone), gone]) == [covered, deleted])
    }

    /// CH08 L343: a failed purchase ends the pending state without changing the plan.
    @Test func aFailedPurchaseIsNoLongerPending() throws {
        var started = PurchaseStarted()
        started.productId = "pro.monthly"
        var failed = PurchaseFailed()
        failed.productId = "pro.monthly"
        let events = [Make.created("u", at: mar1), LedgerEvent(subject: "u", occurredAt: mar1, source: .app, data: started.eventData),
                      LedgerEvent(subject: "u", occurredAt: mar1.adding(seconds: 120), source: .app, data: failed.eventData)]
        #expect(try view(events, at: mar1.adding(seconds: 60)).purchasePending)
        let after = try view(events, at: mar1.adding(seconds: 120))
        #expect(after.purchasePending == false)
        #expect(after.planState == .free)
    }

    // MARK: SPEC §4's conventions and clarified rules, each at its boundary and on both sides

    /// SPEC §4 rule 3 and `billingIssue` (004 CH27 L232): a `subscription.grace_expired` ends
    /// the billing grace at its occurredAt but not the billing issue, which lasts until the
    /// retry window closes (the store keeps retrying).
    @Test func graceExpiredEndsTheGraceButNotTheBillingIssue() throws {
        let cut = days(10, after: mar8), retryEnd = days(60, after: mar8)
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1", graceExpiresAt: days(16, after: mar8)),
                                Make.graceExpired("u", at: cut, original: "t1")]
        let grace = EntitlementView(planState: .pro, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true,
                                    purchasePending: false, productId: "pro.monthly", banners: ["billingIssue"],
                                    reason: .init(rule: "billingGrace", policyKey: "subscription.billingGraceSource", position: 3))
        var lapsed = grace
        lapsed.planState = .free
        lapsed.reason = .init(rule: "signedIn", policyKey: nil, position: 1)
        var resolved = lapsed
        resolved.billingIssue = false
        resolved.banners = []
        #expect(try views(events, at: [justBefore(cut), cut, justBefore(retryEnd), retryEnd]) == [grace, lapsed, lapsed, resolved])
    }

    /// SPEC §4 rule 3: a `subscription.expired` after the failure ends the grace and the billing
    /// issue at its occurredAt.
    @Test func anExpiryEndsTheGraceAndTheBillingIssueAtItsTime() throws {
        let end = days(1, after: mar8)
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1"), Make.expired("u", at: end, original: "t1")]
        let grace = EntitlementView(planState: .pro, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true,
                                    purchasePending: false, productId: "pro.monthly", banners: ["billingIssue"],
                                    reason: .init(rule: "billingGrace", policyKey: "subscription.billingGraceDays", position: 3))
        let ended = EntitlementView(planState: .free, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: false,
                                    purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1))
        #expect(try views(events, at: [justBefore(end), end]) == [grace, ended])
    }

    /// SPEC §4 conventions: facts at the same instant apply in position order. A
    /// `subscription.expired` at the failure's own instant ends its grace only when it comes
    /// after the failure in position.
    @Test func aStoreEndAtTheFailuresInstantCountsOnlyAfterItInPosition() throws {
        let failure = Make.renewalFailed("u", at: mar8, original: "t1"), expiry = Make.expired("u", at: mar8, original: "t1")
        let afterTheExpiry = try views(trial() + [expiry, failure], at: [mar8])
        let afterTheFailure = try views(trial() + [failure, expiry], at: [mar8])
        #expect(afterTheExpiry == [EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true, purchasePending: false,
            productId: "pro.monthly", banners: ["billingIssue"], reason: .init(rule: "billingGrace", policyKey: "subscription.billingGraceDays", position: 4))])
        #expect(afterTheFailure == [EntitlementView(
            planState: .free, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: false, purchasePending: false,
            productId: "pro.monthly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1))])
    }

    /// SPEC §4 `reason.policyKey`: with billingGraceSource `policy` the grace is always
    /// billingGraceDays, whatever date the store gives, and the reason names that key.
    @Test func withThePolicyAsGraceSourceTheStoresDateIsIgnored() throws {
        var policy = Policy.reference
        policy.subscription.billingGraceSource = .policy
        let graceEnd = days(3, after: mar8)
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1", graceExpiresAt: days(16, after: mar8))]
        let grace = EntitlementView(planState: .pro, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true,
                                    purchasePending: false, productId: "pro.monthly", banners: ["billingIssue"],
                                    reason: .init(rule: "billingGrace", policyKey: "subscription.billingGraceDays", position: 3))
        var lapsed = grace
        lapsed.planState = .free
        lapsed.reason = .init(rule: "signedIn", policyKey: nil, position: 1)
        #expect(try views(events, at: [justBefore(graceEnd), graceEnd], policy: policy) == [grace, lapsed])
    }

    /// SPEC §4 rule 5: a refund that comes after the snapshot v — at v's own instant, later in
    /// position — voids v; one earlier in position does not. Voided, v gives nothing, and with
    /// the plan free the banner is `checkingStatus`.
    @Test func aRefundAtTheSnapshotsInstantVoidsItOnlyWhenAfterIt() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), v = days(5, after: mar1)
        let start = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1)]
        let verified = Make.verified("u", at: v), refund = Make.refund("u", at: v, txn: "t1", original: "t1")
        let voided = try views(start + [verified, refund], at: [justBefore(v), v])
        #expect(voided == [
            EntitlementView(planState: .pro, trialEligible: false, expiresAt: apr1, renewsAt: apr1, autoRenew: true, billingIssue: false,
                            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2)),
            EntitlementView(planState: .free, trialEligible: false, expiresAt: v, renewsAt: nil, autoRenew: true, billingIssue: false,
                            purchasePending: false, productId: "pro.monthly", banners: ["checkingStatus"], reason: .init(rule: "signedIn", policyKey: nil, position: 1)),
        ])
        #expect(try views(start + [refund, verified], at: [v]) == [
            EntitlementView(planState: .pro, trialEligible: false, expiresAt: v, renewsAt: nil, autoRenew: true, billingIssue: false, purchasePending: false,
                            productId: "pro.monthly", banners: [], reason: .init(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: 4)),
        ])
    }

    /// SPEC §4 rule 5: a snapshot gives its plan only while its expiresAt is after t; from
    /// then it gives nothing, and a free subject sees `checkingStatus`.
    @Test func aSnapshotsExpiresAtEndsItAndShowsCheckingStatus() throws {
        let expires = mar1.adding(seconds: 2 * 3600)
        let events = [Make.created("u", at: mar1), Make.verified("u", at: mar1, expires: expires)]
        #expect(try views(events, at: [justBefore(expires), expires]) == [
            unsubscribed(.pro, .init(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: 2)),
            unsubscribed(.free, .init(rule: "signedIn", policyKey: nil, position: 1), banners: ["checkingStatus"]),
        ])
    }

    /// SPEC §4 rule 5: the verification window [v, v + verificationIntervalHours) and the
    /// offline grace [v, v + offlineGraceHours) are half-open; after a failed verification the
    /// plan is `pro_grace` with `cantVerify` to the last millisecond of the grace.
    @Test func theSnapshotsWindowsAreHalfOpen() throws {
        let failedAt = mar1.adding(seconds: 3600), windowsEnd = mar1.adding(seconds: 24 * 3600)
        let verifiedOnly = [Make.created("u", at: mar1), Make.verified("u", at: mar1)]
        #expect(try views(verifiedOnly, at: [justBefore(windowsEnd), windowsEnd]) == [
            unsubscribed(.pro, .init(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: 2)),
            unsubscribed(.free, .init(rule: "signedIn", policyKey: nil, position: 1), banners: ["checkingStatus"]),
        ])
        let failed = verifiedOnly + [Make.verificationFailed("u", at: failedAt)]
        #expect(try views(failed, at: [justBefore(failedAt), failedAt, justBefore(windowsEnd), windowsEnd]) == [
            unsubscribed(.pro, .init(rule: "deviceVerified", policyKey: "subscription.verificationIntervalHours", position: 2)),
            unsubscribed(.proGrace, .init(rule: "offlineGrace", policyKey: "subscription.offlineGraceHours", position: 2), banners: ["cantVerify"]),
            unsubscribed(.proGrace, .init(rule: "offlineGrace", policyKey: "subscription.offlineGraceHours", position: 2), banners: ["cantVerify"]),
            unsubscribed(.free, .init(rule: "signedIn", policyKey: nil, position: 1), banners: ["checkingStatus"]),
        ])
    }

    /// SPEC §4 rule 5: `checkingStatus` shows only when the plan is free or guest: a snapshot
    /// whose windows passed under store coverage adds no banner, and a guest sees it too.
    @Test func checkingStatusNeedsAFreeOrGuestPlan() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), later = days(2, after: mar1)
        let covered = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1), Make.verified("u", at: mar1)]
        #expect(try views(covered, at: [later]) == [EntitlementView(
            planState: .pro, trialEligible: false, expiresAt: apr1, renewsAt: apr1, autoRenew: true, billingIssue: false, purchasePending: false,
            productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2))])
        let guest = [Make.created("u", at: mar1, signedIn: false), Make.verified("u", at: mar1)]
        #expect(try views(guest, at: [later]) == [unsubscribed(.guest, .init(rule: "noAccount", policyKey: nil, position: 1), banners: ["checkingStatus"])])
    }

    /// SPEC §4 `banners`, in their order: `billingIssue` first, then rule 5's banner (the
    /// store ended the billing grace, the issue goes on, and a device verified pro offline).
    @Test func bannersComeInTheirOrder() throws {
        let v = days(2, after: mar8)
        let events = trial() + [Make.renewalFailed("u", at: mar8, original: "t1"), Make.graceExpired("u", at: days(1, after: mar8), original: "t1"),
                                Make.verified("u", at: v), Make.verificationFailed("u", at: v.adding(seconds: 60))]
        #expect(try views(events, at: [v.adding(seconds: 120)]) == [EntitlementView(
            planState: .proGrace, trialEligible: false, expiresAt: mar8, renewsAt: nil, autoRenew: true, billingIssue: true, purchasePending: false,
            productId: "pro.monthly", banners: ["billingIssue", "cantVerify"],
            reason: .init(rule: "offlineGrace", policyKey: "subscription.offlineGraceHours", position: 5))])
    }

    /// SPEC §4: a support grant's window [at, until) is half-open.
    @Test func aSupportGrantsWindowIsHalfOpen() throws {
        let events = [Make.created("u", at: mar1), Make.grant("u", at: mar1, until: mar8)]
        #expect(try views(events, at: [justBefore(mar1), mar1, justBefore(mar8), mar8]) == [
            unsubscribed(.guest, .init(rule: "noAccount", policyKey: nil, position: nil)),
            unsubscribed(.pro, .init(rule: "supportGrant", policyKey: nil, position: 2)),
            unsubscribed(.pro, .init(rule: "supportGrant", policyKey: nil, position: 2)),
            unsubscribed(.free, .init(rule: "signedIn", policyKey: nil, position: 1)),
        ])
    }

    /// SPEC §4: a refund ends its transaction's coverage at its own occurredAt, and
    /// `expiresAt` with it.
    @Test func aRefundEndsCoverageAndExpiresAtAtItsOwnTime() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), refundAt = days(3, after: mar1)
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1),
                      Make.refund("u", at: refundAt, txn: "t1", original: "t1")]
        #expect(try views(events, at: [justBefore(refundAt), refundAt]) == [
            EntitlementView(planState: .pro, trialEligible: false, expiresAt: apr1, renewsAt: apr1, autoRenew: true, billingIssue: false,
                            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 2)),
            EntitlementView(planState: .free, trialEligible: false, expiresAt: refundAt, renewsAt: nil, autoRenew: true, billingIssue: false,
                            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "signedIn", policyKey: nil, position: 1)),
        ])
    }

    /// SPEC §4 `productId`: a renewal's own productId is authoritative, whatever change was
    /// pending before it (here one the store never carried out).
    @Test func aRenewalsOwnProductWinsOverAPendingChange() throws {
        let apr1 = ts("2026-04-01T09:30:00Z"), may1 = ts("2026-05-01T09:30:00Z")
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1, product: "pro.yearly"),
                      Make.productChange("u", at: days(10, after: mar1), original: "t1", from: "pro.yearly", to: "pro.monthly"),
                      Make.renewal("u", at: apr1, txn: "t2", original: "t1", expires: may1, product: "pro.yearly")]
        let renewed = EntitlementView(planState: .pro, trialEligible: false, expiresAt: may1, renewsAt: may1, autoRenew: true, billingIssue: false,
                                      purchasePending: false, productId: "pro.yearly", banners: [], reason: .init(rule: "storeCoverage", policyKey: nil, position: 4))
        var before = renewed
        (before.expiresAt, before.renewsAt, before.reason.position) = (apr1, apr1, 2)
        #expect(try views(events, at: [justBefore(apr1), apr1]) == [before, renewed])
    }

    /// SPEC §4 conventions: facts at the same instant apply in position order — a sign-out and
    /// a sign-in of the same millisecond leave the later one in force.
    @Test func factsAtTheSameInstantApplyInPositionOrder() throws {
        let at = days(1, after: mar1)
        let outThenIn = try views([Make.created("u", at: mar1), Make.signedIn("u", at: at, false), Make.signedIn("u", at: at, true)], at: [at])
        let inThenOut = try views([Make.created("u", at: mar1), Make.signedIn("u", at: at, true), Make.signedIn("u", at: at, false)], at: [at])
        #expect(outThenIn == [unsubscribed(.free, .init(rule: "signedIn", policyKey: nil, position: 3))])
        #expect(inThenOut == [unsubscribed(.guest, .init(rule: "noAccount", policyKey: nil, position: 3))])
    }
}

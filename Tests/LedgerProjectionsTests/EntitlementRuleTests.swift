import LedgerCore
import LedgerProjections
import LedgerTestSupport
import Testing

/// Entitlement rules of SPEC §4, one rule per test, each asserting the complete view.
@Suite struct EntitlementRuleTests {
    let mar1 = ts("2026-03-01T09:30:00Z")
    let mar8 = ts("2026-03-08T09:30:00Z")

    /// The view of `subject` at `t` after appending `events` to a fresh store.
    func view(_ events: [LedgerEvent], of subject: String = "u", at t: Timestamp) throws -> EntitlementView {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(events)
            return try ledger.view(EntitlementProjection.self, of: subject, at: t)
        }
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

    /// SPEC §4 rule 1: after `account.deleted` the subject is a guest, whatever it paid for.
    @Test func aDeletedAccountIsAGuestEvenWhileCovered() throws {
        let events = [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: ts("2026-04-01T09:30:00Z")),
                      LedgerEvent(subject: "u", occurredAt: days(2, after: mar1), source: .system, data: AccountDeleted().eventData)]
        #expect(try view(events, at: days(1, after: mar1)).planState == .pro)
        #expect(try view(events, at: days(2, after: mar1)) == EntitlementView(
            planState: .guest, trialEligible: false, expiresAt: ts("2026-04-01T09:30:00Z"), renewsAt: nil, autoRenew: true, billingIssue: false,
            purchasePending: false, productId: "pro.monthly", banners: [], reason: .init(rule: "deleted", policyKey: nil, position: 3)))
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
}

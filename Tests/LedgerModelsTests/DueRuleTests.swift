@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// Due rules of SPEC §4 (seeds 000, 004 CH27), one rule per test with the exact items, at and
/// on both sides of each boundary. Items are the due model's index entries, folded in memory.
@Suite struct DueRuleTests {
    let mar1 = ts("2026-03-01T12:00:00Z")

    /// Every item of subject "u", sorted, as `at kind detail`.
    func items(_ events: [LedgerEvent], policy: Policy = .reference) throws -> [String] {
        let history = try Folded(events)
        return DueModel.indexEntries(of: history.state(DueModel.self), facts: history.facts(), policy: policy)
            .sorted { ($0.at, $0.kind, $0.detail) < ($1.at, $1.kind, $1.detail) }
            .map { "\($0.at) \($0.kind) \($0.detail)" }
    }

    func trial(ends: Timestamp, at: Timestamp? = nil) -> LedgerEvent {
        Make.purchase("u", at: at ?? mar1, txn: "t1", expires: ends, trial: true)
    }

    /// 48 h before the trial ends (the reference policy's trialEndingLeadHours).
    @Test func aTrialEndingIsDueTheLeadBeforeItsEnd() throws {
        #expect(try items([trial(ends: days(7, after: mar1))])
                == [#"2026-03-06T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-08T12:00:00.000Z","channel":"push"}"#])
    }

    /// A trial shorter than the lead (or reported late) is due when it was reported.
    @Test func aShortTrialIsDueWhenReported() throws {
        #expect(try items([trial(ends: mar1.adding(seconds: 47 * 3600))])
                == [#"2026-03-01T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-03T11:00:00.000Z","channel":"push"}"#])
    }

    /// A refund by the time the reminder is due removes it (coverage ends at the refund, so
    /// a refund at that very instant has ended it); one after it leaves it.
    @Test func aRefundByTheReminderRemovesIt() throws {
        let due = days(5, after: mar1)
        #expect(try items([trial(ends: days(7, after: mar1)), Make.refund("u", at: due, txn: "t1", original: "t1")]) == [])
        #expect(try items([trial(ends: days(7, after: mar1)), Make.refund("u", at: due.adding(seconds: 1), txn: "t1", original: "t1")]).count == 1)
    }

    /// An extension known before the reminder moves it, with the new end; one known after it
    /// adds nothing (once per trial).
    @Test func anExtensionMovesTheReminderOnlyBeforeItIsDue() throws {
        let early = [trial(ends: days(7, after: mar1)), Make.extended("u", at: days(1, after: mar1), txn: "t1", original: "t1", until: days(10, after: mar1))]
        #expect(try items(early)
                == [#"2026-03-09T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-11T12:00:00.000Z","channel":"push"}"#])
        let late = [trial(ends: days(7, after: mar1)), Make.extended("u", at: days(6, after: mar1), txn: "t1", original: "t1", until: days(10, after: mar1))]
        #expect(try items(late)
                == [#"2026-03-06T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-08T12:00:00.000Z","channel":"push"}"#])
    }

    /// A trial reported twice (the app's purchase and the store's notification) is one trial:
    /// one reminder, from its earliest report.
    @Test func aTrialReportedTwiceIsRemindedOnce() throws {
        let short = mar1.adding(seconds: 24 * 3600)
        #expect(try items([trial(ends: short), trial(ends: short, at: mar1.adding(seconds: 3600))])
                == [#"2026-03-01T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-02T12:00:00.000Z","channel":"push"}"#])
    }

    /// An extension recorded before the trial's own report: the reminder falls due at the
    /// report, with the extended end.
    @Test func anExtensionRecordedBeforeTheTrialStillReminds() throws {
        let reported = days(2, after: mar1)
        let events = [Make.extended("u", at: mar1, txn: "t1", original: "t1", until: days(3, after: mar1)),
                      Make.purchase("u", at: reported, txn: "t1", expires: days(4, after: mar1), trial: true)]
        #expect(try items(events)
                == [#"2026-03-03T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-04T12:00:00.000Z","channel":"push"}"#])
    }

    /// A deleted account gets no reminder.
    @Test func aDeletedAccountGetsNoReminder() throws {
        #expect(try items([trial(ends: days(7, after: mar1)), Make.deleted("u", at: days(2, after: mar1))]) == [])
    }

    /// CH27 L203–204: with billing notifications off by then, the channel is inApp.
    @Test func billingNotificationsOffMeansInApp() throws {
        let events = [trial(ends: days(7, after: mar1)), Make.notifications("u", at: days(5, after: mar1), enabled: false)]
        #expect(try items(events)
                == [#"2026-03-06T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-08T12:00:00.000Z","channel":"inApp"}"#])
        let otherCategory = [trial(ends: days(7, after: mar1)), Make.notifications("u", at: days(1, after: mar1), category: "marketing", enabled: false)]
        #expect(try items(otherCategory).first?.hasSuffix(#""channel":"push"}"#) == true)
    }

    /// A policy without `notifications` has no trial reminders.
    @Test func noNotificationsNoReminders() throws {
        var policy = Policy.reference
        policy.notifications = nil
        #expect(try items([trial(ends: days(7, after: mar1))], policy: policy) == [])
    }

    /// At the first failed renewal of a billing issue; a second failure inside it adds nothing;
    /// one after a recovery opens another.
    @Test func aPaymentFailureIsDueOncePerBillingIssue() throws {
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: days(30, after: mar1)),
                      Make.renewalFailed("u", at: days(30, after: mar1), original: "t1"),
                      Make.renewalFailed("u", at: days(31, after: mar1), original: "t1"),
                      Make.renewal("u", at: days(32, after: mar1), txn: "t2", original: "t1", expires: days(62, after: mar1)),
                      Make.renewalFailed("u", at: days(62, after: mar1), original: "t1")]
        #expect(try items(events).filter { $0.contains(" paymentFailed ") } == [
            #"2026-03-31T12:00:00.000Z paymentFailed {"originalTransactionId":"t1","channel":"push"}"#,
            #"2026-05-02T12:00:00.000Z paymentFailed {"originalTransactionId":"t1","channel":"push"}"#,
        ])
    }

    /// "A second failure inside it, of any subscription, adds nothing": another subscription
    /// failing during the billing issue opens no episode of its own.
    @Test func anotherSubscriptionFailingInsideTheIssueAddsNothing() throws {
        let events = [Make.purchase("u", at: mar1, txn: "a1", expires: days(30, after: mar1)),
                      Make.purchase("u", at: days(5, after: mar1), txn: "b1", expires: days(31, after: mar1)),
                      Make.renewalFailed("u", at: days(30, after: mar1), original: "a1"),
                      Make.renewalFailed("u", at: days(31, after: mar1), original: "b1")]
        // (The billing grace ends, and the retention flow's items follow.)
        #expect(try items(events).filter { $0.contains(" paymentFailed ") } == [#"2026-03-31T12:00:00.000Z paymentFailed {"originalTransactionId":"a1","channel":"push"}"#])
    }

    /// SPEC §4 `billingIssue`: another subscription's recovery does not close a failure's
    /// window, so a failure after that recovery, while the first failure's issue is still
    /// open, is inside the same episode and adds nothing.
    @Test func anotherSubscriptionsRecoveryLeavesTheEpisodeOpen() throws {
        let events = [Make.purchase("u", at: mar1, txn: "a1", expires: days(30, after: mar1)),
                      Make.purchase("u", at: days(5, after: mar1), txn: "b1", expires: days(31, after: mar1)),
                      Make.renewalFailed("u", at: days(30, after: mar1), original: "a1"),
                      Make.renewalFailed("u", at: days(31, after: mar1), original: "b1"),
                      Make.renewal("u", at: days(32, after: mar1), txn: "b2", original: "b1", expires: days(62, after: mar1)),
                      Make.renewalFailed("u", at: days(40, after: mar1), original: "a1")]
        #expect(try items(events).filter { $0.contains(" paymentFailed ") } == [#"2026-03-31T12:00:00.000Z paymentFailed {"originalTransactionId":"a1","channel":"push"}"#])
        // With a1's issue closed by its retry window (60 days after Mar 31), a failure after it opens another.
        let later = Array(events.dropLast()) + [Make.renewalFailed("u", at: days(90, after: mar1), original: "a1")]
        #expect(try items(later).filter { $0.contains(" paymentFailed ") } == [
            #"2026-03-31T12:00:00.000Z paymentFailed {"originalTransactionId":"a1","channel":"push"}"#,
            #"2026-05-30T12:00:00.000Z paymentFailed {"originalTransactionId":"a1","channel":"push"}"#,
        ])
    }

    /// Each retention item is decided at its own time: refunded on Jan 15 and reversed on
    /// Feb 10, after the period ended (Feb 1), the flow counts from the refund until the
    /// reversal, and from the period's end after it (SPEC §4 Retention).
    @Test func aRefundReversedAfterThePeriodMovesTheFlowFromTheReversal() throws {
        let jan1 = ts("2026-01-01T00:00:00Z"), feb1 = ts("2026-02-01T00:00:00Z")
        let events = [Make.purchase("u", at: jan1, txn: "t1", expires: feb1), Make.refund("u", at: ts("2026-01-15T00:00:00Z"), txn: "t1", original: "t1"),
                      Make.refundReversed("u", at: ts("2026-02-10T00:00:00Z"), txn: "t1", original: "t1")]
        #expect(try items(events) == [
            #"2026-01-22T00:00:00.000Z retentionEmail {"day":7}"#,
            #"2026-02-07T00:00:00.000Z retentionEmail {"day":23}"#,
            #"2026-02-24T00:00:00.000Z retentionEmail {"day":23}"#,
            #"2026-03-02T00:00:00.000Z retentionEmail {"day":29}"#,
            #"2026-03-04T00:00:00.000Z retentionEmail {"day":31}"#,
            #"2026-03-04T00:00:00.000Z tierChanged {"tier":"browseOnly"}"#,
            #"2026-04-02T00:00:00.000Z retentionEmail {"day":60}"#,
            #"2026-05-03T00:00:00.000Z tierChanged {"tier":"archived"}"#,
            #"2027-01-17T00:00:00.000Z retentionEmail {"day":350}"#,
            #"2027-02-01T00:00:00.000Z tierChanged {"tier":"pendingDeletion"}"#,
        ])
    }

    /// A kind appears only when the policy has the sections it reads: no `deletion`, no
    /// deletionQueued; paymentFailed is always on.
    @Test func aKindNeedsItsPolicySection() throws {
        var policy = Policy.reference
        (policy.deletion, policy.notifications) = (nil, nil)
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: days(7, after: mar1), trial: true),
                      Make.renewalFailed("u", at: days(7, after: mar1), original: "t1"), Make.deletionRequested("u", at: days(8, after: mar1))]
        #expect(try items(events, policy: policy) == [#"2026-03-08T12:00:00.000Z paymentFailed {"originalTransactionId":"t1","channel":"push"}"#])
    }

    /// Hard: due at the request; soft: after softGraceDays, unless cancelled or completed by then.
    @Test func aDeletionIsQueuedAtItsScheduledTime() throws {
        #expect(try items([Make.deletionRequested("u", at: mar1)]) == [#"2026-03-01T12:00:00.000Z deletionQueued {"mode":"hard"}"#])
        var soft = Policy.reference
        soft.deletion = .init(mode: .soft, softGraceDays: 30)
        #expect(try items([Make.deletionRequested("u", at: mar1)], policy: soft) == [#"2026-03-31T12:00:00.000Z deletionQueued {"mode":"soft"}"#])
        #expect(try items([Make.deletionRequested("u", at: mar1), Make.deletionCancelled("u", at: days(29, after: mar1))], policy: soft) == [])
        #expect(try items([Make.deletionRequested("u", at: mar1), Make.step("u", at: days(1, after: mar1), "auth"),
                           Make.deleted("u", at: days(2, after: mar1))], policy: soft) == [])
    }

    // MARK: The retention flow (000): e-mails on days 7…350, tier changes

    /// A paid month, cancelled: access ends at the expiry on 1 April, day 0 of the flow.
    var lapsed: [LedgerEvent] {
        [Make.purchase("u", at: mar1, txn: "p1", expires: ts("2026-04-01T12:00:00Z")),
         Make.autoRenew("u", at: days(9, after: mar1), original: "p1", enabled: false)]
    }

    /// The flow's items of `events`, as `at kind detail`.
    func flow(_ events: [LedgerEvent], policy: Policy = .reference) throws -> [String] {
        try items(events, policy: policy).filter { $0.contains(DueRules.retentionEmail) || $0.contains(DueRules.tierChanged) }
    }

    /// Day 0 + n days for each n of retentionEmailDays, and the tiers entered on days 31, 91
    /// and 365 (graceDays 30, browseOnlyUntilDay 90, pendingDeletionFromDay 365).
    @Test func theFlowSendsItsEmailsAndChangesTiersFromDayZero() throws {
        #expect(try flow(lapsed) == [
            #"2026-04-08T12:00:00.000Z retentionEmail {"day":7}"#,
            #"2026-04-24T12:00:00.000Z retentionEmail {"day":23}"#,
            #"2026-04-30T12:00:00.000Z retentionEmail {"day":29}"#,
            #"2026-05-02T12:00:00.000Z retentionEmail {"day":31}"#,
            #"2026-05-02T12:00:00.000Z tierChanged {"tier":"browseOnly"}"#,
            #"2026-05-31T12:00:00.000Z retentionEmail {"day":60}"#,
            #"2026-07-01T12:00:00.000Z tierChanged {"tier":"archived"}"#,
            #"2027-03-17T12:00:00.000Z retentionEmail {"day":350}"#,
            #"2027-04-01T12:00:00.000Z tierChanged {"tier":"pendingDeletion"}"#,
        ])
    }

    /// A reactivation ends the flow: an item at the new purchase's instant is gone, one a
    /// second before it stays. (The new month's own expiry starts another flow, 30 days on.)
    @Test func aReactivationRemovesTheFlowsLaterItems() throws {
        let day31 = ts("2026-05-02T12:00:00Z")
        let firstFlow = { (items: [String]) in items.filter { $0 < "2026-06" } }
        let at = try firstFlow(flow(lapsed + [Make.purchase("u", at: day31, txn: "p2", expires: days(30, after: day31))]))
        #expect(at == [#"2026-04-08T12:00:00.000Z retentionEmail {"day":7}"#, #"2026-04-24T12:00:00.000Z retentionEmail {"day":23}"#,
                       #"2026-04-30T12:00:00.000Z retentionEmail {"day":29}"#])
        let after = day31.adding(seconds: 1)
        let later = try firstFlow(flow(lapsed + [Make.purchase("u", at: after, txn: "p2", expires: days(30, after: after))]))
        #expect(later.count == 5)
        #expect(later.last == #"2026-05-02T12:00:00.000Z tierChanged {"tier":"browseOnly"}"#)
    }

    /// A family member whose organizer cancelled has familyMemberGraceDays (60): browseOnly
    /// from day 61.
    @Test func aFamilyMemberEntersBrowseOnlyAfterItsLongerGrace() throws {
        let family = lapsed + [Make.organizerCancelled("u", at: days(10, after: mar1))]
        #expect(try flow(family).filter { $0.contains("browseOnly") } == [#"2026-06-01T12:00:00.000Z tierChanged {"tier":"browseOnly"}"#])
    }

    /// With startsAt = cancellation (photolala) day 0 is the cancellation, while the paid
    /// month still runs: the day-7 e-mail falls before the expiry.
    @Test func withStartsAtCancellationDayZeroIsTheCancellation() throws {
        var policy = Policy.reference
        policy.retention?.startsAt = .cancellation
        #expect(try flow(lapsed, policy: policy).prefix(2) == [#"2026-03-17T12:00:00.000Z retentionEmail {"day":7}"#,
                                                              #"2026-04-02T12:00:00.000Z retentionEmail {"day":23}"#])
    }

    /// A kind appears only with the sections it reads: no e-mails without `notifications`, no
    /// flow at all without `retention`.
    @Test func theFlowsKindsNeedTheirSections() throws {
        var quiet = Policy.reference
        quiet.notifications = nil
        #expect(try flow(lapsed, policy: quiet).allSatisfy { $0.contains(DueRules.tierChanged) })
        #expect(try flow(lapsed, policy: quiet).count == 3)
        var none = Policy.reference
        none.retention = nil
        #expect(try flow(lapsed, policy: none) == [])
    }

    /// A subject that never paid (a trial only) is never in the flow.
    @Test func aTrialOnlyHistoryHasNoFlow() throws {
        #expect(try flow([trial(ends: days(7, after: mar1))]) == [])
    }

    /// A paid month reported a month after it ended (an import): once known, the flow it
    /// describes has day 0 at its expiry, and its later e-mails and tiers are listed — the
    /// earlier ones were decided before anyone knew.
    @Test func aPurchaseReportedLateStartsTheFlowItDescribes() throws {
        var month = SubscriptionPurchased()
        (month.productId, month.transactionId, month.originalTransactionId) = ("pro.monthly", "p1", "p1")
        (month.purchasedAt, month.expiresAt) = (ts("2026-01-01T12:00:00Z"), ts("2026-02-01T12:00:00Z"))
        let reported = LedgerEvent(subject: "u", occurredAt: ts("2026-03-01T12:00:00Z"), source: .appstore, data: month.eventData)
        #expect(try flow([reported]) == [
            #"2026-03-02T12:00:00.000Z retentionEmail {"day":29}"#,
            #"2026-03-04T12:00:00.000Z retentionEmail {"day":31}"#,
            #"2026-03-04T12:00:00.000Z tierChanged {"tier":"browseOnly"}"#,
            #"2026-04-02T12:00:00.000Z retentionEmail {"day":60}"#,
            #"2026-05-03T12:00:00.000Z tierChanged {"tier":"archived"}"#,
            #"2027-01-17T12:00:00.000Z retentionEmail {"day":350}"#,
            #"2027-02-01T12:00:00.000Z tierChanged {"tier":"pendingDeletion"}"#,
        ])
    }

    /// The e-mails' details are written directly: they are the JSON writer's, for every day a
    /// policy can name.
    @Test func anEmailsDetailIsTheJSONOfItsDay() {
        for n: Int64 in [0, 1, 7, 29, 350, 1_000_000, .max, -1, .min] {
            #expect(DueRules.emailDetail(n) == JSON.object(["day": .integer(n)]).serialized(), "day \(n)")
        }
    }
}

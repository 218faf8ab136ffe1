@_spi(Storage) import LedgerCore
import LedgerModels

/// A time from RFC 3339 text (the tests' fixed dates).
public func ts(_ text: String) -> Timestamp { Timestamp(rfc3339: text) ?? Timestamp(milliseconds: 0) }

/// Days after a time.
public func days(_ n: Int64, after t: Timestamp) -> Timestamp { t.adding(seconds: n * 86_400) }

/// Typed events for the tests, with the fields that matter as arguments.
public enum Make {
    public static func purchase(_ subject: String, at: Timestamp, txn: String, original: String? = nil, expires: Timestamp,
                         trial: Bool = false, product: String = "pro.monthly") -> LedgerEvent {
        var p = SubscriptionPurchased()
        p.productId = product
        p.transactionId = txn
        p.originalTransactionId = original ?? txn
        p.purchasedAt = at
        p.expiresAt = expires
        if trial { p.offer = .freeTrial }
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: p.eventData)
    }

    public static func renewal(_ subject: String, at: Timestamp, txn: String, original: String, expires: Timestamp,
                        product: String = "pro.monthly") -> LedgerEvent {
        var r = SubscriptionRenewed()
        r.productId = product
        r.transactionId = txn
        r.originalTransactionId = original
        r.purchasedAt = at
        r.expiresAt = expires
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: r.eventData)
    }

    public static func renewalFailed(_ subject: String, at: Timestamp, original: String, graceExpiresAt: Timestamp? = nil) -> LedgerEvent {
        var f = SubscriptionRenewalFailed()
        f.originalTransactionId = original
        f.gracePeriodExpiresAt = graceExpiresAt
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: f.eventData)
    }

    public static func autoRenew(_ subject: String, at: Timestamp, original: String, enabled: Bool) -> LedgerEvent {
        var c = SubscriptionAutoRenewChanged()
        c.originalTransactionId = original
        c.enabled = enabled
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: c.eventData)
    }

    public static func refund(_ subject: String, at: Timestamp, txn: String, original: String) -> LedgerEvent {
        var r = SubscriptionRefunded()
        r.transactionId = txn
        r.originalTransactionId = original
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: r.eventData)
    }

    public static func refundReversed(_ subject: String, at: Timestamp, txn: String, original: String) -> LedgerEvent {
        var r = SubscriptionRefundReversed()
        r.transactionId = txn
        r.originalTransactionId = original
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: r.eventData)
    }

    public static func expired(_ subject: String, at: Timestamp, original: String) -> LedgerEvent {
        var e = SubscriptionExpired()
        e.originalTransactionId = original
        e.reason = .billingRetry
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: e.eventData)
    }

    public static func created(_ subject: String, at: Timestamp, signedIn: Bool = true) -> LedgerEvent {
        var c = AccountCreated()
        c.signedIn = signedIn
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: c.eventData)
    }

    public static func grant(_ subject: String, at: Timestamp, until: Timestamp) -> LedgerEvent {
        var g = SupportEntitlementGranted()
        g.until = until
        g.reason = "goodwill"
        g.agent = "agent-7"
        return LedgerEvent(subject: subject, occurredAt: at, source: .support, data: g.eventData)
    }

    public static func usage(_ subject: String, at: Timestamp, feature: String = "export") -> LedgerEvent {
        var u = UsageRecorded()
        u.feature = feature
        u.count = 1
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: u.eventData)
    }

    public static func deleted(_ subject: String, at: Timestamp) -> LedgerEvent {
        LedgerEvent(subject: subject, occurredAt: at, source: .system, data: AccountDeleted().eventData)
    }

    public static func deletionRequested(_ subject: String, at: Timestamp) -> LedgerEvent {
        LedgerEvent(subject: subject, occurredAt: at, source: .app, data: AccountDeletionRequested().eventData)
    }

    public static func deletionCancelled(_ subject: String, at: Timestamp) -> LedgerEvent {
        LedgerEvent(subject: subject, occurredAt: at, source: .app, data: AccountDeletionCancelled().eventData)
    }

    /// A deletion step's outcome: completed, or failed with an error.
    public static func step(_ subject: String, at: Timestamp, _ step: String, failed: Bool = false) -> LedgerEvent {
        if failed {
            var f = AccountDeletionStepFailed()
            f.step = step
            f.error = "timeout"
            return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: f.eventData)
        }
        var c = AccountDeletionStepCompleted()
        c.step = step
        return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: c.eventData)
    }

    public static func exportRequested(_ subject: String, at: Timestamp) -> LedgerEvent {
        LedgerEvent(subject: subject, occurredAt: at, source: .app, data: AccountExportRequested().eventData)
    }

    public static func exportCompleted(_ subject: String, at: Timestamp, location: String) -> LedgerEvent {
        var e = AccountExportCompleted()
        e.location = location
        return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: e.eventData)
    }

    /// A resource of `kind` created (or deleted).
    public static func resource(_ subject: String, at: Timestamp, _ kind: String, _ id: String, deleted: Bool = false) -> LedgerEvent {
        if deleted {
            var d = ResourceDeleted()
            (d.kind, d.resourceId) = (kind, id)
            return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: d.eventData)
        }
        var c = ResourceCreated()
        (c.kind, c.resourceId) = (kind, id)
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: c.eventData)
    }

    public static func extended(_ subject: String, at: Timestamp, txn: String, original: String, until: Timestamp) -> LedgerEvent {
        var e = SubscriptionRenewalExtended()
        (e.transactionId, e.originalTransactionId, e.expiresAt) = (txn, original, until)
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: e.eventData)
    }

    /// A notification category turned on or off (`billing` by default).
    public static func notifications(_ subject: String, at: Timestamp, category: String = "billing", enabled: Bool) -> LedgerEvent {
        var p = NotificationPreferencesChanged()
        (p.category, p.enabled) = (category, enabled)
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: p.eventData)
    }

    public static func recoveryPass(_ subject: String, at: Timestamp, txn: String = "pass-1") -> LedgerEvent {
        var p = OneOffPurchased()
        p.productId = "recovery.pass"
        p.transactionId = txn
        p.kind = .recoveryPass
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: p.eventData)
    }

    public static func organizerCancelled(_ subject: String, at: Timestamp, organizer: String = "organizer-1") -> LedgerEvent {
        var c = FamilyOrganizerCancelled()
        c.organizer = organizer
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: c.eventData)
    }

    public static func session(_ subject: String, at: Timestamp, zone: String, device: String = "d1") -> LedgerEvent {
        var s = SessionStarted()
        s.deviceId = device
        s.timeZone = zone
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: s.eventData)
    }

    /// A session event of `device` other than a start: backgrounded, foregrounded, a crash, or
    /// an end (by the user).
    public static func device(_ subject: String, at: Timestamp, _ action: AccessModel.SessionAction, device: String = "d1") -> LedgerEvent {
        let data: EventData
        switch action {
        case .started:
            var s = SessionStarted()
            (s.deviceId, s.timeZone) = (device, "UTC")
            data = s.eventData
        case .backgrounded:
            var b = SessionBackgrounded()
            b.deviceId = device
            data = b.eventData
        case .foregrounded:
            var f = SessionForegrounded()
            f.deviceId = device
            data = f.eventData
        case .crashed, .ended:
            var e = SessionEnded()
            (e.deviceId, e.reason) = (device, action == .crashed ? .crash : .user)
            data = e.eventData
        }
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: data)
    }

    /// `count` uses of `feature`.
    public static func used(_ subject: String, at: Timestamp, _ feature: String, count: Int64) -> LedgerEvent {
        var u = UsageRecorded()
        (u.feature, u.count) = (feature, count)
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: u.eventData)
    }

    public static func delivered(_ subject: String, at: Timestamp, message: String) -> LedgerEvent {
        var m = InboxMessageDelivered()
        m.messageId = message
        return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: m.eventData)
    }

    public static func read(_ subject: String, at: Timestamp, message: String) -> LedgerEvent {
        var m = InboxMessageRead()
        m.messageId = message
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: m.eventData)
    }

    public static func scheduled(_ subject: String, at: Timestamp, task: String, due: String) -> LedgerEvent {
        var m = MaintenanceScheduled()
        m.taskId = task
        m.dueDate = due
        return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: m.eventData)
    }

    public static func completed(_ subject: String, at: Timestamp, task: String) -> LedgerEvent {
        var m = MaintenanceCompleted()
        m.taskId = task
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: m.eventData)
    }

    public static func flag(_ subject: String, at: Timestamp, _ flag: String, raised: Bool) -> LedgerEvent {
        if raised {
            var f = SecurityFlagRaised()
            f.flag = flag
            return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: f.eventData)
        }
        var f = SecurityFlagCleared()
        f.flag = flag
        return LedgerEvent(subject: subject, occurredAt: at, source: .system, data: f.eventData)
    }

    public static func graceExpired(_ subject: String, at: Timestamp, original: String) -> LedgerEvent {
        var e = SubscriptionGraceExpired()
        e.originalTransactionId = original
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: e.eventData)
    }

    public static func verified(_ subject: String, at: Timestamp, plan: VerifiedPlan = .pro, expires: Timestamp? = nil) -> LedgerEvent {
        var v = EntitlementVerified()
        v.plan = plan
        v.expiresAt = expires
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: v.eventData)
    }

    public static func verificationFailed(_ subject: String, at: Timestamp) -> LedgerEvent {
        var f = EntitlementVerificationFailed()
        f.reason = .network
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: f.eventData)
    }

    public static func signedIn(_ subject: String, at: Timestamp, _ signedIn: Bool) -> LedgerEvent {
        LedgerEvent(subject: subject, occurredAt: at, source: .app, data: signedIn ? AccountSignedIn().eventData : AccountSignedOut().eventData)
    }

    public static func productChange(_ subject: String, at: Timestamp, original: String, from: String, to: String) -> LedgerEvent {
        var c = SubscriptionProductChanged()
        c.originalTransactionId = original
        c.fromProductId = from
        c.toProductId = to
        c.effective = .nextRenewal
        return LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: c.eventData)
    }

    public static func attempt(_ subject: String, at: Timestamp, product: String = "pro.monthly") -> LedgerEvent {
        var p = PurchaseStarted()
        p.productId = product
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: p.eventData)
    }
}

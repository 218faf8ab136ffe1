/// Every event's typed data: one case per event type of SPEC §2.3, each holding that type's
/// payload struct. Projectors `switch` over it; `EventCatalog` maps type names to it.
public enum EventData: Sendable, Hashable {
    /// `subscription.purchased`
    case subscriptionPurchased(SubscriptionPurchased)
    /// `subscription.renewed`
    case subscriptionRenewed(SubscriptionRenewed)
    /// `subscription.renewal_failed`
    case subscriptionRenewalFailed(SubscriptionRenewalFailed)
    /// `subscription.grace_expired`
    case subscriptionGraceExpired(SubscriptionGraceExpired)
    /// `subscription.auto_renew_changed`
    case subscriptionAutoRenewChanged(SubscriptionAutoRenewChanged)
    /// `subscription.expired`
    case subscriptionExpired(SubscriptionExpired)
    /// `subscription.refunded`
    case subscriptionRefunded(SubscriptionRefunded)
    /// `subscription.refund_reversed`
    case subscriptionRefundReversed(SubscriptionRefundReversed)
    /// `subscription.revoked`
    case subscriptionRevoked(SubscriptionRevoked)
    /// `subscription.product_changed`
    case subscriptionProductChanged(SubscriptionProductChanged)
    /// `subscription.renewal_extended`
    case subscriptionRenewalExtended(SubscriptionRenewalExtended)
    /// `purchase.started`
    case purchaseStarted(PurchaseStarted)
    /// `purchase.pending`
    case purchasePending(PurchasePending)
    /// `purchase.failed`
    case purchaseFailed(PurchaseFailed)
    /// `entitlement.verified`
    case entitlementVerified(EntitlementVerified)
    /// `entitlement.verification_failed`
    case entitlementVerificationFailed(EntitlementVerificationFailed)
    /// `restore.requested`
    case restoreRequested(RestoreRequested)
    /// `restore.succeeded`
    case restoreSucceeded(RestoreSucceeded)
    /// `restore.failed`
    case restoreFailed(RestoreFailed)
    /// `oneoff.purchased`
    case oneOffPurchased(OneOffPurchased)
    /// `appstore.notification`
    case appStoreNotification(AppStoreNotification)
    /// `appstore.subject_bound`
    case appStoreSubjectBound(AppStoreSubjectBound)
    /// `account.created`
    case accountCreated(AccountCreated)
    /// `account.signed_in`
    case accountSignedIn(AccountSignedIn)
    /// `account.signed_out`
    case accountSignedOut(AccountSignedOut)
    /// `account.deletion_requested`
    case accountDeletionRequested(AccountDeletionRequested)
    /// `account.deletion_cancelled`
    case accountDeletionCancelled(AccountDeletionCancelled)
    /// `account.deletion_step_completed`
    case accountDeletionStepCompleted(AccountDeletionStepCompleted)
    /// `account.deletion_step_failed`
    case accountDeletionStepFailed(AccountDeletionStepFailed)
    /// `account.deleted`
    case accountDeleted(AccountDeleted)
    /// `account.export_requested`
    case accountExportRequested(AccountExportRequested)
    /// `account.export_completed`
    case accountExportCompleted(AccountExportCompleted)
    /// `support.entitlement_granted`
    case supportEntitlementGranted(SupportEntitlementGranted)
    /// `support.note_added`
    case supportNoteAdded(SupportNoteAdded)
    /// `family.organizer_cancelled`
    case familyOrganizerCancelled(FamilyOrganizerCancelled)
    /// `session.started`
    case sessionStarted(SessionStarted)
    /// `session.backgrounded`
    case sessionBackgrounded(SessionBackgrounded)
    /// `session.foregrounded`
    case sessionForegrounded(SessionForegrounded)
    /// `session.ended`
    case sessionEnded(SessionEnded)
    /// `usage.recorded`
    case usageRecorded(UsageRecorded)
    /// `resource.created`
    case resourceCreated(ResourceCreated)
    /// `resource.deleted`
    case resourceDeleted(ResourceDeleted)
    /// `inbox.message_delivered`
    case inboxMessageDelivered(InboxMessageDelivered)
    /// `inbox.message_read`
    case inboxMessageRead(InboxMessageRead)
    /// `maintenance.scheduled`
    case maintenanceScheduled(MaintenanceScheduled)
    /// `maintenance.completed`
    case maintenanceCompleted(MaintenanceCompleted)
    /// `security.flag_raised`
    case securityFlagRaised(SecurityFlagRaised)
    /// `security.flag_cleared`
    case securityFlagCleared(SecurityFlagCleared)
    /// `notification.preferences_changed`
    case notificationPreferencesChanged(NotificationPreferencesChanged)
    /// `notification.sent`
    case notificationSent(NotificationSent)

    /// The payload inside.
    public var payload: any EventPayload {
        switch self {
        case .subscriptionPurchased(let p): p
        case .subscriptionRenewed(let p): p
        case .subscriptionRenewalFailed(let p): p
        case .subscriptionGraceExpired(let p): p
        case .subscriptionAutoRenewChanged(let p): p
        case .subscriptionExpired(let p): p
        case .subscriptionRefunded(let p): p
        case .subscriptionRefundReversed(let p): p
        case .subscriptionRevoked(let p): p
        case .subscriptionProductChanged(let p): p
        case .subscriptionRenewalExtended(let p): p
        case .purchaseStarted(let p): p
        case .purchasePending(let p): p
        case .purchaseFailed(let p): p
        case .entitlementVerified(let p): p
        case .entitlementVerificationFailed(let p): p
        case .restoreRequested(let p): p
        case .restoreSucceeded(let p): p
        case .restoreFailed(let p): p
        case .oneOffPurchased(let p): p
        case .appStoreNotification(let p): p
        case .appStoreSubjectBound(let p): p
        case .accountCreated(let p): p
        case .accountSignedIn(let p): p
        case .accountSignedOut(let p): p
        case .accountDeletionRequested(let p): p
        case .accountDeletionCancelled(let p): p
        case .accountDeletionStepCompleted(let p): p
        case .accountDeletionStepFailed(let p): p
        case .accountDeleted(let p): p
        case .accountExportRequested(let p): p
        case .accountExportCompleted(let p): p
        case .supportEntitlementGranted(let p): p
        case .supportNoteAdded(let p): p
        case .familyOrganizerCancelled(let p): p
        case .sessionStarted(let p): p
        case .sessionBackgrounded(let p): p
        case .sessionForegrounded(let p): p
        case .sessionEnded(let p): p
        case .usageRecorded(let p): p
        case .resourceCreated(let p): p
        case .resourceDeleted(let p): p
        case .inboxMessageDelivered(let p): p
        case .inboxMessageRead(let p): p
        case .maintenanceScheduled(let p): p
        case .maintenanceCompleted(let p): p
        case .securityFlagRaised(let p): p
        case .securityFlagCleared(let p): p
        case .notificationPreferencesChanged(let p): p
        case .notificationSent(let p): p
        }
    }

    /// The event type name, such as `subscription.purchased`: read from the case, not through
    /// `payload` (which boxes the payload in an existential, an allocation for most types, on
    /// every event a fold routes).
    public var type: String { EventCatalog.typeNames[ordinal] }

    /// The place of its type in `EventCatalog.payloadTypes` (and `typeNames`): a fold finds the
    /// models that read an event by this number, in an array, instead of hashing its type name.
    public var ordinal: Int {
        switch self {
        case .subscriptionPurchased: 0
        case .subscriptionRenewed: 1
        case .subscriptionRenewalFailed: 2
        case .subscriptionGraceExpired: 3
        case .subscriptionAutoRenewChanged: 4
        case .subscriptionExpired: 5
        case .subscriptionRefunded: 6
        case .subscriptionRefundReversed: 7
        case .subscriptionRevoked: 8
        case .subscriptionProductChanged: 9
        case .subscriptionRenewalExtended: 10
        case .purchaseStarted: 11
        case .purchasePending: 12
        case .purchaseFailed: 13
        case .entitlementVerified: 14
        case .entitlementVerificationFailed: 15
        case .restoreRequested: 16
        case .restoreSucceeded: 17
        case .restoreFailed: 18
        case .oneOffPurchased: 19
        case .appStoreNotification: 20
        case .appStoreSubjectBound: 21
        case .accountCreated: 22
        case .accountSignedIn: 23
        case .accountSignedOut: 24
        case .accountDeletionRequested: 25
        case .accountDeletionCancelled: 26
        case .accountDeletionStepCompleted: 27
        case .accountDeletionStepFailed: 28
        case .accountDeleted: 29
        case .accountExportRequested: 30
        case .accountExportCompleted: 31
        case .supportEntitlementGranted: 32
        case .supportNoteAdded: 33
        case .familyOrganizerCancelled: 34
        case .sessionStarted: 35
        case .sessionBackgrounded: 36
        case .sessionForegrounded: 37
        case .sessionEnded: 38
        case .usageRecorded: 39
        case .resourceCreated: 40
        case .resourceDeleted: 41
        case .inboxMessageDelivered: 42
        case .inboxMessageRead: 43
        case .maintenanceScheduled: 44
        case .maintenanceCompleted: 45
        case .securityFlagRaised: 46
        case .securityFlagCleared: 47
        case .notificationPreferencesChanged: 48
        case .notificationSent: 49
        }
    }
}

extension EventCatalog {
    /// The payload type of every event type, in SPEC §2.3 order: the one list that maps type
    /// names to Swift types.
    public static let payloadTypes: [any EventPayload.Type] = [
        SubscriptionPurchased.self,
        SubscriptionRenewed.self,
        SubscriptionRenewalFailed.self,
        SubscriptionGraceExpired.self,
        SubscriptionAutoRenewChanged.self,
        SubscriptionExpired.self,
        SubscriptionRefunded.self,
        SubscriptionRefundReversed.self,
        SubscriptionRevoked.self,
        SubscriptionProductChanged.self,
        SubscriptionRenewalExtended.self,
        PurchaseStarted.self,
        PurchasePending.self,
        PurchaseFailed.self,
        EntitlementVerified.self,
        EntitlementVerificationFailed.self,
        RestoreRequested.self,
        RestoreSucceeded.self,
        RestoreFailed.self,
        OneOffPurchased.self,
        AppStoreNotification.self,
        AppStoreSubjectBound.self,
        AccountCreated.self,
        AccountSignedIn.self,
        AccountSignedOut.self,
        AccountDeletionRequested.self,
        AccountDeletionCancelled.self,
        AccountDeletionStepCompleted.self,
        AccountDeletionStepFailed.self,
        AccountDeleted.self,
        AccountExportRequested.self,
        AccountExportCompleted.self,
        SupportEntitlementGranted.self,
        SupportNoteAdded.self,
        FamilyOrganizerCancelled.self,
        SessionStarted.self,
        SessionBackgrounded.self,
        SessionForegrounded.self,
        SessionEnded.self,
        UsageRecorded.self,
        ResourceCreated.self,
        ResourceDeleted.self,
        InboxMessageDelivered.self,
        InboxMessageRead.self,
        MaintenanceScheduled.self,
        MaintenanceCompleted.self,
        SecurityFlagRaised.self,
        SecurityFlagCleared.self,
        NotificationPreferencesChanged.self,
        NotificationSent.self,
    ]
}

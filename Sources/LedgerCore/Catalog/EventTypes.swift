/// The event types of the ledger (SPEC §2.3) and their schema versions: the one place a type
/// name is known. An event of any other type never reaches the log.
public enum EventTypes {
    /// Each type's current schema version. Every type is at version 1 except `usage.recorded`,
    /// which gained `count` in version 2 (version 1 events read as `count: 1`).
    public static let current: [String: UInt16] = {
        var versions: [String: UInt16] = [:]
        for name in names { versions[name] = 1 }
        versions["usage.recorded"] = 2
        return versions
    }()

    /// The schema versions accepted on input for a type (older ones are upcast on read).
    public static func acceptedVersions(of type: String) -> ClosedRange<UInt16>? {
        current[type].map { 1...$0 }
    }

    /// Every type name, grouped as SPEC §2.3 lists them.
    public static let names: [String] = subscriptions + accounts + telemetry + badgeInputs

    static let subscriptions = [
        "subscription.purchased", "subscription.renewed", "subscription.renewal_failed", "subscription.grace_expired",
        "subscription.auto_renew_changed", "subscription.expired", "subscription.refunded", "subscription.refund_reversed",
        "subscription.revoked", "subscription.product_changed", "subscription.renewal_extended",
        "purchase.started", "purchase.pending", "purchase.failed",
        "entitlement.verified", "entitlement.verification_failed",
        "restore.requested", "restore.succeeded", "restore.failed",
        "oneoff.purchased", "appstore.notification", "appstore.subject_bound",
    ]

    static let accounts = [
        "account.created", "account.signed_in", "account.signed_out", "account.deletion_requested",
        "account.deletion_cancelled", "account.deletion_step_completed", "account.deletion_step_failed",
        "account.deleted", "account.export_requested", "account.export_completed",
        "support.entitlement_granted", "support.note_added", "family.organizer_cancelled",
    ]

    static let telemetry = [
        "session.started", "session.backgrounded", "session.foregrounded", "session.ended",
        "usage.recorded", "resource.created", "resource.deleted",
    ]

    static let badgeInputs = [
        "inbox.message_delivered", "inbox.message_read", "maintenance.scheduled", "maintenance.completed",
        "security.flag_raised", "security.flag_cleared", "notification.preferences_changed", "notification.sent",
    ]
}

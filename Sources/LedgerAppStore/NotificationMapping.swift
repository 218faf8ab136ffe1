import Foundation
@_spi(Storage) import LedgerCore

/// What one App Store notification yields, besides the `appstore.notification` every one
/// yields (SPEC §2.2 "Mapping").
public enum AppStoreYield: Sendable, Hashable {
    case purchased
    case renewed(billingRecovery: Bool)
    case renewalFailed
    case graceExpired
    case expired(ExpirationReason)
    case autoRenewChanged(enabled: Bool)
    case productChanged(ChangeTiming)
    /// A change of product that was pending is withdrawn: the subscription renews into the
    /// product it has (`subscription.product_changed` at next renewal, to the current product).
    case productChangeCancelled
    case refunded
    case refundReversed
    case revoked
    case renewalExtended
    /// Only `appstore.notification`: what Apple said, kept for support, changing no view.
    case nothing

    /// The event type it yields, `nil` for `.nothing`.
    public var eventType: String? {
        switch self {
        case .purchased: SubscriptionPurchased.type
        case .renewed: SubscriptionRenewed.type
        case .renewalFailed: SubscriptionRenewalFailed.type
        case .graceExpired: SubscriptionGraceExpired.type
        case .expired: SubscriptionExpired.type
        case .autoRenewChanged: SubscriptionAutoRenewChanged.type
        case .productChanged, .productChangeCancelled: SubscriptionProductChanged.type
        case .refunded: SubscriptionRefunded.type
        case .refundReversed: SubscriptionRefundReversed.type
        case .revoked: SubscriptionRevoked.type
        case .renewalExtended: SubscriptionRenewalExtended.type
        case .nothing: nil
        }
    }

    /// How the table in the docs says it.
    var words: String {
        switch self {
        case .purchased: "`subscription.purchased`"
        case .renewed(let recovery): recovery ? "`subscription.renewed`, billingRecovery" : "`subscription.renewed`"
        case .renewalFailed: "`subscription.renewal_failed` (gracePeriodExpiresAt from the renewal info)"
        case .graceExpired: "`subscription.grace_expired`"
        case .expired(let reason): "`subscription.expired`, reason `\(reason.rawValue)`"
        case .autoRenewChanged(let enabled): "`subscription.auto_renew_changed`, enabled \(enabled)"
        case .productChanged(.immediate): "`subscription.product_changed` immediate, with the new transaction"
        case .productChanged(.nextRenewal): "`subscription.product_changed` at next renewal"
        case .productChangeCancelled: "`subscription.product_changed` at next renewal, to the current product (the pending change withdrawn)"
        case .refunded: "`subscription.refunded`"
        case .refundReversed: "`subscription.refund_reversed`"
        case .revoked: "`subscription.revoked`"
        case .renewalExtended: "`subscription.renewal_extended`"
        case .nothing: "nothing more"
        }
    }
}

/// Apple's notification types and subtypes, and what each yields: the one table the ingest
/// reads and the docs show (`AppStoreMapping.markdown`, in the LedgerAppStore article).
public enum AppStoreMapping {
    /// One row: a type, a subtype (`nil`: none, `"*"`: any other), and what it yields.
    public struct Row: Sendable, Hashable {
        public let type: String
        public let subtype: String?
        public let yield: AppStoreYield
    }

    /// Every type and subtype Apple's App Store Server Library knows today (23 types, 17
    /// subtypes). A type or subtype not here yields `.nothing`: kept, never an error.
    public static let rows: [Row] = [
        Row(type: "SUBSCRIBED", subtype: "INITIAL_BUY", yield: .purchased),
        Row(type: "SUBSCRIBED", subtype: "RESUBSCRIBE", yield: .purchased),
        Row(type: "OFFER_REDEEMED", subtype: "INITIAL_BUY", yield: .purchased),
        Row(type: "OFFER_REDEEMED", subtype: "RESUBSCRIBE", yield: .purchased),
        Row(type: "OFFER_REDEEMED", subtype: "UPGRADE", yield: .productChanged(.immediate)),
        Row(type: "OFFER_REDEEMED", subtype: "DOWNGRADE", yield: .productChanged(.nextRenewal)),
        Row(type: "OFFER_REDEEMED", subtype: nil, yield: .nothing),
        Row(type: "DID_RENEW", subtype: nil, yield: .renewed(billingRecovery: false)),
        Row(type: "DID_RENEW", subtype: "BILLING_RECOVERY", yield: .renewed(billingRecovery: true)),
        Row(type: "DID_FAIL_TO_RENEW", subtype: nil, yield: .renewalFailed),
        Row(type: "DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", yield: .renewalFailed),
        Row(type: "GRACE_PERIOD_EXPIRED", subtype: nil, yield: .graceExpired),
        Row(type: "EXPIRED", subtype: "VOLUNTARY", yield: .expired(.voluntary)),
        Row(type: "EXPIRED", subtype: "BILLING_RETRY", yield: .expired(.billingRetry)),
        Row(type: "EXPIRED", subtype: "PRICE_INCREASE", yield: .expired(.priceIncrease)),
        Row(type: "EXPIRED", subtype: "PRODUCT_NOT_FOR_SALE", yield: .expired(.productUnavailable)),
        Row(type: "EXPIRED", subtype: "*", yield: .expired(.other)),
        Row(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED", yield: .autoRenewChanged(enabled: true)),
        Row(type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", yield: .autoRenewChanged(enabled: false)),
        Row(type: "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", yield: .productChanged(.immediate)),
        Row(type: "DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE", yield: .productChanged(.nextRenewal)),
        Row(type: "DID_CHANGE_RENEWAL_PREF", subtype: nil, yield: .productChangeCancelled),
        Row(type: "REFUND", subtype: nil, yield: .refunded),
        Row(type: "REFUND_REVERSED", subtype: nil, yield: .refundReversed),
        Row(type: "REVOKE", subtype: nil, yield: .revoked),
        Row(type: "RENEWAL_EXTENDED", subtype: nil, yield: .renewalExtended),
        Row(type: "PRICE_INCREASE", subtype: "PENDING", yield: .nothing),
        Row(type: "PRICE_INCREASE", subtype: "ACCEPTED", yield: .nothing),
        Row(type: "RENEWAL_EXTENSION", subtype: "SUMMARY", yield: .nothing),
        Row(type: "RENEWAL_EXTENSION", subtype: "FAILURE", yield: .nothing),
        Row(type: "REFUND_DECLINED", subtype: nil, yield: .nothing),
        Row(type: "CONSUMPTION_REQUEST", subtype: nil, yield: .nothing),
        Row(type: "ONE_TIME_CHARGE", subtype: nil, yield: .nothing),
        Row(type: "EXTERNAL_PURCHASE_TOKEN", subtype: "UNREPORTED", yield: .nothing),
        Row(type: "RESCIND_CONSENT", subtype: nil, yield: .nothing),
        Row(type: "METADATA_UPDATE", subtype: nil, yield: .nothing),
        Row(type: "MIGRATION", subtype: nil, yield: .nothing),
        Row(type: "PRICE_CHANGE", subtype: nil, yield: .nothing),
        Row(type: "TEST", subtype: nil, yield: .nothing),
    ]

    /// What a notification of `type` and `subtype` yields: its row, the type's `"*"` row, or
    /// `.nothing` (a type or subtype Apple added later).
    public static func yield(type: String, subtype: String?) -> AppStoreYield {
        rows.first { $0.type == type && $0.subtype == subtype }?.yield
            ?? rows.first { $0.type == type && $0.subtype == "*" }?.yield
            ?? .nothing
    }

    /// The table as the LedgerAppStore article shows it.
    public static var markdown: String {
        var lines = ["| notificationType | subtype | yields, besides `appstore.notification` |", "|---|---|---|"]
        for row in rows {
            let subtype = switch row.subtype {
            case nil: "—"
            case "*": "any other"
            case let value?: "`\(value)`"
            }
            lines.append("| `\(row.type)` | \(subtype) | \(row.yield.words) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

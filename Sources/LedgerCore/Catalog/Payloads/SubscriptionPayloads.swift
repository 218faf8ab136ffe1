// Subscription facts (SPEC §2.3, first table). The App Store is their authoritative source.

/// The kind of offer a purchase used.
public enum Offer: String, Sendable, Hashable, CaseIterable {
    case freeTrial, introductory, promotional, offerCode, winBack
}

/// The App Store environment a transaction belongs to.
public enum StoreEnvironment: String, Sendable, Hashable, CaseIterable {
    case production, sandbox
}

/// Why a subscription expired.
public enum ExpirationReason: String, Sendable, Hashable, CaseIterable {
    case voluntary, billingRetry, priceIncrease, productUnavailable, other
}

/// When a product change takes effect.
public enum ChangeTiming: String, Sendable, Hashable, CaseIterable {
    case immediate, nextRenewal
}

/// A plan the app can verify with StoreKit.
public enum VerifiedPlan: String, Sendable, Hashable, CaseIterable {
    case free, trial, pro
}

/// Why a StoreKit verification failed.
public enum VerificationFailure: String, Sendable, Hashable, CaseIterable {
    case network, storekit, other
}

/// A one-off (non-subscription) purchase.
public enum OneOffKind: String, Sendable, Hashable, CaseIterable {
    case recoveryPass, reactivationFee
}

/// `subscription.purchased`: a new subscription transaction (first purchase, trial, resubscribe).
public struct SubscriptionPurchased: EventPayload {
    public static let type = "subscription.purchased"
    public var productId = ""
    public var transactionId = ""
    public var originalTransactionId = ""
    public var purchasedAt = Timestamp(milliseconds: 0)
    public var expiresAt = Timestamp(milliseconds: 0)
    public var offer: Offer?
    public var period: String?
    public var price: String?
    public var currency: String?
    public var environment: StoreEnvironment?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(
        productId: String = "",
        transactionId: String = "",
        originalTransactionId: String = "",
        purchasedAt: Timestamp = Timestamp(milliseconds: 0),
        expiresAt: Timestamp = Timestamp(milliseconds: 0),
        offer: Offer? = nil,
        period: String? = nil,
        price: String? = nil,
        currency: String? = nil,
        environment: StoreEnvironment? = nil
    ) {
        self.productId = productId
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.offer = offer
        self.period = period
        self.price = price
        self.currency = currency
        self.environment = environment
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("productId", \.productId, .identifier),
        .required("transactionId", \.transactionId, .identifier),
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("purchasedAt", \.purchasedAt, .time),
        .required("expiresAt", \.expiresAt, .time),
        .optional("offer", \.offer, .choice),
        .optional("period", \.period, .period),
        .optional("price", \.price, .decimal),
        .optional("currency", \.currency, .currency),
        .optional("environment", \.environment, .choice),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionPurchased(self) }
}

/// `subscription.renewed`: a renewal transaction (or a billing recovery).
public struct SubscriptionRenewed: EventPayload {
    public static let type = "subscription.renewed"
    public var productId = ""
    public var transactionId = ""
    public var originalTransactionId = ""
    public var purchasedAt = Timestamp(milliseconds: 0)
    public var expiresAt = Timestamp(milliseconds: 0)
    public var billingRecovery: Bool?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(
        productId: String = "",
        transactionId: String = "",
        originalTransactionId: String = "",
        purchasedAt: Timestamp = Timestamp(milliseconds: 0),
        expiresAt: Timestamp = Timestamp(milliseconds: 0),
        billingRecovery: Bool? = nil
    ) {
        self.productId = productId
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.billingRecovery = billingRecovery
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("productId", \.productId, .identifier),
        .required("transactionId", \.transactionId, .identifier),
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("purchasedAt", \.purchasedAt, .time),
        .required("expiresAt", \.expiresAt, .time),
        .optional("billingRecovery", \.billingRecovery, .bool),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionRenewed(self) }
}

/// `subscription.renewal_failed`: the store could not charge for the next period.
public struct SubscriptionRenewalFailed: EventPayload {
    public static let type = "subscription.renewal_failed"
    public var originalTransactionId = ""
    public var gracePeriodExpiresAt: Timestamp?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(originalTransactionId: String = "", gracePeriodExpiresAt: Timestamp? = nil) {
        self.originalTransactionId = originalTransactionId
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .optional("gracePeriodExpiresAt", \.gracePeriodExpiresAt, .time),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionRenewalFailed(self) }
}

/// `subscription.grace_expired`: the store's billing grace period ended without recovery.
public struct SubscriptionGraceExpired: EventPayload {
    public static let type = "subscription.grace_expired"
    public var originalTransactionId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(originalTransactionId: String = "") {
        self.originalTransactionId = originalTransactionId
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("originalTransactionId", \.originalTransactionId, .identifier),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionGraceExpired(self) }
}

/// `subscription.auto_renew_changed`: `false` is a voluntary cancellation, `true` an un-cancel.
public struct SubscriptionAutoRenewChanged: EventPayload {
    public static let type = "subscription.auto_renew_changed"
    public var originalTransactionId = ""
    public var enabled = false
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(originalTransactionId: String = "", enabled: Bool = false) {
        self.originalTransactionId = originalTransactionId
        self.enabled = enabled
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("enabled", \.enabled, .bool),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionAutoRenewChanged(self) }
}

/// `subscription.expired`: the subscription ended.
public struct SubscriptionExpired: EventPayload {
    public static let type = "subscription.expired"
    public var originalTransactionId = ""
    public var reason = ExpirationReason.other
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(originalTransactionId: String = "", reason: ExpirationReason = ExpirationReason.other) {
        self.originalTransactionId = originalTransactionId
        self.reason = reason
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("reason", \.reason, .choice),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionExpired(self) }
}

/// `subscription.refunded`: the store refunded a transaction; its coverage ends.
public struct SubscriptionRefunded: TransactionEndPayload {
    public static let type = "subscription.refunded"
    public var transactionId = ""
    public var originalTransactionId = ""
    public var reason: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(transactionId: String = "", originalTransactionId: String = "", reason: String? = nil) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.reason = reason
    }
    @_spi(Storage) public static let fields = shape(transactionId: \.transactionId, originalTransactionId: \.originalTransactionId, reason: \.reason)
    public consuming func intoEventData() -> EventData { .subscriptionRefunded(self) }
}

/// `subscription.refund_reversed`: a refund was taken back; the coverage returns.
public struct SubscriptionRefundReversed: EventPayload {
    public static let type = "subscription.refund_reversed"
    public var transactionId = ""
    public var originalTransactionId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(transactionId: String = "", originalTransactionId: String = "") {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("transactionId", \.transactionId, .identifier),
        .required("originalTransactionId", \.originalTransactionId, .identifier),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionRefundReversed(self) }
}

/// `subscription.revoked`: access was revoked (for example, family sharing removed).
public struct SubscriptionRevoked: TransactionEndPayload {
    public static let type = "subscription.revoked"
    public var transactionId = ""
    public var originalTransactionId = ""
    public var reason: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(transactionId: String = "", originalTransactionId: String = "", reason: String? = nil) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.reason = reason
    }
    @_spi(Storage) public static let fields = shape(transactionId: \.transactionId, originalTransactionId: \.originalTransactionId, reason: \.reason)
    public consuming func intoEventData() -> EventData { .subscriptionRevoked(self) }
}

/// `subscription.product_changed`: an upgrade, downgrade or crossgrade. An `immediate` change
/// carries the new transaction (transactionId, purchasedAt, expiresAt); a `nextRenewal` one
/// does not.
public struct SubscriptionProductChanged: EventPayload {
    public static let type = "subscription.product_changed"
    public var originalTransactionId = ""
    public var fromProductId = ""
    public var toProductId = ""
    public var effective = ChangeTiming.nextRenewal
    public var transactionId: String?
    public var purchasedAt: Timestamp?
    public var expiresAt: Timestamp?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(
        originalTransactionId: String = "",
        fromProductId: String = "",
        toProductId: String = "",
        effective: ChangeTiming = ChangeTiming.nextRenewal,
        transactionId: String? = nil,
        purchasedAt: Timestamp? = nil,
        expiresAt: Timestamp? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.fromProductId = fromProductId
        self.toProductId = toProductId
        self.effective = effective
        self.transactionId = transactionId
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("fromProductId", \.fromProductId, .identifier),
        .required("toProductId", \.toProductId, .identifier),
        .required("effective", \.effective, .choice),
        .optional("transactionId", \.transactionId, .identifier),
        .optional("purchasedAt", \.purchasedAt, .time),
        .optional("expiresAt", \.expiresAt, .time),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionProductChanged(self) }

    /// The fields an immediate change must carry.
    static let immediateFields = ["transactionId", "purchasedAt", "expiresAt"]

    public func violations() -> [FieldViolation] {
        guard effective == .immediate else { return [] }
        let present = [transactionId != nil, purchasedAt != nil, expiresAt != nil]
        return zip(Self.immediateFields, present).compactMap { name, isPresent in
            isPresent ? nil : FieldViolation(field: name, message: "missing; an immediate product change carries the new transaction's \(name)")
        }
    }

    public static var conditionalSchema: JSON? {
        ["if": ["properties": ["effective": ["const": "immediate"]], "required": ["effective"]],
         "then": ["required": .array(immediateFields.map { .string($0) }),
                  "properties": .object(JSONObject(immediateFields.map { ($0, ["not": ["type": "null"]]) }))]]
    }
}

/// `subscription.renewal_extended`: the store extended a transaction's expiry.
public struct SubscriptionRenewalExtended: EventPayload {
    public static let type = "subscription.renewal_extended"
    public var transactionId = ""
    public var originalTransactionId = ""
    public var expiresAt = Timestamp(milliseconds: 0)
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(
        transactionId: String = "",
        originalTransactionId: String = "",
        expiresAt: Timestamp = Timestamp(milliseconds: 0)
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.expiresAt = expiresAt
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("transactionId", \.transactionId, .identifier),
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("expiresAt", \.expiresAt, .time),
    ]
    public consuming func intoEventData() -> EventData { .subscriptionRenewalExtended(self) }
}

/// `purchase.started`: the app began a purchase. Client-side; never changes the plan.
public struct PurchaseStarted: ProductAttemptPayload {
    public static let type = "purchase.started"
    public var productId = ""
    public var reason: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(productId: String = "", reason: String? = nil) {
        self.productId = productId
        self.reason = reason
    }
    @_spi(Storage) public static let fields = shape(productId: \.productId, reason: \.reason)
    public consuming func intoEventData() -> EventData { .purchaseStarted(self) }
}

/// `purchase.pending`: the purchase awaits approval (Ask to Buy, SCA). Never changes the plan.
public struct PurchasePending: ProductAttemptPayload {
    public static let type = "purchase.pending"
    public var productId = ""
    public var reason: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(productId: String = "", reason: String? = nil) {
        self.productId = productId
        self.reason = reason
    }
    @_spi(Storage) public static let fields = shape(productId: \.productId, reason: \.reason)
    public consuming func intoEventData() -> EventData { .purchasePending(self) }
}

/// `purchase.failed`: the purchase failed or was cancelled. Never changes the plan.
public struct PurchaseFailed: ProductAttemptPayload {
    public static let type = "purchase.failed"
    public var productId = ""
    public var reason: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(productId: String = "", reason: String? = nil) {
        self.productId = productId
        self.reason = reason
    }
    @_spi(Storage) public static let fields = shape(productId: \.productId, reason: \.reason)
    public consuming func intoEventData() -> EventData { .purchaseFailed(self) }
}

/// `entitlement.verified`: the app verified the plan with StoreKit (a device snapshot).
public struct EntitlementVerified: EventPayload {
    public static let type = "entitlement.verified"
    public var plan = VerifiedPlan.free
    public var expiresAt: Timestamp?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(plan: VerifiedPlan = VerifiedPlan.free, expiresAt: Timestamp? = nil) {
        self.plan = plan
        self.expiresAt = expiresAt
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("plan", \.plan, .choice),
        .optional("expiresAt", \.expiresAt, .time),
    ]
    public consuming func intoEventData() -> EventData { .entitlementVerified(self) }
}

/// `entitlement.verification_failed`: the app could not verify with StoreKit.
public struct EntitlementVerificationFailed: EventPayload {
    public static let type = "entitlement.verification_failed"
    public var reason = VerificationFailure.other
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(reason: VerificationFailure = VerificationFailure.other) {
        self.reason = reason
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("reason", \.reason, .choice),
    ]
    public consuming func intoEventData() -> EventData { .entitlementVerificationFailed(self) }
}

/// `restore.requested`: the user asked to restore purchases.
public struct RestoreRequested: NoDataPayload {
    public static let type = "restore.requested"
    public init() {}
    public consuming func intoEventData() -> EventData { .restoreRequested(self) }
}

/// `restore.succeeded`: purchases were restored, with the plan found.
public struct RestoreSucceeded: EventPayload {
    public static let type = "restore.succeeded"
    public var plan: VerifiedPlan?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(plan: VerifiedPlan? = nil) {
        self.plan = plan
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .optional("plan", \.plan, .choice),
    ]
    public consuming func intoEventData() -> EventData { .restoreSucceeded(self) }
}

/// `restore.failed`: restoring purchases failed.
public struct RestoreFailed: EventPayload {
    public static let type = "restore.failed"
    public var errorCode: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(errorCode: String? = nil) {
        self.errorCode = errorCode
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .optional("errorCode", \.errorCode, .identifier),
    ]
    public consuming func intoEventData() -> EventData { .restoreFailed(self) }
}

/// `oneoff.purchased`: a one-off purchase (recovery pass, reactivation fee).
public struct OneOffPurchased: EventPayload {
    public static let type = "oneoff.purchased"
    public var productId = ""
    public var transactionId = ""
    public var kind = OneOffKind.recoveryPass
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(productId: String = "", transactionId: String = "", kind: OneOffKind = OneOffKind.recoveryPass) {
        self.productId = productId
        self.transactionId = transactionId
        self.kind = kind
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("productId", \.productId, .identifier),
        .required("transactionId", \.transactionId, .identifier),
        .required("kind", \.kind, .choice),
    ]
    public consuming func intoEventData() -> EventData { .oneOffPurchased(self) }
}

/// `appstore.notification`: one App Store Server Notification exactly as Apple sent it.
public struct AppStoreNotification: EventPayload {
    public static let type = "appstore.notification"
    public var notificationType = ""
    public var subtype: String?
    public var notificationUUID = ""
    public var signedDate = Timestamp(milliseconds: 0)
    public var payload = JSONObject()
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(
        notificationType: String = "",
        subtype: String? = nil,
        notificationUUID: String = "",
        signedDate: Timestamp = Timestamp(milliseconds: 0),
        payload: JSONObject = JSONObject()
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.signedDate = signedDate
        self.payload = payload
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("notificationType", \.notificationType, .identifier),
        .optional("subtype", \.subtype, .identifier),
        .required("notificationUUID", \.notificationUUID, .identifier),
        .required("signedDate", \.signedDate, .time),
        .required("payload", \.payload, .object),
    ]
    public consuming func intoEventData() -> EventData { .appStoreNotification(self) }
}

/// `appstore.subject_bound`: the App Store events held under `appstore:<originalTransactionId>`
/// (`from`, the holding subject) count for this subject: its read models fold them with its own,
/// whenever they arrived (attributed, never rewritten). The ledger appends it itself, once,
/// right after the first event by which both the holding subject and another subject have
/// named the subscription (whichever came first).
public struct AppStoreSubjectBound: EventPayload {
    public static let type = "appstore.subject_bound"
    public var originalTransactionId = ""
    public var from = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(originalTransactionId: String = "", from: String = "") {
        self.originalTransactionId = originalTransactionId
        self.from = from
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("originalTransactionId", \.originalTransactionId, .identifier),
        .required("from", \.from, .subject),
    ]
    public consuming func intoEventData() -> EventData { .appStoreSubjectBound(self) }

    /// The subject a subscription's App Store events wait under until a subject holds it.
    public static func holdingSubject(of originalTransactionId: String) -> String { "appstore:\(originalTransactionId)" }

    /// The prefix of every holding subject.
    public static let holdingPrefix = "appstore:"

    /// The holding subject this binding attributes to `subject`, `nil` when it names none (a
    /// holding subject bound to itself).
    public func holding(attributedTo subject: String) -> String? {
        from == subject ? nil : from
    }

    public func violations() -> [FieldViolation] {
        let holding = Self.holdingSubject(of: originalTransactionId)
        return from == holding ? [] : [FieldViolation(field: "from", message: "must be the holding subject \(holding) of originalTransactionId \(originalTransactionId)")]
    }

    public static var conditionalSchema: JSON? { ["properties": ["from": ["pattern": "^appstore:"]]] }
}

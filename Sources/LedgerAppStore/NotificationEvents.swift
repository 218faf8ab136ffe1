import Foundation
@_spi(Storage) import LedgerCore

extension VerifiedNotification {
    /// The events this notification yields for `subject` (SPEC §2.2): its `appstore.notification`,
    /// then what `AppStoreMapping` says it means. Each occurred at the notification's
    /// `signedDate`, from source `appstore`, with an id derived from its `notificationUUID` and
    /// its type (`EventIdentity.derive(named:)`), so a retry yields the same events (duplicates).
    ///
    /// `previousProductId` is the product the subscription had before an immediate upgrade
    /// (the notification names only the new one); without it, the renewal info's is taken.
    /// - Throws: `AppStoreRejection.malformed` when the notification lacks what its type needs
    ///   (a DID_RENEW without a transaction).
    public func events(subject: String, previousProductId: String? = nil) throws(AppStoreRejection) -> [LedgerEvent] {
        var events = [event(subject: subject, data: AppStoreNotification(
            notificationType: notificationType, subtype: subtype, notificationUUID: notificationUUID, signedDate: signedDate,
            payload: readablePayload).eventData)]
        let yield = AppStoreMapping.yield(type: notificationType, subtype: subtype)
        guard yield != .nothing else { return events }
        let t = Fields(transaction ?? JSONObject(), pointer: "/signedPayload/data/signedTransactionInfo")
        let r = Fields(renewal ?? JSONObject(), pointer: "/signedPayload/data/signedRenewalInfo")
        guard transaction != nil else {
            throw AppStoreRejection(.malformed, "a \(notificationType) notification without signedTransactionInfo", at: "/signedPayload/data")
        }
        let original = try t.string("originalTransactionId")
        let data: EventData
        switch yield {
        case .purchased:
            let offer = t.offer()
            data = SubscriptionPurchased(
                productId: try t.string("productId"), transactionId: try t.string("transactionId"), originalTransactionId: original,
                purchasedAt: try t.time("purchaseDate"), expiresAt: try t.time("expiresDate"), offer: offer,
                period: offer == nil ? nil : t.optionalString("offerPeriod"), price: t.price(), currency: t.optionalString("currency"),
                environment: t.optionalString("environment").flatMap { StoreEnvironment(rawValue: $0.lowercased()) }).eventData
        case .renewed(let recovery):
            data = SubscriptionRenewed(
                productId: try t.string("productId"), transactionId: try t.string("transactionId"), originalTransactionId: original,
                purchasedAt: try t.time("purchaseDate"), expiresAt: try t.time("expiresDate"), billingRecovery: recovery ? true : nil).eventData
        case .renewalFailed:
            data = SubscriptionRenewalFailed(originalTransactionId: original, gracePeriodExpiresAt: r.optionalTime("gracePeriodExpiresDate")).eventData
        case .graceExpired:
            data = SubscriptionGraceExpired(originalTransactionId: original).eventData
        case .expired(let reason):
            data = SubscriptionExpired(originalTransactionId: original, reason: reason).eventData
        case .autoRenewChanged(let enabled):
            data = SubscriptionAutoRenewChanged(originalTransactionId: original, enabled: enabled).eventData
        case .productChanged(.immediate):
            let to = try t.string("productId")
            data = SubscriptionProductChanged(
                originalTransactionId: original, fromProductId: previousProductId ?? r.optionalString("productId") ?? to, toProductId: to,
                effective: .immediate, transactionId: try t.string("transactionId"), purchasedAt: try t.time("purchaseDate"),
                expiresAt: try t.time("expiresDate")).eventData
        case .productChanged(.nextRenewal):
            data = SubscriptionProductChanged(originalTransactionId: original, fromProductId: try t.string("productId"),
                                              toProductId: try r.string("autoRenewProductId"), effective: .nextRenewal).eventData
        case .productChangeCancelled:
            let current = try t.string("productId")
            data = SubscriptionProductChanged(originalTransactionId: original, fromProductId: current, toProductId: current, effective: .nextRenewal).eventData
        case .refunded:
            data = SubscriptionRefunded(transactionId: try t.string("transactionId"), originalTransactionId: original,
                                        reason: t.optionalString("revocationReason") ?? t.optionalNumber("revocationReason")).eventData
        case .refundReversed:
            data = SubscriptionRefundReversed(transactionId: try t.string("transactionId"), originalTransactionId: original).eventData
        case .revoked:
            data = SubscriptionRevoked(transactionId: try t.string("transactionId"), originalTransactionId: original,
                                       reason: t.optionalString("revocationReason") ?? t.optionalNumber("revocationReason")).eventData
        case .renewalExtended:
            data = SubscriptionRenewalExtended(transactionId: try t.string("transactionId"), originalTransactionId: original,
                                               expiresAt: try t.time("expiresDate")).eventData
        case .nothing:
            return events
        }
        events.append(event(subject: subject, data: data))
        return events
    }

    /// The `appAccountToken` of the transaction, else of the renewal info, lower-cased: the
    /// subject the app gave the purchase, when it gave one.
    public var appAccountToken: String? {
        for object in [transaction, renewal] {
            if case .string(let token)? = object?["appAccountToken"], !token.isEmpty { return token.lowercased() }
        }
        return nil
    }

    /// The `originalTransactionId` the notification is about, if it names one.
    public var originalTransactionId: String? {
        for object in [transaction, renewal] {
            if case .string(let id)? = object?["originalTransactionId"], !id.isEmpty { return id }
        }
        return nil
    }

    /// The id of the `appstore.notification` this notification yields: a notification already
    /// stored has an event under it.
    public var notificationEventID: EventID { Self.id(notificationUUID, AppStoreNotification.type) }

    /// The payload with its nested signed data decoded, as support reads it.
    var readablePayload: JSONObject {
        var payload = self.payload
        guard case .object(var data) = payload["data"] else { return payload }
        if let transaction { data["signedTransactionInfo"] = .object(transaction) }
        if let renewal { data["signedRenewalInfo"] = .object(renewal) }
        payload["data"] = .object(data)
        return payload
    }

    private func event(subject: String, data: EventData) -> LedgerEvent {
        LedgerEvent(id: Self.id(notificationUUID, data.type), subject: subject, occurredAt: signedDate, source: .appstore, data: data)
    }

    /// The id of the event of `type` a notification yields: the same notification, delivered
    /// again, yields the same ids.
    static func id(_ notificationUUID: String, _ type: String) -> EventID {
        EventIdentity.derive(named: "appstore/\(notificationUUID.lowercased())/\(type)")
    }
}

/// Reading the fields of Apple's decoded transaction or renewal info.
private struct Fields {
    let object: JSONObject
    let pointer: String

    init(_ object: JSONObject, pointer: String) {
        self.object = object
        self.pointer = pointer
    }

    func string(_ key: String) throws(AppStoreRejection) -> String {
        guard let value = optionalString(key), !value.isEmpty else {
            throw AppStoreRejection(.malformed, "\(key) is missing", at: "\(pointer)/\(key)")
        }
        return value
    }

    func optionalString(_ key: String) -> String? {
        if case .string(let value)? = object[key] { value } else { nil }
    }

    func optionalNumber(_ key: String) -> String? {
        if case .number(let value)? = object[key] { value.description } else { nil }
    }

    /// Apple's milliseconds since 1970, a fraction truncated.
    func optionalTime(_ key: String) -> Timestamp? {
        guard case .number(let number)? = object[key], let value = number.double, value.isFinite, value >= 0, value < 253_402_300_800_000 else { return nil }
        return Timestamp(milliseconds: Int64(value.rounded(.towardZero)))
    }

    func time(_ key: String) throws(AppStoreRejection) -> Timestamp {
        guard let time = optionalTime(key) else {
            throw AppStoreRejection(.malformed, "\(key) is missing or not milliseconds since 1970", at: "\(pointer)/\(key)")
        }
        return time
    }

    /// `freeTrial` for a free-trial discount, else by `offerType`.
    func offer() -> Offer? {
        if optionalString("offerDiscountType") == "FREE_TRIAL" { return .freeTrial }
        guard case .number(let number)? = object["offerType"] else { return nil }
        return switch number.int64 {
        case 1: .introductory
        case 2: .promotional
        case 3: .offerCode
        case 4: .winBack
        default: nil
        }
    }

    /// Apple's price in milliunits as a decimal string: 9990 → "9.99".
    func price() -> String? {
        guard case .number(let number)? = object["price"], let milliunits = number.int64, milliunits >= 0 else { return nil }
        var text = "\(milliunits / 1000)"
        var fraction = String(milliunits % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if !fraction.isEmpty { text += ".\(fraction)" }
        return text
    }
}

import Foundation
import LedgerAppStore
@_spi(Storage) import LedgerCore
import Testing

/// Each notification type and subtype to the events of SPEC §2.3, one rule per test, from
/// notifications minted with Apple's test chain and verified.
@Suite(.enabled(if: Samples.present, Comment(rawValue: Samples.absent)))
struct MappingTests {
    static let signed: Int64 = 1_772_500_000_000                      // 2026-03-03T01:06:40Z
    static let purchase: Int64 = 1_772_357_400_000                    // 2026-03-01T09:30:00Z
    static let expires: Int64 = 1_772_962_200_000                     // a week later

    static let transaction: JSON = [
        "transactionId": "2000000101", "originalTransactionId": "2000000100", "bundleId": "com.example", "productId": "pro.monthly",
        "purchaseDate": .integer(purchase), "expiresDate": .integer(expires), "environment": "Sandbox", "signedDate": .integer(signed),
        "price": 9990, "currency": "EUR", "offerType": 1, "offerDiscountType": "FREE_TRIAL", "offerPeriod": "P1W",
        "appAccountToken": "7E3FB20B-4CDB-47CC-936D-99D65F608138",
    ]
    static let renewal: JSON = [
        "originalTransactionId": "2000000100", "productId": "pro.monthly", "autoRenewProductId": "pro.yearly", "autoRenewStatus": 1,
        "environment": "Sandbox", "signedDate": .integer(signed), "gracePeriodExpiresDate": .integer(expires + 16 * 86_400_000),
    ]

    /// The events of a verified notification of `type`/`subtype` for `user-42`.
    func events(_ type: String, _ subtype: String? = nil, transaction: JSON = MappingTests.transaction, uuid: String = "5a1d0c2e-0000-4000-8000-000000000001") async throws -> [LedgerEvent] {
        let payload = Samples.notification(type, subtype: subtype, uuid: uuid, signedDate: Self.signed, data: [
            ("signedTransactionInfo", .string(try Samples.mint(transaction))),
            ("signedRenewalInfo", .string(try Samples.mint(Self.renewal))),
        ])
        let verified = try await SignedDataVerifier(try Samples.configuration()).verifyNotification(body: Samples.body(try Samples.mint(payload)))
        return try verified.events(subject: "user-42")
    }

    /// The second event's data: what the notification means.
    func meaning(_ type: String, _ subtype: String? = nil) async throws -> EventData? {
        let events = try await events(type, subtype)
        #expect(events.first?.type == AppStoreNotification.type)
        #expect(events.allSatisfy { $0.occurredAt == Timestamp(milliseconds: Self.signed) && $0.source == .appstore && $0.subject == "user-42" })
        return events.count == 2 ? events[1].data : nil
    }

    @Test func subscribedInitialBuyIsAPurchaseWithItsOffer() async throws {
        let expected = SubscriptionPurchased(
            productId: "pro.monthly", transactionId: "2000000101", originalTransactionId: "2000000100",
            purchasedAt: Timestamp(milliseconds: Self.purchase), expiresAt: Timestamp(milliseconds: Self.expires), offer: .freeTrial,
            period: "P1W", price: "9.99", currency: "EUR", environment: .sandbox)
        #expect(try await meaning("SUBSCRIBED", "INITIAL_BUY") == expected.eventData)
        #expect(try await meaning("SUBSCRIBED", "RESUBSCRIBE") == expected.eventData)
        #expect(try await meaning("OFFER_REDEEMED", "INITIAL_BUY") == expected.eventData)
    }

    /// The offer: a free trial by its discount, else by offerType; no period without an offer;
    /// a transaction's fractional milliseconds truncated.
    @Test func offersAndTimesFollowApplesFields() async throws {
        guard case .object(let base) = Self.transaction else { return }
        for (type, offer) in [(1, Offer.introductory), (2, .promotional), (3, .offerCode), (4, .winBack)] {
            var transaction = base
            transaction["offerDiscountType"] = "PAY_AS_YOU_GO"
            transaction["offerType"] = .integer(Int64(type))
            guard case .subscriptionPurchased(let purchase)? = try await events("SUBSCRIBED", "INITIAL_BUY", transaction: .object(transaction)).last?.data else {
                Issue.record("no purchase")
                continue
            }
            #expect(purchase.offer == offer, "offerType \(type)")
            #expect(purchase.period == "P1W")
        }
        var plain = base
        plain["offerType"] = nil
        plain["offerDiscountType"] = nil
        plain["purchaseDate"] = .number(try #require(JSONNumber(Double(Self.purchase) + 0.75)))
        guard case .subscriptionPurchased(let purchase)? = try await events("SUBSCRIBED", "INITIAL_BUY", transaction: .object(plain)).last?.data else {
            Issue.record("no purchase")
            return
        }
        #expect(purchase.offer == nil)
        #expect(purchase.period == nil)
        #expect(purchase.purchasedAt == Timestamp(milliseconds: Self.purchase))
    }

    @Test func didRenewIsARenewalAndBillingRecoverySaysSo() async throws {
        var renewed = SubscriptionRenewed(productId: "pro.monthly", transactionId: "2000000101", originalTransactionId: "2000000100",
                                          purchasedAt: Timestamp(milliseconds: Self.purchase), expiresAt: Timestamp(milliseconds: Self.expires))
        #expect(try await meaning("DID_RENEW") == renewed.eventData)
        renewed.billingRecovery = true
        #expect(try await meaning("DID_RENEW", "BILLING_RECOVERY") == renewed.eventData)
    }

    @Test func didFailToRenewCarriesTheGracePeriodsEnd() async throws {
        let failed = SubscriptionRenewalFailed(originalTransactionId: "2000000100", gracePeriodExpiresAt: Timestamp(milliseconds: Self.expires + 16 * 86_400_000))
        #expect(try await meaning("DID_FAIL_TO_RENEW") == failed.eventData)
        #expect(try await meaning("DID_FAIL_TO_RENEW", "GRACE_PERIOD") == failed.eventData)
        #expect(try await meaning("GRACE_PERIOD_EXPIRED") == SubscriptionGraceExpired(originalTransactionId: "2000000100").eventData)
    }

    @Test func expiredSubtypesAreReasons() async throws {
        for (subtype, reason) in [("VOLUNTARY", ExpirationReason.voluntary), ("BILLING_RETRY", .billingRetry), ("PRICE_INCREASE", .priceIncrease),
                                  ("PRODUCT_NOT_FOR_SALE", .productUnavailable), ("SOMETHING_NEW", .other)] {
            #expect(try await meaning("EXPIRED", subtype) == SubscriptionExpired(originalTransactionId: "2000000100", reason: reason).eventData, "\(subtype)")
        }
    }

    @Test func renewalStatusChangesAutoRenew() async throws {
        #expect(try await meaning("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED") == SubscriptionAutoRenewChanged(originalTransactionId: "2000000100", enabled: false).eventData)
        #expect(try await meaning("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED") == SubscriptionAutoRenewChanged(originalTransactionId: "2000000100", enabled: true).eventData)
    }

    @Test func renewalPreferenceChangesTheProduct() async throws {
        let upgrade = SubscriptionProductChanged(originalTransactionId: "2000000100", fromProductId: "pro.monthly", toProductId: "pro.monthly", effective: .immediate,
                                                 transactionId: "2000000101", purchasedAt: Timestamp(milliseconds: Self.purchase), expiresAt: Timestamp(milliseconds: Self.expires))
        #expect(try await meaning("DID_CHANGE_RENEWAL_PREF", "UPGRADE") == upgrade.eventData)
        #expect(try await meaning("OFFER_REDEEMED", "UPGRADE") == upgrade.eventData)
        let downgrade = SubscriptionProductChanged(originalTransactionId: "2000000100", fromProductId: "pro.monthly", toProductId: "pro.yearly", effective: .nextRenewal)
        #expect(try await meaning("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE") == downgrade.eventData)
        #expect(try await meaning("OFFER_REDEEMED", "DOWNGRADE") == downgrade.eventData)
        let withdrawn = SubscriptionProductChanged(originalTransactionId: "2000000100", fromProductId: "pro.monthly", toProductId: "pro.monthly", effective: .nextRenewal)
        #expect(try await meaning("DID_CHANGE_RENEWAL_PREF") == withdrawn.eventData)
    }

    @Test func refundsRevocationsAndExtensions() async throws {
        #expect(try await meaning("REFUND") == SubscriptionRefunded(transactionId: "2000000101", originalTransactionId: "2000000100").eventData)
        #expect(try await meaning("REFUND_REVERSED") == SubscriptionRefundReversed(transactionId: "2000000101", originalTransactionId: "2000000100").eventData)
        #expect(try await meaning("REVOKE") == SubscriptionRevoked(transactionId: "2000000101", originalTransactionId: "2000000100").eventData)
        #expect(try await meaning("RENEWAL_EXTENDED") == SubscriptionRenewalExtended(transactionId: "2000000101", originalTransactionId: "2000000100",
                                                                                      expiresAt: Timestamp(milliseconds: Self.expires)).eventData)
    }

    /// What changes nothing — and what Apple adds later — is kept as Apple's notification alone.
    @Test func notificationsThatChangeNothingAreKeptAlone() async throws {
        for (type, subtype) in [("TEST", nil), ("CONSUMPTION_REQUEST", nil), ("REFUND_DECLINED", nil), ("PRICE_INCREASE", "PENDING"),
                                ("RENEWAL_EXTENSION", "SUMMARY"), ("ONE_TIME_CHARGE", nil), ("RESCIND_CONSENT", nil), ("METADATA_UPDATE", nil),
                                ("MIGRATION", nil), ("PRICE_CHANGE", nil), ("A_TYPE_FROM_2030", "AND_ITS_SUBTYPE"), ("OFFER_REDEEMED", nil)] as [(String, String?)] {
            let events = try await events(type, subtype)
            #expect(events.map(\.type) == [AppStoreNotification.type], "\(type)/\(subtype ?? "—")")
            guard case .appStoreNotification(let kept) = events.first?.data else { continue }
            #expect(kept.notificationType == type)
            #expect(kept.subtype == subtype)
        }
    }

    /// Apple's notification is kept whole, its nested signed data decoded for support to read.
    @Test func theNotificationIsKeptWithItsSignedDataDecoded() async throws {
        let events = try await events("DID_RENEW")
        guard case .appStoreNotification(let kept) = events.first?.data, case .object(let data)? = kept.payload["data"] else {
            Issue.record("no notification kept")
            return
        }
        #expect(kept.notificationUUID == "5a1d0c2e-0000-4000-8000-000000000001")
        #expect(kept.signedDate == Timestamp(milliseconds: Self.signed))
        #expect(data["signedTransactionInfo"] == Self.transaction)
        #expect(data["signedRenewalInfo"] == Self.renewal)
    }

    /// A retry yields the same ids; another notification, other ids.
    @Test func idsDeriveFromTheNotificationUUID() async throws {
        let first = try await events("DID_RENEW")
        let retry = try await events("DID_RENEW")
        let other = try await events("DID_RENEW", uuid: "5a1d0c2e-0000-4000-8000-000000000002")
        #expect(first.map(\.id) == retry.map(\.id))
        #expect(Set(first.compactMap(\.id)).count == 2)
        #expect(Set(first.compactMap(\.id)).isDisjoint(with: Set(other.compactMap(\.id))))
    }

    @Test func theSubjectIsTheAppAccountTokenLowerCased() async throws {
        let payload = Samples.notification("DID_RENEW", signedDate: Self.signed, data: [("signedTransactionInfo", .string(try Samples.mint(Self.transaction)))])
        let verified = try await SignedDataVerifier(try Samples.configuration()).verifyNotification(body: Samples.body(try Samples.mint(payload)))
        #expect(verified.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        #expect(verified.originalTransactionId == "2000000100")
    }

    /// A downgrade names its next product in the renewal info: without it, it is refused rather
    /// than taken for a withdrawn change.
    @Test func aDowngradeWithoutItsRenewalInfoIsRefused() async throws {
        let payload = Samples.notification("DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE", signedDate: Self.signed,
                                           data: [("signedTransactionInfo", .string(try Samples.mint(Self.transaction)))])
        let verified = try await SignedDataVerifier(try Samples.configuration()).verifyNotification(body: Samples.body(try Samples.mint(payload)))
        #expect(throws: AppStoreRejection.self) { try verified.events(subject: "user-42") }
    }

    /// Without a token on the transaction, the renewal info's names the subject.
    @Test func theRenewalInfosTokenServesWhenTheTransactionHasNone() async throws {
        guard case .object(var transaction) = Self.transaction, case .object(var renewal) = Self.renewal else { return }
        transaction["appAccountToken"] = nil
        renewal["appAccountToken"] = "0C1D2E3F-4A5B-4C6D-8E7F-000000000042"
        let payload = Samples.notification("DID_RENEW", signedDate: Self.signed, data: [
            ("signedTransactionInfo", .string(try Samples.mint(.object(transaction)))),
            ("signedRenewalInfo", .string(try Samples.mint(.object(renewal)))),
        ])
        let verified = try await SignedDataVerifier(try Samples.configuration()).verifyNotification(body: Samples.body(try Samples.mint(payload)))
        #expect(verified.appAccountToken == "0c1d2e3f-4a5b-4c6d-8e7f-000000000042")
    }

    @Test func aRenewalWithoutItsTransactionIsRefused() async throws {
        let payload = Samples.notification("DID_RENEW", signedDate: Self.signed)
        let verified = try await SignedDataVerifier(try Samples.configuration()).verifyNotification(body: Samples.body(try Samples.mint(payload)))
        #expect(throws: AppStoreRejection.self) { try verified.events(subject: "user-42") }
    }

    /// The LedgerAppStore article shows the table the code reads.
    @Test func theArticlesTableIsTheMapping() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = try String(contentsOf: root.appendingPathComponent("Sources/LedgerAppStore/LedgerAppStore.docc/LedgerAppStore.md"), encoding: .utf8)
        #expect(article.contains(AppStoreMapping.markdown), "the article's table differs from AppStoreMapping.rows: paste AppStoreMapping.markdown into it")
        #expect(Set(AppStoreMapping.rows.map(\.type)).count == 23)
        #expect(Set(AppStoreMapping.rows.compactMap(\.subtype)).subtracting(["*"]).count == 17)
    }
}

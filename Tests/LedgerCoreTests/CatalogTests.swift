@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

@Suite struct CatalogTests {
    @Test func jsonToTypedToBinaryToTypedToJSONIsTheIdentityForEveryType() async {
        #expect(everyLayout.count == 51)
        await checkProperty(count: 60, input: Gen.uint64()) { seed in
            var generator = DataGenerator(state: seed)
            for layout in everyLayout {
                var json = generator.data(for: layout)
                if case .failure = layout.decode(json) { json = generator.data(for: layout, allOptionals: true) }
                guard case .success(let typed) = layout.decode(json) else {
                    Issue.record("\(layout.type) v\(layout.schemaVersion) rejected generated data \(JSON.object(json).serialized())")
                    continue
                }
                let binary = layout.binary(typed)
                guard let back = layout.decode(binary: binary) else {
                    Issue.record("\(layout.type) v\(layout.schemaVersion) could not decode its own payload")
                    continue
                }
                #expect(AnyHashable(back) == AnyHashable(typed), "\(layout.type)")
                #expect(layout.json(back) == json, "\(layout.type)")
                if layout.isCurrent {
                    #expect(EventCatalog.decode(type: layout.type, version: layout.schemaVersion, payload: binary).map { AnyHashable($0.payload) } == AnyHashable(typed))
                }
            }
        }
    }

    /// A payload is made in one expression, each field named; what is left out keeps the value
    /// `init()` gives it.
    @Test func payloadsHaveMemberwiseInitialisersDefaultingAsInitDoes() {
        let at = Timestamp(milliseconds: 1_772_357_400_000)
        var byField = SubscriptionPurchased()
        byField.productId = "pro.monthly"
        byField.transactionId = "t1"
        byField.originalTransactionId = "t1"
        byField.purchasedAt = at
        byField.expiresAt = at
        byField.offer = .freeTrial
        #expect(SubscriptionPurchased(productId: "pro.monthly", transactionId: "t1", originalTransactionId: "t1", purchasedAt: at, expiresAt: at, offer: .freeTrial) == byField)
        #expect(SubscriptionPurchased(productId: "pro.monthly") != byField)
        #expect(UsageRecorded(feature: "export") == { var usage = UsageRecorded(); usage.feature = "export"; return usage }())
        #expect(UsageRecorded(feature: "export").count == 1)
        #expect(SessionStarted(deviceId: "d1").timeZone == SessionStarted().timeZone)
        #expect(SubscriptionExpired(originalTransactionId: "t1").reason == SubscriptionExpired().reason)
    }

    @Test func everyCurrentPayloadTypeWrapsIntoItsOwnCase() {
        for type in EventCatalog.payloadTypes {
            let payload = type.init()
            #expect(payload.eventData.type == type.type)
            #expect(EventCatalog.layout(of: type.type, version: type.schemaVersion)?.isCurrent == true)
        }
    }

    @Test func everyCaseOfEventDataNamesItsPayloadsType() {
        for type in EventCatalog.payloadTypes {
            let data = type.init().eventData
            #expect(data.type == type.type)
            #expect(Swift.type(of: data.payload) == type)
            // The fold finds an event's readers at this place.
            #expect(EventCatalog.payloadTypes.indices.contains(data.ordinal) && EventCatalog.payloadTypes[data.ordinal] == type)
        }
    }

    @Test func usageRecordedVersionOneReadsAsVersionTwoWithCountOne() throws {
        let v1 = try #require(EventCatalog.layout(of: "usage.recorded", version: 1))
        let stored = v1.binary(try v1.decode(["feature": "scan"]).get())
        var expected = UsageRecorded()
        expected.feature = "scan"
        expected.count = 1
        #expect(EventCatalog.decode(type: "usage.recorded", version: 1, payload: stored) == .usageRecorded(expected))
        // The stored bytes are version 1's: version 2's layout does not read them.
        #expect(EventCatalog.decode(type: "usage.recorded", version: 2, payload: stored) == nil)
        #expect(EventCatalog.currentVersions["usage.recorded"] == 2)
        // The same from a stored record, as a rebuild reads it (the type resolved from its bytes).
        let draft = EventDraft(subject: "u", type: "usage.recorded", schemaVersion: 1, occurredAt: Timestamp(milliseconds: 5), source: .app, payload: stored)
        let record = EventRecord.encode(draft, version: 1, recordedAt: Timestamp(milliseconds: 6)) + [UInt8](repeating: 0, count: EventRecord.hashSize)
        let folded = try record.withUnsafeBytes { try EventRecord.decodeForFolding($0, position: 1, types: .init(["usage.recorded"])) }
        #expect(folded?.data == .usageRecorded(expected))
        #expect(folded?.storedSchemaVersion == 1)
    }

    @Test func aTruncatedOrPaddedPayloadNeverDecodes() throws {
        let layout = try #require(EventCatalog.layout(of: "subscription.purchased", version: 1))
        var generator = DataGenerator(state: 7)
        let payload = layout.binary(try layout.decode(generator.data(for: layout, allOptionals: true)).get())
        for length in 0..<payload.count {
            #expect(layout.decode(binary: Array(payload[..<length])) == nil)
        }
        #expect(layout.decode(binary: payload + [0]) == nil)
    }

    @Test func aTypedEventIsCheckedByTheSameRulesAsJSON() throws {
        var renewal = SubscriptionRenewed()
        renewal.transactionId = "t2"
        renewal.originalTransactionId = "o1"
        let event = LedgerEvent(subject: "user-42", occurredAt: Timestamp(milliseconds: 0), source: .appstore, data: renewal.eventData)
        let error = #expect(throws: LedgerError.self) { try event.draft() }
        #expect(error?.field == "/data/productId")
        #expect(error?.message == "expected a non-empty string, got \"\"")
    }

    @Test func aTypedEventsDraftDecodesBackToIt() throws {
        var change = SubscriptionProductChanged()
        change.originalTransactionId = "o1"
        change.fromProductId = "pro.monthly"
        change.toProductId = "pro.yearly"
        change.effective = .nextRenewal
        let event = LedgerEvent(subject: "user-42", occurredAt: Timestamp(milliseconds: 5), source: .appstore,
                                meta: ["actor": "apple"], data: change.eventData)
        let draft = try event.draft()
        let stored = StoredEvent(position: 1, version: 1, recordedAt: Timestamp(milliseconds: 6), hash: [], draft: draft)
        let read = try RecordedEvent(stored)
        var expected = event
        expected.id = draft.id
        #expect(read.event == expected)
        // No id given: the same event derives the same id every time.
        #expect(try event.draft().id == draft.id)
    }
}

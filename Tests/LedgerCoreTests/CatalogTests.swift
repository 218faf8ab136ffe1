import LedgerCore
import PropertyBased
import Testing

/// Builds valid `data` for a layout from a seed, guided by each field's schema: what any
/// client could send. Objects have sorted keys and times are canonical, so a round trip must
/// give back exactly the same JSON.
struct DataGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        // SplitMix64: deterministic from the seed the property test draws.
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }

    mutating func text(_ lengths: ClosedRange<Int>) -> String {
        let alphabet = Array("abcXYZ019 .-_/é漢🙂\"\\\n")
        return String((0..<int(lengths)).map { _ in pick(alphabet) })
    }

    mutating func value(for schema: JSONObject) -> JSON {
        if case .array(let cases)? = schema["enum"] { return pick(cases) }
        if case .string(let pattern)? = schema["pattern"] {
            switch pattern {
            case Patterns.time: return .string(Timestamp(milliseconds: Int64(int(0...4_000_000_000_000))).description)
            case Patterns.decimal: return .string("\(int(0...999)).\(int(10...99))")
            case Patterns.currency: return .string(pick(["USD", "EUR", "JPY", "GBP"]))
            case Patterns.period: return .string("P\(int(1...12))\(pick(["Y", "M", "W", "D"]))")
            case Patterns.localDate: return .string("20\(int(10...39))-0\(int(1...9))-1\(int(0...9))")
            case Patterns.timeZone: return .string(pick(["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"]))
            default: Issue.record("no generator for pattern \(pattern)"); return .null
            }
        }
        switch schema["type"] {
        case "boolean": return .bool(next() & 1 == 0)
        case "integer": return .integer(Int64(int(1...1_000_000_000)))
        case "object":
            let keys = Set((0..<int(0...4)).map { _ in text(1...6) }).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            return .object(JSONObject(keys.map { ($0, pick([.null, .bool(true), .integer(Int64(int(0...99))), .string(text(0...8)), .array([.integer(1), "x"])])) }))
        default:
            let minimum = schema["minLength"] == nil ? 0 : 1
            return .string(text(minimum...12))
        }
    }

    /// Valid data for `layout`: required fields always, each optional one half the time
    /// (all of them when a cross-field rule asks for them).
    mutating func data(for layout: Layout, allOptionals: Bool = false) -> JSONObject {
        var object = JSONObject()
        for field in layout.fields where field.isRequired || allOptionals || next() & 1 == 0 {
            object[field.name] = value(for: field.schema)
        }
        return object
    }
}

/// Every layout the catalog knows, current and legacy.
let everyLayout: [Layout] = EventCatalog.typeNames.flatMap { type in
    EventCatalog.versions(of: type).compactMap { EventCatalog.layout(of: type, version: $0) }
}

@Suite struct CatalogTests {
    @Test func jsonToTypedToBinaryToTypedToJSONIsTheIdentityForEveryType() async {
        #expect(everyLayout.count == 51)
        await propertyCheck(count: 60, input: Gen.uint64()) { seed in
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

    @Test func everyCurrentPayloadTypeWrapsIntoItsOwnCase() {
        for type in EventCatalog.payloadTypes {
            let payload = type.init()
            #expect(payload.eventData.type == type.type)
            #expect(EventCatalog.layout(of: type.type, version: type.schemaVersion)?.isCurrent == true)
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

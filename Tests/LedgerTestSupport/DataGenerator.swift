@_spi(Storage) import LedgerCore

/// Builds valid `data` for a layout from a seed, guided by each field's schema: what any
/// client could send. Objects have sorted keys and times are canonical, so a round trip must
/// give back exactly the same JSON.
public struct DataGenerator {
    public var state: UInt64

    public init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        // SplitMix64: deterministic from the seed the property test draws.
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
    public mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }

    public mutating func text(_ lengths: ClosedRange<Int>) -> String {
        let alphabet = Array("abcXYZ019 .-_/é漢🙂\"\\\n")
        return String((0..<int(lengths)).map { _ in pick(alphabet) })
    }

    public mutating func value(for schema: JSONObject) -> JSON {
        if case .array(let cases)? = schema["enum"] { return pick(cases) }
        if case .string(let pattern)? = schema["pattern"] {
            switch pattern {
            case Patterns.time: return .string(Timestamp(milliseconds: Int64(int(0...4_000_000_000_000))).description)
            case Patterns.decimal: return .string("\(int(0...999)).\(int(10...99))")
            case Patterns.currency: return .string(pick(["USD", "EUR", "JPY", "GBP"]))
            case Patterns.period: return .string("P\(int(1...12))\(pick(["Y", "M", "W", "D"]))")
            case Patterns.localDate: return .string("20\(int(10...39))-0\(int(1...9))-1\(int(0...9))")
            case Patterns.timeZone: return .string(pick(["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"]))
            default: return .null   // a new pattern: the round-trip test then fails to decode
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
    @_spi(Storage) public mutating func data(for layout: Layout, allOptionals: Bool = false) -> JSONObject {
        var object = JSONObject()
        for field in layout.fields where field.isRequired || allOptionals || next() & 1 == 0 {
            object[field.name] = value(for: field.schema)
        }
        // A binding names the holding subject of its subscription (`AppStoreSubjectBound.violations`).
        if layout.type == AppStoreSubjectBound.type, case .string(let original) = object["originalTransactionId"] {
            object["from"] = .string(AppStoreSubjectBound.holdingSubject(of: original))
        }
        return object
    }
}

/// Every layout the catalog knows, current and legacy.
@_spi(Storage) public let everyLayout: [Layout] = EventCatalog.typeNames.flatMap { type in
    EventCatalog.versions(of: type).compactMap { EventCatalog.layout(of: type, version: $0) }
}


extension DataGenerator {
    /// A valid event line of any type and layout version, with or without an id and meta,
    /// about one of `subjects` subjects, its time written in a random zone.
    public mutating func eventLine(subjects: Int = 5) -> String {
        let layout = pick(everyLayout)
        var data = self.data(for: layout)
        if case .failure = layout.decode(data) { data = self.data(for: layout, allOptionals: true) }
        var object: JSONObject = [
            "type": .string(layout.type), "subject": .string("user-\(int(0...(subjects - 1)))"),
            "occurredAt": .string(zoned(Timestamp(milliseconds: Int64(int(1_700_000_000_000...1_900_000_000_000))))),
            "source": .string(pick(EventSource.allCases).rawValue), "data": .object(data),
        ]
        if !layout.isCurrent || next() & 1 == 0 { object["schemaVersion"] = .integer(Int64(layout.schemaVersion)) }
        if next() & 1 == 0 { object["id"] = .string(EventID(high: next(), low: next()).description) }
        if next() % 3 == 0 { object["meta"] = ["correlationId": .string(text(1...8))] }
        return JSON.object(object).serialized()
    }

    /// A time written with a random offset and fraction style (the same instant).
    public mutating func zoned(_ t: Timestamp) -> String {
        let offset = int(-12...14) * 60
        let local = Timestamp(milliseconds: t.milliseconds + Int64(offset) * 60_000).description   // …sssZ
        let sign = offset < 0 ? "-" : "+"
        let h = abs(offset) / 60, m = abs(offset) % 60
        let zone = offset == 0 && next() & 1 == 0 ? "Z" : "\(sign)\(h < 10 ? "0" : "")\(h):\(m < 10 ? "0" : "")\(m)"
        return String(local.dropLast()) + zone
    }
}

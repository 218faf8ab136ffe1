/// A JSON value as the ledger reads and writes it: strict, lossless, ordered.
///
/// Foundation's `JSONSerialization` and `JSONDecoder` lose what input validation needs (they
/// take `1.0` for an integer, forget key order and keep the last of two equal keys), so the ledger
/// parses JSON itself: objects keep their members in input order, numbers keep their literal
/// text, and a duplicate key is a syntax error.
public enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSON])
    case object(JSONObject)

    /// The JSON type's name, for messages: `null`, `boolean`, `number`, `string`, `array`, `object`.
    public var kind: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// A whole number that fits in 64 bits.
    public static func integer(_ value: Int64) -> JSON { .number(JSONNumber(value)) }

    /// Which characters a string literal escapes beyond `"`, `\` and the C0 controls, which
    /// JSON itself requires.
    @_spi(Storage) public enum Escaping: Sendable {
        /// Nothing more: the canonical bytes. App Store payloads are stored as this text, so
        /// derived ids, the hash chain and policy hashes are computed over it; changing it
        /// would change those of existing stores. Never change it.
        case canonical
        /// Also DEL and the C1 controls (U+007F–U+009F) as `\u00XX`, as C0 is: JSON written
        /// out, which a terminal may show (U+009B alone starts an escape sequence). It reads
        /// back as the same value.
        case output
    }

    /// The value written as compact JSON. With `sortedKeys`, object keys are in byte order at
    /// every level (the canonical form export and derived ids use).
    public func serialized(sortedKeys: Bool = false) -> String {
        serialized(sortedKeys: sortedKeys, escaping: .canonical)
    }

    /// The value written as compact JSON, escaping as `escaping` says: `.output` for what a
    /// command or a route writes out.
    @_spi(Storage) public func serialized(sortedKeys: Bool = false, escaping: Escaping) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(into: &out, sortedKeys: sortedKeys, escaping: escaping)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON of this value to `out`.
    public func write(into out: inout [UInt8], sortedKeys: Bool = false) {
        write(into: &out, sortedKeys: sortedKeys, escaping: .canonical)
    }

    /// Appends the compact JSON of this value to `out`, escaping as `escaping` says.
    @_spi(Storage) public func write(into out: inout [UInt8], sortedKeys: Bool = false, escaping: Escaping) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.text.utf8)
        case .string(let s): JSON.writeString(s, into: &out, escaping: escaping)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out, sortedKeys: sortedKeys, escaping: escaping)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            let pairs = sortedKeys ? object.pairs.sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) } : object.pairs
            for (i, (key, value)) in pairs.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, into: &out, escaping: escaping)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out, sortedKeys: sortedKeys, escaping: escaping)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes a JSON string literal: `"` and `\` escaped, control characters as `\n`, `\t`…
    /// or `\u00XX` (lower-case hex), everything else as UTF-8; with `.output`, DEL and C1 as
    /// `\u00XX` too.
    static func writeString(_ s: String, into out: inout [UInt8], escaping: Escaping = .canonical) {
        // A hex digit from arithmetic: a table would be an array allocated per call.
        func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }
        out.append(UInt8(ascii: "\""))
        // DEL is one byte in UTF-8; U+0080–U+009F are the two bytes 0xC2 0x80–0x9F.
        var lead = false
        for byte in s.utf8 {
            if escaping == .output {
                if lead {
                    lead = false
                    if byte <= 0x9F {
                        out.append(contentsOf: "\\u00".utf8)
                        out.append(hex(byte >> 4))
                        out.append(hex(byte & 0xF))
                        continue
                    }
                    out.append(0xC2)
                }
                if byte == 0xC2 {
                    lead = true
                    continue
                }
                if byte == 0x7F {
                    out.append(contentsOf: "\\u007f".utf8)
                    continue
                }
            }
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex(byte >> 4))
                out.append(hex(byte & 0xF))
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// A JSON number, kept as its literal text so that nothing is rounded or reinterpreted.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number as written (validated against RFC 8259's grammar).
    public let text: String

    /// A number from its literal text, which must already be valid JSON number syntax.
    init(literal: String) { text = literal }

    /// A whole number.
    public init(_ value: Int64) {
        // Single digits (most counts a view shows) from a table: `String(_:)` goes through the
        // generic integer description, about 170 instructions each.
        text = value >= 0 && value < 10 ? Self.digits[Int(value)] : String(value)
    }

    private static let digits = (0 ..< 10).map { String($0) }

    /// A number with a fraction, in Swift's shortest round-tripping form; `nil` for an infinity
    /// or NaN, which JSON cannot hold.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        text = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// Whether it is written as a whole number: no fraction and no exponent (`1.0` is not).
    public var isInteger: Bool { !text.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") } }

    /// The value, if it is written as a whole number that fits in 64 bits.
    public var int64: Int64? { isInteger ? Int64(text) : nil }

    /// The value as a double (may round).
    public var double: Double? { Double(text) }

    public var description: String { text }
}

/// A JSON object: members in the order they were written; keys are unique.
public struct JSONObject: Sendable, Hashable {
    /// One `"key": value` pair.
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSON
        public init(key: String, value: JSON) {
            self.key = key
            self.value = value
        }
    }

    /// The members in order, as pairs: a literal's pairs are kept as they come (views build
    /// their JSON from literals on every query; turning each pair into a `Member` cost a copy,
    /// and the runtime's generic destruction of the literal's tuples, per member).
    private(set) var pairs: [(String, JSON)]

    /// The members in order (each made from its pair as it is read).
    public var members: LazyMapCollection<[(String, JSON)], Member> { pairs.lazy.map { Member(key: $0.0, value: $0.1) } }

    /// An object with these members; a later member with a key already present replaces it.
    public init(_ members: [(String, JSON)] = []) {
        self.pairs = []
        for (key, value) in members { self[key] = value }
    }

    init(unique pairs: [(String, JSON)]) { self.pairs = pairs }

    /// The value under `key`, or `nil` when the key is absent. Setting appends a new key or
    /// replaces the value in place; setting `nil` removes it.
    public subscript(key: String) -> JSON? {
        get { pairs.first { $0.0 == key }?.1 }
        set {
            if let i = pairs.firstIndex(where: { $0.0 == key }) {
                if let newValue { pairs[i].1 = newValue } else { pairs.remove(at: i) }
            } else if let newValue {
                pairs.append((key, newValue))
            }
        }
    }

    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.pairs.count == b.pairs.count && zip(a.pairs, b.pairs).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(pairs.count)
        for (key, value) in pairs {
            hasher.combine(key)
            hasher.combine(value)
        }
    }

    /// The keys in order.
    public var keys: [String] { pairs.map(\.0) }
}

/// JSON pointers (RFC 6901) as error messages name fields: `/data/expiresAt`, `/` for the whole.
public enum JSONPointer {
    /// The pointer to the value reached through `components` (keys or array indexes).
    public static func make(_ components: [String]) -> String {
        guard !components.isEmpty else { return "/" }
        var out = ""
        for component in components {
            out += "/"
            for character in component {
                switch character {
                case "~": out += "~0"
                case "/": out += "~1"
                default: out.append(character)
                }
            }
        }
        return out
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(JSONObject(literal: elements)) }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// An object with these members in order.
    public init(dictionaryLiteral elements: (String, JSON)...) { self.init(literal: elements) }

    /// The members of a literal, in order: its keys are distinct as written (checked in debug
    /// builds), so nothing is searched. Views build their JSON this way on every query.
    init(literal elements: [(String, JSON)]) {
        assert(Set(elements.map(\.0)).count == elements.count, "a JSON object literal repeats a key")
        self.init(unique: elements)
    }
}

extension JSON {
    /// The value indented by two spaces per level, keys in their order, for files people read.
    /// Arrays of scalars stay on one line.
    public func pretty(indent: Int = 0) -> String {
        let pad = String(repeating: "  ", count: indent + 1), end = String(repeating: "  ", count: indent)
        switch self {
        case .array(let items) where items.contains(where: { if case .object = $0 { true } else if case .array = $0 { true } else { false } }):
            return "[\n" + items.map { pad + $0.pretty(indent: indent + 1) }.joined(separator: ",\n") + "\n" + end + "]"
        case .object(let object) where !object.members.isEmpty:
            let body = object.members.map { member in
                pad + JSON.string(member.key).serialized() + ": " + member.value.pretty(indent: indent + 1)
            }
            return "{\n" + body.joined(separator: ",\n") + "\n" + end + "}"
        case .array(let items):
            return "[" + items.map { $0.serialized() }.joined(separator: ", ") + "]"
        default:
            return serialized()
        }
    }
}

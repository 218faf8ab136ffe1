/// How one kind of data value is read from JSON, written to JSON and to the binary payload,
/// and described in JSON Schema. Every field of every event type uses one of these, so the
/// strict decoder, the binary codec and the generated schemas cannot drift apart.
@_spi(Storage) public struct ValueCodec<Value: Sendable & Hashable>: Sendable {
    /// The JSON Schema of a valid value.
    public let schema: JSONObject
    /// What a valid value is, for messages: "expected <this>, got 42".
    public let expected: String
    /// The whole message for a value `fromJSON` refuses, when the codec has a better one than
    /// "expected …, got …" (a time outside years 0000–9999, a missing zone), or `nil`.
    let problem: @Sendable (JSON) -> String?
    /// A rule every value appended must keep beyond its form (a time within years 0000–9999):
    /// the message when it breaks it, else `nil`. Checked on input, JSON or typed, never on
    /// read: events already stored are read as they are. `nil` for a codec with no such rule.
    let rule: (@Sendable (Value) -> String?)?
    let fromJSON: @Sendable (JSON) -> Value?
    let toJSON: @Sendable (Value) -> JSON
    let write: @Sendable (Value, inout [UInt8]) -> Void
    let read: @Sendable (inout PayloadReader) -> Value?

    init(schema: JSONObject, expected: String, fromJSON: @escaping @Sendable (JSON) -> Value?,
         toJSON: @escaping @Sendable (Value) -> JSON, write: @escaping @Sendable (Value, inout [UInt8]) -> Void,
         read: @escaping @Sendable (inout PayloadReader) -> Value?, problem: @escaping @Sendable (JSON) -> String? = { _ in nil },
         rule: (@Sendable (Value) -> String?)? = nil) {
        self.problem = problem
        self.rule = rule
        self.schema = schema
        self.expected = expected
        self.fromJSON = fromJSON
        self.toJSON = toJSON
        self.write = write
        self.read = read
    }
}

extension ValueCodec where Value == String {
    /// A string whose value is checked by `isValid`; stored as length-prefixed UTF-8.
    static func string(schema: JSONObject, expected: String, isValid: @escaping @Sendable (String) -> Bool,
                       rule: (@Sendable (String) -> String?)? = nil) -> Self {
        Self(schema: schema, expected: expected,
             fromJSON: { json in
                 guard case .string(let s) = json, isValid(s) else { return nil }
                 return s
             },
             toJSON: { .string($0) },
             write: { value, out in out.appendBytes(value.utf8) },
             read: { reader in reader.string().flatMap { isValid($0) ? $0 : nil } },
             rule: rule)
    }

    /// Any string, including the empty one (free text: notes, reasons).
    public static let text = string(schema: ["type": "string"], expected: "a string") { _ in true }

    /// A non-empty string: product, transaction, message and task ids, feature and kind names.
    public static let identifier = string(schema: ["type": "string", "minLength": 1], expected: "a non-empty string") { !$0.isEmpty }

    /// Another subject (a family organizer, the subject that held App Store events): 1…256 bytes.
    public static let subject = string(schema: ["type": "string", "minLength": 1, "maxLength": .integer(Int64(EventLimits.maxSubjectBytes))],
                                       expected: "a subject of 1…\(EventLimits.maxSubjectBytes) bytes") { EventLimits.subjectProblem($0) == nil }

    /// A price as a decimal string, such as `"9.99"` (never a JSON number: no binary rounding).
    public static let decimal = string(schema: ["type": "string", "pattern": .string(Patterns.decimal)],
                                       expected: "a decimal string such as \"9.99\"", isValid: Patterns.isDecimal)

    /// An ISO 4217 currency code: three capital letters.
    public static let currency = string(schema: ["type": "string", "pattern": .string(Patterns.currency)],
                                        expected: "a three-letter currency code such as \"USD\"", isValid: Patterns.isCurrency)

    /// An ISO 8601 period of whole years, months, weeks or days: `P1M`, `P1Y`, `P3D`, `P1Y6M`.
    public static let period = string(schema: ["type": "string", "pattern": .string(Patterns.period)],
                                      expected: "an ISO 8601 period such as \"P1M\" or \"P1Y\"", isValid: Patterns.isPeriod)

    /// A local calendar date, `YYYY-MM-DD`, that the calendar has (no 31 February). The pattern
    /// cannot know month lengths: the calendar is an input rule, so a date already stored is
    /// read as it is.
    public static let localDate = string(schema: ["type": "string", "pattern": .string(Patterns.localDate)],
                                         expected: "a local date YYYY-MM-DD", isValid: Patterns.isLocalDate, rule: Patterns.calendarProblem)

    /// An IANA time-zone name such as `Europe/Berlin` or `UTC`. A name that is not one would
    /// count the device's days in UTC without a word: every field of this codec refuses, on
    /// input, a name missing from the catalog's own list (`Patterns.timeZoneNames`, not the
    /// machine's database, so the same event is accepted everywhere); events already stored are
    /// read as they are.
    public static let timeZone = string(schema: ["type": "string", "pattern": .string(Patterns.timeZone)],
                                        expected: "an IANA time-zone name such as \"Europe/Berlin\"", isValid: Patterns.isTimeZone,
                                        rule: Patterns.timeZoneProblem)
}

extension ValueCodec where Value == Timestamp {
    /// An RFC 3339 time with a zone, within years 0000–9999 once in UTC; JSON out is always
    /// UTC with milliseconds; binary is i64 ms.
    public static let time = ValueCodec(
        schema: ["type": "string", "pattern": .string(Patterns.time)],
        expected: "an RFC 3339 time",
        fromJSON: { json in
            guard case .string(let s) = json else { return nil }
            return Timestamp(rfc3339: s)
        },
        toJSON: { .string($0.description) },
        write: { value, out in out.appendFixed(UInt64(bitPattern: value.milliseconds)) },
        read: { reader in reader.fixed().map { Timestamp(milliseconds: Int64(bitPattern: $0)) } },
        problem: Timestamp.inputProblem,
        rule: Timestamp.rangeProblem)
}

extension ValueCodec where Value == Bool {
    /// `true` or `false`.
    public static let bool = ValueCodec(
        schema: ["type": "boolean"], expected: "true or false",
        fromJSON: { json in
            guard case .bool(let b) = json else { return nil }
            return b
        },
        toJSON: { .bool($0) },
        write: { value, out in out.append(value ? 1 : 0) },
        read: { reader in
            switch reader.byte() {
            case 0: false
            case 1: true
            default: nil
            }
        })
}

extension ValueCodec where Value == Int64 {
    /// A whole number ≥ 1 written without a fraction or exponent (`1`, never `1.0`).
    public static let positiveCount = ValueCodec(
        schema: ["type": "integer", "minimum": 1], expected: "a whole number from 1",
        fromJSON: { json in
            guard case .number(let n) = json, let v = n.int64, v >= 1 else { return nil }
            return v
        },
        toJSON: { .integer($0) },
        write: { value, out in out.appendVarint(UInt64(bitPattern: value)) },
        read: { reader in reader.varint().flatMap { $0 >= 1 && $0 <= UInt64(Int64.max) ? Int64($0) : nil } })
}

extension ValueCodec where Value == JSONObject {
    /// Any JSON object, kept as its canonical (sorted-key) text.
    public static let object = ValueCodec(
        schema: ["type": "object"], expected: "an object",
        fromJSON: { json in
            guard case .object(let o) = json else { return nil }
            return o
        },
        toJSON: { .object($0) },
        write: { value, out in out.appendBytes(Array(JSON.object(value).serialized(sortedKeys: true).utf8)) },
        read: { reader in
            guard let bytes = reader.lengthPrefixed(), case .object(let o)? = try? JSONParser.parse(Array(bytes)) else { return nil }
            return o
        })
}

extension ValueCodec where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// One of an enumeration's raw values, stored as its text (cases may be added later
    /// without renumbering anything stored).
    public static var choice: ValueCodec {
        let names = Value.allCases.map(\.rawValue)
        return ValueCodec(
            schema: ["type": "string", "enum": .array(names.map { .string($0) })],
            expected: "one of " + names.joined(separator: ", "),
            fromJSON: { json in
                guard case .string(let s) = json else { return nil }
                return Value(rawValue: s)
            },
            toJSON: { .string($0.rawValue) },
            write: { value, out in out.appendBytes(value.rawValue.utf8) },
            read: { reader in reader.string().flatMap(Value.init(rawValue:)) })
    }
}

/// Reads a binary payload in place (a stored record's bytes are read where they lie); every
/// read returns `nil` past the end or on a malformed value.
struct PayloadReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func fixed() -> UInt64? {
        guard bytes.count - offset >= 8 else { return nil }
        defer { offset += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count, shift < 64 {
            let b = bytes[offset]
            offset += 1
            value |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    mutating func lengthPrefixed() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
        defer { offset += Int(length) }
        return UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
    }

    mutating func string() -> String? {
        lengthPrefixed().flatMap { StrictUTF8.string($0) }
    }
}

/// The patterns of the string codecs, written once for both the Swift check and the schema.
/// Each Swift check accepts exactly what its pattern does.
@_spi(Storage) public enum Patterns {
    public static let time = "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
    public static let decimal = "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?$"
    public static let currency = "^[A-Z]{3}$"
    public static let period = "^P([0-9]+[YMWD])+$"
    public static let localDate = "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
    public static let timeZone = "^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$"

    private static func digit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }

    static func isDecimal(_ s: String) -> Bool {
        var c = Array(s.utf8)[...]
        if c.first == UInt8(ascii: "-") { c = c.dropFirst() }
        let whole = c.prefix(while: digit)
        guard !whole.isEmpty, whole.count == 1 || whole.first != UInt8(ascii: "0") else { return false }
        c = c.dropFirst(whole.count)
        if c.isEmpty { return true }
        guard c.first == UInt8(ascii: "."), c.count > 1 else { return false }
        return c.dropFirst().allSatisfy(digit)
    }

    static func isCurrency(_ s: String) -> Bool {
        s.utf8.count == 3 && s.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
    }

    static func isPeriod(_ s: String) -> Bool {
        var c = Array(s.utf8)[...]
        guard c.first == UInt8(ascii: "P") else { return false }
        c = c.dropFirst()
        guard !c.isEmpty else { return false }
        while !c.isEmpty {
            let n = c.prefix(while: digit)
            guard !n.isEmpty else { return false }
            c = c.dropFirst(n.count)
            guard let unit = c.first, "YMWD".utf8.contains(unit) else { return false }
            c = c.dropFirst()
        }
        return true
    }

    static func isLocalDate(_ s: String) -> Bool {
        let c = Array(s.utf8)
        guard c.count == 10, c[4] == UInt8(ascii: "-"), c[7] == UInt8(ascii: "-"),
              [0, 1, 2, 3, 5, 6, 8, 9].allSatisfy({ digit(c[$0]) })
        else { return false }
        let month = Int(c[5] - 48) * 10 + Int(c[6] - 48), day = Int(c[8] - 48) * 10 + Int(c[9] - 48)
        return (1...12).contains(month) && (1...31).contains(day)
    }

    /// For a `YYYY-MM-DD` the pattern takes, why the calendar does not have it ("\"2026-02-31\"
    /// is not a calendar date: February 2026 has 28 days"), else `nil`.
    static func calendarProblem(_ s: String) -> String? {
        let c = Array(s.utf8)
        guard isLocalDate(s) else { return nil }
        func number(_ range: Range<Int>) -> Int { c[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } }
        let (year, month, day) = (number(0..<4), number(5..<7), number(8..<10))
        guard day > CivilDate.daysIn(month: month, year: year) else { return nil }
        return "\"\(s)\" " + CivilDate.monthLengthProblem(year: year, month: month)
    }

    /// For a zone name the pattern takes, the message when the catalog's list does not hold it.
    static func timeZoneProblem(_ s: String) -> String? {
        timeZoneNames.contains(s) ? nil : "unknown time zone \"\(s)\"; expected an IANA name such as \"Europe/Berlin\""
    }

    static func isTimeZone(_ s: String) -> Bool {
        func letter(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }
        func part(_ c: UInt8) -> Bool { letter(c) || digit(c) || c == UInt8(ascii: "_") || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") }
        // One pass, no split (a rebuild checks the zone of every session it reads): a letter
        // first, then parts, each "/" between two non-empty segments.
        let slash = UInt8(ascii: "/")
        guard let head = s.utf8.first, letter(head) else { return false }
        var previous = head
        for c in s.utf8.dropFirst() {
            guard c == slash ? previous != slash : part(c) else { return false }
            previous = c
        }
        return previous != slash
    }
}

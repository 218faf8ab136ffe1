@_spi(Storage) import LedgerCore

/// A value a read model's state is made of, with a compact, deterministic binary encoding:
/// the same value always encodes to the same bytes, so states built incrementally and by a
/// rebuild can be compared byte for byte.
///
/// Integers, booleans, strings, timestamps, arrays, optionals, `Dated` facts and enums with
/// `UInt8` or `String` raw values already are; a struct becomes one by listing its fields
/// once (`StateRecord`).
public protocol StateValue: Sendable {
    static func encode(_ value: Self, to encoder: inout StateEncoder)
    static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self
}

/// A struct whose encoding is its fields', in the order its one `code(_:)` method names them:
/// the one place a state's layout is written, read both ways — encoding reads each field,
/// decoding (from `init()`) sets it.
///
/// ```swift
/// public struct State: ModelState {
///     public var passes: [Dated<String>] = []
///     public var cancellations: [Dated<String>] = []
///     public init() {}
///     public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
///         try coder.code(&passes); try coder.code(&cancellations)
///     }
/// }
/// ```
public protocol StateRecord: StateValue {
    init()
    /// Codes each field in order: `coder.code(&field)`.
    mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged)
}

extension StateRecord {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) {
        // Encoding reads the fields only, so the copy shares its storage and nothing is copied;
        // the encoder moves into the coder and back, so its bytes are never shared (and copied).
        var copy = value
        var coder = StateCoder(encoding: encoder)
        encoder = StateEncoder()
        try? copy.code(&coder)   // encoding never throws
        encoder = coder.finishEncoding()
    }

    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
        var value = Self()
        // The decoder moves into the coder and back, so its window is never shared (and copied);
        // after a throw it is spent, as the whole decode fails.
        var coder = StateCoder(decoding: decoder)
        decoder = StateDecoder(UnsafeRawBufferPointer(start: nil, count: 0))
        try value.code(&coder)
        decoder = coder.finishDecoding()
        return value
    }
}

/// A `StateRecord`'s fields on their way out (encoding: each is read) or in (decoding: each
/// is set), one method for both, so a record's layout is written once.
public struct StateCoder {
    // Both are held, the one not in use empty (neither allocates): each field then reads or
    // writes in place, where optionals had to be taken out and put back for every field.
    private var encoder: StateEncoder
    private var decoder: StateDecoder
    private let decoding: Bool

    init(encoding encoder: StateEncoder) {
        self.encoder = encoder
        decoder = StateDecoder(UnsafeRawBufferPointer(start: nil, count: 0))
        decoding = false
    }

    init(decoding decoder: StateDecoder) {
        encoder = StateEncoder()
        self.decoder = decoder
        decoding = true
    }

    /// Whether this coder sets the fields (decoding): a record builds what it derives from
    /// them then.
    var isDecoding: Bool { decoding }

    /// Encodes `value`, or sets it to the value decoded.
    public mutating func code<Value: StateValue>(_ value: inout Value) throws(StateDecoder.Damaged) {
        if decoding {
            value = try Value.decode(from: &decoder)
        } else {
            Value.encode(value, to: &encoder)
        }
    }

    /// Codes a record's fields in this coder: the bytes `Value.encode` and `decode` make, without
    /// the coder of its own they make and drop for each record. (`package`: the models of this
    /// package pick these when they name a record field; a model elsewhere gets the same bytes
    /// from `code(_:)` above.)
    package mutating func code<Value: StateRecord>(_ value: inout Value) throws(StateDecoder.Damaged) {
        if decoding {
            value = Value()
            try value.code(&self)
        } else {
            try? value.code(&self)   // as `StateRecord.encode`: a record's throw stops that record alone
        }
    }

    /// Codes an optional record as `Optional`'s encoding does, its fields in this coder.
    package mutating func code<Value: StateRecord>(_ value: inout Value?) throws(StateDecoder.Damaged) {
        if decoding {
            guard try decoder.bool() else {
                value = nil
                return
            }
            var record = Value()
            try record.code(&self)
            value = consume record
        } else {
            encoder.write(value != nil)
            guard var record = value else { return }
            try? record.code(&self)
        }
    }

    /// Codes an array of records as `Array`'s encoding does, each record's fields in this coder.
    package mutating func code<Element: StateRecord>(_ values: inout [Element]) throws(StateDecoder.Damaged) {
        if decoding {
            let count = try decoder.count()
            var decoded: [Element] = []
            decoded.reserveCapacity(count)
            for _ in 0 ..< count {
                var record = Element()
                try record.code(&self)
                decoded.append(consume record)
            }
            values = decoded
        } else {
            encoder.write(UInt64(values.count))
            for element in values {
                var record = element   // shares its storage: encoding reads the fields only
                try? record.code(&self)
            }
        }
    }

    /// Codes an array of dated records as `Array` and `Dated`'s encodings do, each record's
    /// fields in this coder.
    package mutating func code<Value: StateRecord>(_ values: inout [Dated<Value>]) throws(StateDecoder.Damaged) {
        if decoding {
            let count = try decoder.count()
            var decoded: [Dated<Value>] = []
            decoded.reserveCapacity(count)
            for _ in 0 ..< count {
                let at = try decoder.timestamp()
                let position = try decoder.uint()
                var record = Value()
                try record.code(&self)
                decoded.append(Dated(at: at, position: position, value: consume record))
            }
            values = decoded
        } else {
            encoder.write(UInt64(values.count))
            for fact in values {
                encoder.write(fact.at)
                encoder.write(fact.position)
                var record = fact.value
                try? record.code(&self)
            }
        }
    }

    /// Codes the fields `body` names as a part of its own: its length, then its bytes, encoded
    /// afresh (no string or time written before it shortens what it writes), so that its bytes
    /// can be kept as they are and written back unread (`nested(unread:_:)`).
    package mutating func nested(_ body: (inout StateCoder) throws(StateDecoder.Damaged) -> Void) throws(StateDecoder.Damaged) {
        try part(continuing: false, body)
    }

    /// Codes the fields `body` names as a part a reader of the fields before may pass over
    /// (`decode(_:leavingLastPart:)`): its length, then its bytes, which go on from the fields
    /// before (a string written there is a back reference here, a time a difference), unlike
    /// `nested(_:)`'s. What follows the part, if anything, goes on from the fields before it.
    package mutating func lastPart(_ body: (inout StateCoder) throws(StateDecoder.Damaged) -> Void) throws(StateDecoder.Damaged) {
        try part(continuing: true, body)
    }

    /// A part: its length, then the fields `body` names, coded afresh or `continuing` the
    /// string window and last time of the fields before it.
    private mutating func part(continuing: Bool, _ body: (inout StateCoder) throws(StateDecoder.Damaged) -> Void) throws(StateDecoder.Damaged) {
        if decoding {
            let bytes = try decoder.part()
            var inner = StateCoder(decoding: continuing ? decoder.continuation(bytes) : StateDecoder(bytes))
            try body(&inner)
            guard inner.decoder.isAtEnd else { throw StateDecoder.Damaged(what: "trailing bytes in a nested part") }
        } else {
            var inner = StateCoder(encoding: continuing ? encoder.continuation() : StateEncoder())
            try? body(&inner)   // encoding never throws
            encoder.writePart(inner.encoder.bytes)
        }
    }

    /// A nested part (`nested(_:)`) left unread: decoding keeps its bytes in `unread`; encoding
    /// writes `unread` when there are some, else what `body` encodes.
    package mutating func nested(unread: inout [UInt8]?, _ body: (inout StateCoder) throws(StateDecoder.Damaged) -> Void) throws(StateDecoder.Damaged) {
        if decoding {
            unread = Array(try decoder.part())
        } else if let bytes = unread {
            encoder.writePart(bytes)
        } else {
            try nested(body)
        }
    }

    /// Decodes the fields `body` names from `bytes`, then passes over the part (`lastPart`)
    /// that must end them, unread: a state's parts a view does not read
    /// (`ModelState.decodeForView`).
    package static func decode(_ bytes: UnsafeRawBufferPointer, leavingLastPart body: (inout StateCoder) throws(StateDecoder.Damaged) -> Void) throws(StateDecoder.Damaged) {
        var coder = StateCoder(decoding: StateDecoder(bytes))
        try body(&coder)
        _ = try coder.decoder.part()
        guard coder.decoder.isAtEnd else { throw StateDecoder.Damaged(what: "\(coder.decoder.remaining) trailing bytes") }
    }

    /// Decodes a nested part's bytes (kept by `nested(unread:_:)`) into the fields `body` names.
    package static func decodeNested(_ bytes: [UInt8], _ body: (inout StateCoder) throws(StateDecoder.Damaged) -> Void) throws(StateDecoder.Damaged) {
        let result = bytes.withUnsafeBytes { buffer -> Result<Void, StateDecoder.Damaged> in
            var inner = StateCoder(decoding: StateDecoder(buffer))
            do throws(StateDecoder.Damaged) {
                try body(&inner)
            } catch {
                return .failure(error)
            }
            return inner.decoder.isAtEnd ? .success(()) : .failure(StateDecoder.Damaged(what: "trailing bytes in a nested part"))
        }
        try result.get()
    }

    fileprivate consuming func finishEncoding() -> StateEncoder { encoder }
    fileprivate consuming func finishDecoding() -> StateDecoder { decoder }
}

extension StateValue {
    /// The value's encoding on its own.
    public var encoded: [UInt8] {
        var encoder = StateEncoder()
        Self.encode(self, to: &encoder)
        return encoder.bytes
    }

    /// Decodes what `encoded` made; trailing bytes are damage.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(StateDecoder.Damaged) -> Self {
        var decoder = StateDecoder(bytes)
        let value = try decode(from: &decoder)
        guard decoder.isAtEnd else { throw StateDecoder.Damaged(what: "\(decoder.remaining) trailing bytes") }
        return value
    }
}

/// Writes the compact encoding: unsigned LEB128 integers (zig-zag for signed ones), and two
/// things states repeat made small:
///
/// - **Timestamps** as the zig-zag difference from the timestamp written before (the first
///   from 0): a renewal's purchase is its event's time, its period ends a month on.
/// - **Strings**: a string equal to one of the last `window` distinct strings written is its
///   slot there (`slot << 1 | 1`, one byte); any other is its UTF-8 length (`length << 1`)
///   and bytes. A subscription's original transaction id and product id, repeated by every
///   renewal, take a byte each.
///
/// Both depend only on what was written before, so the encoding stays deterministic.
public struct StateEncoder: Sendable {
    public private(set) var bytes: [UInt8] = []
    private var recent = RecentStrings()
    private var lastTime: Int64 = 0
    static let window = 8
    /// The bytes an encoder makes room for at its first write: most states fit, where growing
    /// from nothing took a copy at each doubling.
    static let initialCapacity = 64

    public init() {}

    public mutating func write(_ value: UInt64) {
        if bytes.capacity == 0 { bytes.reserveCapacity(Self.initialCapacity) }
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func write(_ value: Int64) { write(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }
    public mutating func write(_ value: UInt8) {
        if bytes.capacity == 0 { bytes.reserveCapacity(Self.initialCapacity) }
        bytes.append(value)
    }

    public mutating func write(_ value: Bool) { write(UInt8(value ? 1 : 0)) }

    public mutating func write(_ value: Timestamp) {
        write(value.milliseconds &- lastTime)
        lastTime = value.milliseconds
    }

    /// An encoder for a part that goes on from what this one wrote: its strings and last
    /// time are known to it (`StateCoder.lastPart`).
    func continuation() -> StateEncoder {
        var continued = StateEncoder()
        (continued.recent, continued.lastTime) = (recent, lastTime)
        return continued
    }

    /// A nested part's bytes, after their length.
    mutating func writePart(_ part: [UInt8]) {
        write(UInt64(part.count))
        bytes.append(contentsOf: part)
    }

    public mutating func write(_ value: String) {
        if let slot = recent.slot(of: value) {
            write(UInt64(slot) << 1 | 1)
            return
        }
        let utf8 = value.utf8
        write(UInt64(utf8.count) << 1)
        bytes.append(contentsOf: utf8)
        recent.add(value)
    }
}

/// Reads what `StateEncoder` wrote. Damage (a truncated or malformed state) throws, never crashes.
public struct StateDecoder {
    /// A state's bytes are not an encoding this code reads.
    public struct Damaged: Error, Sendable, CustomStringConvertible {
        public var what: String
        public init(what: String) { self.what = what }
        public var description: String { what }
    }

    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    private var recent = RecentStrings()
    private var lastTime: Int64 = 0

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    public var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    /// A decoder for `part`, going on from what this one read (`StateEncoder.continuation`).
    func continuation(_ part: UnsafeRawBufferPointer) -> StateDecoder {
        var continued = StateDecoder(part)
        (continued.recent, continued.lastTime) = (recent, lastTime)
        return continued
    }

    public mutating func uint() throws(Damaged) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count, shift < 64 else { throw Damaged(what: "bad integer at byte \(offset)") }
            let b = bytes[offset]
            offset += 1
            value |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return value }
            shift += 7
        }
    }

    public mutating func int() throws(Damaged) -> Int64 {
        let raw = try uint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    public mutating func byte() throws(Damaged) -> UInt8 {
        guard offset < bytes.count else { throw Damaged(what: "truncated at byte \(offset)") }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func bool() throws(Damaged) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw Damaged(what: "bad boolean at byte \(offset - 1)")
        }
    }

    public mutating func timestamp() throws(Damaged) -> Timestamp {
        lastTime = lastTime &+ (try int())
        return Timestamp(milliseconds: lastTime)
    }

    public mutating func string() throws(Damaged) -> String {
        let code = try uint()
        if code & 1 == 1 {
            let slot = Int(clamping: code >> 1)
            guard let text = recent.string(at: slot) else { throw Damaged(what: "bad string reference at byte \(offset)") }
            return text
        }
        let length = code >> 1
        guard length <= UInt64(bytes.count - offset) else { throw Damaged(what: "truncated string at byte \(offset)") }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
        offset += Int(length)
        guard let text = StrictUTF8.string(slice) else { throw Damaged(what: "bad UTF-8 at byte \(offset)") }
        recent.add(text)
        return text
    }

    /// A nested part's bytes (its length first), left undecoded.
    mutating func part() throws(Damaged) -> UnsafeRawBufferPointer {
        let length = try uint()
        guard length <= UInt64(bytes.count - offset) else { throw Damaged(what: "truncated nested part at byte \(offset)") }
        defer { offset += Int(length) }
        return UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
    }

    /// A count of elements still to come, checked against the bytes left (each takes one at least).
    public mutating func count() throws(Damaged) -> Int {
        let count = try uint()
        guard count <= UInt64(bytes.count - offset) else { throw Damaged(what: "bad count \(count) at byte \(offset)") }
        return Int(count)
    }
}

// MARK: The values states are made of

extension UInt64: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self { try decoder.uint() }
}

extension Int64: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self { try decoder.int() }
}

extension Bool: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self { try decoder.bool() }
}

extension String: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self { try decoder.string() }
}

extension Timestamp: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self { try decoder.timestamp() }
}

extension Array: StateValue where Element: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) {
        encoder.write(UInt64(value.count))
        for element in value { Element.encode(element, to: &encoder) }
    }

    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
        let count = try decoder.count()
        var values: [Element] = []
        values.reserveCapacity(count)
        for _ in 0 ..< count { values.append(try Element.decode(from: &decoder)) }
        return values
    }
}

extension Optional: StateValue where Wrapped: StateValue {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) {
        encoder.write(value != nil)
        if let value { Wrapped.encode(value, to: &encoder) }
    }

    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
        try decoder.bool() ? try Wrapped.decode(from: &decoder) : nil
    }
}

/// An enum stored as its `UInt8` raw value.
extension StateValue where Self: RawRepresentable, RawValue == UInt8 {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value.rawValue) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
        let raw = try decoder.byte()
        guard let value = Self(rawValue: raw) else { throw StateDecoder.Damaged(what: "unknown \(Self.self) \(raw)") }
        return value
    }
}

/// An enum stored as its `String` raw value (one byte once written before: the string window).
extension StateValue where Self: RawRepresentable, RawValue == String {
    public static func encode(_ value: Self, to encoder: inout StateEncoder) { encoder.write(value.rawValue) }
    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
        let raw = try decoder.string()
        guard let value = Self(rawValue: raw) else { throw StateDecoder.Damaged(what: "unknown \(Self.self) \(raw)") }
        return value
    }
}

extension VerifiedPlan: StateValue {}

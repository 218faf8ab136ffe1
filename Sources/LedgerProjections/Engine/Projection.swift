import LedgerCore

/// A read model: a pure reducer over events and a pure view of its state at a time.
///
/// The engine owns everything about running it safely (checkpoints, catch-up, rebuilds,
/// swaps); a projection only says which events it reads, how one event changes the state of
/// one key, and what the state means at a time under a policy. It does no I/O, reads no clock
/// and never reads another projection's state: rules two models share are shared code.
///
/// ```swift
/// enum SessionCount: Projection {
///     struct State: ProjectionState { var sessions: UInt64 = 0 … }
///     static let name = "sessions"
///     static let codeVersion: UInt32 = 1
///     static let eventTypes: Set<String> = ["session.started"]
///     static func apply(_ event: RecordedEvent, to state: inout State) { state.sessions += 1 }
///     static func view(of state: State, at t: Timestamp, policy: Policy) -> View { … }
/// }
/// ```
///
/// **Facts, not answers.** Events arrive late and out of order, so a state keeps the facts a
/// view needs (with their business times) rather than a running answer; `view(of:at:policy:)`
/// decides from the facts whose `occurredAt` ≤ t. The policy is applied only there, which is
/// why changing a rule never needs new facts — only a rebuild to record the new policy hash.
public protocol Projection: Sendable {
    /// The state of one key, stored in its compact binary encoding.
    associatedtype State: ProjectionState
    /// What the model answers at a time.
    associatedtype View: ProjectionView

    /// The model's name, as `stats`, `status` and `rebuild` show it: lower-case, stable.
    static var name: String { get }
    /// Bumped whenever `apply` or the state's encoding changes meaning: a served generation
    /// built by another code version is reported stale, and neither appends nor catch-up
    /// advance it, until a rebuild replaces it. A change to `view` alone needs no bump: views
    /// are worked out from the stored facts at query time, so the new rule answers at once.
    static var codeVersion: UInt32 { get }
    /// The event types the model reads; others never reach `apply`.
    static var eventTypes: Set<String> { get }
    /// The key whose state an event changes: the subject unless a model says otherwise;
    /// `nil` skips the event.
    static func key(for event: RecordedEvent) -> String?
    /// Folds one event into its key's state. Pure: no I/O, no clock.
    static func apply(_ event: RecordedEvent, to state: inout State)
    /// The model's answer at `t` under `policy`. Pure.
    static func view(of state: State, at t: Timestamp, policy: Policy) -> View
    /// Times at which the view may change with no new event — a period running out, a grace
    /// ending, a day boundary — as a superset: the audit evaluates the view at each and lists
    /// those where something changed. Unsorted, duplicates allowed. Default: none.
    static func changeTimes(of state: State, policy: Policy) -> [Timestamp]
    /// Whether `policy` has what the model reads: a policy without the section a model reads
    /// has no such model (SPEC §4), and `status` reports it as `null`. Default: always.
    static func isServed(by policy: Policy) -> Bool
}

extension Projection {
    public static func key(for event: RecordedEvent) -> String? { event.subject }
    public static func changeTimes(of state: State, policy: Policy) -> [Timestamp] { [] }
    public static func isServed(by policy: Policy) -> Bool { true }
}

/// A projection's per-key state: empty to start with, and a compact, deterministic encoding
/// (the same state always encodes to the same bytes, so incremental and rebuilt models can be
/// compared byte for byte).
public protocol ProjectionState: Sendable, Equatable {
    /// The state of a key no event has touched.
    init()
    /// Appends the encoding.
    func encode(to writer: inout StateWriter)
    /// Reads what `encode` wrote.
    init(from reader: inout StateReader) throws(StateReader.Damaged)
}

/// A view as JSON: the members in the order SPEC §5 lists them, every key always present
/// (`null` for no value). Dry runs compare views member by member.
public protocol ProjectionView: Sendable, Equatable {
    var json: JSONObject { get }
    /// The rule that decides a field (its dotted path in `json`), as the audit names it when the
    /// field changes; `nil` when the field follows from the model's other fields (the audit
    /// then cites the rule of the other fields that changed with it).
    func rule(for field: String) -> String?
    /// The rule behind a field's change from `previous` to this view. Default: `rule(for:)`.
    /// A model may cite what ended instead (entitlement: a plan lost cites the rule that gave it).
    func rule(for field: String, since previous: Self) -> String?
    /// What happened between `previous` and this view when no event caused it, in words for
    /// the audit's time entries ("the trial ran out: trial → free"); `nil` when nothing this
    /// model says more about than its changed fields.
    func timeChange(since previous: Self) -> String?
    /// Fields the audit does not list as changes because they restate others (`reason.rule`
    /// is the change's `rule`; `enteredAt` moves with the tier).
    static var restatedFields: Set<String> { get }
}

extension ProjectionView {
    public func rule(for field: String) -> String? { nil }
    public func rule(for field: String, since previous: Self) -> String? { rule(for: field) }
    public func timeChange(since previous: Self) -> String? { nil }
    public static var restatedFields: Set<String> { [] }
}

extension ProjectionState {
    /// The state's encoding.
    public var encoded: [UInt8] {
        var writer = StateWriter()
        encode(to: &writer)
        return writer.bytes
    }

    /// Decodes a stored state. With a `memo`, what the state begins with may be taken from
    /// another state decoded in the memo that began with the same bytes (`StateReader.leading`).
    public static func decode(_ bytes: UnsafeRawBufferPointer, memo: DecodeMemo? = nil) throws(StateReader.Damaged) -> Self {
        var reader = StateReader(bytes, memo: memo)
        let state = try Self(from: &reader)
        guard reader.isAtEnd else { throw StateReader.Damaged(what: "\(reader.remaining) trailing bytes") }
        return state
    }
}

/// Writes a state's compact encoding: unsigned LEB128 integers, zig-zag signed ones, and
/// two things a state repeats a lot made small:
///
/// - **Strings**: the last `StringWindow.size` distinct ones written are kept in a window. A
///   string in it is written as its slot (`slot << 2 | 1`, one byte); one that begins with at
///   least `StringWindow.minimumShared` bytes of a string in it as that slot and the bytes shared
///   (`shared << 5 | slot << 2 | 3`), then the rest's length and bytes; any other as its UTF-8
///   length (`length << 1`) and bytes. A subscription's original transaction id and product id,
///   repeated by every renewal, mostly take a byte each; a renewal's own transaction id, which
///   shares most of its digits with the one before, a few bytes.
/// - **Timestamps** are written as the zig-zag difference from the timestamp written before
///   (the first from 0): a renewal's purchase time is its record time, its period ends a month on.
///
/// Both depend only on what was written before, so the encoding stays deterministic.
///
/// The bytes go into a buffer of the writer's own, not an array: a rebuild encodes every
/// state, and an array's append checks its buffer is unshared for every byte (a third of the
/// encoding's instructions). So a writer cannot be copied.
public struct StateWriter: ~Copyable {
    private var buffer: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    private var strings = WrittenStrings()
    private var lastTimestamp: Int64 = 0

    /// Room for a typical state from the start: grown from nothing, a state's bytes were
    /// copied into a new buffer five or six times.
    public init() {
        capacity = 256
        buffer = .allocate(capacity: capacity)
    }

    deinit { buffer.deallocate() }

    /// What has been written.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: buffer, count: count)) }

    /// How many bytes have been written.
    var written: Int { count }

    /// Starts another state after the bytes written (a rebuild writes many into one buffer):
    /// its strings and timestamps are written as by a writer of its own.
    mutating func startState() {
        strings.removeAll()
        lastTimestamp = 0
    }

    /// Bytes as they are, outside any state (a rebuild writes each state's key before it).
    mutating func writeRaw(_ bytes: UnsafeRawBufferPointer) {
        append(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// Room for `more` bytes after those written.
    @inline(__always) private mutating func reserve(_ more: Int) {
        if count + more > capacity { grow(to: count + more) }
    }

    private mutating func grow(to needed: Int) {
        let larger = Swift.max(needed, capacity * 2)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: buffer, count: count)
        buffer.deallocate()
        (buffer, capacity) = (moved, larger)
    }

    @inline(__always) private mutating func append(_ byte: UInt8) {
        reserve(1)
        buffer[count] = byte
        count += 1
    }

    private mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        reserve(bytes.count)
        if let base = bytes.baseAddress { (buffer + count).update(from: base, count: bytes.count) }
        count += bytes.count
    }

    public mutating func write(_ value: UInt64) {
        reserve(10)
        var v = value
        while v >= 0x80 {
            buffer[count] = UInt8(truncatingIfNeeded: v) | 0x80
            count += 1
            v >>= 7
        }
        buffer[count] = UInt8(v)
        count += 1
    }

    public mutating func write(_ value: Int64) { write(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }
    public mutating func write(_ value: Bool) { append(value ? 1 : 0) }
    public mutating func write(_ value: UInt8) { append(value) }

    public mutating func write(_ value: Timestamp) {
        write(value.milliseconds &- lastTimestamp)
        lastTimestamp = value.milliseconds
    }

    public mutating func write(_ value: String) {
        var value = value
        // `withUTF8` makes a string contiguous first if it is not (a no-op for a native one).
        let head: UInt64? = value.withUTF8 { bytes in
            let head = WrittenStrings.head(bytes)
            switch strings.match(bytes, head: head) {
            case .whole(let slot):
                write(UInt64(slot) << 2 | 1)
                return nil
            case .prefix(let slot, let shared):
                write(UInt64(shared) << 5 | UInt64(slot) << 2 | 3)
                write(UInt64(bytes.count - shared))
                append(UnsafeBufferPointer(rebasing: bytes[shared...]))
            case .none:
                write(UInt64(bytes.count) << 1)
                append(bytes)
            }
            return head
        }
        if let head { strings.push(value, head: head) }
    }

    /// A string written in full, outside the window (records other than states use it).
    mutating func writePlain(_ value: String) {
        var value = value
        value.withUTF8 { bytes in
            write(UInt64(bytes.count))
            append(bytes)
        }
    }

    /// An optional: a presence byte, then the value.
    public mutating func write<T>(_ value: T?, _ body: (inout StateWriter, T) -> Void) {
        if let value {
            append(1)
            body(&self, value)
        } else {
            append(0)
        }
    }

    /// A count, then each element.
    public mutating func write<C: Collection>(_ values: C, _ body: (inout StateWriter, C.Element) -> Void) {
        write(UInt64(values.count))
        for value in values { body(&self, value) }
    }
}

/// The writer's `StringWindow`: its slots hold each string with its first eight bytes as one
/// integer beside it, so that a string is compared with a slot by one exclusive-or, and byte by
/// byte only past eight shared bytes.
struct WrittenStrings {
    enum Match: Equatable {
        case whole(slot: Int)
        case prefix(slot: Int, shared: Int)
    }

    struct Slot {
        var value: String
        /// The first eight bytes (fewer, zero-padded), loaded little-endian: the first byte two
        /// strings differ in is the lowest set byte of their heads' exclusive-or.
        var head: UInt64
        var length: Int
    }

    private var window = StringWindow<Slot>()

    /// Up to the first eight bytes of `bytes`, zero-padded, the first lowest.
    static func head(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        guard let base = bytes.baseAddress else { return 0 }
        if bytes.count >= 8 { return UInt64(littleEndian: UnsafeRawPointer(base).loadUnaligned(as: UInt64.self)) }
        var head: UInt64 = 0
        for i in 0 ..< bytes.count { head |= UInt64(base[i]) << (8 * UInt64(i)) }
        return head
    }

    /// The slot holding `value`'s bytes (whose `head(_:)` is `head`); else the slot sharing the
    /// longest prefix with it, if that is at least `StringWindow.minimumShared` bytes (the
    /// lowest slot of equals).
    func match(_ value: UnsafeBufferPointer<UInt8>, head: UInt64) -> Match? {
        var best: Match?
        var bestShared = StringWindow<Slot>.minimumShared - 1
        let length = value.count
        return window.slots.withUnsafeBufferPointer { slots in
            for index in slots.indices {
                let difference = slots[index].head ^ head
                var shared = difference == 0 ? 8 : difference.trailingZeroBitCount / 8
                let other = slots[index].length
                if shared == 8 && length > 8 && other > 8 {
                    // Past the heads: the rest byte by byte.
                    shared = slots[index].value.utf8.withContiguousStorageIfAvailable { bytes in
                        let limit = Swift.min(length, bytes.count)
                        var i = 8
                        while i < limit && value[i] == bytes[i] { i += 1 }
                        return i
                    } ?? zip(value, slots[index].value.utf8).prefix { $0 == $1 }.count
                }
                shared = Swift.min(shared, length, other)
                if shared == length && shared == other { return .whole(slot: index) }
                if shared > bestShared {
                    bestShared = shared
                    best = .prefix(slot: index, shared: shared)
                }
            }
            return best
        }
    }

    /// Empties the window, keeping its room.
    mutating func removeAll() { window.removeAll() }

    /// A string not in the window (whose `head(_:)` is `head`) takes the next slot.
    mutating func push(_ value: String, head: UInt64) {
        window.push(Slot(value: value, head: head, length: value.utf8.count))
    }
}

/// The last few distinct strings a state's encoding wrote or read, in slots filled in turn
/// (the oldest is overwritten): the writer (`WrittenStrings`, whose slots hold each string with
/// its first bytes) and the reader (slots of strings) fill the same slots in the same order, so
/// a slot number names a string. Slots rather than a most-recent-first list, so that a
/// reference moves nothing.
struct StringWindow<Slot> {
    /// Slots: a slot number takes 3 bits of a string's code.
    static var size: Int { 8 }
    /// The fewest bytes a string must share with a slot's to be written as that slot's prefix
    /// (fewer would save a byte at most, and cost the reader a copy).
    static var minimumShared: Int { 3 }
    /// The slots filled so far, by number.
    private(set) var slots: [Slot] = []
    private var next = 0

    /// The string in `slot`; `nil` for a slot not filled yet.
    func take(_ slot: Int) -> Slot? { slot < slots.count ? slots[slot] : nil }

    /// A string not in the window takes the next slot.
    mutating func push(_ value: Slot) {
        if slots.isEmpty { slots.reserveCapacity(Self.size) }   // one allocation, not one per doubling
        if slots.count < Self.size { slots.append(value) } else { slots[next] = value }
        next = (next + 1) % Self.size
    }

    /// Empties the window, keeping its room.
    mutating func removeAll() {
        slots.removeAll(keepingCapacity: true)
        next = 0
    }
}

extension StringWindow: Sendable where Slot: Sendable {}

/// What the states read in one query began with, decoded (`StateReader.leading`): the
/// entitlement, retention and badge models each keep their own copy of a subject's
/// subscription facts, and retention its own copy of the entitlement state (no model reads
/// another's state, SPEC §4). The same events fold them to the same bytes, so a status query
/// decodes each once (and an append, the states it loads for one event). For one thread and
/// one query or event: it holds decoded values, not a cache of the store.
public final class DecodeMemo {
    /// A value decoded from the start of a state: the bytes it took, and the reader's string
    /// window and last timestamp after it.
    class Entry {
        let type: ObjectIdentifier
        /// The bytes it took: the state's own, in a memo whose states stay in place, else a
        /// copy this entry owns.
        let bytes: UnsafeRawBufferPointer
        private let owned: Bool
        let strings: StringWindow<String>
        let lastTimestamp: Int64

        init(type: ObjectIdentifier, bytes: UnsafeRawBufferPointer, copy: Bool, strings: StringWindow<String>, lastTimestamp: Int64) {
            self.type = type
            if copy {
                let owned = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
                owned.copyMemory(from: bytes)
                self.bytes = UnsafeRawBufferPointer(owned)
            } else {
                self.bytes = bytes
            }
            self.owned = copy
            self.strings = strings
            self.lastTimestamp = lastTimestamp
        }

        deinit { if owned { bytes.deallocate() } }
    }

    /// An entry with its value (the entry's `type` is `T`'s, so a match is downcast unchecked).
    final class Decoded<T>: Entry {
        let value: T

        init(_ value: T, bytes: UnsafeRawBufferPointer, copy: Bool, strings: StringWindow<String>, lastTimestamp: Int64) {
            self.value = value
            super.init(type: ObjectIdentifier(T.self), bytes: bytes, copy: copy, strings: strings, lastTimestamp: lastTimestamp)
        }
    }

    /// One thread uses a memo, for one query.
    @exclusivity(unchecked) var entries: [Entry] = []
    /// The states decoded with this memo stay where they are, unchanged, for as long as it
    /// lives, so entries refer to their bytes instead of copying them.
    let statesStayInPlace: Bool

    /// A memo for one query or event. `statesStayInPlace`: every state decoded with it stays
    /// where it is, unchanged, while the memo lives (a status query's, read from a map in one
    /// read transaction that outlives the memo). Otherwise (an append, whose loaded states are
    /// copies freed after decoding) each entry copies the bytes it took.
    public init(statesStayInPlace: Bool = false) {
        self.statesStayInPlace = statesStayInPlace
    }
}

/// Reads what `StateWriter` wrote; any malformed byte is `Damaged`.
public struct StateReader {
    /// A stored state that does not decode: a bug or a damaged store; `ledger rebuild` replaces it.
    public struct Damaged: Error, Sendable, CustomStringConvertible {
        public var what: String
        public var description: String { what }
        /// A state that does not decode, saying what is wrong (a projection's own decoder throws it too).
        public init(what: String) { self.what = what }
    }

    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    private var strings = StringWindow<String>()
    private var lastTimestamp: Int64 = 0
    private let memo: DecodeMemo?

    public init(_ bytes: UnsafeRawBufferPointer, memo: DecodeMemo? = nil) {
        self.bytes = bytes
        self.memo = memo
    }

    /// Decodes the value a state begins with, or, reading with a memo, takes it from the memo
    /// when another state decoded in it began with the very same bytes for a value of this
    /// type. Reading a value consumes its bytes from the start of the state with a fresh
    /// reader, and nothing else, so the same bytes decode to the same value and leave the
    /// reader in the same place: the memo changes how much work a query does, never what it
    /// answers. Anywhere but at the start of a state, or without a memo, it just decodes.
    public mutating func leading<T>(_ decode: (inout StateReader) throws(Damaged) -> T) throws(Damaged) -> T {
        guard let memo, offset == 0 else { return try decode(&self) }
        let type = ObjectIdentifier(T.self)
        for entry in memo.entries where entry.type == type && bytes.begins(with: entry.bytes) {
            offset = entry.bytes.count
            strings = entry.strings
            lastTimestamp = entry.lastTimestamp
            return unsafeDowncast(entry, to: DecodeMemo.Decoded<T>.self).value
        }
        let value = try decode(&self)
        // A query registers a few values (the facts, the entitlement's state): one allocation.
        if memo.entries.isEmpty { memo.entries.reserveCapacity(4) }
        memo.entries.append(DecodeMemo.Decoded(value, bytes: UnsafeRawBufferPointer(rebasing: bytes[..<offset]), copy: !memo.statesStayInPlace,
                                               strings: strings, lastTimestamp: lastTimestamp))
        return value
    }

    public var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    @inline(__always)
    public mutating func uint() throws(Damaged) -> UInt64 {
        // Most integers of a state (counts, slots, small differences) are one byte.
        if offset < bytes.count, bytes[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(bytes[offset])
        }
        return try longUInt()
    }

    private mutating func longUInt() throws(Damaged) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        // Ten bytes left hold any integer, so no end check per byte. The integers longer than a
        // byte (timestamp differences, positions, long string codes) are all read here. (One
        // loop bounded by the nearer of the end and the tenth byte read the status benchmark's
        // integers in 45 M instructions against this path's 36 M, so the checked loop below
        // reads only the integers within ten bytes of a state's end.)
        if bytes.count - offset >= 10, let base = bytes.baseAddress {
            var i = offset
            repeat {
                let b = base.load(fromByteOffset: i, as: UInt8.self)
                i += 1
                value |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 {
                    offset = i
                    return value
                }
                shift += 7
            } while shift < 64
            throw Damaged(what: "bad integer at byte \(offset)")
        }
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
        lastTimestamp = lastTimestamp &+ (try int())
        return Timestamp(milliseconds: lastTimestamp)
    }

    public mutating func string() throws(Damaged) -> String {
        let code = try uint()
        let value: String
        switch code & 3 {
        case 1:
            guard let whole = strings.take(Int(clamping: code >> 2)) else { throw Damaged(what: "bad string reference at byte \(offset)") }
            return whole
        case 3:
            guard var start = strings.take(Int(code >> 2 & 7)), code >> 5 <= UInt64(start.utf8.count) else {
                throw Damaged(what: "bad string prefix reference at byte \(offset)")
            }
            let shared = Int(code >> 5)
            let length = try uint()
            guard length <= UInt64(bytes.count - offset) else { throw Damaged(what: "truncated string at byte \(offset)") }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
            offset += Int(length)
            // The shared bytes and the rest, joined in a scratch buffer and checked whole (the
            // prefix may end inside a character the rest finishes).
            let text = start.withUTF8 { prefix in
                withUnsafeTemporaryAllocation(byteCount: shared + rest.count, alignment: 1) { joined in
                    UnsafeMutableRawBufferPointer(rebasing: joined[..<shared]).copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(prefix)[..<shared]))
                    UnsafeMutableRawBufferPointer(rebasing: joined[shared...]).copyMemory(from: rest)
                    return StrictUTF8.string(UnsafeRawBufferPointer(joined))
                }
            }
            guard let text else { throw Damaged(what: "bad UTF-8 at byte \(offset)") }
            value = text
        default:
            value = try utf8(length: code >> 1)
        }
        strings.push(value)
        return value
    }

    /// A string written by `StateWriter.writePlain(_:)`.
    mutating func plainString() throws(Damaged) -> String { try utf8(length: try uint()) }

    private mutating func utf8(length: UInt64) throws(Damaged) -> String {
        guard length <= UInt64(bytes.count - offset) else { throw Damaged(what: "truncated string at byte \(offset)") }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
        offset += Int(length)
        guard let text = StrictUTF8.string(slice) else { throw Damaged(what: "bad UTF-8 at byte \(offset)") }
        return text
    }

    /// An optional written by `StateWriter.write(_:_:)`.
    public mutating func optional<T>(_ body: (inout StateReader) throws(Damaged) -> T) throws(Damaged) -> T? {
        try bool() ? try body(&self) : nil
    }

    /// A collection written by `StateWriter.write(_:_:)`.
    public mutating func array<T>(_ body: (inout StateReader) throws(Damaged) -> T) throws(Damaged) -> [T] {
        let count = try uint()
        guard count <= UInt64(bytes.count - offset) else { throw Damaged(what: "bad count \(count) at byte \(offset)") }
        var values: [T] = []
        values.reserveCapacity(Int(count))
        for _ in 0..<count { values.append(try body(&self)) }
        return values
    }

    /// A string raw-value enum, stored as its raw value.
    public mutating func choice<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws(Damaged) -> T where T.RawValue == String {
        let text = try string()
        // Compared case by case: a string enum's synthesized `init(rawValue:)` builds a table of
        // its raw values on every call (about 800 instructions a snapshot in a status query).
        for value in T.allCases where value.rawValue == text { return value }
        throw Damaged(what: "unknown value \(text)")
    }
}

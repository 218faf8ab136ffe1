@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// The states' compact encoding: integers in LEB128, strings by back reference, timestamps as
/// differences, and every state decoding to itself.
@Suite struct StateCodingTests {
    /// Writes with `body`, returning the bytes.
    func encode(_ body: (inout StateEncoder) -> Void) -> [UInt8] {
        var encoder = StateEncoder()
        body(&encoder)
        return encoder.bytes
    }

    /// Reads `bytes` with `body`, requiring every byte to be read.
    func decode<T>(_ bytes: [UInt8], _ body: (inout StateDecoder) throws(StateDecoder.Damaged) -> T) throws -> T {
        try bytes.withUnsafeBytes { buffer in
            var decoder = StateDecoder(buffer)
            let value = try body(&decoder)
            #expect(decoder.isAtEnd)
            return value
        }
    }

    /// The window's rule written out plainly: a string among the last eight distinct ones
    /// written is its slot (most recent first), any other its length and bytes.
    func referenceEncoding(_ strings: [String]) -> [UInt8] {
        var recent: [String] = []
        var out: [UInt8] = []
        func uint(_ value: UInt64) {
            var v = value
            while v >= 0x80 { out.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
            out.append(UInt8(v))
        }
        for string in strings {
            if let slot = recent.firstIndex(of: string) {
                uint(UInt64(slot) << 1 | 1)
                continue
            }
            uint(UInt64(string.utf8.count) << 1)
            out += Array(string.utf8)
            recent.insert(string, at: 0)
            if recent.count > 8 { recent.removeLast() }
        }
        return out
    }

    @Test func aRepeatedStringIsOneByte() {
        let bytes = encode { e in e.write("1000010-1"); e.write("pro.monthly"); e.write("1000010-1"); e.write("pro.monthly") }
        // length 9 << 1, the bytes; length 11 << 1, the bytes; "1000010-1" is now slot 1, then
        // "pro.monthly" is still slot 0 (a reference moves nothing).
        #expect(bytes == [18] + Array("1000010-1".utf8) + [22] + Array("pro.monthly".utf8) + [3, 1])
    }

    /// More distinct strings than the window holds, then ones that fell off and ones still in
    /// it, the empty string, two-byte characters and NUL bytes: written as the rule says, byte
    /// for byte, and read back.
    @Test func stringsAreWrittenAsTheWindowsRuleSaysAndReadBack() async {
        let pool = (0..<12).map { "s\($0)" } + ["", "é✓", "a\u{0}b", "pro.monthly"]
        await checkProperty(count: 200, input: Gen.uint64()) { seed in
            var random = DataGenerator(state: seed)
            let strings = (0..<random.int(1...40)).map { _ in random.pick(pool) }
            let bytes = encode { e in for s in strings { e.write(s) } }
            #expect(bytes == referenceEncoding(strings), "\(strings)")
            let decoded = try decode(bytes) { d throws(StateDecoder.Damaged) in try strings.map { _ throws(StateDecoder.Damaged) in try d.string() } }
            #expect(decoded == strings)
        }
    }

    @Test func timestampsAreDifferencesFromTheOneBefore() throws {
        let times = [ts("2026-03-01T09:30:00Z"), ts("2026-03-01T09:30:01Z"), ts("2026-02-01T00:00:00Z")]
        let bytes = encode { e in for t in times { e.write(t) } }
        // The second is 1,000 ms after the first (zig-zag 2,000: two bytes), the third before it.
        #expect(bytes[6...7] == [0xD0, 0x0F])
        #expect(try decode(bytes) { d throws(StateDecoder.Damaged) in try times.map { _ throws(StateDecoder.Damaged) in try d.timestamp() } } == times)
    }

    @Test func integersOfEveryLengthRoundTrip() throws {
        let values: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, 1 << 35, UInt64.max]
        let signed: [Int64] = [0, -1, 1, -64, 64, .min, .max]
        let bytes = encode { e in
            for v in values { e.write(v) }
            for v in signed { e.write(v) }
        }
        #expect(try decode(bytes) { d throws(StateDecoder.Damaged) in
            (try values.map { _ throws(StateDecoder.Damaged) in try d.uint() }, try signed.map { _ throws(StateDecoder.Damaged) in try d.int() })
        } == (values, signed))
    }

    /// Damage throws, naming what is wrong; it never crashes.
    @Test func damagedBytesThrow() {
        func damaged(_ bytes: [UInt8], _ body: (inout StateDecoder) throws(StateDecoder.Damaged) -> Void) -> Bool {
            bytes.withUnsafeBytes { buffer in
                var decoder = StateDecoder(buffer)
                do { try body(&decoder); return false } catch { return true }
            }
        }
        #expect(damaged(Array(repeating: 0xFF, count: 11)) { d throws(StateDecoder.Damaged) in _ = try d.uint() }, "an integer longer than ten bytes")
        #expect(damaged([0x80]) { d throws(StateDecoder.Damaged) in _ = try d.uint() }, "an integer cut short")
        #expect(damaged([3]) { d throws(StateDecoder.Damaged) in _ = try d.string() }, "a reference to a string never read")
        #expect(damaged([8, 0x61]) { d throws(StateDecoder.Damaged) in _ = try d.string() }, "a string longer than the bytes left")
        #expect(damaged([4, 0xC3, 0x28]) { d throws(StateDecoder.Damaged) in _ = try d.string() }, "bad UTF-8")
        #expect(damaged([2]) { d throws(StateDecoder.Damaged) in _ = try d.bool() }, "a boolean other than 0 or 1")
        #expect(damaged([9]) { d throws(StateDecoder.Damaged) in _ = try EntitlementModel.Attempt.decode(from: &d) }, "an unknown enum value")
        #expect(damaged([200, 1]) { d throws(StateDecoder.Damaged) in _ = try [Bool].decode(from: &d) }, "a count beyond the bytes left")
        #expect((try? [0, 0, 7].withUnsafeBytes { try BadgeModel.State.decode($0) }) == nil, "trailing bytes")
    }

    /// A record's encoding is its fields' in the order its list gives them.
    @Test func aRecordIsItsFieldsInOrder() {
        let task = BadgeModel.Task(id: "t", dueDay: -2)
        #expect(task.encoded == [2, UInt8(ascii: "t"), 3])
    }

    /// A record field, an optional record, an array of records and one of dated records, coded
    /// in the coder of the record around them (this package's path), are the bytes the generic
    /// path writes for them one by one — strings referring back across records, times as
    /// differences from the record before — and read back to themselves. A record that throws
    /// while it is encoded stops there, and the fields and records after it are still written,
    /// on both paths.
    @Test func recordsInsideARecordAreTheBytesOfTheGenericPath() async {
        await checkProperty(count: 50, input: Gen.uint64()) { seed in
            var random = DataGenerator(state: seed)
            func inner() -> Inner { Inner(name: random.pick(["a", "b", "pro.monthly", "ünï", "stop"]), at: Timestamp(milliseconds: Int64(random.int(0...1_000_000)))) }
            let outer = Outer(one: inner(), maybe: random.int(0...1) == 0 ? inner() : nil,
                              list: (0 ..< random.int(0...11)).map { _ in inner() },
                              dated: (0 ..< random.int(0...11)).map { i in Dated(at: Timestamp(milliseconds: Int64(i) * 7), position: UInt64(i), value: inner()) })
            let generic = encode { encoder in
                Inner.encode(outer.one, to: &encoder)
                Optional<Inner>.encode(outer.maybe, to: &encoder)
                [Inner].encode(outer.list, to: &encoder)
                [Dated<Inner>].encode(outer.dated, to: &encoder)
            }
            #expect(outer.encoded == generic, "seed \(seed)")
            let stops = ([outer.one] + (outer.maybe.map { [$0] } ?? []) + outer.list + outer.dated.map(\.value)).contains { $0.name == "stop" }
            if !stops {
                let decoded = try generic.withUnsafeBytes { try Outer.decode($0) }
                #expect(decoded == outer, "seed \(seed)")
            }
        }
    }

    struct Inner: StateRecord, Equatable {
        var name = ""
        var at = Timestamp(milliseconds: 0)
        init() {}
        init(name: String, at: Timestamp) { (self.name, self.at) = (name, at) }
        mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&name)
            if name == "stop" { throw StateDecoder.Damaged(what: "a record that stops after its name") }
            try coder.code(&at)
        }
    }

    struct Outer: StateRecord, Equatable {
        var one = Inner()
        var maybe: Inner?
        var list: [Inner] = []
        var dated: [Dated<Inner>] = []
        init() {}
        init(one: Inner, maybe: Inner?, list: [Inner], dated: [Dated<Inner>]) { (self.one, self.maybe, self.list, self.dated) = (one, maybe, list, dated) }
        mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&one)
            try coder.code(&maybe)
            try coder.code(&list)
            try coder.code(&dated)
        }
    }

    /// Every state of every model (and the facts) of random histories decodes to itself and
    /// encodes again to the same bytes.
    @Test func everyStateDecodesToItselfAndTheSameBytes() async {
        await checkProperty(count: 30, input: Gen.uint64()) { seed in
            var random = RandomHistory(seed: seed)
            let history = try Folded(random.events(subjects: 3, perSubject: 1...20))
            for subject in ["s0", "s1", "s2"] {
                let facts = history.facts(of: subject)
                #expect(try facts.encoded.withUnsafeBytes { try SubjectFacts.decode($0) } == facts, "seed \(seed)")
                for model in ReadModels.all { try roundTrips(model, history, subject, seed) }
            }
        }
    }

    private func roundTrips<M: ReadModel>(_ model: M.Type, _ history: Folded, _ subject: String, _ seed: UInt64) throws {
        let state = history.state(model, of: subject)
        let bytes = state.encoded
        let decoded = try bytes.withUnsafeBytes { try M.State.decode($0) }
        #expect(decoded == state, "\(M.name), seed \(seed)")
        #expect(decoded.encoded == bytes, "\(M.name), seed \(seed)")
        // What a view decodes (`decodeForView`, which may leave folding's parts out) answers
        // as the whole state does, before, inside and after the history.
        let viewed = try bytes.withUnsafeBytes { try M.State.decodeForView($0) }
        #expect(throws: StateDecoder.Damaged.self, "\(M.name), seed \(seed)") { try (bytes + [0]).withUnsafeBytes { try M.State.decodeForView($0) } }
        let facts = history.facts(of: subject)
        for t in ["2025-12-01T00:00:00Z", "2026-02-15T12:00:00Z", "2026-06-01T00:00:00Z", "2027-06-01T00:00:00Z"].map(ts) {
            #expect(M.view(of: viewed, facts: facts, at: t, policy: .reference) == M.view(of: state, facts: facts, at: t, policy: .reference), "\(M.name) at \(t), seed \(seed)")
            #expect(M.answersFrom(viewed, facts: facts) == M.answersFrom(state, facts: facts), "\(M.name), seed \(seed)")
        }
    }
}

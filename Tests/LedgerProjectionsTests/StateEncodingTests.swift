import LedgerCore
@testable import LedgerProjections
import LedgerStore
import LedgerTestSupport
import PropertyBased
import Testing

/// The compact state encoding: strings by back reference, timestamps as differences.
@Suite struct StateEncodingTests {
    /// Writes with `body`, returning the bytes.
    func encode(_ body: (inout StateWriter) -> Void) -> [UInt8] {
        var writer = StateWriter()
        body(&writer)
        return writer.bytes
    }

    /// Reads `bytes` with `body`, requiring every byte to be read.
    func decode<T>(_ bytes: [UInt8], _ body: (inout StateReader) throws(StateReader.Damaged) -> T) throws -> T {
        try bytes.withUnsafeBytes { buffer in
            var reader = StateReader(buffer)
            let value = try body(&reader)
            #expect(reader.isAtEnd)
            return value
        }
    }

    @Test func aRepeatedStringIsOneByte() {
        let bytes = encode { w in w.write("1000010-1"); w.write("pro.monthly"); w.write("1000010-1"); w.write("pro.monthly") }
        // length 9 << 1, the bytes; length 11 << 1, the bytes; slot 0 << 2 | 1; slot 1 << 2 | 1.
        #expect(bytes == [18] + Array("1000010-1".utf8) + [22] + Array("pro.monthly".utf8) + [1, 5])
    }

    @Test func aStringThatBeginsLikeOneInTheWindowIsThatSlotsPrefixAndTheRest() throws {
        let strings = ["1000010-1", "pro.monthly", "1000010-2", "pro.yearly", "1000010-2"]
        let bytes = encode { w in for s in strings { w.write(s) } }
        // "1000010-2": 8 bytes of slot 0 (8 << 5 | 0 << 2 | 3 = 259, LEB128 131 2), then 1 byte "2".
        // "pro.yearly": 4 bytes of slot 1 (4 << 5 | 1 << 2 | 3 = 135, LEB128 135 1), then 6 bytes.
        // "1000010-2" again: slot 2 << 2 | 1.
        #expect(bytes == [18] + Array("1000010-1".utf8) + [22] + Array("pro.monthly".utf8)
                + [131, 2, 1] + Array("2".utf8) + [135, 1, 6] + Array("yearly".utf8) + [9])
        #expect(try decode(bytes) { r throws(StateReader.Damaged) in try strings.map { _ throws(StateReader.Damaged) in try r.string() } } == strings)
    }

    @Test func aStringSharingFewerThanThreeBytesIsWrittenInFull() {
        let bytes = encode { w in w.write("abc"); w.write("abX") }
        #expect(bytes == [6] + Array("abc".utf8) + [6] + Array("abX".utf8))
    }

    @Test func stringsRoundTripThroughTheWindow() throws {
        // More distinct strings than the window holds, then ones that fell off and ones still in it.
        let strings = (0..<12).map { "s\($0)" } + ["s0", "s11", "s4", "s11", "", "é✓", "s0"]
        let bytes = encode { w in for s in strings { w.write(s) } }
        #expect(try decode(bytes) { r throws(StateReader.Damaged) in try strings.map { _ throws(StateReader.Damaged) in try r.string() } } == strings)
    }

    /// The writer compares a string with its window's slots by their first eight bytes at
    /// once; it writes every sequence of strings as the window's rule says, byte by byte
    /// (`referenceEncoding`), and the strings read back: stems of lengths around eight bytes,
    /// empty strings, NUL bytes and two-byte characters.
    @Test func stringsAreWrittenAsTheWindowsRuleSaysByteByByte() async {
        let stems = ["", "1000010", "10000104", "2000000123456", "com.example.pro.", "a\u{0}"]
        let pieces = ["0", "1", "a", "\u{0}", "é"]
        let string = zip(Gen.int(in: 0 ... stems.count - 1), Gen.int(in: 0 ... pieces.count - 1).array(of: 0...10))
            .map { stem, rest in stems[stem] + rest.map { pieces[$0] }.joined() }
        await checkProperty(count: 300, input: string.array(of: 0...40)) { strings throws in
            let bytes = encode { w in for s in strings { w.write(s) } }
            #expect(bytes == Self.referenceEncoding(strings))
            #expect(try decode(bytes) { r throws(StateReader.Damaged) in try strings.map { _ throws(StateReader.Damaged) in try r.string() } } == strings)
        }
    }

    /// The window's rule, byte by byte: a string in a slot as that slot; else one sharing at
    /// least three bytes with a slot as the slot sharing most (the lowest of equals), then the
    /// rest; else in full. Each string not in a slot then takes the next slot, in turn.
    static func referenceEncoding(_ strings: [String]) -> [UInt8] {
        func varint(_ value: Int) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.appendVarint(UInt64(value))
            return bytes
        }
        var slots: [[UInt8]] = []
        var next = 0
        var out: [UInt8] = []
        for string in strings {
            let bytes = Array(string.utf8)
            if let slot = slots.firstIndex(of: bytes) {
                out += varint(slot << 2 | 1)
                continue
            }
            var best: (slot: Int, shared: Int)?
            for (slot, other) in slots.enumerated() {
                let shared = zip(bytes, other).prefix { $0 == $1 }.count
                if shared >= 3 && shared > (best?.shared ?? 0) { best = (slot, shared) }
            }
            if let best {
                out += varint(best.shared << 5 | best.slot << 2 | 3) + varint(bytes.count - best.shared) + bytes[best.shared...]
            } else {
                out += varint(bytes.count << 1) + bytes
            }
            if slots.count < 8 { slots.append(bytes) } else { slots[next] = bytes }
            next = (next + 1) % 8
        }
        return out
    }

    @Test func timestampsAreDifferencesFromTheOneBefore() throws {
        let times = [Timestamp(milliseconds: 1_767_225_600_000), Timestamp(milliseconds: 1_767_225_600_000),
                     Timestamp(milliseconds: 1_769_904_000_000), Timestamp(milliseconds: 5), Timestamp(milliseconds: -86_400_000)]
        let bytes = encode { w in for t in times { w.write(t) } }
        #expect(bytes[6] == 0)   // the same time again: one byte, zero
        #expect(try decode(bytes) { r throws(StateReader.Damaged) in try times.map { _ throws(StateReader.Damaged) in try r.timestamp() } } == times)
    }

    /// Integers of every length read back the same whether ten bytes follow them (read
    /// without an end check per byte) or fewer (checked byte by byte).
    @Test func integersOfEveryLengthRoundTripNearTheEndAndFarFromIt() throws {
        let values: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, 1 << 35, (1 << 49) - 1, 1 << 56, 1 << 63, .max]
        for value in values {
            let alone = encode { w in w.write(value) }
            #expect(try decode(alone) { r throws(StateReader.Damaged) in try r.uint() } == value)
            let padded = encode { w in w.write(value); for _ in 0..<10 { w.write(UInt8(0)) } }
            #expect(try decode(padded) { r throws(StateReader.Damaged) in
                let read = try r.uint()
                for _ in 0..<10 { _ = try r.byte() }
                return read
            } == value)
        }
    }

    /// An integer whose tenth byte still says "more" is damaged (read with ten bytes or more
    /// left), and so is one cut short by the end of the state (fewer left).
    @Test func anIntegerLongerThanTenBytesOrCutShortIsDamaged() {
        for bytes in [[UInt8](repeating: 0x80, count: 10) + [1], [UInt8](repeating: 0x80, count: 10) + [1, 0, 0, 0], [0x80, 0x80], [UInt8](repeating: 0xFF, count: 9)] {
            #expect(throws: StateReader.Damaged.self) {
                _ = try decode(bytes) { r throws(StateReader.Damaged) in try r.uint() }
            }
        }
    }

    @Test func aReferenceBeyondTheStringsReadIsDamaged() {
        #expect(throws: StateReader.Damaged.self) {
            _ = try decode([18] + Array("1000010-1".utf8) + [5]) { r throws(StateReader.Damaged) in (try r.string(), try r.string()) }
        }
    }

    @Test func aPrefixLongerThanItsSlotsStringOrBreakingUTF8IsDamaged() {
        // 10 bytes of the 9-byte slot 0.
        #expect(throws: StateReader.Damaged.self) {
            _ = try decode([18] + Array("1000010-1".utf8) + [195, 2, 0]) { r throws(StateReader.Damaged) in (try r.string(), try r.string()) }
        }
        // 1 byte of "é" (2 bytes), then "x".
        #expect(throws: StateReader.Damaged.self) {
            _ = try decode([4] + Array("é".utf8) + [35, 1] + Array("x".utf8)) { r throws(StateReader.Damaged) in (try r.string(), try r.string()) }
        }
        // A rest longer than the bytes left.
        #expect(throws: StateReader.Damaged.self) {
            _ = try decode([18] + Array("1000010-1".utf8) + [131, 2, 9, 50]) { r throws(StateReader.Damaged) in (try r.string(), try r.string()) }
        }
    }

    /// Subscription facts of one transaction, `id`, with its original and product ids.
    func facts(_ id: String, at time: String) -> SubscriptionFacts {
        var facts = SubscriptionFacts()
        let at = ts(time)
        facts.transactions = [Dated(at: at, position: 3, value: SubscriptionFacts.Transaction(
            kind: .purchase, id: id, originalId: id, productId: "pro.monthly", purchasedAt: at, expiresAt: at.adding(seconds: 30 * 86_400), isTrial: false))]
        return facts
    }

    /// Decodes `bytes` as a `State` with `memo`.
    func decode<State: ProjectionState>(_ type: State.Type, _ bytes: [UInt8], memo: DecodeMemo) throws -> State {
        try bytes.withUnsafeBytes { buffer in try State.decode(buffer, memo: memo) }
    }

    /// The badge state's facts are the entitlement state's: the badge takes them from the memo,
    /// and reads on from where they end with the reader as they left it (a message id that
    /// refers back to the transaction's id, a time written as a difference from its expiry).
    @Test func aStateBeginningWithTheBytesOfFactsDecodedBeforeTakesThemFromTheMemo() throws {
        var entitlement = EntitlementProjection.State()
        entitlement.subscription = facts("1000010-1", at: "2026-01-05T10:00:00Z")
        entitlement.grants = [Dated(at: ts("2026-01-06T00:00:00Z"), position: 4, value: ts("2026-02-01T00:00:00Z"))]
        var badge = BadgeProjection.State()
        badge.subscription = entitlement.subscription
        badge.delivered = [Dated(at: ts("2026-01-07T00:00:00Z"), position: 5, value: "1000010-1")]
        let memo = DecodeMemo()
        #expect(try decode(EntitlementProjection.State.self, entitlement.encoded, memo: memo) == entitlement)
        #expect(try decode(BadgeProjection.State.self, badge.encoded, memo: memo) == badge)
        #expect(memo.entries.count == 2)   // the entitlement's facts and its state; the badge's facts were those facts
    }

    /// The retention state begins with its own copy of the entitlement state, folded from the
    /// same events to the same bytes: it takes the whole entitlement state from the memo, and
    /// reads on with the reader as the state left it (a pass id that refers back to the
    /// transaction's id, a time written as a difference from the last sign-in).
    @Test func aRetentionStateBeginningWithTheEntitlementStateTakesItFromTheMemo() throws {
        var entitlement = EntitlementProjection.State()
        entitlement.subscription = facts("1000010-1", at: "2026-01-05T10:00:00Z")
        entitlement.signIns = [Dated(at: ts("2026-01-06T00:00:00Z"), position: 4, value: true)]
        var retention = RetentionProjection.State()
        retention.access = entitlement
        retention.recoveryPasses = [Dated(at: ts("2026-03-01T00:00:00Z"), position: 9, value: "1000010-1")]
        let memo = DecodeMemo()
        #expect(try decode(EntitlementProjection.State.self, entitlement.encoded, memo: memo) == entitlement)
        #expect(memo.entries.count == 2)   // the facts, and the entitlement state
        #expect(try decode(RetentionProjection.State.self, retention.encoded, memo: memo) == retention)
        #expect(memo.entries.count == 2)   // not decoded again
    }

    /// The other way round: an entitlement state read after a retention state that began with
    /// the same bytes is the retention's decoded copy.
    @Test func anEntitlementStateReadAfterTheRetentionStateTakesItsCopy() throws {
        var entitlement = EntitlementProjection.State()
        entitlement.subscription = facts("1000010-1", at: "2026-01-05T10:00:00Z")
        entitlement.attempts = [Dated(at: ts("2026-01-05T09:59:00Z"), position: 2, value: .started)]
        var retention = RetentionProjection.State()
        retention.access = entitlement
        retention.organizerCancellations = [Dated(at: ts("2026-04-01T00:00:00Z"), position: 12, value: "organizer-7")]
        let memo = DecodeMemo()
        #expect(try decode(RetentionProjection.State.self, retention.encoded, memo: memo) == retention)
        #expect(try decode(EntitlementProjection.State.self, entitlement.encoded, memo: memo) == entitlement)
        #expect(memo.entries.count == 2)
    }

    /// A memo whose states stay in place (a status query's, over one read transaction) refers
    /// to the bytes an entry took where they lie; any other memo keeps its own copy, since an
    /// append's loaded states are freed after decoding.
    @Test func aMemoOfStatesThatStayInPlaceRefersToTheirBytesAndAnyOtherCopiesThem() throws {
        var badge = BadgeProjection.State()
        badge.subscription = facts("1000010-1", at: "2026-01-05T10:00:00Z")
        let bytes = badge.encoded
        try bytes.withUnsafeBytes { buffer in
            for stayInPlace in [true, false] {
                let memo = DecodeMemo(statesStayInPlace: stayInPlace)
                #expect(try BadgeProjection.State.decode(buffer, memo: memo) == badge)
                let entry = try #require(memo.entries.first)
                #expect((entry.bytes.baseAddress == buffer.baseAddress) == stayInPlace)
                #expect(Array(entry.bytes) == Array(bytes.prefix(entry.bytes.count)))
                #expect(entry.bytes.count > 0)
                // The same bytes again: taken from the memo, whichever it keeps.
                #expect(try BadgeProjection.State.decode(buffer, memo: memo) == badge)
                #expect(memo.entries.count == 1)
            }
        }
    }

    /// Facts stored with other bytes are decoded from their own.
    @Test func aStateWhoseFactsAreOtherBytesDecodesItsOwn() throws {
        var first = EntitlementProjection.State()
        first.subscription = facts("1000010-1", at: "2026-01-05T10:00:00Z")
        var second = BadgeProjection.State()
        second.subscription = facts("1000010-2", at: "2026-01-05T10:00:00Z")
        let memo = DecodeMemo()
        #expect(try decode(EntitlementProjection.State.self, first.encoded, memo: memo) == first)
        #expect(try decode(BadgeProjection.State.self, second.encoded, memo: memo) == second)
        #expect(memo.entries.count == 3)   // the first's facts and state, the second's facts
    }

    /// Every model's stored state, on random histories appended in batches (so states are
    /// decoded, folded and encoded again across commits), decodes and encodes back to the
    /// same bytes.
    @Test func everyStoredStateDecodesAndEncodesToItsBytes() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var history = RandomHistory(seed: 31)
            let events = history.events(subjects: 200, perSubject: 6...30)
            for chunk in stride(from: 0, to: events.count, by: 97) {
                try ledger.append(Array(events[chunk..<min(chunk + 97, events.count)]))
            }
            #expect(try roundTrips(EntitlementProjection.self, ledger) == 200)
            #expect(try roundTrips(RetentionProjection.self, ledger) == 200)
            #expect(try roundTrips(BadgeProjection.self, ledger) > 0)
        }
    }

    /// How many stored states of `projection` were checked.
    func roundTrips<P: Projection>(_ projection: P.Type, _ ledger: Ledger) throws -> Int {
        let states = try ledger.engine.servedStates(of: P.name)
        for (key, bytes) in states {
            let decoded = try bytes.withUnsafeBytes { buffer in try P.State.decode(buffer) }
            #expect(decoded.encoded == bytes, "\(P.name) \(key)")
        }
        return states.count
    }
}

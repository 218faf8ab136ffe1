import LedgerCore
import LedgerStore
import LedgerTestSupport
import Testing
@testable import LedgerProjections

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
        let bytes = encode { w in w.write("1000010-1"); w.write("pro.monthly"); w.write("1000010-1") }
        // length 9 << 1, the bytes; length 11 << 1, the bytes; slot 0 << 1 | 1.
        #expect(bytes == [18] + Array("1000010-1".utf8) + [22] + Array("pro.monthly".utf8) + [1])
    }

    @Test func stringsRoundTripThroughTheWindow() throws {
        // More distinct strings than the window holds, then ones that fell off and ones still in it.
        let strings = (0..<12).map { "s\($0)" } + ["s0", "s11", "s4", "s11", "", "é✓", "s0"]
        let bytes = encode { w in for s in strings { w.write(s) } }
        #expect(try decode(bytes) { r throws(StateReader.Damaged) in try strings.map { _ throws(StateReader.Damaged) in try r.string() } } == strings)
    }

    @Test func timestampsAreDifferencesFromTheOneBefore() throws {
        let times = [Timestamp(milliseconds: 1_767_225_600_000), Timestamp(milliseconds: 1_767_225_600_000),
                     Timestamp(milliseconds: 1_769_904_000_000), Timestamp(milliseconds: 5), Timestamp(milliseconds: -86_400_000)]
        let bytes = encode { w in for t in times { w.write(t) } }
        #expect(bytes[6] == 0)   // the same time again: one byte, zero
        #expect(try decode(bytes) { r throws(StateReader.Damaged) in try times.map { _ throws(StateReader.Damaged) in try r.timestamp() } } == times)
    }

    @Test func aReferenceBeyondTheStringsReadIsDamaged() {
        #expect(throws: StateReader.Damaged.self) {
            _ = try decode([18] + Array("1000010-1".utf8) + [3]) { r throws(StateReader.Damaged) in (try r.string(), try r.string()) }
        }
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

import Foundation
import LedgerCore
import LedgerProjections
import LedgerStore
import LedgerTestSupport
import Testing
import Synchronization

/// `ReadModelFold`: the rebuild's fold, with its second (folding) thread, on real stores.
@Suite struct ReadModelFoldTests {
    /// More events than one hand-over batch, so that the folding thread runs.
    static func appended(_ ledger: Ledger, seed: UInt64) throws -> Int {
        var history = RandomHistory(seed: seed)
        let events = history.events(subjects: 600, perSubject: 6...14)
        for chunk in stride(from: 0, to: events.count, by: 250) {
            try ledger.append(Array(events[chunk..<min(chunk + 250, events.count)]))
        }
        return events.count
    }

    static func states(_ fold: ReadModelFold) -> [String: [[UInt8]: [UInt8]]] {
        var states: [String: [[UInt8]: [UInt8]]] = [:]
        fold.forEachState { model, key, state in states[model, default: [:]][key] = state }
        return states
    }

    static func served(_ ledger: Ledger) throws -> [String: [[UInt8]: [UInt8]]] {
        var states: [String: [[UInt8]: [UInt8]]] = [:]
        for name in ledger.engine.modelNames {
            for (key, state) in try ledger.engine.servedStates(of: name) { states[name, default: [:]][Array(key.utf8)] = state }
        }
        return states
    }

    @Test func aRebuildOfManyBatchesEqualsTheIncrementalStatesByteForByte() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try Self.appended(ledger, seed: 11) > 2 * 2_048)
            let incremental = try Self.served(ledger)
            try ledger.engine.rebuild(compare: false)
            #expect(try Self.served(ledger) == incremental)
        }
    }

    /// Past `parallelFrom` states a model's states are encoded on every core; the rebuild
    /// writes them with `MDB_APPEND`, which refuses a key out of byte order (checked: a reversed
    /// sort fails here). Subjects of several scripts and cases, and more than one chunk each.
    @Test func aModelOfThousandsOfStatesIsEncodedInKeyByteOrderOnEveryCore() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var history = RandomHistory(seed: 14)
            let prefixes = ["a", "Z", "é", "Ω", "e"]
            var events: [LedgerEvent] = []
            for s in 0..<6_000 { events += history.history(of: "\(prefixes[s % prefixes.count])\(s)", count: 1) }
            for chunk in stride(from: 0, to: events.count, by: 1_000) {
                try ledger.append(Array(events[chunk..<min(chunk + 1_000, events.count)]))
            }
            let incremental = try Self.served(ledger)
            #expect(incremental.values.contains { $0.count > 4_096 })
            try ledger.engine.rebuild(compare: false)
            #expect(try Self.served(ledger) == incremental)
        }
    }

    @Test func storedAndDecodedEventsFoldToTheServedStates() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let count = try Self.appended(ledger, seed: 12)
            let stored = try (1...UInt64(count)).compactMap { try ledger.log.event(at: $0) }
            #expect(stored.count == count)
            let fromStored = ReadModelFold()
            let fromDecoded = ReadModelFold()
            for event in stored {
                try fromStored.apply(event)
                try fromDecoded.apply(try RecordedEvent(event))
            }
            try fromStored.finish()
            try fromDecoded.finish()
            let served = try Self.served(ledger)
            #expect(Self.states(fromStored) == served)
            #expect(Self.states(fromDecoded) == served)
            #expect(fromStored.stateCount == served.values.reduce(0) { $0 + $1.count })
        }
    }

    @Test func aPayloadThatDoesNotDecodeFailsTheFoldWithItsPosition() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let count = try Self.appended(ledger, seed: 13)
            let fold = ReadModelFold()
            var last = StoredEvent(position: 0, version: 0, recordedAt: Timestamp(milliseconds: 0), hash: [], draft: EventDraft(subject: "x", type: "x", occurredAt: Timestamp(milliseconds: 0), source: .app, payload: []))
            for position in 1...UInt64(count) {
                guard let event = try ledger.log.event(at: position) else { continue }
                try fold.apply(event)
                last = event
            }
            var damaged = last
            damaged.position = UInt64(count + 1)
            damaged.draft.payload = [0xFF, 0xFF, 0xFF]
            let error = #expect(throws: LedgerError.self) {
                try fold.apply(damaged)
                try fold.finish()
            }
            #expect(error?.code == .corruptRecord)
            #expect(error?.position == UInt64(count + 1))
        }
    }

    /// `discard()` hands the folded states to a thread of their own to be freed (as a rebuild
    /// does once they are written): every state is freed there, none on the caller's thread, by
    /// the time `waitUntilFreed()` returns.
    @Test func discardedStatesAreFreedOnAThreadOfTheirOwn() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let t = ts("2026-03-01T12:00:00Z")
            try ledger.append((0 ..< 40).map { Make.usage("u\($0 % 10)", at: days($0, after: t)) })
            let fold = ReadModelFold([Probed.self])
            for position in 1...UInt64(40) { if let event = try ledger.log.event(at: position) { try fold.apply(event) } }
            try fold.finish()
            #expect(fold.stateCount == 10)
            FreeProbe.freedBy.withLock { $0 = [] }
            let caller = pthread_self()
            fold.discard()
            #expect(fold.stateCount == 0)
            ReadModelFold.waitUntilFreed()
            let freedBy = FreeProbe.freedBy.withLock { $0 }
            #expect(freedBy.count == 10)
            #expect(freedBy.allSatisfy { pthread_equal($0, caller) == 0 })
            #expect(Set(freedBy.map { UInt($0) }).count == 1)   // one thread frees them all
        }
    }

    /// The folds number their keys in one shared table. A model keyed by something other than
    /// the subject numbers that key in the same table, so a key reached as one event's subject
    /// and as another's payload field is one state, inline and rebuilt alike.
    @Test func aModelKeyedByAPayloadFieldFoldsAKeyReachedBothWaysIntoOneState() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path, projections: ReadModels.all + [ByFeature.self])
            defer { ledger.close() }
            let t = ts("2026-03-01T10:00:00Z")
            try ledger.append([
                Make.session("scan", at: t, zone: "UTC"),                      // key "scan", the subject
                Make.usage("u1", at: days(1, after: t), feature: "scan"),      // key "scan", the feature
                Make.usage("scan", at: days(2, after: t), feature: "print"),   // key "print"
                Make.usage("print", at: days(3, after: t), feature: "scan"),   // key "scan"
            ])
            let expected = [("print", 1), ("scan", 3)]
            let inline = try ledger.engine.servedStates(of: ByFeature.name)
            #expect(inline.map(\.key) == expected.map(\.0))
            #expect(try inline.map { entry in try entry.state.withUnsafeBytes { try ByFeature.State.decode($0).count } } == expected.map { UInt64($0.1) })
            try ledger.engine.rebuild(compare: false)
            #expect(try ledger.engine.servedStates(of: ByFeature.name).map(\.key) == inline.map(\.key))
            #expect(try ledger.engine.servedStates(of: ByFeature.name).map(\.state) == inline.map(\.state))
            #expect(try ledger.engine.view(ByFeature.self, of: "scan", at: days(9, after: t)) == Counting.View(count: 3))
        }
    }

    /// Past one hand-over batch the reading thread numbers subjects while the folding thread
    /// numbers the features it keys usage by, in one table: features named like subjects met
    /// before, after and never, so each key is reached both ways, on both threads.
    @Test func aModelKeyedByAPayloadFieldFoldsOnTheFoldingThreadAsInline() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path, projections: ReadModels.all + [ByFeature.self])
            defer { ledger.close() }
            let t = ts("2026-03-01T10:00:00Z")
            var events: [LedgerEvent] = []
            for i in 0 ..< 6_000 {
                let at = Timestamp(milliseconds: t.milliseconds + Int64(i) * 60_000)
                events.append(i % 3 == 0 ? Make.session("s\(i % 900)", at: at, zone: "UTC")
                                         : Make.usage("s\(i % 700)", at: at, feature: "s\((i * 7) % 1_100)"))
            }
            for chunk in stride(from: 0, to: events.count, by: 1_000) {
                try ledger.append(Array(events[chunk ..< min(chunk + 1_000, events.count)]))
            }
            let inline = try ledger.engine.servedStates(of: ByFeature.name)
            #expect(inline.count == 1_100)
            try ledger.engine.rebuild(compare: false)
            let rebuilt = try ledger.engine.servedStates(of: ByFeature.name)
            #expect(rebuilt.map(\.key) == inline.map(\.key))
            #expect(rebuilt.map(\.state) == inline.map(\.state))
        }
    }
}

/// Usage counted, each state holding an object that records which thread frees it.
enum Probed: Projection {
    struct State: ProjectionState {
        var count: UInt64 = 0
        let probe = FreeProbe()
        init() {}
        func encode(to writer: inout StateWriter) { writer.write(count) }
        init(from reader: inout StateReader) throws(StateReader.Damaged) { count = try reader.uint() }
        static func == (a: State, b: State) -> Bool { a.count == b.count }
    }
    static let name = "probed"
    static let codeVersion: UInt32 = 1
    static let eventTypes: Set<String> = ["usage.recorded"]
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> Counting.View { Counting.View(count: state.count) }
}

/// Records the thread that frees it.
final class FreeProbe: Sendable {
    static let freedBy = Mutex<[pthread_t]>([])
    deinit { let thread = pthread_self(); Self.freedBy.withLock { $0.append(thread) } }
}

/// Usage counted by feature, sessions by subject: a model whose key is not always the subject.
enum ByFeature: Projection {
    typealias State = Counting.State
    static let name = "by_feature"
    static let codeVersion: UInt32 = 1
    static let eventTypes: Set<String> = ["usage.recorded", "session.started"]
    static func key(for event: RecordedEvent) -> String? {
        if case .usageRecorded(let usage) = event.data { return usage.feature }
        return event.subject
    }
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, at t: Timestamp, policy: Policy) -> Counting.View { Counting.View(count: state.count) }
}

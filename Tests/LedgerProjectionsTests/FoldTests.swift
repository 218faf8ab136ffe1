import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// The engine's folds over real stores: a rebuild's fold of the whole log against the states
/// each append folded inline.
@Suite struct FoldTests {
    static func appended(_ ledger: Ledger, seed: UInt64) throws -> Int {
        var history = RandomHistory(seed: seed)
        let events = history.events(subjects: 600, perSubject: 6...14)
        for chunk in stride(from: 0, to: events.count, by: 250) {
            try ledger.append(Array(events[chunk..<min(chunk + 250, events.count)]))
        }
        return events.count
    }

    /// Every fold's served states, by fold and key.
    static func served(_ ledger: Ledger) throws -> [String: [String: [UInt8]]] {
        var states: [String: [String: [UInt8]]] = [:]
        for name in ["facts"] + ledger.modelNames {
            for (key, state) in try ledger.servedStates(of: name) { states[name, default: [:]][key] = state }
        }
        return states
    }

    @Test func aRebuildEqualsTheStatesAppendsFoldedByteForByte() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try Self.appended(ledger, seed: 11) > 4_000)
            let incremental = try Self.served(ledger)
            try ledger.rebuild()
            #expect(try Self.served(ledger) == incremental)
        }
    }

    /// Every part of a rebuild's fold folds the keys of its own part of every fold, the folds
    /// keyed by a store's transaction ids too; on one thread or three, the states are those
    /// the appends folded.
    @Test(arguments: [1, 3]) func aRebuildOnAnyNumberOfThreadsEqualsTheStatesAppendsFolded(threads: Int) throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try Self.appended(ledger, seed: 12) > 4_000)
            let incremental = try Self.served(ledger)
            #expect(incremental["holders"]?.count ?? 0 > 100)
            #expect(incremental["transactions"]?.count ?? 0 > 100)
            ledger.setFoldThreads(threads)
            try ledger.rebuild()
            #expect(try Self.served(ledger) == incremental)
        }
    }

    /// A rebuild writes its states with `MDB_APPEND`, which refuses a key out of the store's
    /// order: subjects of several scripts, cases and lengths.
    @Test func thousandsOfSubjectsAreWrittenInTheStoresOrder() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var history = RandomHistory(seed: 14)
            let prefixes = ["a", "Z", "é", "Ω", "e", "a\u{0}", ""]
            var events: [LedgerEvent] = []
            for s in 0..<6_000 { events += history.history(of: "\(prefixes[s % prefixes.count])\(s)", count: 1) }
            for chunk in stride(from: 0, to: events.count, by: 1_000) {
                try ledger.append(Array(events[chunk..<min(chunk + 1_000, events.count)]))
            }
            let incremental = try Self.served(ledger)
            #expect(incremental.values.contains { $0.count > 4_096 })
            try ledger.rebuild()
            #expect(try Self.served(ledger) == incremental)
        }
    }

    /// A stored event whose payload does not decode fails the rebuild, naming its position,
    /// and leaves the served models as they were.
    @Test func aPayloadThatDoesNotDecodeFailsTheRebuildWithItsPosition() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            // A purchase last: every model's fold reads it.
            let count = try Self.appended(ledger, seed: 13) + 1
            try ledger.append([Make.purchase("last", at: ts("2026-06-01T00:00:00Z"), txn: "t", expires: ts("2026-07-01T00:00:00Z"))])
            let before = try Self.served(ledger)
            // Its record written again with a payload that does not decode: its type stays readable.
            var draft = try #require(try ledger.log.event(at: UInt64(count))).draft
            draft.payload = [0xFF, 0xFF, 0xFF]
            let record = EventRecord.encode(draft, version: 1, recordedAt: ts("2026-06-01T00:00:00Z")) + [UInt8](repeating: 0, count: EventRecord.hashSize)
            try ledger.log.environment.write { txn in
                let events = try #require(try txn.openDatabase(LogSchema.events, flags: []))
                try txn.put(events, key: LogSchema.key(UInt64(count)), value: record)
            }
            let error = #expect(throws: LedgerError.self) { try ledger.rebuild() }
            #expect(error?.code == .corruptRecord)
            #expect(error?.position == UInt64(count))
            #expect(try Self.served(ledger) == before)
        }
    }

    /// A position missing from the log (positions are gap-free) fails the rebuild, naming it,
    /// instead of folding what is left.
    @Test func aPositionMissingFromTheLogFailsTheRebuildWithIt() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let count = try Self.appended(ledger, seed: 17)
            #expect(count > 2)
            let before = try Self.served(ledger)
            try ledger.log.environment.write { txn in
                let events = try #require(try txn.openDatabase(LogSchema.events, flags: []))
                #expect(try txn.delete(events, key: LogSchema.key(2)))
            }
            let error = #expect(throws: LedgerError.self) { try ledger.rebuild() }
            #expect(error?.code == .corruptRecord)
            #expect(error?.position == 2)
            #expect(try Self.served(ledger) == before)
        }
    }

    /// A model keyed by something other than the subject: a key reached as one event's subject
    /// and as another's payload field is one state, inline and rebuilt alike.
    @Test func aModelKeyedByAPayloadFieldFoldsAKeyReachedBothWaysIntoOneState() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path, models: ReadModels.all + [ByFeature.self])
            defer { ledger.close() }
            let t = ts("2026-03-01T10:00:00Z")
            try ledger.append([
                Make.session("scan", at: t, zone: "UTC"),                      // key "scan", the subject
                Make.usage("u1", at: days(1, after: t), feature: "scan"),      // key "scan", the feature
                Make.usage("scan", at: days(2, after: t), feature: "print"),   // key "print"
                Make.usage("print", at: days(3, after: t), feature: "scan"),   // key "scan"
            ])
            let expected = [("print", 1), ("scan", 3)]
            let inline = try ledger.servedStates(of: ByFeature.name)
            #expect(inline.map(\.key) == expected.map(\.0))
            #expect(try inline.map { entry in try entry.state.withUnsafeBytes { try ByFeature.State.decode($0).count } } == expected.map { UInt64($0.1) })
            try ledger.rebuild()
            #expect(try ledger.servedStates(of: ByFeature.name).map(\.key) == inline.map(\.key))
            #expect(try ledger.servedStates(of: ByFeature.name).map(\.state) == inline.map(\.state))
            #expect(try ledger.view(ByFeature.self, of: "scan", at: days(9, after: t)) == Counting.View(count: 3))
            #expect(try ledger.verifyModels() == [])
        }
    }
}

/// Usage counted by feature, sessions by subject: a model whose key is not always the subject.
enum ByFeature: ReadModel {
    typealias State = Counting.State
    static let name = "by_feature"
    static let version: UInt32 = 1
    static let reads: Set<String> = [UsageRecorded.type, SessionStarted.type]
    static func key(for event: RecordedEvent) -> String? {
        if case .usageRecorded(let usage) = event.data { return usage.feature }
        return event.subject
    }
    static func apply(_ event: RecordedEvent, to state: inout State) { state.count += 1 }
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> Counting.View? { Counting.View(count: state.count) }
}

import LMDB
import LedgerCore
@testable import LedgerProjections
import LedgerStore
import LedgerTestSupport
import Testing

/// Models built together share one generation of the `models` database, each model's states
/// marked by a tag after the key, so one subject's states of every model are neighbours.
@Suite struct GenerationTests {
    let jan1 = ts("2026-01-01T00:00:00Z")

    /// Every stored key of the `models` database, in the store's order, with the generation
    /// number split off.
    private func storedKeys(_ ledger: Ledger) throws -> [(generation: UInt32, rest: [UInt8])] {
        let storage = ledger.engine.storage
        return try storage.env.read { txn in
            var keys: [(generation: UInt32, rest: [UInt8])] = []
            try txn.withCursor(storage.states) { cursor in
                var entry = try cursor.first()
                while let current = entry, let generation = ModelSchema.generation(ofKey: current.key) {
                    keys.append((generation, Array(current.key.dropFirst(4))))
                    entry = try cursor.next()
                }
            }
            return keys
        }
    }

    private func purchases(_ subjects: [String]) -> [LedgerEvent] {
        subjects.enumerated().map { i, subject in Make.purchase(subject, at: jan1, txn: "t\(i)", expires: days(30, after: jan1)) }
    }

    /// A new store serves its models from one generation, tagged by their place.
    @Test func aNewStoresModelsShareOneGenerationEachWithItsTag() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(purchases(["u1"]))
            let served = try ledger.engine.statuses().map(\.served)
            #expect(served.map { $0?.id } == [1, 1, 1])
            #expect(served.map { $0?.tag } == [0, 1, 2])
        }
    }

    /// One subject's states of every model are stored one after another, subject by subject.
    @Test func oneSubjectsStatesOfEveryModelAreNeighbours() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(purchases(["u2", "u1"]))
            let expected: [(UInt32, [UInt8])] = ["u1", "u2"].flatMap { subject in (0 ... 2).map { (1, Array(subject.utf8) + [UInt8($0)]) } }
            #expect(try storedKeys(ledger).map { [$0.generation: $0.rest] } == expected.map { [$0.0: $0.1] })
            // A full rebuild writes its shadow the same way, under the next number.
            try ledger.engine.rebuild()
            #expect(try storedKeys(ledger).map { [$0.generation: $0.rest] } == expected.map { [2: $0.1] })
            #expect(try ledger.engine.statuses().map { $0.served?.tag } == [0, 1, 2])
        }
    }

    /// Rebuilt alone, a model gets a generation of its own; the states it left in the shared one
    /// are deleted, and the other models' states there still serve.
    @Test func aModelRebuiltAloneLeavesItsSharedStatesToTheCollector() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(purchases(["u1", "u2", "u3"]))
            let before = try ReadModels.all.map { try ledger.engine.servedStates(of: $0.name) }
            try ledger.engine.rebuild(["entitlement"])
            let served = try ledger.engine.statuses().map(\.served)
            #expect(served.map { $0?.id } == [2, 1, 1])
            #expect(served.map { $0?.tag } == [nil, 1, 2])
            let keys = try storedKeys(ledger)
            #expect(keys.filter { $0.generation == 1 }.map { $0.rest.last } == [1, 2, 1, 2, 1, 2])
            #expect(keys.filter { $0.generation == 2 }.map { String(decoding: $0.rest, as: UTF8.self) } == ["u1", "u2", "u3"])
            #expect(try ReadModels.all.map { try ledger.engine.servedStates(of: $0.name) }.map { $0.map(\.key) } == before.map { $0.map(\.key) })
            #expect(try ReadModels.all.map { try ledger.engine.servedStates(of: $0.name) }.map { $0.map(\.state) } == before.map { $0.map(\.state) })
            #expect(try ledger.engine.verify() == [])
        }
    }

    /// The tag after a key can sort a key before a shorter one it begins with ("a" tagged 1
    /// after "a\u{0}" tagged 1): a rebuild still writes in the store's order, and `verify`
    /// compares in it.
    @Test func subjectsThatBeginWithAnotherAndALowByteRebuildAndVerify() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let subjects = ["a", "a\u{0}", "a\u{1}b", "a\u{2}", "ab"]
            try ledger.append(purchases(subjects) + [Make.created("a\u{1}", at: jan1)])
            let report = try ledger.engine.rebuild()
            #expect(report.changes == [])
            #expect(try ledger.engine.verify() == [])
            #expect(try ledger.engine.servedStates(of: "badge").count == 5)
            #expect(try ledger.view(EntitlementProjection.self, of: "a\u{0}", at: days(1, after: jan1)).planState == .pro)
            // A status query finds each model's state among its neighbours ("a\u{1}" has an
            // entitlement state but no badge state; "a\u{1}b" lies between its states).
            let at = days(1, after: jan1)
            for subject in subjects + ["a\u{1}", "none"] {
                let own = [try ledger.view(EntitlementProjection.self, of: subject, at: at).json,
                           try ledger.view(RetentionProjection.self, of: subject, at: at).json,
                           try ledger.view(BadgeProjection.self, of: subject, at: at).json]
                #expect(try ledger.engine.views(of: subject, at: at).views.map(\.view) == own, "\(subject.debugDescription)")
            }
        }
    }

    /// `verify` compares each model's states in a shared generation with a fresh fold, and
    /// names a state that differs, one missing and one that should not be there.
    @Test func verifyFindsAWrongAMissingAndAStrayStateInASharedGeneration() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(purchases(["u1", "u2"]))
            let served = try ledger.engine.statuses().map { try #require($0.served) }
            let storage = ledger.engine.storage
            try storage.env.write { txn in
                // Badge's state of u2 replaced by its state of u1 (a purchase at another position).
                let u1 = try #require(try storage.state(served[2], "u1", txn))
                try txn.put(storage.states, key: ModelSchema.stateKey(served[2], "u2"), value: u1)
                _ = try txn.delete(storage.states, key: ModelSchema.stateKey(served[0], "u1"))
                try txn.put(storage.states, key: ModelSchema.stateKey(served[1], "ghost"), value: u1)
            }
            #expect(try ledger.engine.verify().map(\.description) == [
                "entitlement u1: missing from the served model",
                "retention ghost: in the served model but not in a fresh rebuild",
                "badge u2: differs from a fresh rebuild",
            ])
        }
    }

    /// A layout-3 store, where every generation is a model's own, reads as it is, read only
    /// too; opened for writing it becomes layout 4 with nothing rewritten.
    @Test func aLayout3StoreReadsAsItIsAndUpgradesWithoutRewriting() throws {
        try withStorePath { path in
            let at = days(1, after: jan1)
            let before: [[(model: String, view: JSONObject)]]
            do {
                let ledger = try Ledger(path: path)
                try ledger.append(purchases(["u1", "u2"]))
                // Each model rebuilt alone: generations of their own, as layout 3 kept them.
                for model in ReadModels.all { try ledger.engine.rebuild([model.name]) }
                #expect(try ledger.engine.statuses().map { $0.served?.tag } == [nil, nil, nil])
                before = try ["u1", "u2"].map { try ledger.engine.views(of: $0, at: at).views.map { ($0.model, $0.view ?? JSONObject()) } }
                try ledger.log.environment.write { txn in
                    try txn.put(try #require(try txn.openDatabase(LogSchema.meta, flags: [])), key: LogSchema.formatKey, value: [3])
                }
                ledger.close()
            }
            var readOnly = EventLog.Options()
            readOnly.readOnly = true
            do {
                let ledger = try Ledger(path: path, options: readOnly)
                defer { ledger.close() }
                #expect(try ["u1", "u2"].map { try ledger.engine.views(of: $0, at: at).views }.map { $0.map(\.view) } == before.map { $0.map(\.view) })
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let format = try ledger.log.environment.read { txn in
                try txn.get(try #require(try txn.openDatabase(LogSchema.meta, flags: [])), key: LogSchema.formatKey).map { Array($0) }
            }
            #expect(format == [LogSchema.storeFormat])
            #expect(LogSchema.storeFormat == 5)
            #expect(try ledger.engine.statuses().map { $0.served?.id } == [2, 3, 4])
            #expect(try ledger.engine.verify() == [])
        }
    }

    /// A generation record without a tag, as every record was written before tags, is a
    /// generation of the model's own; a tagged record keeps its tag.
    @Test func aGenerationRecordWithoutATagIsTheModelsOwn() throws {
        let own = Generation(id: 7, checkpoint: 42, codeVersion: 3, policyHash: "abc")
        let shared = Generation(id: 7, checkpoint: 42, codeVersion: 3, policyHash: "abc", tag: 2)
        #expect(shared.encoded == own.encoded + [2])
        #expect(try own.encoded.withUnsafeBytes { try Generation.decode($0) } == own)
        #expect(try shared.encoded.withUnsafeBytes { try Generation.decode($0) } == shared)
        #expect(ModelSchema.stateKey(own, "u1") == [0, 0, 0, 7] + Array("u1".utf8))
        #expect(ModelSchema.stateKey(shared, "u1") == [0, 0, 0, 7] + Array("u1".utf8) + [2])
        // The generation's number big-endian, as `prefix` writes where a generation begins.
        #expect(ModelSchema.stateKey(0x0102_0304, Array("u1".utf8), tag: 9) == [1, 2, 3, 4] + Array("u1".utf8) + [9])
        #expect(ModelSchema.prefix(0x0102_0304) == [1, 2, 3, 4])
    }
}

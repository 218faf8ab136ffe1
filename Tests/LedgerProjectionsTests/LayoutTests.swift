import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// How the engine keeps its folds in the store: one generation for the facts and every
/// model, a subject's states neighbours, keyed by length and bytes so any subject is exact.
@Suite struct LayoutTests {
    let jan1 = ts("2026-01-01T00:00:00Z")

    /// Every stored key of the `models` database, in the store's order.
    private func storedKeys(_ ledger: Ledger) throws -> [[UInt8]] {
        let store = ledger.engine.store
        try ledger.engine.storeTail()
        return try store.env.read { txn in
            var keys: [[UInt8]] = []
            try txn.withCursor(store.states) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    keys.append(Array(current.key))
                    entry = try cursor.next()
                }
            }
            return keys
        }
    }

    private func served(_ ledger: Ledger) throws -> Generation {
        try #require(try ledger.engine.read { txn, overlay in try ledger.engine.store.served(txn, overlay) })
    }

    private func events(_ subjects: [String]) -> [LedgerEvent] {
        subjects.enumerated().flatMap { i, subject in
            [Make.purchase(subject, at: jan1, txn: "t\(i)", expires: days(30, after: jan1)), Make.attempt(subject, at: jan1),
             Make.recoveryPass(subject, at: jan1), Make.delivered(subject, at: jan1, message: "m")]
        }
    }

    /// A new store serves the facts and every model from one generation, each tagged by its
    /// place: the facts 0, the models in registration order.
    @Test func aNewStoreServesEveryFoldFromOneGeneration() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(events(["u1"]))
            let generation = try served(ledger)
            #expect(generation.id == 1)
            #expect(generation.folds.map(\.name) == ["facts"] + ReadModels.all.map { $0.name })
            #expect(generation.folds.map(\.tag) == Array(0 ... UInt64(ReadModels.all.count)))
            #expect(generation.folds.map(\.checkpoint) == Array(repeating: 4, count: ReadModels.all.count + 1))
        }
    }

    /// One subject's states of every fold are stored one after another: generation ‖ key
    /// length ‖ key ‖ tag; a rebuild writes the same under the next number.
    /// A fold's tag is one byte of every state key: a generation record whose tag is not a
    /// byte is damage, refused when it is read (never trapped on when used), at 255 and 256.
    @Test func aGenerationRecordWithATagAtOrPastTheItemsMarkIsDamaged() throws {
        var generation = Generation()
        generation.folds = [.init(name: "facts", tag: 0, version: 1, checkpoint: 0)]
        generation.folds[0].tag = UInt64(ModelSchema.itemMark - 1)
        #expect(try generation.encoded.withUnsafeBytes { bytes in try Generation.decode(bytes) }.folds.first?.tagByte == ModelSchema.itemMark - 1)
        generation.folds[0].tag = UInt64(ModelSchema.itemMark)
        #expect(throws: StateDecoder.Damaged.self) { try generation.encoded.withUnsafeBytes { bytes in try Generation.decode(bytes) } }
    }

    /// Tags stay below the items' mark: with every tag below it taken, a fold that needs one
    /// is refused by name of the limit, and nothing is written.
    @Test func aFoldPastTheLastTagIsRefused() throws {
        try withStorePath { path in
            do {
                let ledger = try Ledger(path: path, models: [])
                try ledger.append(events(["u1"]))
                let store = ledger.engine.store
                try ledger.engine.storeTail()
                try store.env.write { txn in
                    var served = try #require(try store.storedServed(txn))
                    for tag in 1 ..< ModelSchema.itemMark { served.folds.append(.init(name: "other-\(tag)", tag: tag, version: 1, checkpoint: 4)) }
                    try store.setStoredServed(served, txn)
                }
                ledger.close()
            }
            let error = #expect(throws: LedgerError.self) {
                let ledger = try Ledger(path: path, models: [EntitlementModel.self])
                defer { ledger.close() }
                try ledger.append([Make.attempt("u1", at: jan1)])
            }
            #expect(error?.message.contains("at most 64 folds") == true)
        }
    }

    @Test func oneSubjectsStatesAreNeighbours() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(events(["u2", "u1"]))
            let holders = UInt8(try #require(ReadModels.all.firstIndex { $0 == HoldersModel.self })) + 1
            let transactions = UInt8(try #require(ReadModels.all.firstIndex { $0 == TransactionsModel.self })) + 1
            let badge = UInt8(try #require(ReadModels.all.firstIndex { $0 == BadgeModel.self })) + 1
            let due = UInt8(try #require(ReadModels.all.firstIndex { $0 == DueModel.self })) + 1
            let expected = { (generation: UInt8) -> [[UInt8]] in
                let prefix: [UInt8] = [0, 0, 0, generation, 0, 2]
                var keys: [[UInt8]] = []
                // Who holds each store subscription and transaction, under its id (keys sort by
                // length first: t0 and t1 before the subjects, pass-1 after them).
                for original in ["t0", "t1"] { keys += [prefix + Array(original.utf8) + [holders], prefix + Array(original.utf8) + [transactions]] }
                for subject in ["u1", "u2"] {
                    // The limits and deletion models read none of these events: they have no
                    // state of them.
                    for tag in 0 ... UInt8(ReadModels.all.count) where tag != 5 && tag != 6 && tag != holders && tag != transactions {
                        keys.append(prefix + Array(subject.utf8) + [tag])
                    }
                    // Then beside them the badge's item, the message, and the due list's anchors.
                    keys.append(prefix + Array(subject.utf8) + [ModelSchema.itemMark | badge] + Array("m".utf8))
                    keys.append(prefix + Array(subject.utf8) + [ModelSchema.anchorsMark | due])
                }
                keys.append([0, 0, 0, generation, 0, 6] + Array("pass-1".utf8) + [transactions])
                return keys
            }
            #expect(try storedKeys(ledger) == expected(1))
            try ledger.rebuild()
            #expect(try storedKeys(ledger) == expected(2))
        }
    }

    /// Subjects that begin with another's bytes, with low bytes after them, each find exactly
    /// their own states, appended, rebuilt and verified.
    @Test func subjectsThatBeginWithAnotherFindTheirOwnStates() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let subjects = ["a", "a\u{0}", "a\u{1}b", "a\u{2}", "ab"]
            try ledger.append(events(subjects) + [Make.created("a\u{1}", at: jan1)])
            #expect(try ledger.rebuild().changes == [])
            #expect(try ledger.verifyModels() == [])
            #expect(try ledger.servedStates(of: "badge").map(\.key) == subjects)
            let at = days(1, after: jan1)
            for subject in subjects + ["a\u{1}", "none"] {
                let folded = try Folded(events(subjects) + [Make.created("a\u{1}", at: jan1)])
                #expect(try ledger.status(of: subject, at: at).answers.map { $0.view?.json } == [
                    folded.view(EntitlementModel.self, of: subject, at: at)?.json, folded.view(RetentionModel.self, of: subject, at: at)?.json,
                    folded.view(BadgeModel.self, of: subject, at: at)?.json, folded.view(AccessModel.self, of: subject, at: at)?.json,
                    folded.view(LimitsModel.self, of: subject, at: at)?.json,
                    folded.view(DeletionModel.self, of: subject, at: at)?.json,
                ], "\(subject.debugDescription)")
            }
        }
    }

    /// `verify` compares every fold's states with a fresh fold, and names a state that
    /// differs, one missing and one that should not be there.
    @Test func verifyFindsAWrongAMissingAndAStrayState() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(events(["u1", "u2"]))
            let id = try served(ledger).number
            let store = ledger.engine.store
            try ledger.engine.storeTail()
            try store.env.write { txn in
                // Badge's state of u2 counting another unread message; its item of u1 gone.
                let stored = try #require(try store.state(id, tag: 3, "u2", txn, .none))
                var badge = try stored.withUnsafeBytes { bytes throws(StateDecoder.Damaged) in try BadgeModel.State.decode(bytes) }
                badge.unread += 1
                try txn.put(store.states, key: ModelSchema.stateKey(id, "u2", tag: 3), value: badge.encoded)
                #expect(try txn.delete(store.states, key: ModelSchema.itemKey(id, tag: 3, ItemKey(key: "u1", item: "m"))))
                _ = try txn.delete(store.states, key: ModelSchema.stateKey(id, "u1", tag: 1))
                let retention = try #require(try store.state(id, tag: 2, "u1", txn, .none))
                try txn.put(store.states, key: ModelSchema.stateKey(id, "ghost", tag: 2), value: retention)
            }
            let found = [
                "entitlement u1: missing from the served model",
                "retention ghost: in the served model but not in a fresh rebuild",
                "badge u2: differs from a fresh rebuild",
                "badge u1 · m: missing from the served model",
            ]
            #expect(try ledger.verifyModels().map(\.description) == found)
            // Checked a subject or so at a time (bounded memory), the same problems are found.
            #expect(try Set(ledger.verifyModels(keysPerPass: 1).map(\.description)) == Set(found))
        }
    }

    /// A key of the models' database that is neither a state's, an item's nor an anchor
    /// list's — a mark no fold uses, or cut short of its length — is named by `verify`, not
    /// read as anything.
    @Test func verifyNamesKeysThatAreNoStateItemOrAnchorList() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(events(["u1"]))
            let id = try served(ledger).number
            let store = ledger.engine.store
            try store.env.write { txn in
                try txn.put(store.states, key: ModelSchema.keyPrefix(id, "u1") + [0xC3], value: [1])
                try txn.put(store.states, key: ModelSchema.prefix(id) + [0, 9, 0x75], value: [1])
            }
            #expect(try ledger.verifyModels().map(\.description) == ["models: 2 item keys are damaged; run `ledger rebuild`"])
            #expect(try ledger.status(of: "u1", at: jan1).answers.count == 6)
        }
    }

    /// A served state that does not decode is what `ledger rebuild` is told to mend: the
    /// rebuild says it could not compare that model's views, and replaces the state.
    @Test func aRebuildReplacesAServedStateThatDoesNotDecode() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(events(["u1", "u2"]))
            let id = try served(ledger).number
            let store = ledger.engine.store
            try ledger.engine.storeTail()
            try store.env.write { txn in try txn.put(store.states, key: ModelSchema.stateKey(id, "u2", tag: 3), value: [0xFF, 0xFF, 0xFF]) }
            #expect(try ledger.verifyModels().map(\.description) == ["badge u2: differs from a fresh rebuild"])
            let error = #expect(throws: LedgerError.self) { try ledger.status(of: "u2") }
            #expect(error?.code == .corruptRecord)
            let report = try ledger.rebuild()
            #expect(report.notCompared == ["badge"])
            #expect(try ledger.verifyModels() == [])
            #expect(try ledger.status(of: "u2").answers.count == ReadModels.all.filter { $0.shownInStatus }.count)
        }
    }

    /// A damaged generation record fails reads, and the next open for writing builds the
    /// models again from the log in a new generation; a rebuild deletes the old one's states.
    @Test func aDamagedGenerationRecordIsBuiltAgainWhenTheStoreOpens() throws {
        try withStorePath { path in
            let old: UInt32
            do {
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                try ledger.append(events(["u1", "u2"]))
                old = try served(ledger).number
                let store = ledger.engine.store
                try store.env.write { txn in try txn.put(store.generations, key: ModelSchema.servedKey, value: [0xFF]) }
                let error = #expect(throws: LedgerError.self) { try ledger.status(of: "u1") }
                #expect(error?.code == .corruptRecord)
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try served(ledger).number != old)
            #expect(try ledger.verifyModels() == [])
            #expect(try ledger.status(of: "u1").answers.count == ReadModels.all.filter { $0.shownInStatus }.count)
            try ledger.rebuild()
            let store = ledger.engine.store
            #expect(try store.env.read { txn in try store.storedGenerations(txn) }.contains(old) == false)
        }
    }

    /// Read models of a layout newer than this code's are refused, not wiped: a newer ledger
    /// built them.
    @Test func readModelsOfANewerLayoutAreRefusedAndKept() throws {
        try withStorePath { path in
            let states: Int
            do {
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                try ledger.append(events(["u1"]))
                let store = ledger.engine.store
                try store.env.write { txn in try txn.put(store.generations, key: ModelSchema.layoutKey, value: [ModelSchema.layout + 1]) }
                states = try ledger.servedStates(of: "entitlement").count
            }
            let error = #expect(throws: LedgerError.self) { _ = try Ledger(path: path) }
            #expect(error?.code == .unsupportedFormat)
            #expect(error?.message.contains("newer than this ledger's") == true)
            // Put back to this layout, the same states are there: nothing was wiped.
            do {
                let env = try Environment(path: path)
                let generations = try env.openDatabase(ModelSchema.generations, flags: [])
                try env.write { txn in try txn.put(generations, key: ModelSchema.layoutKey, value: [ModelSchema.layout]) }
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(states == 1)
            #expect(try ledger.servedStates(of: "entitlement").count == states)
        }
    }

    /// A store whose models were kept in the first layout (a generation per model, no layout
    /// record) is refused read only, and opened for writing its models are built again.
    @Test func aStoreOfTheFirstModelsLayoutIsBuiltAgain() throws {
        try withStorePath { path in
            do {
                let ledger = try Ledger(path: path)
                try ledger.append(events(["u1", "u2"]))
                try ledger.engine.store.env.write { txn in
                    _ = try txn.delete(ledger.engine.store.generations, key: ModelSchema.layoutKey)
                    try txn.put(ledger.engine.store.generations, key: Array("served/entitlement".utf8), value: [1, 2, 3])
                }
                ledger.close()
            }
            var readOnly = EventLog.Options()
            readOnly.readOnly = true
            #expect { _ = try Ledger(path: path, options: readOnly) } throws: { error in
                (error as? LedgerError)?.message.contains("open the store once for writing") == true
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try served(ledger).folds.allSatisfy { $0.checkpoint == 8 })
            #expect(try ledger.view(EntitlementModel.self, of: "u2", at: days(1, after: jan1))?.planState == .pro)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A store of layout 4, which kept items in a database of their own, is built again when
    /// opened for writing, and that database is dropped: its items now live beside the states.
    @Test func aLayout4StoresItemDatabaseIsDroppedAndItsModelsBuiltAgain() throws {
        try withStorePath { path in
            do {
                let ledger = try Ledger(path: path)
                try ledger.append(events(["u1", "u2"]))
                let store = ledger.engine.store
                try store.env.write { txn in
                    try txn.put(store.generations, key: ModelSchema.layoutKey, value: [4])
                    let items = try #require(try txn.openDatabase(ModelSchema.oldItems, flags: [.create]))
                    try txn.put(items, key: [0, 0, 0, 1, 0, 2] + Array("u1".utf8) + [3, 0x6D], value: [1])
                }
                ledger.close()
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let store = ledger.engine.store
            #expect(try store.env.write { txn in try txn.openDatabase(ModelSchema.oldItems, flags: []) } == nil)
            #expect(try store.env.read { txn in try txn.get(store.generations, key: ModelSchema.layoutKey).map { Array($0) } } == [ModelSchema.layout])
            #expect(try ledger.view(BadgeModel.self, of: "u2", at: jan1)?.unreadInbox == 1)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A model registered after the store was built gets the next tag and catches up from
    /// the start of the log when the store opens.
    @Test func aModelAddedLaterCatchesUpFromTheStart() throws {
        try withStorePath { path in
            do {
                let ledger = try Ledger(path: path, models: [EntitlementModel.self])
                try ledger.append(events(["u1"]) + [Make.delivered("u1", at: jan1, message: "m2")])
                ledger.close()
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let generation = try served(ledger)
            #expect(generation.folds.map(\.name) == ["facts", "entitlement"] + ReadModels.all.dropFirst().map { $0.name })
            #expect(generation.folds.map(\.checkpoint) == Array(repeating: 5, count: ReadModels.all.count + 1))
            #expect(try ledger.view(BadgeModel.self, of: "u1", at: jan1)?.unreadInbox == 2)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A generation record round-trips; keys are generation ‖ length ‖ key ‖ tag.
    @Test func aGenerationRecordAndAStateKeyAreWhatTheLayoutSays() throws {
        var generation = Generation()
        generation.id = 7
        generation.policyHash = "abc"
        generation.folds = [.init(name: "facts", tag: 0, version: 1, checkpoint: 42)]
        #expect(try generation.encoded.withUnsafeBytes { try Generation.decode($0) } == generation)
        #expect(ModelSchema.stateKey(0x0102_0304, "u1", tag: 9) == [1, 2, 3, 4, 0, 2] + Array("u1".utf8) + [9])
        // Beside the states: a key's anchor list and its items (an item past 200 bytes as its hash).
        #expect(ModelSchema.anchorsKey(0x0102_0304, tag: 9, key: "u1") == [1, 2, 3, 4, 0, 2] + Array("u1".utf8) + [0x89])
        #expect(ModelSchema.itemKey(0x0102_0304, tag: 3, ItemKey(key: "u1", item: "m7")) == [1, 2, 3, 4, 0, 2] + Array("u1".utf8) + [0x43] + Array("m7".utf8))
        let long = String(repeating: "é", count: 101)
        #expect(ModelSchema.itemKey(1, tag: 3, ItemKey(key: "u1", item: long)) == [0, 0, 0, 1, 0, 2] + Array("u1".utf8) + [0x43, 0xFF] + Array(SHA256.hash(data: Array(long.utf8))))
        #expect(ModelSchema.itemKey(1, tag: 3, ItemKey(key: "u1", item: String(repeating: "é", count: 100))) == [0, 0, 0, 1, 0, 2] + Array("u1".utf8) + [0x43] + Array(String(repeating: "é", count: 100).utf8))
        // In the index: "e" ‖ generation ‖ tag ‖ anchor (sign flipped, big-endian) ‖ length ‖ key, and "o" ‖ generation ‖ tag.
        #expect(ModelSchema.anchorKey(0x0102_0304, tag: 2, key: "u1", anchor: Timestamp(milliseconds: 5))
                == [0x65, 1, 2, 3, 4, 2, 0x80, 0, 0, 0, 0, 0, 0, 5, 0, 2] + Array("u1".utf8))
        #expect(ModelSchema.anchorKey(1, tag: 2, key: "", anchor: Timestamp(milliseconds: -1)) == [0x65, 0, 0, 0, 1, 2, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0])
        #expect(ModelSchema.entryPrefix(0x0102_0304, tag: 2) == [0x65, 1, 2, 3, 4, 2])
        #expect(ModelSchema.offsetsKey(0x0102_0304, tag: 2) == [0x6F, 1, 2, 3, 4, 2])
        #expect(ModelSchema.keyPrefix(0x0102_0304, "u1") == [1, 2, 3, 4, 0, 2] + Array("u1".utf8))
        let parsed = [UInt8]([1, 2, 3, 4, 0, 2, 0x75, 0x31, 9]).withUnsafeBytes { ModelSchema.parse($0, in: 0x0102_0304) }
        #expect(parsed?.key == "u1")
        #expect(parsed?.tag == 9)
    }
}

@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// The due list (SPEC §4 "Due"): kept in each append's transaction as a time-ordered index,
/// read by range without reading any subject's state, moved by late facts, rebuilt the same.
@Suite struct DueTests {
    let mar1 = ts("2026-03-01T12:00:00Z")
    let all = (ts("2020-01-01T00:00:00Z"), ts("2030-01-01T00:00:00Z"))

    func lines(_ items: [DueItem]) -> [String] { items.map { "\($0.subject) \($0.at) \($0.kind) \(JSON.object($0.detail).serialized())" } }

    /// A one-day window over 300 customers reads the index, not their states: with every state
    /// taken out of the store it gives the same items (and a status has nothing left to read).
    @Test func aWindowReadsNoStates() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append((0 ..< 300).map { i in
                Make.purchase("c\(i)", at: mar1.adding(seconds: Int64(i) * 3600), txn: "t\(i)", expires: days(7, after: mar1.adding(seconds: Int64(i) * 3600)), trial: true)
            })
            let window = (days(5, after: mar1), days(6, after: mar1))
            let items = try ledger.due(from: window.0, to: window.1)
            #expect(items.count == 24)
            #expect(items.allSatisfy { $0.kind == "trialEndingSoon" && DueModel.Kind(rawValue: $0.kind) == .trialEndingSoon })
            let store = ledger.engine.store
            try ledger.engine.storeTail()
            try store.env.write { txn in try txn.removeAll(store.states) }
            #expect(try ledger.due(from: window.0, to: window.1) == items)
            #expect(try ledger.view(EntitlementModel.self, of: "c0", at: mar1)?.planState == .guest)
        }
    }

    /// A window parses each distinct detail once; a detail that is no JSON (a damaged store)
    /// still fails it, naming the entry, whether a good detail came before it or another
    /// entry shares it.
    @Test func aDamagedDetailFailsTheWindowNamingItsEntry() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append((0 ..< 3).map { i in Make.purchase("c\(i)", at: mar1, txn: "t\(i)", expires: days(7, after: mar1), trial: true) })
            let window = (days(5, after: mar1), days(6, after: mar1))
            let items = try ledger.due(from: window.0, to: window.1)
            #expect(items.map(\.subject) == ["c0", "c1", "c2"])
            let store = ledger.engine.store
            try ledger.engine.storeTail()
            try store.env.write { txn in
                let served = try #require(try store.storedServed(txn))
                let record = try #require(served.record(DueModel.name))
                let overlay = Overlay.none
                for subject in ["c1", "c2"] {
                    let damaged = IndexEntry(at: items[1].at, kind: items[1].kind, serializedDetail: "{\"transactionId\":", anchor: items[1].at)
                    try store.setEntries([damaged], of: subject, generation: served.number, tag: record.tagByte, txn, overlay)
                }
                try overlay.store(into: store, txn)
            }
            let error = #expect(throws: LedgerError.self) { try ledger.due(from: window.0, to: window.1) }
            #expect(error?.code == .corruptRecord)
            #expect(error?.message.contains("the index entry of c1 at \(items[1].at) has a damaged detail") == true)
        }
    }

    /// Two details the same but for how a transaction id is spelled in Unicode (composed and
    /// decomposed) are two details: each item keeps its own bytes.
    @Test func aDetailKeepsItsOwnSpellingOfAnId() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let composed = "t-\u{E9}", decomposed = "t-e\u{301}"
            try ledger.append([
                Make.purchase("c0", at: mar1, txn: composed, expires: days(7, after: mar1), trial: true),
                Make.purchase("c1", at: mar1, txn: decomposed, expires: days(7, after: mar1), trial: true),
            ])
            let items = try ledger.due(from: days(5, after: mar1), to: days(6, after: mar1))
            #expect(items.map(\.subject) == ["c0", "c1"])
            let ids = items.map { item -> [UInt8] in
                if case .string(let id)? = item.detail["transactionId"] { Array(id.utf8) } else { [] }
            }
            #expect(ids == [Array(composed.utf8), Array(decomposed.utf8)])
        }
    }

    /// The stored entries of `subject` in the due index, by anchor: each anchor with its
    /// entries' kinds.
    func anchors(_ ledger: Ledger, of subject: String) throws -> [Timestamp: Int] {
        let store = ledger.engine.store
        return try ledger.engine.read { txn, overlay in
            let record = try #require(try store.served(txn, overlay)?.record(DueModel.name))
            let generation = try #require(try store.served(txn, overlay)?.number)
            var found: [Timestamp: Int] = [:]
            try store.allEntries(generation: generation, tag: record.tagByte, txn, overlay) { key, entry in
                if key == subject { found[entry.anchor, default: 0] += 1 }
            }
            return found
        }
    }

    /// A renewal moves one stored entry (SPEC §4: the cost of a renewal does not grow with the
    /// items it moves): a monthly subscriber's predicted lapse, its six e-mails and three tier
    /// changes are filed under the lapse, and a renewal files them under the next one. A
    /// window finds each item at its own distance from the anchor.
    @Test func aRenewalMovesOneAnchor() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let apr1 = ts("2026-04-01T12:00:00Z"), may1 = ts("2026-05-01T12:00:00Z")
            try ledger.append([Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1)])
            #expect(try anchors(ledger, of: "u") == [apr1: 9])
            try ledger.append([Make.renewal("u", at: apr1, txn: "t2", original: "t1", expires: may1)])
            #expect(try anchors(ledger, of: "u") == [may1: 9])
            #expect(try lines(ledger.due(from: days(350, after: may1), to: days(351, after: may1))) == [#"u 2027-04-16T12:00:00.000Z retentionEmail {"day":350}"#])
            #expect(try lines(ledger.due(from: days(31, after: may1), to: days(32, after: may1))) == [
                #"u 2026-06-01T12:00:00.000Z retentionEmail {"day":31}"#,
                #"u 2026-06-01T12:00:00.000Z tierChanged {"tier":"browseOnly"}"#,
            ])
            #expect(try lines(ledger.due(from: days(31, after: may1).adding(milliseconds: 1), to: days(60, after: may1))) == [])
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// Items are predictions until their time: a refund reported late removes the trial's
    /// reminder, an extension moves it; `verify` finds the index equal to a fresh build.
    @Test func aLateFactMovesOrRemovesAnItem() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append([Make.purchase("u", at: mar1, txn: "t1", expires: days(7, after: mar1), trial: true),
                               Make.purchase("v", at: mar1, txn: "v1", expires: days(7, after: mar1), trial: true)])
            #expect(try lines(ledger.due(from: all.0, to: all.1)) == [
                #"u 2026-03-06T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-08T12:00:00.000Z","channel":"push"}"#,
                #"v 2026-03-06T12:00:00.000Z trialEndingSoon {"transactionId":"v1","trialEndsAt":"2026-03-08T12:00:00.000Z","channel":"push"}"#,
            ])
            try ledger.append([Make.refund("u", at: days(2, after: mar1), txn: "t1", original: "t1"),
                               Make.extended("v", at: days(1, after: mar1), txn: "v1", original: "v1", until: days(9, after: mar1))])
            #expect(try lines(ledger.due(from: all.0, to: all.1)) == [
                #"v 2026-03-08T12:00:00.000Z trialEndingSoon {"transactionId":"v1","trialEndsAt":"2026-03-10T12:00:00.000Z","channel":"push"}"#,
            ])
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A store built without the due model gets its whole due list when the model is added:
    /// its catch-up works out the entries of every key whose facts changed, not only of those
    /// whose due state did.
    @Test func aDueModelAddedToAStoreListsWhatItsFactsMakeDue() throws {
        try withStorePath { path in
            do {
                let ledger = try Ledger(path: path, models: [EntitlementModel.self])
                try ledger.append([Make.purchase("u", at: mar1, txn: "t1", expires: days(7, after: mar1), trial: true)])
                ledger.close()
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try lines(ledger.due(from: all.0, to: all.1)) == [
                #"u 2026-03-06T12:00:00.000Z trialEndingSoon {"transactionId":"t1","trialEndsAt":"2026-03-08T12:00:00.000Z","channel":"push"}"#,
            ])
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// SPEC §2.1: the same events in any order give the same due list, and a rebuild gives the
    /// one the appends kept.
    @Test func anyOrderAndARebuildGiveTheSameDueList() async {
        await checkProperty(count: 10, input: Gen.uint64()) { seed in
            var history = RandomHistory(seed: seed)
            let events = history.events(subjects: 4, perSubject: 4...20)
            let shuffled = history.shuffled(events)
            let first = try withStorePath { path in
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                try ledger.append(events)
                return try lines(ledger.due(from: all.0, to: all.1))
            }
            try withStorePath { path in
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                for event in shuffled { try ledger.append([event]) }
                #expect(try lines(ledger.due(from: all.0, to: all.1)) == first, "seed \(seed)")
                try ledger.rebuild()
                #expect(try lines(ledger.due(from: all.0, to: all.1)) == first, "seed \(seed)")
                #expect(try ledger.verifyModels() == [], "seed \(seed)")
            }
        }
    }
}

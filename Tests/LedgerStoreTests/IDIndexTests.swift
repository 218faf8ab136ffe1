import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// Replaces a store's id index with layout 2's (event id → position, u64 BE, a key each) and
/// marks the store `format`, in `txn`.
func rewriteIDsAsLayout2(_ txn: borrowing Transaction, format: UInt8) throws {
    let events = try #require(try txn.openDatabase(LogSchema.events, flags: []))
    let meta = try #require(try txn.openDatabase(LogSchema.meta, flags: []))
    if let index = try txn.openDatabase(LogSchema.ids, flags: LogSchema.idsFlags) { try txn.drop(index) }
    let layout2 = try #require(try txn.openDatabase("ids", flags: [.create]))
    try txn.withCursor(events) { cursor in
        var entry = try cursor.first()
        while let e = entry {
            try txn.put(layout2, key: try #require(EventRecord.id(ofRecord: e.value)).bytes, value: Array(e.key))
            entry = try cursor.next()
        }
    }
    try txn.put(meta, key: LogSchema.formatKey, value: [format])
}

/// The id index of store layout 3: one key, whose values are SHA-256(id)'s first 8 bytes ‖
/// the position in 6 bytes, sorted.
@Suite struct IDIndexTests {
    @Test func anEntryIsTheIdsHashPrefixThenItsPositionInSixBytes() throws {
        let id = try #require(EventID("0b6d2c1e-8f3a-4c5b-9d7e-1a2b3c4d5e6f"))
        let hash = Array(SHA256.hash(data: id.bytes).prefix(8))
        #expect(LogSchema.idEntry(id, position: 0x01_0203_0405) == hash + [0, 1, 2, 3, 4, 5])
        #expect(LogSchema.idEntry(id, position: 1) == hash + [0, 0, 0, 0, 0, 1])
    }

    @Test func everyEventIsOneSortedValueOfTheOneKey() throws {
        try withStorePath { path in
            let drafts = (0..<60).map { draft("user-\($0 % 4)", $0) }
            do {
                let log = try EventLog(path: path)
                try log.append(Array(drafts[..<25]))
                try log.append(Array(drafts[25...]))
                log.close()
            }
            let entries = try entries(of: LogSchema.ids, flags: LogSchema.idsFlags, at: path)
            let expected = drafts.enumerated().map { LogSchema.idEntry($1.id, position: UInt64($0 + 1)) }
            #expect(entries.map(\.key) == Array(repeating: LogSchema.idKey, count: 60))
            #expect(entries.map(\.value) == expected.sorted { $0.lexicographicallyPrecedes($1) })
        }
    }

    @Test func anEventIsFoundByItsIdAndAnUnknownIdIsNot() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let drafts = (0..<200).map { draft("user-\($0 % 7)", $0) }
            try log.append(drafts)
            for (i, draft) in drafts.enumerated() {
                #expect(try log.event(id: draft.id)?.position == UInt64(i + 1))
            }
            #expect(try log.event(id: EventID.random()) == nil)
        }
    }

    /// Two ids under one hash prefix (made here by adding entries, as a real collision of 64
    /// bits cannot be): each lookup reads the records and answers with the event that has the id.
    @Test func idsSharingAHashPrefixAreToldApartByTheirRecords() throws {
        try withStorePath { path in
            let drafts = (0..<10).map { draft("user-\($0 % 2)", $0) }
            try writeStore(path, drafts)
            do {
                let env = try Environment(path: path)
                let ids = try env.openDatabase(LogSchema.ids, flags: LogSchema.idsFlags)
                try env.write { txn in
                    // Event 3's prefix also points at 7 (after it); event 7's also at 2 (before it).
                    try txn.put(ids, key: LogSchema.idKey, value: LogSchema.idEntry(drafts[2].id, position: 7))
                    try txn.put(ids, key: LogSchema.idKey, value: LogSchema.idEntry(drafts[6].id, position: 2))
                }
            }
            let log = try EventLog(path: path)
            #expect(try log.event(id: drafts[2].id)?.position == 3)
            #expect(try log.event(id: drafts[6].id)?.position == 7)
            let again = try log.append([drafts[6], drafts[2]])
            #expect(again.outcomes == [.duplicate(position: 7), .duplicate(position: 3)])
            #expect(try log.lastPosition() == 10)
        }
    }

    /// A store written with layout 2 (a key per id) gets the packed index the first time it is
    /// opened for writing, and the old database is gone; read only, it is refused with what to do.
    @Test func aLayout2StoreIsUpgradedWhenOpenedForWriting() throws {
        try withStorePath { path in
            let drafts = (0..<30).map { draft("user-\($0 % 3)", $0) }
            try writeStore(path, drafts)
            do {
                let env = try Environment(path: path)
                try env.write { txn in try rewriteIDsAsLayout2(txn, format: 2) }
            }
            expectReadOnlyOpenRefused(path, layout: 2)
            do {
                let log = try EventLog(path: path)
                #expect(try log.verify() == VerifyReport(eventsChecked: 30, problem: nil))
                #expect(try log.event(id: drafts[17].id)?.position == 18)
                #expect(try log.append([drafts[4]]).outcomes == [.duplicate(position: 5)])
                log.close()
            }
            let entries = try entries(of: LogSchema.ids, flags: LogSchema.idsFlags, at: path)
            #expect(entries.map(\.value) == drafts.enumerated().map { LogSchema.idEntry($1.id, position: UInt64($0 + 1)) }.sorted { $0.lexicographicallyPrecedes($1) })
            let env = try Environment(path: path)
            #expect(throws: LMDBError.self) { try env.openDatabase("ids", flags: []) }
        }
    }
}

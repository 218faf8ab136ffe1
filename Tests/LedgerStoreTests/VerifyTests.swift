@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// Tampering goes through the raw LMDB layer, with the log closed (one handle per process).
@Suite struct VerifyTests {
    func store(_ path: String, events: Int = 20) throws {
        let log = try EventLog(path: path)
        try log.append((0..<events).map { draft("user-\($0 % 3)", $0) })
        #expect(try log.verify() == VerifyReport(eventsChecked: UInt64(events), problem: nil))
    }

    /// Opens the raw environment and one of the log's databases, and writes to it.
    func tamper(_ path: String, _ name: String, flags: Database.Flags = [], _ body: (borrowing Transaction, Database) throws -> Void) throws {
        let env = try Environment(path: path)
        let db = try env.openDatabase(name, flags: flags)
        try env.write { txn in try body(txn, db) }
    }

    func verify(_ path: String) throws -> VerifyReport {
        try EventLog(path: path).verify(chunkSize: 6)
    }

    @Test func aSoundLogVerifies() throws {
        try withStorePath { path in
            try store(path, events: 100)
            #expect(try verify(path) == VerifyReport(eventsChecked: 100, problem: nil))
        }
    }

    @Test func aFlippedByteInAnEventIsFoundAtItsPosition() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.events) { txn, db in
                var record = try #require(try txn.get(db, key: LogSchema.key(7)).map { Array($0) })
                record[record.count - EventRecord.trailerSize - 1] ^= 0x01   // the payload's last byte
                try txn.put(db, key: LogSchema.key(7), value: record)
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .hashMismatch)
            #expect(report.problem?.position == 7)
            #expect(report.eventsChecked == 6)
        }
    }

    /// A broken chain used to be noticed only by `verify`: appends kept extending it. The last
    /// link is checked before every append; nothing is appended to a broken one.
    @Test func anAppendRefusesToExtendABrokenChain() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.events) { txn, db in
                var record = try #require(try txn.get(db, key: LogSchema.key(20)).map { Array($0) })
                record[record.count - EventRecord.trailerSize - 1] ^= 0x01
                try txn.put(db, key: LogSchema.key(20), value: record)
            }
            let log = try EventLog(path: path)
            defer { log.close() }
            do throws(LedgerError) {
                _ = try log.append([draft("user-9", 99)])
                Issue.record("appended to a broken chain")
            } catch {
                #expect(error.code == .corruptRecord)
                #expect(error.message == "the log's hash chain is broken at its last event, position 20: appending would extend a damaged chain; "
                        + "run `ledger verify`, and restore the store from an export or a backup")
            }
            #expect(try log.stats().events == 20)
        }
    }

    /// The last link is checked against the record before it: a damaged hash there breaks it too.
    @Test func anAppendRefusesWhenTheRecordBeforeTheLastIsDamaged() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.events) { txn, db in
                var record = try #require(try txn.get(db, key: LogSchema.key(19)).map { Array($0) })
                record[record.count - 1] ^= 0x80   // its hash's last byte
                try txn.put(db, key: LogSchema.key(19), value: record)
            }
            let log = try EventLog(path: path)
            defer { log.close() }
            #expect(throws: LedgerError.self) { try log.append([draft("user-9", 99)]) }
            #expect(try log.stats().events == 20)
        }
    }

    @Test func aFlippedByteThatBreaksTheEncodingIsABadRecord() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.events) { txn, db in
                var record = try #require(try txn.get(db, key: LogSchema.key(3)).map { Array($0) })
                record[17] = 0xEE                         // the source code byte
                try txn.put(db, key: LogSchema.key(3), value: record)
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .badRecord)
            #expect(report.problem?.position == 3)
        }
    }

    @Test func aMissingIdIndexEntryIsFound() throws {
        try withStorePath { path in
            try store(path)
            let id = try #require(try EventLog(path: path).event(at: 11)?.id)
            try tamper(path, LogSchema.ids, flags: LogSchema.idsFlags) { txn, db in
                let removed = try txn.delete(db, key: LogSchema.idKey, value: LogSchema.idEntry(id, position: 11))
                #expect(removed)
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .idIndex)
            #expect(report.problem?.position == 11)
            #expect(report.problem?.message.contains("missing from the id index") == true)
        }
    }

    @Test func anExtraIdIndexEntryIsFound() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.ids, flags: LogSchema.idsFlags) { txn, db in
                try txn.put(db, key: LogSchema.idKey, value: LogSchema.idEntry(EventID.random(), position: 4))
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .idIndex)
            #expect(report.problem?.position == 4)
        }
    }

    @Test func aMissingStreamIndexEntryIsFound() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.streams) { txn, db in
                // user-2's events are at positions 3, 6, 9, 12, 15, 18: its one chunk loses
                // position 6 (version 2), packed as 3 and then the differences 6, 3, 3, 3.
                try txn.put(db, key: LogSchema.streamKey("user-2", version: 1), value: [3, 6, 3, 3, 3])
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .streamIndex)
            #expect(report.problem?.position == 6)
        }
    }

    @Test func aStreamIndexPositionOfAnotherSubjectIsFound() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.streams) { txn, db in
                // user-2's chunk (3, 6, …, 18) gains position 19, user-0's seventh event.
                try txn.put(db, key: LogSchema.streamKey("user-2", version: 1), value: [3, 3, 3, 3, 3, 3, 1])
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .streamIndex)
            #expect(report.problem?.position == 19)
            #expect(report.eventsChecked == 20)
        }
    }

    @Test func aStreamIndexEntryThatIsNotARunOfPositionsIsFound() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.streams) { txn, db in
                // A truncated integer: the high bit says another byte follows.
                try txn.put(db, key: LogSchema.streamKey("user-1", version: 1), value: [2, 0x85])
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .streamIndex)
            #expect(report.problem?.position == 2)
            #expect(report.problem?.message == "the stream index of user-1: an entry of the stream index is damaged; run `ledger verify`")
        }
    }

    @Test func aMissingPositionIsAGap() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.events) { txn, db in
                let removed = try txn.delete(db, key: LogSchema.key(9))
                #expect(removed)
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .positionGap)
            #expect(report.problem?.position == 9)
        }
    }

    @Test func aSubjectCountOutOfStepIsFound() throws {
        try withStorePath { path in
            try store(path)
            try tamper(path, LogSchema.meta) { txn, db in
                try txn.put(db, key: LogSchema.subjectCountKey, value: LogSchema.key(99))
            }
            let report = try verify(path)
            #expect(report.problem?.kind == .subjectCount)
            #expect(report.problem?.message == "the store counts 99 subjects; the log holds 3")
        }
    }
}

@Suite struct GrowthTests {
    @Test func aStoreOpenedWithATinyMapTakesOneHundredThousandEvents() throws {
        try withStorePath { path in
            var options = EventLog.Options()
            options.initialMapSize = 64 << 10
            let log = try EventLog(path: path, options: options)
            for batch in 0..<100 {
                try log.append((0..<1_000).map { draft("user-\(($0 + batch) % 97)", batch * 1_000 + $0) })
            }
            #expect(try log.lastPosition() == 100_000)
            #expect(log.environment.growths > 0)
            #expect(log.environment.info().mapSize > 64 << 10)
            let expected = (0..<100).reduce(0) { sum, batch in sum + (0..<1_000).filter { ($0 + batch) % 97 == 5 }.count }
            #expect(try log.events(subject: "user-5").collect().count == expected)
            #expect(try log.verify().isValid)
        }
    }
}

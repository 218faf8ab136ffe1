@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// The stream index of store layout 2: each subject's positions packed in chunks of 128
/// versions under the chunk's first version.
@Suite struct StreamIndexTests {
    @Test func aSubjectsPositionsArePackedAsDifferencesInOneEntry() throws {
        try withStorePath { path in
            do {
                let log = try EventLog(path: path)
                // a at positions 1, 3, 4; b at 2.
                try log.append([draft("a", 0), draft("b", 1), draft("a", 2)])
                try log.append([draft("a", 3)])
                log.close()
            }
            let entries = try entries(of: LogSchema.streams, at: path)
            #expect(entries.map(\.key) == [LogSchema.streamKey("a", version: 1), LogSchema.streamKey("b", version: 1)])
            #expect(entries.map(\.value) == [[1, 2, 1], [2]])
        }
    }

    /// 300 events of one subject fill two chunks of 128 and start a third; versions and
    /// reads from any version cross them.
    @Test func aLongStreamSpansChunksOf128() throws {
        try withStorePath { path in
            do {
                let log = try EventLog(path: path)
                for start in stride(from: 0, to: 300, by: 50) {
                    try log.append((start..<start + 50).flatMap { [draft("long", $0), draft("other-\($0 % 7)", $0)] })
                }
                #expect(try log.events(subject: "long").collect().map(\.version) == Array(1...300))
                #expect(try log.events(subject: "long", fromVersion: 127, chunkSize: 3).collect().map(\.version) == Array(127...300))
                #expect(try log.events(subject: "long", fromVersion: 256).collect().map(\.position) == (256...300).map { UInt64(2 * $0 - 1) })
                let result = try log.append([draft("long", 999)], expecting: ["long": .exact(300)])
                #expect(result.outcomes == [.appended(position: 601, version: 301)])
                #expect(try log.verify() == VerifyReport(eventsChecked: 601, problem: nil))
                log.close()
            }
            let longKeys = try entries(of: LogSchema.streams, at: path).map(\.key).filter { $0.starts(with: LogSchema.streamPrefix("long")) }
            #expect(longKeys == [1, 129, 257].map { LogSchema.streamKey("long", version: $0) })
        }
    }

    /// A damaged chunk found by the writer (extending it, or checking an expected version)
    /// aborts the whole transaction: the append fails as a damaged record and nothing of the
    /// batch is written.
    @Test func aDamagedChunkFailsTheAppendAndWritesNothing() throws {
        try withStorePath { path in
            do {
                let log = try EventLog(path: path)
                try log.append([draft("a", 0), draft("b", 1)])
                log.close()
            }
            do {
                let env = try Environment(path: path)
                let streams = try env.openDatabase(LogSchema.streams)
                // A truncated integer: the high bit says another byte follows.
                try env.write { txn in try txn.put(streams, key: LogSchema.streamKey("b", version: 1), value: [0x82]) }
            }
            let log = try EventLog(path: path)
            defer { log.close() }
            do throws(LedgerError) {
                _ = try log.append([draft("a", 2), draft("b", 3)])
                Issue.record("an append over a damaged stream index succeeded")
            } catch {
                #expect(error.code == .corruptRecord)
                #expect(error.message == "committing an append: the stream index of b is damaged; run `ledger verify`")
            }
            // Found while checking an expected version (before any write), the same.
            do throws(LedgerError) {
                _ = try log.append([draft("a", 4), draft("b", 5)], expecting: ["b": .exact(1)])
                Issue.record("an append expecting a version over a damaged stream index succeeded")
            } catch {
                #expect(error.code == .corruptRecord)
                #expect(error.message == "committing an append: the stream index of b is damaged; run `ledger verify`")
            }
            #expect(try log.lastPosition() == 2)
            #expect(try log.events(subject: "a").collect().map(\.position) == [1])
        }
    }

    /// A store written with layout 1 (a stream key per event) is upgraded in place the first
    /// time it is opened for writing; read only, it is refused with what to do.
    @Test func aLayout1StoreIsUpgradedWhenOpenedForWriting() throws {
        try withStorePath { path in
            try writeStore(path, (0..<40).map { draft("user-\($0 % 3)", $0) })
            try rewriteAsLayout1(path, events: 40)
            expectReadOnlyOpenRefused(path, layout: 1)
            do {
                let log = try EventLog(path: path)
                #expect(try log.events(subject: "user-1").collect().map(\.position) == Array(stride(from: 2, through: 40, by: 3)))
                #expect(try log.verify() == VerifyReport(eventsChecked: 40, problem: nil))
                let result = try log.append([draft("user-1", 99)], expecting: ["user-1": .exact(13)])
                #expect(result.outcomes == [.appended(position: 41, version: 14)])
                log.close()
            }
            #expect(try entries(of: LogSchema.streams, at: path).count == 3)
        }
    }

    /// Rewrites a store's stream index as layout 1 had it (prefix ‖ version → position, u64
    /// BE), its id index as layouts 1 and 2 had it, and marks the store layout 1; subjects are
    /// `user-(position - 1) % 3`.
    func rewriteAsLayout1(_ path: String, events count: UInt64) throws {
        let env = try Environment(path: path)
        let streams = try env.openDatabase(LogSchema.streams)
        let events = try env.openDatabase(LogSchema.events)
        try env.write { txn in
            try txn.removeAll(streams)
            var versions: [String: UInt64] = [:]
            for position in 1...count {
                let subject = "user-\((position - 1) % 3)"
                versions[subject, default: 0] += 1
                #expect(try txn.get(events, key: LogSchema.key(position)) != nil)
                try txn.put(streams, key: LogSchema.streamKey(subject, version: versions[subject] ?? 0), value: LogSchema.key(position))
            }
            try rewriteIDsAsLayout2(txn, format: 1)
        }
    }
}

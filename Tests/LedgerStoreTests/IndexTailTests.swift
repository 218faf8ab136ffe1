@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) @testable import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Dispatch
import Glibc
import PropertyBased
import Synchronization
import Testing

/// Store layout 5: the id and stream index entries of the latest events stay in memory (the
/// index tail) until `indexTailLimit` events gather, then go into the stored indexes inside
/// the append that reaches the limit, and when the log closes.
@Suite struct IndexTailTests {
    /// A log whose tail is merged once it holds `limit` events.
    static func log(_ path: String, limit: Int) throws -> EventLog {
        var options = EventLog.Options()
        options.indexTailLimit = limit
        return try EventLog(path: path, options: options)
    }

    /// The position the stored indexes are complete through, and how many entries the stored
    /// id index holds, as the open log's environment sees them.
    static func stored(_ log: EventLog) throws -> (indexed: UInt64?, ids: Int) {
        let env = log.environment
        let meta = try env.openDatabase(LogSchema.meta, flags: [])
        let ids = try env.openDatabase(LogSchema.ids, flags: LogSchema.idsFlags)
        return try env.read { txn in
            (try txn.get(meta, key: LogSchema.indexedKey).flatMap(LogSchema.integer), try txn.count(ids))
        }
    }

    @Test func theLatestEventsAreFoundByIdAndSubjectBeforeTheStoredIndexesHoldThem() throws {
        try withStorePath { path in
            let drafts = (0..<180).map { draft("user-\($0 % 3)", $0) }
            let log = try Self.log(path, limit: 50)
            for start in stride(from: 0, to: 180, by: 20) { try log.append(Array(drafts[start ..< start + 20])) }
            // Merged at the 50th, 100th and 150th event, inside the batches that reached them:
            // the last 30 are in the tail.
            #expect(try Self.stored(log) == (150, 150))
            for (index, draft) in drafts.enumerated() {
                #expect(try log.event(id: draft.id)?.position == UInt64(index + 1))
            }
            for subject in 0..<3 {
                let positions = try log.events(subject: "user-\(subject)", chunkSize: 7).collect().map(\.position)
                #expect(positions == Array(stride(from: UInt64(subject + 1), through: 180, by: 3)))
                #expect(try log.version(of: "user-\(subject)") == UInt64(positions.count))
            }
            // The tail's events are duplicates like any other, as are the stored ones, and an
            // id of either with other content is a conflict (SPEC §2.1); the next versions
            // follow them.
            let again = try log.append(Array(drafts[160 ..< 180]))
            #expect(again.duplicates == 20)
            #expect(try log.append(Array(drafts[0 ..< 20])).duplicates == 20)
            for index in [5, 170] {
                var altered = drafts[index]
                altered.payload = draft("user-9", 9_999).payload
                do throws(LedgerError) {
                    try log.append([altered])
                    Issue.record("event \(index) with other content was appended")
                } catch {
                    #expect(error.code == .idConflict)
                    #expect(error.position == UInt64(index + 1))
                }
            }
            let next = try log.append([draft("user-0", 1_000)])
            #expect(next.outcomes == [.appended(position: 181, version: 61)])
            #expect(try log.verify().isValid)
            log.close()
            #expect(try Self.stored(log) == (181, 181))
        }
    }

    /// One append larger than the limit merges inside its own transaction each time the tail
    /// reaches it, so that a streamed batch of any size keeps a bounded tail; the appends of
    /// the same transaction after a merge still find the versions it merged.
    @Test func anAppendLargerThanTheLimitMergesInsideItsTransaction() throws {
        try withStorePath { path in
            let drafts = (0..<230).map { draft("user-\($0 % 2)", $0) }
            let log = try Self.log(path, limit: 50)
            try log.append(Array(drafts[..<30]))
            #expect(try Self.stored(log) == (0, 0))
            // 30 + 120: merged at 50 and 100 events, then at 150.
            let result = try log.append(Array(drafts[30 ..< 150]))
            #expect(result.outcomes.last == .appended(position: 150, version: 75))
            #expect(try Self.stored(log) == (150, 150))
            var lines = drafts[150...].makeIterator()
            let summary = try log.appendStream { Events(take: { lines.next().map { StreamedEvent(draft: $0) } }) }
            #expect(summary.appended == 80)
            #expect(try Self.stored(log) == (200, 200))
            #expect(try log.version(of: "user-0") == 115)
            #expect(try log.events(subject: "user-1").collect().map(\.position) == Array(stride(from: UInt64(2), through: 230, by: 2)))
            for (index, draft) in drafts.enumerated() { #expect(try log.event(id: draft.id)?.position == UInt64(index + 1)) }
            #expect(try log.verify().isValid)
        }
    }

    /// A source of streamed events from a closure.
    struct Events: StreamedEvents {
        let take: () -> StreamedEvent?
        mutating func next() throws -> StreamedEvent? { take() }
    }

    /// However often the tail is merged (at every append, every 333 events, only when the log
    /// closes), the stored indexes end up the same, byte for byte: the layout's entries for
    /// every event.
    @Test func mergingTheTailAtOnceWritesTheSameIndexesAsMergingEveryAppend() async {
        await checkProperty(count: 12, input: Gen.uint64()) { seed in
            var generator = DataGenerator(state: seed)
            // Some subjects with more events than one stream chunk holds (128).
            let drafts = (0..<700).map { n in draft("s\(generator.next() % (generator.next() % 2 == 0 ? 3 : 40))", n) }
            var stores: [[[(key: [UInt8], value: [UInt8])]]] = []
            for limit in [1, 333, 1_000_000] {
                try withStorePath { path in
                    // Released before the store is opened again (one environment per store in
                    // a process).
                    do {
                        let log = try Self.log(path, limit: limit)
                        var start = 0
                        while start < drafts.count {
                            let size = Int(generator.next() % 90) + 1
                            try log.append(Array(drafts[start ..< min(start + size, drafts.count)]))
                            start += size
                        }
                        #expect(try log.verify().isValid, "seed \(seed), limit \(limit)")
                        log.close()
                    }
                    stores.append([try entries(of: LogSchema.ids, flags: LogSchema.idsFlags, at: path), try entries(of: LogSchema.streams, at: path)])
                }
            }
            // What layout 5 stores once merged, whenever that was: one id entry per event,
            // sorted; each subject's positions in runs of 128 from versions 1, 129, …, each
            // run's first position whole and the others as differences, in LEB128.
            let ids = drafts.enumerated().map { LogSchema.idEntry($1.id, position: UInt64($0 + 1)) }
                .sorted { $0.lexicographicallyPrecedes($1) }.map { (key: LogSchema.idKey, value: $0) }
            var positions: [String: [UInt64]] = [:]
            for (index, draft) in drafts.enumerated() { positions[draft.subject, default: []].append(UInt64(index + 1)) }
            let streams = positions.flatMap { subject, positions in
                stride(from: 0, to: positions.count, by: 128).map { start in
                    let run = positions[start ..< min(start + 128, positions.count)]
                    var value: [UInt8] = []
                    var previous: UInt64 = 0
                    for position in run {
                        value.appendVarint(position - previous)
                        previous = position
                    }
                    return (key: LogSchema.streamKey(subject, version: UInt64(start + 1)), value: value)
                }
            }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
            for (limit, store) in zip([1, 333, 1_000_000], stores) {
                for (index, (name, expected)) in [("ids", ids), ("streams", streams)].enumerated() {
                    #expect(store[index].map(\.key) == expected.map(\.key), "seed \(seed), limit \(limit): \(name)")
                    #expect(store[index].map(\.value) == expected.map(\.value), "seed \(seed), limit \(limit): \(name)")
                }
            }
        }
    }

    /// A store whose stored indexes another process has brought past this process's tail
    /// (it appended and closed): the tail drops what they now hold, and every event is found
    /// once, whether this process, the other or both indexed it.
    @Test func aTailMergedByAnotherProcessIsDroppedNotCountedTwice() throws {
        try withStorePath { path in
            let log = try Self.log(path, limit: 1_000_000)
            defer { log.close() }
            let mine = (0..<30).map { draft("subject-0", $0) }
            try log.append(mine)
            #expect(try Self.stored(log) == (0, 0))
            let child = try Child(["append-many", path, "500"])
            let (status, lines) = child.finish()
            #expect(status == 0 && lines.contains("done"))
            #expect(try Self.stored(log) == (530, 530))
            // The child's 500 events are five batches of 100, batch n of subject-n.
            #expect(try log.version(of: "subject-0") == 30 + 100)
            #expect(try log.events(subject: "subject-0").collect().map(\.version) == Array(1...130))
            #expect(try log.event(id: mine[29].id)?.position == 30)
            #expect(try log.event(id: EventID(high: 4, low: 99))?.position == 530)
            let next = try log.append([draft("subject-0", 99)])
            #expect(next.outcomes == [.appended(position: 531, version: 131)])
            #expect(try log.verify().isValid)
        }
    }

    /// A reader looks events up in its own copy of the tail, with no lock held: an append
    /// commits, and adds its entries to the tail, while a reader is inside its read — and the
    /// reader still sees its snapshot, the tail included.
    @Test func anAppendCommitsWhileAReaderIsInsideItsReadAndTheReaderKeepsItsSnapshot() throws {
        try withStorePath { path in
            let log = try Self.log(path, limit: 1_000)
            defer { log.close() }
            let first = draft("user-0", 0)
            let second = draft("user-0", 1)
            try log.append([first])
            let appended = DispatchSemaphore(value: 0)
            try log.storage.readIndexed("a test's read") { txn, tail throws in
                DispatchQueue.global().async {
                    _ = try? log.append([second])
                    appended.signal()
                }
                // Were a lock held across the read, the append could not add its entries
                // until the read ended: this would time out.
                #expect(appended.wait(timeout: .now() + 60) == .success)
                #expect(try log.storage.version(of: "user-0", txn, tail: tail) == 1)
                #expect(try log.storage.stored(first.id, txn, tail: tail)?.position == 1)
                #expect(try log.storage.stored(second.id, txn, tail: tail)?.position == nil)
                #expect(try log.storage.streamPositions(of: "user-0", from: 1, limit: 10, txn, tail: tail).map(\.position) == [1])
            }
            #expect(try log.version(of: "user-0") == 2)
            #expect(try log.event(id: second.id)?.position == 2)
        }
    }

    /// Readers on four threads while one appends one event at a time, the tail merged every
    /// 40 events: every read sees a whole snapshot — each subject's version, its events by
    /// stream and the last event by id as the log holds them through the snapshot's head —
    /// whether its copy of the tail was current, lagged a commit or predated a merge.
    @Test func readersBesideAnAppenderAlwaysSeeAWholeSnapshot() throws {
        try withStorePath { path in
            let log = try Self.log(path, limit: 40)
            defer { log.close() }
            let drafts = (0..<400).map { draft("user-\($0 % 5)", $0) }
            let stop = Atomic<Bool>(false)
            let reads = Atomic<Int>(0)
            let problems = Mutex<[String]>([])
            let group = DispatchGroup()
            for reader in 0..<4 {
                DispatchQueue.global().async(group: group) {
                    var round = 0
                    while !stop.load(ordering: .acquiring) {
                        let subject = (reader + round) % 5
                        do throws(LedgerError) {
                            let problem = try log.storage.readIndexed("a test's read") { txn, tail -> String? in
                                // Event n (from 1) is drafts[n - 1], of subject (n - 1) % 5.
                                let head = Int(try log.storage.head(txn).position)
                                let expected = (0..<head).filter { $0 % 5 == subject }.map { UInt64($0 + 1) }
                                let version = try log.storage.version(of: "user-\(subject)", txn, tail: tail)
                                let positions = try log.storage.streamPositions(of: "user-\(subject)", from: 1, limit: 1_000, txn, tail: tail).map(\.position)
                                let last = head == 0 ? nil : try log.storage.stored(drafts[head - 1].id, txn, tail: tail)?.position
                                guard version == UInt64(expected.count), positions == expected, head == 0 || last == UInt64(head) else {
                                    return "at head \(head), user-\(subject): version \(version), positions \(positions), last found at \(String(describing: last))"
                                }
                                return nil
                            }
                            if let problem { problems.withLock { $0.append(problem) } }
                        } catch {
                            problems.withLock { $0.append(error.message) }
                        }
                        reads.add(1, ordering: .relaxed)
                        round += 1
                    }
                }
            }
            while reads.load(ordering: .relaxed) < 4 { usleep(1_000) }   // the readers under way
            for draft in drafts { try log.append([draft]) }
            stop.store(true, ordering: .releasing)
            group.wait()
            #expect(problems.withLock { Array($0.prefix(3)) } == [])
            #expect(try log.events(subject: "user-3").collect().map(\.position) == Array(stride(from: UInt64(4), through: 400, by: 5)))
            #expect(try log.verify().isValid)
        }
    }

    /// The shared tail moves only forward, whoever offers it: a copy brought up to a later
    /// commit replaces it and an older one does not; a commit's entries join it only where it
    /// ends; a merge starts it over unless a reader's copy got there first; and a copy built
    /// again for another store replaces whatever it holds.
    @Test func theSharedTailMovesOnlyForwardWhateverOffersIt() {
        /// A tail after `base` through `head`, event n of subject "s" at version n.
        func tail(after base: UInt64, through head: UInt64) -> IndexTail {
            var tail = IndexTail(base: base)
            for position in stride(from: base + 1, through: head, by: 1) {
                tail.add(id: EventID(high: 0, low: position), hash: position, subject: "s", version: position, position: position)
            }
            return tail
        }
        let tails = IndexTails(limit: 100)
        tails.publish(tail(after: 0, through: 5), .advanced)
        #expect(tails.snapshot.head == 5)
        tails.publish(tail(after: 0, through: 3), .advanced)
        #expect(tails.snapshot.head == 5)
        tails.absorb(tail(after: 5, through: 7), merged: false)
        #expect((tails.snapshot.base, tails.snapshot.head, tails.snapshot.version(of: "s")) == (0, 7, 7))
        #expect(tails.snapshot.positions(of: "s", from: 6, limit: 5).map(\.position) == [6, 7])
        tails.absorb(tail(after: 5, through: 8), merged: false)   // not where it ends
        #expect(tails.snapshot.head == 7)
        tails.absorb(tail(after: 9, through: 10), merged: true)
        #expect((tails.snapshot.base, tails.snapshot.head) == (9, 10))
        #expect(tails.snapshot.position(of: EventID(high: 0, low: 6)) == nil)
        #expect(tails.snapshot.position(of: EventID(high: 0, low: 10)) == 10)
        tails.publish(tail(after: 12, through: 12), .advanced)   // a reader saw a later merge
        tails.absorb(tail(after: 12, through: 12), merged: true)
        #expect((tails.snapshot.base, tails.snapshot.head) == (12, 12))
        tails.publish(tail(after: 0, through: 2), .restarted)
        #expect((tails.snapshot.base, tails.snapshot.head) == (0, 2))
    }

    /// Dropping what the stored indexes now hold keeps each subject's later events, numbered
    /// on from the version the stored index ends at.
    @Test func droppingTheMergedEventsKeepsEachStreamsLaterVersions() {
        var tail = IndexTail(base: 0)
        for position in UInt64(1)...10 {
            let subject = position % 2 == 0 ? "even" : "odd"
            tail.add(id: EventID(high: 1, low: position), hash: position, subject: subject, version: (position + 1) / 2, position: position)
        }
        tail.drop(through: 6)
        #expect((tail.base, tail.head, tail.count) == (6, 10, 4))
        #expect(tail.positions(of: "even").map(\.version) == [4, 5])
        #expect(tail.positions(of: "even").map(\.position) == [8, 10])
        #expect(tail.positions(of: "odd").map(\.position) == [7, 9])
        #expect(tail.version(of: "odd") == 5)
        #expect(tail.position(of: EventID(high: 1, low: 6)) == nil)
        tail.drop(through: 10)
        #expect(tail.streams.isEmpty && tail.ids.isEmpty && tail.positions.isEmpty)
    }
}

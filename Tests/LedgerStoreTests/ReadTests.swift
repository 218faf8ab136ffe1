import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Synchronization
import Testing

@Suite struct ReadTests {
    /// 50 events over three subjects, read back in chunks of 7 so every read crosses chunks.
    func fifty(_ log: EventLog) throws {
        try log.append((0..<50).map { draft("user-\($0 % 3)", $0) })
    }

    /// Readers that never pause — by subject, by id, versions, personal fields opened — beside
    /// a thread appending one event at a time: every append finishes (readers look events up
    /// in their own copy of the index tail), and every reader keeps reading.
    @Test func appendsFinishBesideReadersThatNeverPause() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            try log.append((0..<2_000).map { draft("user-\($0 % 20)", $0) } + [PersonalDataTests.note("user-3", "a note")])
            let stop = Mutex(false)
            let reads = Mutex([Int](repeating: 0, count: 4))
            let group = DispatchGroup()
            for thread in 0..<4 {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    var i = thread
                    while !stop.withLock({ $0 }) {
                        let subject = "user-\(i % 20)"
                        switch i % 3 {
                        case 0: _ = try? log.events(subject: subject, chunkSize: 64).collect()
                        case 1: _ = try? log.version(of: subject)
                        default: _ = try? log.event(at: UInt64(i % 2_000) + 1)
                        }
                        reads.withLock { $0[thread] += 1 }
                        i += 4
                    }
                }
            }
            var appended = 0
            for n in 0..<200 {
                appended += try log.append([draft("user-\(n % 20)", 10_000 + n)]).appended
            }
            stop.withLock { $0 = true }
            group.wait()
            #expect(appended == 200)
            #expect(reads.withLock { $0.allSatisfy { $0 > 0 } })
            #expect(try log.lastPosition() == 2_201)
        }
    }

    @Test func forwardReadsARangeInPositionOrderAcrossChunks() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try fifty(log)
            #expect(try log.events(chunkSize: 7).collect().map(\.position) == Array(1...50))
            #expect(try log.events(from: 13, through: 29, chunkSize: 7).collect().map(\.position) == Array(13...29))
            #expect(try log.events(from: 51).collect().isEmpty)
        }
    }

    @Test func backwardReadsARangeNewestFirstAcrossChunks() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try fifty(log)
            #expect(try log.eventsBackward(chunkSize: 7).collect().map(\.position) == Array((1...50).reversed()))
            #expect(try log.eventsBackward(from: 29, through: 13, chunkSize: 7).collect().map(\.position) == Array((13...29).reversed()))
            #expect(try log.eventsBackward(from: 500, through: 48).collect().map(\.position) == [50, 49, 48])
        }
    }

    @Test func aSubjectReadsInVersionOrderFromAnyVersion() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try fifty(log)
            let all = try log.events(subject: "user-1", chunkSize: 4).collect()
            #expect(all.map(\.version) == Array(1...17))
            #expect(all.allSatisfy { $0.subject == "user-1" })
            #expect(try log.events(subject: "user-1", fromVersion: 15).collect().map(\.version) == [15, 16, 17])
            #expect(try log.events(subject: "nobody").collect().isEmpty)
        }
    }

    @Test func aSubjectIsNotConfusedWithOneItPrefixes() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("ab", 1), draft("a", 2), draft("abc", 3), draft("a", 4)])
            #expect(try log.events(subject: "a").collect().map(\.position) == [2, 4])
            #expect(try log.events(subject: "ab").collect().map(\.position) == [1])
        }
    }

    @Test func asyncIterationStreamsTheSameEvents() async throws {
        try await withStorePath { path in
            let log = try EventLog(path: path)
            try fifty(log)
            var positions: [UInt64] = []
            for try await event in log.events(chunkSize: 9) { positions.append(event.position) }
            #expect(positions == Array(1...50))
        }
    }

    @Test func aForwardReadFollowsEventsAppendedWhileItRuns() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try fifty(log)
            var iterator = log.events(chunkSize: 10).makeBlockingIterator()
            var seen: [UInt64] = []
            while let event = try iterator.next() {
                seen.append(event.position)
                if event.position == 45 { try log.append([draft("late", 99)]) }
            }
            #expect(seen == Array(1...51))
        }
    }
}

@Suite struct AppendPropertyTests {
    /// Batches drawn from a pool of 30 events, so ids repeat within and across batches.
    @Test func anyBatchingOfRepeatedEventsStoresEachIdOnceWithGapFreePositions() async {
        let pool = (0..<30).map { draft("user-\($0 % 4)", $0) }
        await checkProperty(count: 25, input: Gen.int(in: 0...29).array(of: 1...8).array(of: 1...12)) { batches in
            try withStorePath { path in
                let log = try EventLog(path: path)
                for batch in batches {
                    let drafts = batch.map { pool[$0] }
                    let result = try log.append(drafts)
                    for (draft, outcome) in zip(drafts, result.outcomes) {
                        #expect(try log.event(at: outcome.position)?.id == draft.id)
                    }
                }
                let distinct = Set(batches.flatMap { $0 })
                let events = try log.events().collect()
                #expect(events.map(\.position) == Array(1...UInt64(distinct.count)))
                #expect(Set(events.map(\.id)) == Set(distinct.map { pool[$0].id }))
                #expect(try log.verify().isValid)
            }
        }
    }
}

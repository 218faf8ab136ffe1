import Dispatch
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Synchronization
import Testing

@Suite struct AppendTests {
    @Test func everyFieldReadsBackByPositionByIdAndBySubject() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            var note = SupportNoteAdded()
            note.text = "Called about a double charge: \u{0}\u{7F} ☃ \"quoted\""
            note.agent = "agent-7"
            let original = EventDraft(
                id: EventID("0b6d2f4e-8a1c-4c3b-9f00-1234567890ab") ?? .random(), subject: "user-42 ☃",
                type: SupportNoteAdded.type, schemaVersion: 1,
                occurredAt: Timestamp(milliseconds: 1_772_357_400_123), source: .support,
                meta: ["correlationId": "c-1", "actor": "tester"], payload: EventCatalog.encode(note.eventData))
            let result = try log.append([draft("someone-else"), original])
            #expect(result.outcomes == [.appended(position: 1, version: 1), .appended(position: 2, version: 1)])

            let byPosition = try #require(try log.event(at: 2))
            #expect(byPosition.draft == original)
            #expect(byPosition.position == 2)
            #expect(byPosition.version == 1)
            #expect(byPosition.hash.count == 32)
            #expect(try log.event(id: original.id) == byPosition)
            #expect(try log.events(subject: "user-42 ☃").collect() == [byPosition])
            #expect(try log.events(from: 2).collect() == [byPosition])
            #expect(try log.event(at: 3) == nil)
            #expect(try log.event(id: .random()) == nil)
        }
    }

    @Test func recordedAtIsStampedByTheLedgerAndNeverGoesBackwards() throws {
        try withStorePath { path in
            let clock = Mutex<Int64>(5_000)
            var options = EventLog.Options()
            options.clock = { Timestamp(milliseconds: clock.withLock { $0 }) }
            let log = try EventLog(path: path, options: options)
            try log.append([draft("a", 1)])
            clock.withLock { $0 = 1_000 }       // the wall clock steps back
            try log.append([draft("a", 2)])
            #expect(try log.event(at: 1)?.recordedAt == Timestamp(milliseconds: 5_000))
            #expect(try log.event(at: 2)?.recordedAt == Timestamp(milliseconds: 5_000))
        }
    }

    @Test func positionsStayGapFreeUnderEightConcurrentAppenders() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let appended = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for k in 0..<60 {
                    let size = 1 + (worker + k) % 4
                    let batch = (0..<size).map { i in draft(k % 2 == 0 ? "shared-\(k % 5)" : "own-\(worker)", worker * 1000 + k * 10 + i) }
                    do {
                        let result = try log.append(batch)
                        appended.withLock { $0 += result.appended }
                    } catch {
                        Issue.record("append failed: \(error)")
                    }
                }
            }
            let total = appended.withLock { $0 }
            let events = try log.events().collect()
            #expect(events.map(\.position) == Array(1...UInt64(total)))
            var versions: [String: UInt64] = [:]
            for event in events {
                #expect(event.version == (versions[event.subject] ?? 0) + 1, "versions of \(event.subject) must be 1, 2, 3… in position order")
                versions[event.subject] = event.version
            }
            for (subject, version) in versions { #expect(try log.version(of: subject) == version) }
            #expect(try log.verify().isValid)
        }
    }

    @Test func sixtyFourConcurrentSingleEventAppendsShareTransactions() async throws {
        try await withStorePath { path in
            let log = try EventLog(path: path)
            let positions = try await withThrowingTaskGroup(of: UInt64.self) { group in
                for n in 0..<64 {
                    group.addTask { try await log.append([draft("user-\(n)", n)]).outcomes[0].position }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(positions.sorted() == Array(1...64))
            let counters = log.commitCounters
            #expect(counters.batches == 64)
            #expect(counters.transactions < 64, "group commit should gather concurrent appends into shared transactions")
        }
    }

    @Test func anEmptyBatchWritesNothing() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            #expect(try log.append([]) == AppendResult(outcomes: []))
            #expect(try log.lastPosition() == 0)
        }
    }

    @Test func aNoSyncLogAppendsAndSyncs() throws {
        try withStorePath { path in
            var options = EventLog.Options()
            options.durability = .noSync
            let log = try EventLog(path: path, options: options)
            try log.append((0..<100).map { draft("bulk", $0) })
            try log.sync()
            #expect(try log.lastPosition() == 100)
        }
    }

    @Test func aReadOnlyLogReadsButRefusesAppends() throws {
        try withStorePath { path in
            do { try EventLog(path: path).append([draft("a")]) }
            var options = EventLog.Options()
            options.readOnly = true
            let log = try EventLog(path: path, options: options)
            #expect(try log.lastPosition() == 1)
            #expect(throws: LedgerError.self) { try log.append([draft("a", 2)]) }
        }
    }

    @Test func aClosedLogRefusesAppendsWithASayingError() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            log.close()
            do {
                try log.append([draft("a")])
                Issue.record("append after close should fail")
            } catch let error as LedgerError {
                #expect(error.code == .closed)
            }
            #expect(try log.lastPosition() == 0)
        }
    }

    /// Blocking and async appenders on a real log, closed while they run (the protocol alone:
    /// `GroupCommitTests`): every append either is stored at the position it reported or throws
    /// `.closed`, and `close()` returns only once every append it let in is stored.
    @Test(.timeLimit(.minutes(1))) func blockingAndAsyncAppendersClosedMidwayLoseNothing() async throws {
        try await withStorePath { path in
            let log = try EventLog(path: path)
            let outcomes = Outcomes()
            let record = outcomes.record
            let threads = DispatchGroup()
            for worker in 0..<4 {
                DispatchQueue.global().async(group: threads) {
                    for k in 0..<400 { record("thread-\(worker)", Result { try log.append([draft("thread-\(worker)", k)]) }) }
                }
            }
            await withTaskGroup(of: Void.self) { tasks in
                for worker in 0..<4 {
                    tasks.addTask {
                        for k in 0..<400 {
                            do { record("task-\(worker)", .success(try await log.append([draft("task-\(worker)", k)]))) } catch { record("task-\(worker)", .failure(error)) }
                        }
                    }
                }
                tasks.addTask {
                    while outcomes.stored.withLock({ $0.count }) < 200 { try? await Task.sleep(for: .milliseconds(1)) }
                    log.close()
                    outcomes.storedAtClose.withLock { $0 = try? log.lastPosition() }
                }
            }
            await withCheckedContinuation { done in threads.notify(queue: .global()) { done.resume() } }
            let positions = outcomes.stored.withLock { $0 }
            #expect(positions.count + outcomes.refused.withLock { $0 } == 3_200)
            #expect(positions.count >= 200)
            #expect(try log.lastPosition() == UInt64(positions.count))
            #expect(outcomes.storedAtClose.withLock { $0 } == UInt64(positions.count), "an append was stored after close() returned")
            for event in try log.events().collect() { #expect(positions[event.position] == event.subject) }
        }
    }
}

/// What concurrent appenders were told: the position of each stored event's subject, how many
/// were refused because the log closed, and the last position stored when `close()` returned.
private final class Outcomes: Sendable {
    let stored = Mutex<[UInt64: String]>([:])
    let refused = Mutex(0)
    let storedAtClose = Mutex<UInt64?>(nil)

    @Sendable func record(_ subject: String, _ result: Result<AppendResult, any Error>) {
        switch result {
        case .success(let appended): stored.withLock { $0[appended.outcomes[0].position] = subject }
        case .failure(let error as LedgerError) where error.code == .closed: refused.withLock { $0 += 1 }
        case .failure(let error): Issue.record("append failed: \(error)")
        }
    }
}

@Suite struct IdempotencyTests {
    @Test func reAppendingAnEventIsANoOpThatReportsItsPosition() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let event = draft("user-1")
            try log.append([draft("user-0"), event])
            let again = try log.append([event])
            #expect(again.outcomes == [.duplicate(position: 2)])
            #expect(again.appended == 0)
            #expect(again.duplicates == 1)
            #expect(again.firstPosition == nil)
            #expect(try log.lastPosition() == 2)
        }
    }

    @Test func aRepeatInsideOneBatchReportsTheFirstOccurrence() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let event = draft("user-1")
            let result = try log.append([event, draft("user-2"), event])
            #expect(result.outcomes == [.appended(position: 1, version: 1), .appended(position: 2, version: 1), .duplicate(position: 1)])
        }
    }

    @Test func theSameIdWithOtherContentIsAConflictAndNothingOfTheBatchIsWritten() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let event = draft("user-1", 1)
            try log.append([event])
            var altered = event
            altered.payload = draft("user-1", 2).payload
            do {
                try log.append([draft("user-2"), altered])
                Issue.record("a changed event under a stored id must conflict")
            } catch let error as LedgerError {
                #expect(error.code == .idConflict)
                #expect(error.index == 1)
                #expect(error.position == 1)
                #expect(error.field == "/id")
            }
            #expect(try log.lastPosition() == 1)
            #expect(try log.version(of: "user-2") == 0)
        }
    }

    @Test func theSameIdWithOtherContentInsideOneBatchIsAConflict() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let event = draft("user-1", 1)
            var altered = event
            altered.occurredAt = Timestamp(milliseconds: 0)
            #expect(throws: LedgerError.self) { try log.append([event, altered]) }
            #expect(try log.lastPosition() == 0)
        }
    }
}

@Suite struct ExpectedVersionTests {
    @Test func exactVersionThatMatchesAppends() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("user-1", 1), draft("user-1", 2)])
            let result = try log.append([draft("user-1", 3)], to: "user-1", expectedVersion: .exact(2))
            #expect(result.outcomes == [.appended(position: 3, version: 3)])
        }
    }

    @Test func exactVersionThatDiffersNamesExpectedAndActual() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("user-1", 1), draft("user-1", 2)])
            do {
                try log.append([draft("user-1", 3)], to: "user-1", expectedVersion: .exact(1))
                Issue.record("a stale expected version must fail")
            } catch let error as LedgerError {
                #expect(error.code == .wrongExpectedVersion)
                #expect(error.expectedVersion == .exact(1))
                #expect(error.actualVersion == 2)
                #expect(error.subject == "user-1")
                #expect(error.message == "subject user-1 is at version 2, but the append expected version 1; read the stream again and retry")
            }
            #expect(try log.lastPosition() == 2)
        }
    }

    @Test func noStreamAppendsToANewSubjectOnly() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("user-1", 1)], to: "user-1", expectedVersion: .noStream)
            do {
                try log.append([draft("user-1", 2)], to: "user-1", expectedVersion: .noStream)
                Issue.record("noStream on an existing subject must fail")
            } catch let error as LedgerError {
                #expect(error.code == .wrongExpectedVersion)
                #expect(error.expectedVersion == .noStream)
                #expect(error.actualVersion == 1)
            }
        }
    }

    @Test func anyVersionAlwaysAppends() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("user-1", 1)], to: "user-1", expectedVersion: .any)
            try log.append([draft("user-1", 2)], to: "user-1", expectedVersion: .any)
            #expect(try log.version(of: "user-1") == 2)
        }
    }

    @Test func retryingASuccessfulAppendWithItsExpectationSucceedsAgain() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            let event = draft("user-1", 1)
            let first = try log.append([event], to: "user-1", expectedVersion: .noStream)
            let retry = try log.append([event], to: "user-1", expectedVersion: .noStream)
            #expect(retry.outcomes == [.duplicate(position: first.outcomes[0].position)])
        }
    }

    @Test func anExpectationOnAnotherSubjectGuardsTheBatch() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("account", 1)])
            #expect(throws: LedgerError.self) {
                try log.append([draft("user-1", 1)], expecting: ["account": .exact(5)])
            }
            try log.append([draft("user-1", 1)], expecting: ["account": .exact(1)])
            #expect(try log.lastPosition() == 2)
        }
    }

    @Test func aRejectedBatchInAGroupDoesNotDisturbTheOthers() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("contended", 0)])
            let outcomes = Mutex<[Bool]>([])
            DispatchQueue.concurrentPerform(iterations: 16) { n in
                let ok = (try? log.append([draft("contended", n + 1)], to: "contended", expectedVersion: .exact(1))) != nil
                outcomes.withLock { $0.append(ok) }
            }
            #expect(outcomes.withLock { $0.filter { $0 }.count } == 1, "exactly one writer wins version 2")
            #expect(try log.version(of: "contended") == 2)
            #expect(try log.verify().isValid)
        }
    }
}

@Suite struct BadInputTests {
    func rejects(_ bad: EventDraft, field: String) throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            do {
                try log.append([draft("ok", 1), draft("ok", 2), bad, draft("ok", 3)])
                Issue.record("the batch should be rejected")
            } catch let error as LedgerError {
                #expect(error.code == .invalidEvent)
                #expect(error.index == 2)
                #expect(error.field == field)
            }
            #expect(try log.lastPosition() == 0, "nothing of a rejected batch is written")
        }
    }

    @Test func anEmptySubjectRejectsTheBatch() throws {
        try rejects(draft(""), field: "/subject")
    }

    @Test func aSubjectOver256BytesRejectsTheBatch() throws {
        try rejects(draft(String(repeating: "s", count: 257)), field: "/subject")
    }

    @Test func anEventOver64KiBEncodedRejectsTheBatch() throws {
        try rejects(draft("big", payload: [UInt8](repeating: 1, count: 65_537)), field: "/")
    }

    @Test func anUnknownTypeNeverReachesTheLog() throws {
        var bad = draft("t")
        bad.type = "subscription.teleported"
        try rejects(bad, field: "/type")
    }

    @Test func aSchemaVersionTheTypeNeverHadRejectsTheBatch() throws {
        var bad = draft("v")
        bad.schemaVersion = 3
        try rejects(bad, field: "/schemaVersion")
    }

    @Test func aPayloadThatIsNotItsTypesLayoutRejectsTheBatch() throws {
        try rejects(draft("p", payload: Array("not a payload".utf8)), field: "/data")
    }

    @Test func metaOver4KiBRejectsTheBatch() throws {
        var bad = draft("meta")
        bad.meta = ["blob": String(repeating: "m", count: 4_200)]
        try rejects(bad, field: "/meta")
    }
}

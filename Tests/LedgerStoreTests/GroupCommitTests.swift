import Dispatch
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) @testable import LedgerStore
import LedgerTestSupport
import Synchronization
import Testing

/// Group commit's leader protocol (`GroupCommitWriter`), driven with a commit of the test's own:
/// one leader at a time, a batch never left waiting with no leader, `close()` returning only
/// once every accepted batch is done and `finish` has run.
///
/// Its callers run on threads of their own and its tasks on the test's own thread
/// (`.onOwnThread`): on the dispatch pool or the cooperative pool they would queue behind the
/// other tests' work, and 400 appends waited out the time limit in a loaded run.
@Suite(.timeLimit(.minutes(1)), .onOwnThread) struct GroupCommitTests {
    /// A thread of its own running `body`; `ended()` waits for it to end.
    final class Caller: Sendable {
        private let done = DispatchSemaphore(value: 0)

        init(_ body: @escaping @Sendable () -> Void) {
            Thread { [done] in
                body()
                done.signal()
            }.start()
        }

        func ended() async {
            await withCheckedContinuation { resume in
                Thread { [done] in
                    done.wait()
                    done.signal()
                    resume.resume()
                }.start()
            }
        }
    }

    /// What the injected commit saw: how many groups ran at once at most, the batches it
    /// committed, and when `finish` ran (after how many batches).
    final class Probe: Sendable {
        let running = Mutex(0)
        let mostAtOnce = Mutex(0)
        let committed = Mutex<[String]>([])
        let finishedAfter = Mutex<Int?>(nil)
        /// Blocks the first commit until signalled, when set.
        let gate: DispatchSemaphore?
        let firstStarted = DispatchSemaphore(value: 0)
        private let started = Mutex(0)

        init(gated: Bool = false) { gate = gated ? DispatchSemaphore(value: 0) : nil }

        func commit(_ group: [PendingAppend]) -> [Result<AppendResult, LedgerError>] {
            let now = running.withLock { $0 += 1; return $0 }
            mostAtOnce.withLock { $0 = max($0, now) }
            if started.withLock({ $0 += 1; return $0 }) == 1 {
                firstStarted.signal()
                gate?.wait()
            }
            usleep(200)
            committed.withLock { $0 += group.map { $0.drafts[0].subject } }
            running.withLock { $0 -= 1 }
            return group.map { _ in .success(AppendResult(outcomes: [.appended(position: 1, version: 1)])) }
        }

        func finish() { finishedAfter.withLock { $0 = committed.withLock { $0.count } } }

        func writer() throws -> GroupCommitWriter {
            try GroupCommitWriter(maxGroupEvents: 8, commit: { self.commit($0) }, finish: { self.finish() })
        }
    }

    static func blocking(_ writer: GroupCommitWriter, _ subject: String) -> Result<AppendResult, LedgerError> {
        let slot = BlockingSlot()
        do {
            return try writer.commit(PendingAppend(drafts: [draft(subject)], data: [], expectations: [:], completion: .blocking(slot)), waitingOn: slot)
        } catch {
            return .failure(error)
        }
    }

    static func async(_ writer: GroupCommitWriter, _ subject: String) async throws -> AppendResult {
        try await withCheckedThrowingContinuation { continuation in
            do {
                try writer.submit(PendingAppend(drafts: [draft(subject)], data: [], expectations: [:], completion: .async(continuation)))
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Whether `condition` holds within five seconds (a protocol that loses a batch or a
    /// wake-up fails here instead of hanging the run).
    static func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    @Test func blockingAndAsyncCallersNeverCommitTwoGroupsAtOnce() async throws {
        let probe = Probe()
        let writer = try probe.writer()
        let threads = (0..<4).map { worker in
            Caller { for k in 0..<50 { _ = Self.blocking(writer, "thread-\(worker)-\(k)") } }
        }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for worker in 0..<4 {
                tasks.addTask { for k in 0..<50 { _ = try await Self.async(writer, "task-\(worker)-\(k)") } }
            }
            try await tasks.waitForAll()
        }
        for thread in threads { await thread.ended() }
        writer.close()
        #expect(probe.mostAtOnce.withLock { $0 } == 1)
        #expect(probe.committed.withLock { $0.count } == 400)
        #expect(probe.finishedAfter.withLock { $0 } == 400)
    }

    /// A task's batch that arrives while a blocking caller leads is committed once that caller
    /// lets go, with nothing else arriving and no `close()` to wake anyone.
    @Test func aBatchThatArrivesWhileACallerLeadsIsCommittedWithoutAnotherAppend() async throws {
        let probe = Probe(gated: true)
        let writer = try probe.writer()
        let leader = Caller { _ = Self.blocking(writer, "leader") }
        await Caller { probe.firstStarted.wait() }.ended()
        async let waiting = Self.async(writer, "waiting")
        // The task's batch is queued behind the leader before the gate opens.
        try await Task.sleep(for: .milliseconds(50))
        probe.gate?.signal()
        #expect(await Self.eventually { probe.committed.withLock { $0 } == ["leader", "waiting"] }, "the queued batch was left with no leader")
        await leader.ended()
        writer.close()
        _ = try await waiting
    }

    /// `close()` called while a blocking caller leads, with nothing else queued, returns once
    /// that caller's batch is committed, and `finish` runs after it.
    @Test func closingWhileACallerLeadsWaitsForItsBatchThenFinishes() async throws {
        let probe = Probe(gated: true)
        let writer = try probe.writer()
        let result = Mutex<Result<AppendResult, LedgerError>?>(nil)
        let leader = Caller { result.withLock { $0 = Self.blocking(writer, "leader") } }
        await Caller { probe.firstStarted.wait() }.ended()
        let closed = Mutex<Int?>(nil)
        _ = Caller {
            writer.close()
            // What close() found done when it returned.
            closed.withLock { $0 = probe.finishedAfter.withLock { $0 } ?? -1 }
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(probe.finishedAfter.withLock { $0 } == nil, "finish ran while a batch was being committed")
        #expect(closed.withLock { $0 } == nil, "close() returned while a batch was being committed")
        probe.gate?.signal()
        #expect(await Self.eventually { closed.withLock { $0 } != nil }, "close() never returned")
        // close() returned once the batch was committed and finish had run after it.
        #expect(closed.withLock { $0 } == 1)
        await leader.ended()
        #expect(try result.withLock { $0 }?.get().appended == 1)
        #expect(throws: LedgerError.self) { try Self.blocking(writer, "late").get() }
    }
}

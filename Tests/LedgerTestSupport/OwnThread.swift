import Foundation
import Testing

/// Runs `body` on a thread of its own, in the calling task, without holding a thread of the
/// cooperative pool. Swift Testing runs every test on that pool, which is as wide as the
/// machine has cores (two here): a test that blocks for minutes — on NATS servers, child
/// processes, sleeps — would hold one of them, and every other test would queue for the rest.
/// The body stays in the test's task (its executor preference is the thread), so its
/// `#expect`s are recorded against the test.
public func onOwnThread<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    let executor = ThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try await body() }
}

/// Whether the caller runs on a thread `onOwnThread` started.
public func isOnOwnThread() -> Bool {
    Thread.current.threadDictionary[ThreadExecutor.marker] as? Bool ?? false
}

/// Runs each test of a suite (`@Suite(.onOwnThread)`) or a test through `onOwnThread`: for
/// suites whose tests block on servers and processes for minutes.
public struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        // A suite's own scope runs its tests, each scoped again.
        guard !test.isSuite else { return try await function() }
        try await LedgerTestSupport.onOwnThread { try await function() }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// Each test on a thread of its own, off the cooperative pool (`onOwnThread`).
    public static var onOwnThread: Self { Self() }
}

/// A task executor that runs its jobs, in order, on one thread it starts.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// Set in the thread's dictionary: `isOnOwnThread`.
    static let marker = "LedgerTestSupport.ThreadExecutor"
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "onOwnThread"
        thread.stackSize = 8 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs queued have run.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        Thread.current.threadDictionary[Self.marker] = true
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

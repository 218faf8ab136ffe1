import Foundation

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

/// A task executor that runs its jobs, in order, on one thread it starts.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in run() }
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

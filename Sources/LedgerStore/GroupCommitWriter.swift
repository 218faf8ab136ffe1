import Dispatch
import Glibc
@_spi(Storage) import LedgerCore
import Synchronization

/// One caller's batch waiting for the writer thread.
final class PendingAppend: Sendable {
    let drafts: [EventDraft]
    /// Each draft's typed data, as its check decoded it.
    let data: [EventData]
    let expectations: [String: ExpectedVersion]
    private let completion: Completion

    enum Completion: Sendable {
        case blocking(BlockingSlot)
        case async(CheckedContinuation<AppendResult, any Error>)
    }

    init(drafts: [EventDraft], data: [EventData], expectations: [String: ExpectedVersion], completion: Completion) {
        self.drafts = drafts
        self.data = data
        self.expectations = expectations
        self.completion = completion
    }

    /// Hands the result to the waiting caller. Called exactly once, by the writer thread.
    func complete(_ result: Result<AppendResult, LedgerError>) {
        switch completion {
        case .blocking(let slot):
            slot.result.withLock { $0 = result }
            slot.semaphore.signal()
        case .async(let continuation):
            continuation.resume(with: result.mapError { $0 as any Error })
        }
    }
}

/// Where a blocked caller waits for its result.
final class BlockingSlot: Sendable {
    let semaphore = DispatchSemaphore(value: 0)
    let result = Mutex<Result<AppendResult, LedgerError>?>(nil)

    /// Blocks until the writer has completed the append, and returns its result.
    func wait() -> Result<AppendResult, LedgerError> {
        semaphore.wait()
        return result.withLock { $0 } ?? .failure(LedgerError(.storage, "the writer finished without a result; this is a bug in the ledger"))
    }
}

/// Group commit: callers on any thread or task enqueue their batches; one dedicated thread
/// takes everything waiting, writes it in one LMDB write transaction, commits (fsync, unless the
/// store is `nosync`), and only then wakes each caller with its own result.
///
/// Why a dedicated thread: an LMDB write transaction belongs to the thread that began it and
/// blocks while another process writes. On the cooperative pool that would pin a pool thread;
/// here no write transaction ever meets an `await`.
final class GroupCommitWriter: Sendable {
    typealias Commit = @Sendable ([PendingAppend]) -> [Result<AppendResult, LedgerError>]

    private struct Queue {
        var pending: [PendingAppend] = []
        var closed = false
    }

    private let queue = Mutex(Queue())
    private let wakeup = DispatchSemaphore(value: 0)
    private let maxGroupEvents: Int
    private let commit: Commit
    /// Runs on the writer thread once the queue is closed and empty, before it ends.
    private let finish: @Sendable () -> Void
    private let thread = Mutex<pthread_t?>(nil)
    private let counters = Mutex(CommitCounters())

    /// Starts the writer thread. `commit` runs on it, once per group.
    init(maxGroupEvents: Int, commit: @escaping Commit, finish: @escaping @Sendable () -> Void) throws(LedgerError) {
        self.maxGroupEvents = maxGroupEvents
        self.commit = commit
        self.finish = finish
        // A joinable pthread rather than Foundation's Thread: `close()` joins it, so when it
        // returns nothing on that thread still holds the store open.
        let box = Unmanaged.passRetained(ThreadBody { [self] in self.run() })
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { argument in
            guard let argument else { return nil }
            let body = Unmanaged<ThreadBody>.fromOpaque(argument).takeRetainedValue()
            body.run()
            return nil
        }, box.toOpaque())
        guard rc == 0 else {
            box.release()
            throw LedgerError(.storage, "could not start the writer thread (error \(rc)); the system is out of threads or memory")
        }
        thread.withLock { $0 = handle }
    }

    /// Queues a batch. - Throws: `.closed` once `close()` has been called.
    func submit(_ append: PendingAppend) throws(LedgerError) {
        let accepted = queue.withLock { q in
            if q.closed { return false }
            q.pending.append(append)
            return true
        }
        guard accepted else { throw LedgerError(.closed, "the event log is closed; open it again to append") }
        wakeup.signal()
    }

    /// Finishes every queued batch, then stops the thread. Safe to call more than once.
    func close() {
        let first = queue.withLock { q in
            defer { q.closed = true }
            return !q.closed
        }
        guard first else { return }
        wakeup.signal()
        if let handle = thread.withLock({ $0 }) {
            pthread_join(handle, nil)
        }
    }

    private func run() {
        while true {
            wakeup.wait()
            while true {
                let (group, closed) = takeGroup()
                if group.isEmpty {
                    if closed {
                        finish()
                        return
                    }
                    break
                }
                let results = commit(group)
                counters.withLock { c in
                    c.transactions += 1
                    c.batches += group.count
                }
                for (append, result) in zip(group, results) {
                    append.complete(result)
                }
            }
        }
    }

    /// How many transactions and batches the writer has committed so far.
    var commitCounters: CommitCounters { counters.withLock { $0 } }

    /// Takes waiting batches, oldest first, up to `maxGroupEvents` events (at least one batch).
    private func takeGroup() -> ([PendingAppend], Bool) {
        queue.withLock { q in
            var events = 0
            var count = 0
            for append in q.pending {
                if count > 0 && events + append.drafts.count > maxGroupEvents { break }
                events += append.drafts.count
                count += 1
            }
            let group = Array(q.pending.prefix(count))
            q.pending.removeFirst(count)
            return (group, q.closed)
        }
    }
}

/// The closure a writer thread runs, boxed to cross `pthread_create`.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// What group commit has done: how many batches it gathered into how many transactions.
@_spi(Storage) public struct CommitCounters: Sendable, Hashable {
    /// Write transactions committed (fsyncs, for a durable log).
    public var transactions = 0
    /// Append calls they carried (successful or rejected).
    public var batches = 0
}

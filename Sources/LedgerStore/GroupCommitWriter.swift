import Dispatch
import Glibc
@_spi(Storage) import LedgerCore
import Synchronization

/// One caller's batch waiting for the leading thread (`GroupCommitWriter`).
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

    /// Hands the result to the waiting caller. Called exactly once, by the leading thread.
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

/// Group commit: callers on any thread or task enqueue their batches; one thread at a time — the
/// *leader* — takes everything waiting, writes it in one LMDB write transaction, commits (fsync,
/// unless the store is `nosync`), and only then hands each caller its own result.
///
/// Who leads: a blocking caller that finds no leader leads itself — it commits its own group on
/// its own thread, so a lone append wakes no other thread, and then hands the lead to the writer
/// thread if others are waiting. An `async` caller, or `close()`, that finds no leader hands the
/// lead to the dedicated writer thread, which commits group after group until none waits.
///
/// Why a dedicated thread still: an LMDB write transaction belongs to the thread that began it
/// and blocks while another process writes. On the cooperative pool that would pin a pool
/// thread; so the `async` overload never leads, and no write transaction ever meets an
/// `await`. (A task that calls the blocking overload leads on its pool thread, as any blocking
/// call would hold it: async code calls the `async` overload.)
final class GroupCommitWriter: Sendable {
    typealias Commit = @Sendable ([PendingAppend]) -> [Result<AppendResult, LedgerError>]

    private struct Queue {
        var pending: [PendingAppend] = []
        var closed = false
        /// Whether a thread leads: takes groups until the queue is empty (the writer thread) or
        /// its own batch is committed (a blocking caller). Never false while a batch waits.
        var leading = false
    }

    private let queue = Mutex(Queue())
    private let wakeup = DispatchSemaphore(value: 0)
    private let maxGroupEvents: Int
    private let commit: Commit
    /// Runs on the writer thread once the queue is closed and empty, before it ends.
    private let finish: @Sendable () -> Void
    private let thread = Mutex<pthread_t?>(nil)
    private let counters = Mutex(CommitCounters())

    /// Starts the writer thread. `commit` runs on the leading thread, once per group.
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

    /// Queues a batch to be committed by the writer thread (or by a blocking caller leading).
    /// - Throws: `.closed` once `close()` has been called.
    func submit(_ append: PendingAppend) throws(LedgerError) {
        if try enqueue(append) { wakeup.signal() }
    }

    /// Queues a batch and, when no thread leads, commits it on the calling thread; then waits
    /// for its result. - Throws: `.closed` once `close()` has been called.
    func commit(_ append: PendingAppend, waitingOn slot: BlockingSlot) throws(LedgerError) -> Result<AppendResult, LedgerError> {
        if try enqueue(append) { lead(until: append) }
        return slot.wait()
    }

    /// Adds `append` to the queue; whether the caller is to lead (no thread was leading).
    private func enqueue(_ append: PendingAppend) throws(LedgerError) -> Bool {
        let lead = queue.withLock { q -> Bool? in
            if q.closed { return nil }
            q.pending.append(append)
            defer { q.leading = true }
            return !q.leading
        }
        guard let lead else { throw LedgerError(.closed, "the event log is closed; open it again to append") }
        return lead
    }

    /// Finishes every queued batch, then stops the thread. Safe to call more than once.
    func close() {
        let (first, appoint) = queue.withLock { q in
            defer { q.closed = true; q.leading = true }
            return (!q.closed, !q.leading)
        }
        guard first else { return }
        // A caller leading now hands the lead to the writer thread when it is done.
        if appoint { wakeup.signal() }
        if let handle = thread.withLock({ $0 }) {
            pthread_join(handle, nil)
        }
    }

    /// A blocking caller's lead: commits the group that holds `own` (the oldest waiting, as
    /// nothing waited when it began to lead), then lets go, or hands the lead to the writer
    /// thread when more waits or the queue is closing.
    private func lead(until own: PendingAppend) {
        while true {
            let (group, closed) = takeGroup()
            // Never so while `own` waits. Taking none from an open queue let go of the lead; a
            // closed one's lead goes to the writer thread, below.
            guard !group.isEmpty else { if closed { break } else { return } }
            commitGroup(group)
            if group.contains(where: { $0 === own }) { break }
        }
        let handOff = queue.withLock { q in
            if q.pending.isEmpty && !q.closed {
                q.leading = false
                return false
            }
            return true
        }
        if handOff { wakeup.signal() }
    }

    private func commitGroup(_ group: [PendingAppend]) {
        let results = commit(group)
        counters.withLock { c in
            c.transactions += 1
            c.batches += group.count
        }
        for (append, result) in zip(group, results) {
            append.complete(result)
        }
    }

    /// The writer thread: each time it is handed the lead, commits group after group until the
    /// queue is empty; once it is closed, finishes and ends.
    private func run() {
        while true {
            wakeup.wait()
            while true {
                let (group, closed) = takeGroup()
                if !group.isEmpty {
                    commitGroup(group)
                    continue
                }
                if closed {
                    finish()
                    return
                }
                break
            }
        }
    }

    /// How many transactions and batches the writer has committed so far.
    var commitCounters: CommitCounters { counters.withLock { $0 } }

    /// Takes waiting batches, oldest first, up to `maxGroupEvents` events (at least one batch).
    /// Taking none from an open queue ends the lead; a closed one stays led until the writer
    /// thread ends.
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
            if group.isEmpty && !q.closed { q.leading = false }
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

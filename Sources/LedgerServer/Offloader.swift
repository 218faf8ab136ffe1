import Foundation
import Glibc
import LedgerCore
import Synchronization

/// Runs bodies that may take seconds on threads of their own, not on one of the few the
/// tasks and the event loops share: requests over NATS (which wait while a partition changes
/// hands), and heavy reads (an audit of a long history). At most `limit` run at once and
/// `waiting` more wait their turn, in order; beyond those a request is told to retry (`503`).
/// One whose request is no longer wanted when its turn comes (its client left) is dropped.
final class Offloader: Sendable {
    /// How many bodies may run at once.
    let limit: Int
    /// How many may wait for one to finish.
    let waiting: Int
    /// Whether the bodies' threads run at the lowest priority (`nice` 19), so that what the
    /// event loops answer meanwhile is not kept waiting for a core.
    let lowPriority: Bool
    /// What a request beyond `limit` and `waiting` is told.
    private let busy: String
    private let state = Mutex(State())

    private struct State {
        var running = 0
        var queue: [Waiting] = []
    }

    /// A body waiting its turn: started when it comes if still wanted, else dropped.
    private struct Waiting {
        let start: @Sendable () -> Void
        let isWanted: @Sendable () -> Bool
        let drop: @Sendable () -> Void
    }

    /// How many bodies run and how many wait their turn now.
    var load: (running: Int, waiting: Int) { state.withLock { ($0.running, $0.queue.count) } }

    /// What a body dropped before its turn completes with.
    static let unwanted = "the request was dropped before its turn: its client left"

    init(limit: Int, waiting: Int = 0, lowPriority: Bool = false, busy: String) {
        (self.limit, self.waiting, self.lowPriority, self.busy) = (max(1, limit), max(0, waiting), lowPriority, busy)
    }

    /// The one the server's requests over NATS share.
    static let cluster = Offloader(limit: 64, busy: "the node has 64 requests waiting on the cluster; retry")

    /// The heavy reads `limits` allows.
    static func heavyReads(_ limits: ServerLimits) -> Offloader {
        Offloader(limit: limits.heavyReads, waiting: limits.heavyReadsWaiting, lowPriority: true,
                  busy: "the server is answering \(limits.heavyReads + limits.heavyReadsWaiting) long reads (audits, exports); retry")
    }

    /// `body`'s result, from a thread of its own; `unavailable` when `limit` run and
    /// `waiting` wait, or when it waited and was no longer wanted (`isWanted`) at its turn.
    func run<T: Sendable>(while isWanted: @escaping @Sendable () -> Bool = { true },
                          _ body: @escaping @Sendable () throws(LedgerError) -> T) async throws(LedgerError) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, LedgerError>, Never>) in
            do throws(LedgerError) {
                try start(body, while: isWanted) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    /// Starts `body` on a thread of its own (or queues it) and hands its result to
    /// `completion` there, its slot already passed on; throws `unavailable` at once when
    /// `limit` run and `waiting` wait. Queued, it is dropped if `isWanted` says no when its
    /// turn comes: `completion` then gets `unavailable` (`unwanted`) and the next takes the slot.
    func start<T: Sendable>(_ body: @escaping @Sendable () throws(LedgerError) -> T, while isWanted: @escaping @Sendable () -> Bool = { true },
                            completion: @escaping @Sendable (Result<T, LedgerError>) -> Void) throws(LedgerError) {
        let job: @Sendable () -> Void = { [self] in
            Thread.detachNewThread { [self] in
                // Linux keeps a nice value per thread: who 0 is this thread alone.
                if lowPriority { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19) }
                let result: Result<T, LedgerError>
                do throws(LedgerError) { result = .success(try body()) } catch { result = .failure(error) }
                finished()
                completion(result)
            }
        }
        let admission = state.withLock { state -> Admission in
            if state.running < limit {
                state.running += 1
                return .now
            }
            guard state.queue.count < waiting else { return .refused }
            state.queue.append(Waiting(start: job, isWanted: isWanted, drop: { completion(.failure(LedgerError(.unavailable, Self.unwanted))) }))
            return .queued
        }
        switch admission {
        case .now: job()
        case .queued: break
        case .refused: throw LedgerError(.unavailable, busy)
        }
    }

    private enum Admission { case now, queued, refused }

    /// A body finished: the next in the queue still wanted takes its slot; those before it
    /// that are not are dropped.
    private func finished() {
        while true {
            let next = state.withLock { state -> Waiting? in
                guard !state.queue.isEmpty else {
                    state.running -= 1
                    return nil
                }
                return state.queue.removeFirst()
            }
            guard let next else { return }
            // Asked outside the lock: whether a client is still there is the channel's to say.
            guard next.isWanted() else {
                next.drop()
                continue
            }
            next.start()
            return
        }
    }
}

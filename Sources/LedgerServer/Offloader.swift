import Foundation
import LedgerCore
import Synchronization

/// Runs bodies that may block for seconds (requests over NATS, which wait while a partition
/// changes hands) on threads of their own, not on one of the few the tasks share; at most
/// `limit` at once, beyond which a request is told to retry (`503`).
final class Offloader: Sendable {
    /// How many bodies may run at once.
    let limit: Int
    private let running = Mutex<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// The one the server's routes share.
    static let shared = Offloader(limit: 64)

    /// `body`'s result, from a thread of its own; `unavailable` when `limit` are running.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws(LedgerError) -> T) async throws(LedgerError) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, LedgerError>, Never>) in
            do throws(LedgerError) {
                try start(body) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    /// Starts `body` on a thread of its own and hands its result to `completion` there, its
    /// slot already free; throws `unavailable` at once when `limit` are running.
    func start<T: Sendable>(_ body: @escaping @Sendable () throws(LedgerError) -> T,
                            completion: @escaping @Sendable (Result<T, LedgerError>) -> Void) throws(LedgerError) {
        let admitted = running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else { throw LedgerError(.unavailable, "the node has \(limit) requests waiting on the cluster; retry") }
        Thread.detachNewThread { [self] in
            let result: Result<T, LedgerError>
            do throws(LedgerError) { result = .success(try body()) } catch { result = .failure(error) }
            running.withLock { $0 -= 1 }
            completion(result)
        }
    }
}

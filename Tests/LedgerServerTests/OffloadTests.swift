import Foundation
import Synchronization
import HTTPTypes
@_spi(Storage) import LedgerCore
@testable import LedgerServer
import Testing

/// A cluster node's server waits on the cluster on threads of its own, at most `limit` at
/// once; beyond, a request is told to retry. The slots are taken with `start`, from threads
/// alone: tasks may wait minutes for one of the shared threads while other suites run.
@Suite struct OffloadTests {
    @Test func beyondTheLimitARequestIsToldToRetry() async throws {
        let offloader = Offloader(limit: Offloader.shared.limit)
        let (entered, release, finished) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let returned = Mutex(0)
        for _ in 0 ..< offloader.limit {
            try offloader.start({ () throws(LedgerError) -> Int in
                entered.signal()
                release.wait()
                return 1
            }, completion: { result in
                returned.withLock { $0 += (try? result.get()) ?? 0 }
                finished.signal()
            })
        }
        // Every slot taken, each body running on its own thread…
        for _ in 0 ..< offloader.limit { #expect(entered.wait(timeout: .now() + 60) == .success) }
        // …one more is refused rather than queued.
        var refused: LedgerError?
        do throws(LedgerError) { _ = try await offloader.run { () throws(LedgerError) in 0 } } catch { refused = error }
        #expect(refused?.code == .unavailable)
        let reply = Reply.from(refused ?? LedgerError(.storage, "none"))
        #expect(reply.status == .serviceUnavailable)
        #expect(reply.headers[.retryAfter] == "1")
        for _ in 0 ..< offloader.limit { release.signal() }
        for _ in 0 ..< offloader.limit { #expect(finished.wait(timeout: .now() + 60) == .success) }
        #expect(returned.withLock { $0 } == offloader.limit)
        // The slots are free again, and a body's result comes back.
        #expect(try await offloader.run { () throws(LedgerError) in 7 } == 7)
    }
}

import Foundation
import Synchronization
import HTTPTypes
@_spi(Storage) import LedgerCore
@testable import LedgerServer
import Testing

/// A cluster node's server waits on the cluster on threads of its own, at most
/// `limit` at once; beyond, a request is told to retry. The test has an offloader of its
/// own: the routes' shared one serves other suites' servers running beside it.
@Suite struct OffloadTests {
    @Test func beyondTheLimitARequestIsToldToRetry() async throws {
        let offloader = Offloader(limit: Offloader.shared.limit)
        let release = DispatchSemaphore(value: 0)
        let entered = Entered()
        let waiting = (0..<offloader.limit).map { _ in
            Task {
                try await offloader.run { () throws(LedgerError) -> Int in
                    entered.count.withLock { $0 += 1 }
                    release.wait()
                    return 1
                }
            }
        }
        // Every slot taken (the tasks may start late on a busy machine)…
        let deadline = Date().addingTimeInterval(120)
        while entered.count.withLock { $0 } < offloader.limit && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(entered.count.withLock { $0 } == offloader.limit)
        // …one more is refused rather than queued.
        var refused: LedgerError?
        do throws(LedgerError) { _ = try await offloader.run { () throws(LedgerError) in 0 } } catch { refused = error }
        #expect(refused?.code == .unavailable)
        let reply = Reply.from(refused ?? LedgerError(.storage, "none"))
        #expect(reply.status == .serviceUnavailable)
        #expect(reply.headers[.retryAfter] == "1")
        for _ in waiting { release.signal() }
        var done = 0
        for task in waiting { done += try await task.value }
        #expect(done == offloader.limit)
        // The slots are free again.
        #expect(try await offloader.run { () throws(LedgerError) in 7 } == 7)
    }
}

/// How many offloaded bodies have begun.
private final class Entered: Sendable {
    let count = Mutex(0)
}

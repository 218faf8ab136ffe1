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
        let offloader = Offloader(limit: Offloader.cluster.limit, busy: "busy")
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

/// Heavy reads (audits, exports): `limit` run, `waiting` more wait their turn and run in
/// order as slots free, beyond them a request is told to retry; they run at the lowest priority.
@Suite struct HeavyReadTests {
    @Test func readsBeyondTheLimitWaitTheirTurnThenAreRefused() async throws {
        let offloader = Offloader(limit: 2, waiting: 2, lowPriority: true, busy: "busy")
        let (entered, release, finished) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let order = Mutex<[Int]>([])
        let priorities = Mutex<[Int32]>([])
        for index in 0 ..< 4 {
            try offloader.start({ () throws(LedgerError) -> Int in
                order.withLock { $0.append(index) }
                errno = 0
                let priority = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
                priorities.withLock { $0.append(priority) }
                entered.signal()
                release.wait()
                return index
            }, completion: { _ in finished.signal() })
        }
        // Two run; two wait, not started.
        for _ in 0 ..< 2 { #expect(entered.wait(timeout: .now() + 60) == .success) }
        #expect(entered.wait(timeout: .now() + 0.3) == .timedOut)
        #expect(order.withLock { Set($0) } == [0, 1])
        // A fifth is refused at once.
        var refused: LedgerError?
        do throws(LedgerError) { try offloader.start({ () throws(LedgerError) in 0 }, completion: { _ in }) } catch { refused = error }
        #expect(refused?.code == .unavailable)
        #expect(refused?.message == "busy")
        // Each slot freed starts the next waiting, in order.
        release.signal()
        #expect(finished.wait(timeout: .now() + 60) == .success)
        #expect(entered.wait(timeout: .now() + 60) == .success)
        #expect(order.withLock { $0.last } == 2)
        for _ in 0 ..< 3 { release.signal() }
        for _ in 0 ..< 3 { #expect(finished.wait(timeout: .now() + 60) == .success) }
        #expect(order.withLock { $0 }.suffix(2) == [2, 3])
        #expect(priorities.withLock { $0 } == [19, 19, 19, 19])
        #expect(try await offloader.run { () throws(LedgerError) in 7 } == 7)
    }

    /// Of three reads, one running and two waiting, the first waiting whose client left
    /// meanwhile is dropped at its turn (never run, told why) and the next takes the slot.
    @Test func aWaitingReadNoLongerWantedIsDroppedAtItsTurn() async throws {
        let offloader = Offloader(limit: 1, waiting: 2, busy: "busy")
        let (entered, release, finished) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let ran = Mutex<[Int]>([])
        let results = Mutex<[Int: Result<Int, LedgerError>]>([:])
        let left = Mutex(false)
        for index in 0 ..< 3 {
            try offloader.start({ () throws(LedgerError) -> Int in
                ran.withLock { $0.append(index) }
                if index == 0 {
                    entered.signal()
                    release.wait()
                }
                return index
            }, while: { index != 1 || !left.withLock { $0 } }, completion: { result in
                results.withLock { $0[index] = result }
                finished.signal()
            })
        }
        #expect(entered.wait(timeout: .now() + 60) == .success)
        #expect(offloader.load == (1, 2))
        left.withLock { $0 = true }
        release.signal()
        for _ in 0 ..< 3 { #expect(finished.wait(timeout: .now() + 60) == .success) }
        #expect(ran.withLock { $0 } == [0, 2])
        let dropped = results.withLock { $0[1] }
        if case .failure(let error)? = dropped {
            #expect(error.code == .unavailable && error.message == Offloader.unwanted)
        } else {
            Issue.record("the read whose client left was answered: \(String(describing: dropped))")
        }
        #expect(try results.withLock { $0[2] }?.get() == 2)
        #expect(offloader.load == (0, 0))
    }
}

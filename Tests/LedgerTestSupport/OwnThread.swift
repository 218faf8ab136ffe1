import Foundation

/// Runs `body` on a thread of its own and waits for it without holding a thread of the
/// cooperative pool. Swift Testing runs every test on that pool, which is as wide as the
/// machine has cores (two here): a test that blocks for minutes — on NATS servers, child
/// processes, sleeps — would hold one of them, and every other test would queue for the rest.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

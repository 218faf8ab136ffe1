import Foundation

/// A bounded hand-over of items from one producer thread to one consumer thread: `put` blocks
/// while `depth` items wait. Either side may stop the other: the consumer's `fail` (or
/// `cancel`) makes the producer's `put` throw; the producer's `close` ends the consumer's
/// `take` once the queue is drained, and `closeAndWait` waits for that.
///
/// The rebuild's fold hands batches of events to its folding thread with it; the demo hands
/// drafted windows to the appending thread.
public final class HandOff<Item>: @unchecked Sendable {
    // @unchecked: every field is read and written under `condition`.
    private let condition = NSCondition()
    private var items: [Item] = []
    private let depth: Int
    private var closed = false
    /// The consumer has taken its last item (or failed).
    private var drained = false
    private var failure: (any Error)?

    /// Why `put` throws after `cancel()`.
    public struct Cancelled: Error {}

    public init(depth: Int) { self.depth = max(1, depth) }

    /// Queues `item` (taken: the consumer gets it unshared), blocking while `depth` items wait.
    /// - Throws: the consumer's error (or `Cancelled`) once it has stopped.
    public func put(_ item: consuming Item) throws {
        condition.lock()
        defer { condition.unlock() }
        while items.count >= depth && failure == nil { condition.wait() }
        if let failure { throw failure }
        items.append(item)
        condition.broadcast()
    }

    /// The next item, blocking while none waits; `nil` once closed and drained, or stopped.
    public func take() -> Item? {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty && !closed && failure == nil { condition.wait() }
        guard failure == nil, !items.isEmpty else {
            drained = true
            condition.broadcast()
            return nil
        }
        condition.broadcast()
        return items.removeFirst()
    }

    /// The producer has no more items.
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Stops both sides with `error`: the producer's `put` throws it, `take` returns `nil`.
    public func fail(_ error: any Error) {
        condition.lock()
        if failure == nil { failure = error }
        drained = true
        condition.broadcast()
        condition.unlock()
    }

    /// Stops both sides (`put` throws `Cancelled`).
    public func cancel() { fail(Cancelled()) }

    /// Closes, waits until the consumer has taken everything (or failed), and rethrows its error.
    public func closeAndWait() throws {
        condition.lock()
        defer { condition.unlock() }
        closed = true
        condition.broadcast()
        while !drained { condition.wait() }
        if let failure { throw failure }
    }
}

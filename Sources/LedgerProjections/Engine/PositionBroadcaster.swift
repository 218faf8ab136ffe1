import Synchronization

/// Tells in-process subscribers about each new head position as soon as its commit is
/// durable: no one polls the disk.
final class PositionBroadcaster: Sendable {
    private struct Subscribers {
        var next = 0
        var streams: [Int: AsyncStream<UInt64>.Continuation] = [:]
        var last: UInt64 = 0
        /// The store has closed: a stream asked for now ends at once.
        var finished = false
    }

    private let subscribers = Mutex(Subscribers())

    /// Every head position committed from now on (the latest only, when a subscriber falls
    /// behind), starting with `current`; after `finish()`, a stream that has ended.
    func stream(current: UInt64) -> AsyncStream<UInt64> {
        let (stream, continuation) = AsyncStream.makeStream(of: UInt64.self, bufferingPolicy: .bufferingNewest(1))
        let id: Int? = subscribers.withLock { state in
            guard !state.finished else { return nil }
            state.next += 1
            state.streams[state.next] = continuation
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.yield(max(current, subscribers.withLock { $0.last }))
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ head: UInt64) {
        let streams = subscribers.withLock { state in
            state.last = max(state.last, head)
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.yield(head) }
    }

    /// Ends every stream (the store is closing).
    func finish() {
        let streams = subscribers.withLock { state in
            state.finished = true
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}

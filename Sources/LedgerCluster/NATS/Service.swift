import CNATS
@_spi(Storage) import LedgerCore

/// Answers requests on a subject: each request's bytes go to `handler`, whose bytes go back to
/// the requester. Members of the same queue group share the requests (one of them answers).
///
/// The handler runs on the C client's delivery thread for this subscription, one request at a
/// time; it must not block on anything but its own work.
package final class Service: @unchecked Sendable {
    private var subscription: OpaquePointer?
    private let box: Unmanaged<Handler>

    final class Handler {
        let handle: ([UInt8]) -> [UInt8]
        let connection: NATSConnection
        init(_ connection: NATSConnection, _ handle: @escaping ([UInt8]) -> [UInt8]) {
            self.connection = connection
            self.handle = handle
        }
    }

    package init(_ connection: NATSConnection, subject: String, queue: String, handler: @escaping ([UInt8]) -> [UInt8]) throws(LedgerError) {
        box = Unmanaged.passRetained(Handler(connection, handler))
        var subscription: OpaquePointer?
        let status = natsConnection_QueueSubscribe(&subscription, connection.natsConnection, subject, queue, { _, _, message, closure in
            guard let message, let closure else { return }
            defer { natsMsg_Destroy(message) }
            let handler = Unmanaged<Handler>.fromOpaque(closure).takeUnretainedValue()
            let answer = handler.handle(NATSConnection.bytes(of: message))
            if let reply = natsMsg_GetReply(message) {
                _ = answer.withUnsafeBytes { natsConnection_Publish(handler.connection.natsConnection, reply, $0.baseAddress, Int32($0.count)) }
            }
        }, box.toOpaque())
        guard status == NATS_OK, let subscription else {
            box.release()
            throw NATSConnection.failure(status, jsErrCode(0), doing: "answering on \(subject)")
        }
        self.subscription = subscription
        // The subscription is known to the server once the flush returns: a request sent
        // after `init` returns reaches it.
        _ = natsConnection_FlushTimeout(connection.natsConnection, connection.timeout)
    }

    /// Stops taking requests; those already delivered are still answered (a drain, not an
    /// unsubscribe, which would drop them unanswered). `finish()` waits for them.
    package func stop() {
        guard let subscription else { return }
        natsSubscription_Drain(subscription)
    }

    /// Waits (up to 5 s) until the requests delivered before `stop()` are answered, then frees
    /// the subscription and its handler.
    package func finish() {
        guard let subscription else { return }
        self.subscription = nil
        if natsSubscription_WaitForDrainCompletion(subscription, 5_000) == NATS_OK {
            natsSubscription_Destroy(subscription)
            box.release()
        } else {
            // Still inside a handler: unsubscribing is safe; the handler is kept (rather than
            // freed under a callback that may still run).
            natsSubscription_Unsubscribe(subscription)
            natsSubscription_Destroy(subscription)
        }
    }

    deinit {
        // A service is finished before it goes; one that was not (an error on the way) stops
        // here, its handler kept for the reason above.
        if let subscription {
            natsSubscription_Unsubscribe(subscription)
            natsSubscription_Destroy(subscription)
        }
    }
}

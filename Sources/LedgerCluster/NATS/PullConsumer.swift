import CNATS
@_spi(Storage) import LedgerCore

/// A durable pull consumer of one filter subject of a stream: a node reads its partitions'
/// messages in stream order with it, from the sequence its own store has folded up to.
package final class PullConsumer: @unchecked Sendable {
    private let subscription: OpaquePointer
    private let connection: NATSConnection

    /// Binds to (or creates) the durable consumer `durable` of `stream` over `filter`, delivering
    /// from `startSequence`. A durable that exists with another start is deleted and created
    /// again: the node's own checkpoint, not the consumer's, says where to start.
    package init(_ connection: NATSConnection, stream: String, filter: String, durable: String, startSequence: UInt64) throws(LedgerError) {
        self.connection = connection
        var error = jsErrCode(0)
        // The durable's own position may lag or lead the store's checkpoint: start it over.
        _ = js_DeleteConsumer(connection.jetStreamContext, stream, durable, nil, &error)
        self.subscription = try connection.retrying("subscribing to \(filter)") { () throws(LedgerError) -> OpaquePointer in
            var options = jsSubOptions()
            jsSubOptions_Init(&options)
            var subscription: OpaquePointer?
            let status = stream.withCString { stream in
                filter.withCString { filterC in
                    durable.withCString { durableC in
                        options.Stream = stream
                        options.Config.Durable = durableC
                        options.Config.FilterSubject = filterC
                        options.Config.AckPolicy = js_AckAll
                        options.Config.DeliverPolicy = js_DeliverByStartSequence
                        options.Config.OptStartSeq = max(startSequence, 1)
                        options.Config.MaxAckPending = 100_000
                        // Its state is disposable (the node's checkpoint decides where to
                        // start): one copy in memory, removed once nobody pulls for a while.
                        options.Config.Replicas = 1
                        options.Config.MemoryStorage = true
                        options.Config.InactiveThreshold = 30_000_000_000
                        return js_PullSubscribe(&subscription, connection.jetStreamContext, filterC, durableC, nil, &options, &error)
                    }
                }
            }
            guard status == NATS_OK, let subscription else {
                throw NATSConnection.failure(status, error, doing: "subscribing to \(filter)")
            }
            return subscription
        }
    }

    deinit { natsSubscription_Destroy(subscription) }

    /// Stops delivering: the durable consumer stays on the server until the next owner
    /// replaces it.
    package func stop() { natsSubscription_Unsubscribe(subscription) }

    /// Up to `batch` messages in stream order; waits up to `timeout` milliseconds for the
    /// first one and returns none when nothing came. Acknowledges them all: a node's own
    /// checkpoint, committed with the states, decides what it folds again after a crash.
    package func fetch(batch: Int, timeout: Int64) throws(LedgerError) -> [NATSConnection.StoredMessage] {
        var list = natsMsgList()
        var error = jsErrCode(0)
        let status = natsSubscription_Fetch(&list, subscription, Int32(batch), timeout, &error)
        if status == NATS_TIMEOUT || (status == NATS_OK && list.Count == 0) { return [] }
        guard status == NATS_OK else { throw NATSConnection.failure(status, error, doing: "fetching messages") }
        defer { natsMsgList_Destroy(&list) }
        var messages: [NATSConnection.StoredMessage] = []
        messages.reserveCapacity(Int(list.Count))
        var last: OpaquePointer?
        for i in 0..<Int(list.Count) {
            guard let message = list.Msgs[i] else { continue }
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            var sequence: UInt64 = 0, time: Int64 = 0
            if natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta {
                sequence = meta.pointee.Sequence.Stream
                time = meta.pointee.Timestamp
                jsMsgMetaData_Destroy(meta)
            }
            messages.append(NATSConnection.StoredMessage(
                sequence: sequence,
                subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "",
                data: NATSConnection.bytes(of: message), time: time))
            last = message
        }
        if let last { _ = natsMsg_Ack(last, nil) }
        return messages
    }
}

import CNATS
@_spi(Storage) import LedgerCore

/// A pull consumer of one filter subject of a stream: a node reads its partitions' messages in
/// stream order with it, from the sequence its own store has folded up to.
///
/// A durable consumer, replicated like the stream, so that it outlives a server's death. Its
/// position is not what counts (the node's checkpoint, committed with its store, decides where
/// to start): a node that takes a partition makes its consumer anew from its checkpoint, and
/// the server removes a consumer nobody has pulled from for a minute (a dead node's).
package final class PullConsumer: @unchecked Sendable {
    private let subscription: OpaquePointer
    private let connection: NATSConnection
    private let stream: String
    private let name: String
    /// The consumer's own sequence of the last message delivered: each delivery is the next,
    /// or one was lost (deliveries are not acknowledged, so never sent again).
    private var delivered: UInt64 = 0

    /// Creates the durable consumer `name` of `stream` over `filter`, delivering from
    /// `startSequence` (replacing one of that name), and subscribes to it. A `oneOff` consumer
    /// (a reader's, named once) replaces nothing and is kept in one copy in memory.
    package init(_ connection: NATSConnection, stream: String, filter: String, name: String, startSequence: UInt64, oneOff: Bool = false) throws(LedgerError) {
        self.connection = connection
        self.stream = stream
        self.name = name
        self.subscription = try connection.retrying("subscribing to \(filter)", seconds: 10) { () throws(LedgerError) -> OpaquePointer in
            var error = jsErrCode(0)
            if !oneOff {
                let deleted = js_DeleteConsumer(connection.jetStreamContext, stream, name, nil, &error)
                guard deleted == NATS_OK || deleted == NATS_NOT_FOUND || error == JSConsumerNotFoundErr else {
                    throw NATSConnection.failure(deleted, error, doing: "replacing the consumer \(name)")
                }
                error = jsErrCode(0)
            }
            var subscription: OpaquePointer?
            let status = stream.withCString { streamC in
                filter.withCString { filterC in
                    name.withCString { nameC in
                        var config = jsConsumerConfig()
                        jsConsumerConfig_Init(&config)
                        config.Durable = nameC
                        config.FilterSubject = filterC
                        config.AckPolicy = js_AckNone
                        config.DeliverPolicy = js_DeliverByStartSequence
                        config.OptStartSeq = max(startSequence, 1)
                        config.MaxAckPending = 100_000
                        config.InactiveThreshold = 60_000_000_000
                        if oneOff {
                            config.Replicas = 1
                            config.MemoryStorage = true
                        }
                        var info: UnsafeMutablePointer<jsConsumerInfo>?
                        let added = js_AddConsumer(&info, connection.jetStreamContext, streamC, &config, nil, &error)
                        jsConsumerInfo_Destroy(info)
                        guard added == NATS_OK else { return added }
                        // Bound to the consumer made above (the same configuration, which the
                        // client checks): unsubscribing leaves it to the server to remove.
                        var options = jsSubOptions()
                        jsSubOptions_Init(&options)
                        options.Stream = streamC
                        options.Consumer = nameC
                        options.Config = config
                        return js_PullSubscribe(&subscription, connection.jetStreamContext, filterC, nameC, nil, &options, &error)
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

    /// Stops delivering (locally: the consumer stays for the node's next hold of the partition,
    /// or until the server removes it for want of pulls).
    package func stop() { natsSubscription_Unsubscribe(subscription) }

    /// Removes the consumer from the server (a one-off reader's, once it has read).
    package func remove() {
        var error = jsErrCode(0)
        _ = js_DeleteConsumer(connection.jetStreamContext, stream, name, nil, &error)
    }

    /// Whether the server still has the consumer. One kept on a server that died is gone
    /// with it, and a fetch from it just finds nothing.
    package func exists() -> Bool {
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        var error = jsErrCode(0)
        let status = js_GetConsumerInfo(&info, connection.jetStreamContext, stream, name, nil, &error)
        jsConsumerInfo_Destroy(info)
        return status == NATS_OK
    }

    /// Up to `batch` messages in stream order; waits up to `timeout` milliseconds for the
    /// first one and returns none when nothing came. Acknowledges them all: a node's own
    /// checkpoint, committed with the states, decides what it folds again after a crash.
    ///
    /// Asks first for what is there without waiting (a fetch of a whole batch would wait for the
    /// batch to fill or the time to pass); only when nothing is there does it wait, for one.
    package func fetch(batch: Int, timeout: Int64) throws(LedgerError) -> [NATSConnection.StoredMessage] {
        var list = natsMsgList()
        var error = jsErrCode(0)
        var request = jsFetchRequest()
        jsFetchRequest_Init(&request)
        request.Batch = Int32(batch)
        request.NoWait = true
        request.Expires = timeout * 1_000_000
        var status = natsSubscription_FetchRequest(&list, subscription, &request)
        if status == NATS_TIMEOUT || status == NATS_NOT_FOUND || (status == NATS_OK && list.Count == 0) {
            if status == NATS_OK { natsMsgList_Destroy(&list) }
            list = natsMsgList()
            status = natsSubscription_Fetch(&list, subscription, 1, timeout, &error)
        }
        if status == NATS_TIMEOUT || (status == NATS_OK && list.Count == 0) { return [] }
        guard status == NATS_OK else { throw NATSConnection.failure(status, error, doing: "fetching messages") }
        defer { natsMsgList_Destroy(&list) }
        var messages: [NATSConnection.StoredMessage] = []
        messages.reserveCapacity(Int(list.Count))
        var last: OpaquePointer?
        for i in 0..<Int(list.Count) {
            guard let message = list.Msgs[i] else { continue }
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            var sequence: UInt64 = 0, time: Int64 = 0, order: UInt64 = 0
            if natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta {
                sequence = meta.pointee.Sequence.Stream
                order = meta.pointee.Sequence.Consumer
                time = meta.pointee.Timestamp
                jsMsgMetaData_Destroy(meta)
            }
            guard order == delivered + 1 else {
                throw LedgerError(.unavailable, "consumer \(name) delivered its message \(order) after \(delivered): one was lost; reading again from the checkpoint")
            }
            delivered = order
            messages.append(NATSConnection.StoredMessage(
                sequence: sequence,
                subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "",
                data: NATSConnection.bytes(of: message), time: time))
            last = message
        }
        _ = last
        return messages
    }
}

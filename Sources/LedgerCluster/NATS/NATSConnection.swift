import CNATS
import Glibc
@_spi(Storage) import LedgerCore

/// A connection to a NATS cluster and its JetStream context: the only code that calls the C
/// client (`CNATS`). Everything else in the cluster works with the Swift values it returns.
///
/// nats.c's connection and JetStream context are thread-safe; this class adds no locking of
/// its own. Closing is the owner's job (`close()`), once no other thread uses it.
package final class NATSConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    private let jetStream: OpaquePointer
    /// How long a request or a JetStream call waits for its answer, in milliseconds.
    package let timeout: Int64

    /// Connects to `urls` (comma-separated `nats://host:port`), retrying for a while when a
    /// server is down: the client moves to another server of the cluster by itself.
    package init(urls: String, name: String, timeout: Int64 = 5_000) throws(LedgerError) {
        self.timeout = timeout
        var options: OpaquePointer?
        try Self.check(natsOptions_Create(&options), doing: "preparing a NATS connection")
        defer { natsOptions_Destroy(options) }
        let servers = urls.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }
        guard !servers.isEmpty else { throw LedgerError(.invalidArgument, "no NATS server URL given; pass nats://HOST:PORT[,…]") }
        var status = withCStrings(servers) { pointers in
            var pointers = pointers
            return natsOptions_SetServers(options, &pointers, Int32(pointers.count))
        }
        try Self.check(status, doing: "reading the NATS URLs \(urls)")
        natsOptions_SetName(options, name)
        natsOptions_SetTimeout(options, timeout)
        natsOptions_SetMaxReconnect(options, -1)
        natsOptions_SetReconnectWait(options, 100)
        var connection: OpaquePointer?
        status = natsConnection_Connect(&connection, options)
        guard status == NATS_OK, let connection else {
            throw LedgerError(.unavailable, "cannot reach NATS at \(urls): \(Self.text(status)); start the cluster (Tools/cluster up) or check the URL")
        }
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = timeout
        var jetStream: OpaquePointer?
        status = natsConnection_JetStream(&jetStream, connection, &jsOptions)
        guard status == NATS_OK, let jetStream else {
            natsConnection_Destroy(connection)
            throw LedgerError(.unavailable, "NATS at \(urls) offers no JetStream: \(Self.text(status))")
        }
        self.connection = connection
        self.jetStream = jetStream
    }

    deinit {
        jsCtx_Destroy(jetStream)
        natsConnection_Destroy(connection)
    }

    /// Closes the connection: every call after it fails with `.unavailable`.
    package func close() { natsConnection_Close(connection) }

    // MARK: Streams

    /// Creates the stream `name` over `subjects` when it does not exist (file storage,
    /// `replicas` copies, a duplicate window of `duplicateWindow` seconds), retrying while
    /// the cluster elects its leaders. An existing stream is left as it is.
    package func ensureStream(_ name: String, subjects: [String], replicas: Int, duplicateWindow: Int64) throws(LedgerError) {
        try retrying("creating the stream \(name)") { () throws(LedgerError) in
            var info: UnsafeMutablePointer<jsStreamInfo>?
            var error = jsErrCode(0)
            let found = js_GetStreamInfo(&info, jetStream, name, nil, &error)
            if found == NATS_OK { jsStreamInfo_Destroy(info); return }
            guard found == NATS_NOT_FOUND || error == JSStreamNotFoundErr else {
                throw Self.failure(found, error, doing: "looking up the stream \(name)")
            }
            var config = jsStreamConfig()
            jsStreamConfig_Init(&config)
            let status = name.withCString { name in
                withCStrings(subjects) { pointers in
                    var pointers = pointers
                    return pointers.withUnsafeMutableBufferPointer { buffer in
                        config.Name = name
                        config.Subjects = buffer.baseAddress
                        config.SubjectsLen = Int32(buffer.count)
                        config.Storage = js_FileStorage
                        config.Replicas = Int64(replicas)
                        config.Duplicates = duplicateWindow * 1_000_000_000
                        config.AllowDirect = true
                        return js_AddStream(&info, jetStream, &config, nil, &error)
                    }
                }
            }
            if status == NATS_OK || error == JSStreamNameExistErr { jsStreamInfo_Destroy(info); return }
            throw Self.failure(status, error, doing: "creating the stream \(name)")
        }
    }

    /// Waits until JetStream answers (its servers have elected a metadata leader), asking
    /// every half second for up to `seconds`. A request sent before the election is not
    /// answered and would wait the connection's whole timeout before its retry.
    package func awaitJetStream(seconds: Double = 30) throws(LedgerError) {
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = min(timeout, 500)
        let deadline = Timestamp.now().milliseconds + Int64(seconds * 1000)
        while true {
            var info: UnsafeMutablePointer<jsAccountInfo>?
            var error = jsErrCode(0)
            let status = js_GetAccountInfo(&info, jetStream, &options, &error)
            if status == NATS_OK { jsAccountInfo_Destroy(info); return }
            let failure = Self.failure(status, error, doing: "asking JetStream for the account")
            guard failure.code == .unavailable, Timestamp.now().milliseconds < deadline else { throw failure }
            nats_Sleep(50)
        }
    }

    /// The stream's last sequence (0 when empty).
    package func lastSequence(of stream: String) throws(LedgerError) -> UInt64 {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var error = jsErrCode(0)
        let status = js_GetStreamInfo(&info, jetStream, stream, nil, &error)
        guard status == NATS_OK, let info else { throw Self.failure(status, error, doing: "reading the stream \(stream)") }
        defer { jsStreamInfo_Destroy(info) }
        return info.pointee.State.LastSeq
    }

    /// What a publish to a stream came back with.
    package struct PublishAck: Sendable, Hashable {
        /// The message's sequence in the stream (the stored one's, for a duplicate).
        package var sequence: UInt64
        /// Whether the stream already held a message with this message id (within its
        /// duplicate window) and stored nothing.
        package var duplicate: Bool
    }

    /// One message of `publish(_:)`.
    package struct Publication: Sendable {
        package var subject: String
        package var data: [UInt8]
        package var messageID: String?
        package var expectedLastSubjectSequence: UInt64?
        /// The append call that publishes it, kept in the message (header `Ledger-Call`).
        package var call: String?
        package init(subject: String, data: [UInt8], messageID: String?, expectedLastSubjectSequence: UInt64?, call: String? = nil) {
            self.subject = subject
            self.data = data
            self.messageID = messageID
            self.expectedLastSubjectSequence = expectedLastSubjectSequence
            self.call = call
        }
    }

    /// Publishes `messages` together, without waiting for each acknowledgement before the
    /// next (JetStream stores them in the order sent), and returns each one's outcome: its
    /// sequence (the stored one's for an id already in the duplicate window),
    /// `.wrongExpectedVersion` when the subject's last sequence was not the one expected,
    /// `.unavailable` when no answer came in time (it may be stored: publish it again, same id).
    package func publish(_ messages: [Publication]) -> [Result<PublishAck, LedgerError>] {
        let sent = messages.map { message -> (subject: String, data: [UInt8], headers: [String: String]) in
            var headers: [String: String] = [:]
            if let id = message.messageID { headers["Nats-Msg-Id"] = id }
            if let expected = message.expectedLastSubjectSequence { headers["Nats-Expected-Last-Subject-Sequence"] = String(expected) }
            if let call = message.call { headers[Self.callHeader] = call }
            return (message.subject, message.data, headers)
        }
        return gather(sent, timeout: timeout) { bytes, subject, noResponders in
            Self.acknowledgement(bytes, of: subject, noResponders: noResponders)
        }
    }

    /// JetStream's answer to a publish: `{"stream":…,"seq":N[,"duplicate":true]}` or `{"error":{…}}`.
    static func acknowledgement(_ bytes: [UInt8], of subject: String, noResponders: Bool) -> Result<PublishAck, LedgerError> {
        if noResponders { return .failure(LedgerError(.unavailable, "no stream took the message to \(subject) (JetStream is electing a leader); publish it again")) }
        guard case .object(let ack)? = try? JSONParser.parse(bytes) else {
            return .failure(LedgerError(.storage, "JetStream answered a publish to \(subject) with something that is not JSON"))
        }
        if case .object(let error)? = ack["error"] {
            var code: Int64 = 0
            if case .number(let n)? = error["err_code"], let c = n.int64 { code = c }
            var text = ""
            if case .string(let t)? = error["description"] { text = t }
            if code == Int64(JSStreamWrongLastSequenceErr.rawValue) {
                return .failure(LedgerError(.wrongExpectedVersion, "the NATS subject \(subject) moved on since it was read; read it again and retry"))
            }
            // No leader or no peers yet: a retry mends it. Anything else (a full store, a
            // message too large, permissions) needs the operator.
            let transient: Set<Int64> = [10005, 10008]
            return .failure(LedgerError(transient.contains(code) ? .unavailable : .storage,
                                        "JetStream refused the message to \(subject): \(text) (error \(code))" + (transient.contains(code) ? "; retry" : "; see the NATS servers' logs")))
        }
        guard case .number(let n)? = ack["seq"], let sequence = n.int64 else {
            return .failure(LedgerError(.storage, "JetStream's acknowledgement of a publish to \(subject) has no sequence"))
        }
        var duplicate = false
        if case .bool(let d)? = ack["duplicate"] { duplicate = d }
        return .success(PublishAck(sequence: UInt64(sequence), duplicate: duplicate))
    }

    /// A message read back from a stream.
    package struct StoredMessage: Sendable, Hashable {
        package var sequence: UInt64
        package var subject: String
        package var data: [UInt8]
        /// When the stream stored it, in nanoseconds since 1970 (the stream leader's clock).
        package var time: Int64 = 0
        /// The append call that published it (`Publication.call`), if it said.
        package var call: String?
    }

    /// The header that names the append call a message came from.
    static let callHeader = "Ledger-Call"

    /// The last message stored under `subject`, `nil` when it has none.
    package func lastMessage(in stream: String, subject: String) throws(LedgerError) -> StoredMessage? {
        var message: OpaquePointer?
        var error = jsErrCode(0)
        let status = js_GetLastMsg(&message, jetStream, stream, subject, nil, &error)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else { throw Self.failure(status, error, doing: "reading the last message of \(subject)") }
        defer { natsMsg_Destroy(message) }
        return Self.stored(message)
    }

    /// The message at `sequence`, `nil` when there is none (never stored, or deleted).
    package func message(in stream: String, at sequence: UInt64) throws(LedgerError) -> StoredMessage? {
        var message: OpaquePointer?
        var error = jsErrCode(0)
        let status = js_GetMsg(&message, jetStream, stream, sequence, nil, &error)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else { throw Self.failure(status, error, doing: "reading message \(sequence) of \(stream)") }
        defer { natsMsg_Destroy(message) }
        return Self.stored(message)
    }

    // MARK: Request and reply

    /// Sends each request at once and waits for their answers; `.unavailable` for one nobody
    /// listens to or answers in time.
    package func requests(_ requests: [(subject: String, data: [UInt8])], timeout: Int64) -> [Result<[UInt8], LedgerError>] {
        gather(requests.map { ($0.subject, $0.data, [:]) }, timeout: timeout) { bytes, subject, noResponders in
            noResponders ? .failure(LedgerError(.unavailable, "no ledger node answers \(subject) yet; a node takes it over within seconds — retry")) : .success(bytes)
        }
    }

    /// Publishes each message with a reply subject of its own under one inbox, and gathers the
    /// replies, made into results by `answer`, until all came or `timeout` passed.
    private func gather<R>(_ messages: [(subject: String, data: [UInt8], headers: [String: String])], timeout: Int64,
                           _ answer: ([UInt8], String, Bool) -> Result<R, LedgerError>) -> [Result<R, LedgerError>] {
        guard !messages.isEmpty else { return [] }
        var results = [Result<R, LedgerError>?](repeating: nil, count: messages.count)
        var inbox: UnsafeMutablePointer<natsInbox>?
        guard natsInbox_Create(&inbox) == NATS_OK, let inbox else {
            return messages.map { _ in .failure(LedgerError(.unavailable, "NATS failed making an inbox")) }
        }
        defer { natsInbox_Destroy(inbox) }
        let prefix = String(cString: inbox)
        var subscription: OpaquePointer?
        var status = natsConnection_SubscribeSync(&subscription, connection, prefix + ".*")
        guard status == NATS_OK, let subscription else {
            let failure = Self.failure(status, jsErrCode(0), doing: "waiting for answers")
            return messages.map { _ in .failure(failure) }
        }
        defer { natsSubscription_Destroy(subscription) }
        for (i, message) in messages.enumerated() {
            var msg: OpaquePointer?
            status = message.data.withUnsafeBytes { bytes in
                natsMsg_Create(&msg, message.subject, "\(prefix).\(i)", bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
            }
            guard status == NATS_OK, let msg else {
                results[i] = .failure(Self.failure(status, jsErrCode(0), doing: "sending to \(message.subject)"))
                continue
            }
            for (key, value) in message.headers.sorted(by: { $0.key < $1.key }) { natsMsgHeader_Set(msg, key, value) }
            status = natsConnection_PublishMsg(connection, msg)
            natsMsg_Destroy(msg)
            if status != NATS_OK { results[i] = .failure(Self.failure(status, jsErrCode(0), doing: "sending to \(message.subject)")) }
        }
        _ = natsConnection_Flush(connection)
        let deadline = Timestamp.now().milliseconds + timeout
        var pending = results.count { $0 == nil }
        // Each message gets one reply: an answer, or the server's "no responders", which the C
        // client reports without the message (so without saying which request it was for).
        var noResponders = 0
        while pending > noResponders {
            let left = deadline - Timestamp.now().milliseconds
            var reply: OpaquePointer?
            guard left > 0 else { break }
            let next = natsSubscription_NextMsg(&reply, subscription, left)
            if next == NATS_NO_RESPONDERS && reply == nil {
                noResponders += 1
                continue
            }
            guard next == NATS_OK || next == NATS_NO_RESPONDERS, let reply else { break }
            defer { natsMsg_Destroy(reply) }
            let replySubject = natsMsg_GetSubject(reply).map { String(cString: $0) } ?? ""
            guard let i = Int(replySubject.split(separator: ".").last ?? ""), i >= 0, i < messages.count, results[i] == nil else { continue }
            results[i] = answer(Self.bytes(of: reply), messages[i].subject, next == NATS_NO_RESPONDERS || natsMsg_IsNoResponders(reply))
            pending -= 1
        }
        let unanswered = pending > 0 && pending == noResponders
        return results.enumerated().map { i, result in
            if let result { return result }
            if unanswered { return answer([], messages[i].subject, true) }
            return .failure(LedgerError(.unavailable, "no answer from \(messages[i].subject) in time; what was sent may have been done: send it again (appends are idempotent)"))
        }
    }

    /// Publishes `data` to `subject` without JetStream (an answer to a request).
    package func send(_ data: [UInt8], to subject: String) throws(LedgerError) {
        let status = data.withUnsafeBytes { bytes in
            natsConnection_Publish(connection, subject, bytes.baseAddress, Int32(bytes.count))
        }
        try Self.check(status, doing: "answering on \(subject)")
    }

    /// Makes sure every message published so far reached the server.
    package func flush() throws(LedgerError) {
        try Self.check(natsConnection_FlushTimeout(connection, timeout), doing: "flushing the NATS connection")
    }

    // MARK: Inside

    var jetStreamContext: OpaquePointer { jetStream }
    var natsConnection: OpaquePointer { connection }

    /// Retries `body` while the cluster is still electing leaders (JetStream answers "no
    /// suitable peers" or times out for the first seconds after its servers start).
    func retrying<R>(_ doing: String, seconds: Double = 30, _ body: () throws(LedgerError) -> R) throws(LedgerError) -> R {
        let deadline = Timestamp.now().milliseconds + Int64(seconds * 1000)
        while true {
            do throws(LedgerError) {
                return try body()
            } catch {
                guard error.code == .unavailable, Timestamp.now().milliseconds < deadline else { throw error }
                nats_Sleep(200)
            }
        }
    }

    static func stored(_ message: OpaquePointer) -> StoredMessage {
        StoredMessage(sequence: natsMsg_GetSequence(message),
                      subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "",
                      data: bytes(of: message), time: natsMsg_GetTime(message), call: header(callHeader, of: message))
    }

    static func header(_ key: String, of message: OpaquePointer) -> String? {
        var value: UnsafePointer<CChar>?
        guard natsMsgHeader_Get(message, key, &value) == NATS_OK, let value else { return nil }
        return String(cString: value)
    }

    static func bytes(of message: OpaquePointer) -> [UInt8] {
        let count = Int(natsMsg_GetDataLength(message))
        guard count > 0, let data = natsMsg_GetData(message) else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
    }

    static func text(_ status: natsStatus) -> String {
        natsStatus_GetText(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
    }

    static func check(_ status: natsStatus, doing: String) throws(LedgerError) {
        guard status == NATS_OK else { throw failure(status, jsErrCode(0), doing: doing) }
    }

    /// An error of the C client as a `LedgerError`, with the code `code` gives it.
    static func failure(_ status: natsStatus, _ error: jsErrCode, doing: String) -> LedgerError {
        var detail = text(status)
        if error.rawValue != 0 { detail += " (JetStream error \(error.rawValue))" }
        if let last = lastError(), !detail.contains(last) { detail += ": \(last)" }
        let code = code(status, error, detail: detail)
        if error.rawValue == 10074 {
            // JSStreamReplicasNotSupportedErr: a single server, not a cluster.
            detail += "; this NATS is a single JetStream server: start the nodes with --replicas 1, or run a cluster (Tools/cluster up)"
        }
        return LedgerError(code, "NATS failed \(doing): \(detail)")
    }

    /// `.unavailable` for a failure a retry may mend — no server, a timeout, no leader or not
    /// all the peers yet (nats.c's key-value calls give that as text, not as the error code) —
    /// else `.storage`.
    static func code(_ status: natsStatus, _ error: jsErrCode, detail: String) -> LedgerError.Code {
        let transient: Set<UInt32> = [NATS_TIMEOUT.rawValue, NATS_NO_SERVER.rawValue, NATS_CONNECTION_CLOSED.rawValue,
                                      NATS_CONNECTION_DISCONNECTED.rawValue, NATS_NO_RESPONDERS.rawValue, NATS_STALE_CONNECTION.rawValue]
        let noPeers = error == JSClusterNoPeersErr || detail.contains("no suitable peers")
        return transient.contains(status.rawValue) || noPeers || error.rawValue == 10008 /* JSClusterNotAvailErr */ ? .unavailable : .storage
    }

    private static func lastError() -> String? {
        var status = NATS_OK
        guard let text = nats_GetLastError(&status), status != NATS_OK else { return nil }
        return String(cString: text)
    }
}

/// Calls `body` with C strings of `strings`, valid for the call.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { UnsafePointer($0) })
}

func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

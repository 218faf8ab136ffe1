import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes

/// How long a connection may take over each part of a request, how long it may leave an answer
/// unread, and how long it may sit idle: a client that sends a request's head slowly, its body
/// slowly, nothing at all, or all but stops reading what it asked for is closed, so that slow
/// or stalled clients cannot hold every connection (`ServerLimits.connections`). A request
/// being answered has no deadline: its route decides how long it takes.
///
/// Two handlers share one clock per connection: `RawBytesWatch`, first in the pipeline, sees
/// a request's first byte (before its head is whole, which the HTTP decoder alone knows) and
/// when the socket stops taking what is written to it;
/// `RequestPartsWatch`, after the decoder, sees the head, the end of the body and the end of
/// each response.
final class ConnectionClock {
    /// What the connection is waiting for, and so which deadline runs.
    enum Phase {
        /// Between requests (or before the first): `idle` runs.
        case idle
        /// A request's first bytes came, its head is not whole: `head` runs.
        case readingHead
        /// A head came and its body has not ended (answered early or not): `body` runs.
        case readingBody
        /// Every request read, a response still owed: no deadline.
        case answering
        /// More is written than the client has read (the channel is not writable): `write`
        /// runs, and starts again each time the client has read `minimumProgress` more.
        case stalled
    }

    private let limits: ServerLimits
    private(set) var phase = Phase.idle
    /// Requests whose head came and whose response has not ended. Counted, not flagged: a
    /// response may end before its body is read (a `403`, a `401`), and pipelined requests
    /// may be read while an earlier one is answered.
    private var owed = 0
    /// A head came and its body has not ended.
    private var bodyOpen = false
    /// Bytes came that no head has accounted for yet.
    private var bytesPending = false
    /// The channel takes writes (what is queued is under its high-water mark).
    private var writable = true
    private var deadline: Scheduled<Void>?
    /// The bytes the channel held unsent when the write deadline last started.
    private var unsentAtStart = 0
    /// What a client that is reading takes of an answer within each write deadline, at the
    /// least: half the channel's default high-water mark (it turns writable again below the
    /// other half).
    static let minimumProgress = 32 * 1024
    private weak var context: ChannelHandlerContext?

    init(limits: ServerLimits) { self.limits = limits }

    /// The connection opened, on the raw handler's `context` (where a 408 is written).
    func opened(_ context: ChannelHandlerContext) {
        self.context = context
        settle()
    }

    func bytesArrived() {
        guard !bodyOpen else { return }
        bytesPending = true
        if phase == .idle { settle() }
    }

    func headArrived() {
        owed += 1
        bodyOpen = true
        bytesPending = false
        settle()
    }

    func bodyEnded() {
        bodyOpen = false
        settle()
    }

    func responseEnded() {
        owed = max(0, owed - 1)
        settle()
    }

    func writabilityChanged(_ isWritable: Bool) {
        writable = isWritable
        settle()
    }

    func closed() {
        deadline?.cancel()
        deadline = nil
        context = nil
    }

    /// The phase the counts give, with its deadline (started afresh only when the phase changes).
    private func settle() {
        let next: Phase = if !writable { .stalled } else if bodyOpen { .readingBody } else if owed > 0 { .answering } else if bytesPending { .readingHead } else { .idle }
        guard next != phase || deadline == nil else { return }
        phase = next
        deadline?.cancel()
        deadline = nil
        let timeout: Duration? = switch next {
        case .idle: limits.idleTimeout
        case .readingHead: limits.headerTimeout
        case .readingBody: limits.bodyTimeout
        case .answering: nil
        case .stalled: limits.writeTimeout
        }
        guard let timeout else { return }
        if next == .stalled { unsentAtStart = unsent }
        start(next, timeout)
    }

    private func start(_ phase: Phase, _ timeout: Duration) {
        guard let context else { return }
        deadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .nanoseconds(Int64(timeout / .nanoseconds(1)))) { [weak self] in
            self?.expired(phase)
        }
    }

    /// The bytes written to the channel and not yet to the socket.
    private var unsent: Int {
        (try? context?.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    /// A deadline passed: the connection closes; one whose request head was late is told so
    /// first (`408`: no response is owed, so none is being written).
    private func expired(_ expected: Phase) {
        guard phase == expected, let context else { return }
        deadline = nil
        // A client still reading, however slowly, is given another deadline.
        if phase == .stalled, unsentAtStart - unsent >= Self.minimumProgress {
            unsentAtStart = unsent
            start(.stalled, limits.writeTimeout)
            return
        }
        if phase == .readingHead && owed == 0 {
            let reply = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: reply)), promise: nil)
        }
        context.close(promise: nil)
    }
}

/// First in a connection's pipeline: tells the clock when bytes arrive.
final class RawBytesWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let clock: ConnectionClock

    init(clock: ConnectionClock) { self.clock = clock }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { clock.opened(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        clock.opened(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        clock.bytesArrived()
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        clock.writabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        clock.closed()
        context.fireChannelInactive()
    }
}

/// After the HTTP decoder: tells the clock of each request's head and end and each
/// response's end. It finds the clock in its own pipeline's `RawBytesWatch`.
final class RequestPartsWatch: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var clock: ConnectionClock?

    func handlerAdded(context: ChannelHandlerContext) {
        clock = try? context.pipeline.syncOperations.handler(type: RawBytesWatch.self).clock
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: clock?.headArrived()
        case .body: break
        case .end: clock?.bodyEnded()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { clock?.responseEnded() }
        context.write(data, promise: promise)
    }
}

/// HTTP/1.1 with `ConnectionClock`'s deadlines: Hummingbird's own channel, with the raw
/// watch put first in each connection's pipeline and the parts watch after the decoder.
struct DeadlinedHTTP1Channel: ServerChildChannel {
    let inner: HTTP1Channel
    let limits: ServerLimits

    init(responder: @escaping HTTPChannelHandler.Responder, limits: ServerLimits) {
        inner = HTTP1Channel(responder: responder, configuration: .init(additionalChannelHandlers: [RequestPartsWatch()]))
        self.limits = limits
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(RawBytesWatch(clock: ConnectionClock(limits: limits)), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

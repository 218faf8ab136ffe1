import Glibc
import HTTPTypes
import Hummingbird
import LedgerProjections
@_spi(Storage) import LedgerStore
import NIOCore
import Prometheus

/// What `/metrics` shows, in Prometheus' text format: requests by route and status, how long
/// appends take to be durable, the events appended, and each model's lag behind the log
/// (worked out when scraped).
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let appendDuration: DurationHistogram
    let eventsAppended: Counter
    let duplicates: Counter

    init() {
        appendDuration = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "append_duration", unitName: "seconds",
                                             helpText: "Time from a request's batch reaching the writer to its being durable"),
            buckets: [.microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                      .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1)])
        eventsAppended = registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "events_appended", unitName: "total",
                                                                               helpText: "Events written by the server's appends"))
        duplicates = registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "events_duplicate", unitName: "total",
                                                                           helpText: "Events the server was given again, already stored"))
    }

    /// A request to `route` (its template: `/v1/subjects/{subject}/status`) answered `status`.
    func request(route: String, status: HTTPResponse.Status) {
        registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "http_requests", unitName: "total",
                                                              helpText: "HTTP requests by route and status"),
                             labels: [("route", route), ("status", String(status.code))]).increment()
    }

    /// An append made durable in `duration`.
    func appended(_ result: AppendResult, in duration: Duration) {
        appendDuration.record(duration)
        eventsAppended.increment(by: Int64(result.appended))
        duplicates.increment(by: Int64(result.duplicates))
    }

    /// The exposition, each model's lag (events between its checkpoint and the head) and the
    /// heavy reads running and waiting their turn set now.
    func exposition(_ ledger: Ledger, heavyReads: (running: Int, waiting: Int)) throws(LedgerError) -> String {
        registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "heavy_reads_running", unitName: "",
                                                            helpText: "Heavy reads (audits, exports, the due list) running"))
            .set(Double(heavyReads.running))
        registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "heavy_reads_waiting", unitName: "",
                                                            helpText: "Heavy reads waiting their turn"))
            .set(Double(heavyReads.waiting))
        let stats = try ledger.stats()
        for model in stats.models {
            let lag = stats.log.lastPosition - min(model.checkpoint ?? 0, stats.log.lastPosition)
            registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "model_lag", unitName: "events",
                                                                helpText: "Events between a read model's checkpoint and the head of the log"),
                               labels: [("model", model.name)]).set(Double(lag))
        }
        registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "ledger", metricName: "log_last_position", unitName: "",
                                                            helpText: "The last position of the log"))
            .set(Double(stats.log.lastPosition))
        return registry.emitToString()
    }
}

/// The server's request context: Hummingbird's basics, the client's address, which lets
/// `/metrics` answer loopback clients without a token, and its connection.
struct ServerContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    /// The client's connection: a heavy read waiting its turn is dropped once it closed.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }

    /// Whether the client is still connected: the connection open, and its side not closed
    /// (TCP's CLOSE_WAIT, as nginx counts a client gone). Asked of the socket, as a request
    /// being answered reads nothing more that would show it; blocks for the channel's event
    /// loop, so never ask it on one.
    var connected: @Sendable () -> Bool {
        { [channel] in
            // Not a socket: a test's channel, with no client to leave.
            guard let socket = channel as? any SocketOptionProvider else { return true }
            guard channel.isActive, let info = try? socket.getTCPInfo().wait() else { return false }
            return Int(info.tcpi_state) != Int(TCP_CLOSE_WAIT)
        }
    }

    /// Who sent `request`: the peer, or behind a proxy `trusted` holds the client it names.
    func client(_ request: Request, trusting trusted: TrustedProxies) -> ClientAddress {
        ClientAddress(request, peer: remoteAddress, trusted: trusted)
    }

    /// Whether the request came straight from this machine: a loopback peer and no proxy
    /// header of any form (a proxy here forwards others' requests).
    func isLoopback(_ request: Request) -> Bool {
        client(request, trusting: .loopback).isDirectLoopback
    }
}

/// Counts requests no route matched (`404`), as the route `unmatched`; the routes count their own.
struct UnmatchedMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            if response.status == .notFound { metrics.request(route: "unmatched", status: .notFound) }
            return response
        } catch let error as any HTTPResponseError where error.status == .notFound {
            metrics.request(route: "unmatched", status: .notFound)
            throw error
        }
    }
}

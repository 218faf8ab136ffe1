import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import LedgerAppStore
@_spi(Storage) import LedgerCore
import LedgerModels
import LedgerProjections
@_spi(Storage) import LedgerStore
import Logging

/// `ledger serve`: one process serving one store over HTTP (SPEC §7) — the App Store's
/// webhook, the JSON API and the support pages — every answer worked out by the same library
/// calls the command line makes, its JSON the command line's `--json`, byte for byte.
///
/// The store stays open for the server's life: reads run in read transactions of their own on
/// whatever task handles the request; appends go through the ledger's one writer, and answer
/// only once durable (group commit). `run()` stops on SIGTERM or SIGINT after the requests in
/// flight, appends included, have finished.
public struct LedgerServer: Sendable {
    /// The largest request body taken (SPEC §7: `413` beyond).
    public static let maximumBodyBytes = 1 << 20

    let ledger: Ledger
    /// The cluster the JSON routes answer from, when this server is a cluster node's.
    let cluster: (any ClusterAnswers)?
    let tokens: AccessTokens
    /// The App Store's verifier, from the settings recorded in the store (`ledger init
    /// --appstore-…`); `nil` when there are none, and the webhook answers `503`.
    let verifier: SignedDataVerifier?
    let logger: Logger
    /// The support pages' sign-ins.
    let sessions = Sessions()
    /// What `/metrics` shows.
    let metrics = ServerMetrics()
    /// What one client may take: timeouts, connections, heavy reads at once.
    let limits: ServerLimits
    /// The proxies whose headers name the client a sign-in is throttled by.
    let trustedProxies: TrustedProxies
    /// Where heavy reads (audits, a subject's events, the due list, a customer's page) run,
    /// `limits.heavyReads` at once, off the threads that answer everything else.
    let heavyReads: Offloader

    /// A server of `ledger`, which it neither opens nor closes.
    /// - Throws: `LedgerError` when the store's App Store settings do not make a verifier.
    public init(ledger: Ledger, limits: ServerLimits = ServerLimits(), trustedProxies: TrustedProxies = .loopback,
                logger: Logger = Logger(label: "ledger.serve")) throws(LedgerError) {
        try self.init(ledger: ledger, cluster: nil, limits: limits, trustedProxies: trustedProxies, logger: logger)
    }

    /// A server of a cluster node (`ledger node --port`): the JSON routes and the support
    /// pages answer from `cluster`; `ledger` (the node's store) keeps the tokens. The App
    /// Store's webhook answers `503` (it binds a subscription to a customer in one store).
    @_spi(Cluster) public init(ledger: Ledger, cluster: (any ClusterAnswers)?, limits: ServerLimits = ServerLimits(),
                               trustedProxies: TrustedProxies = .loopback, logger: Logger = Logger(label: "ledger.serve")) throws(LedgerError) {
        self.ledger = ledger
        self.cluster = cluster
        self.limits = limits
        self.trustedProxies = trustedProxies
        heavyReads = Offloader.heavyReads(limits)
        tokens = AccessTokens(ledger)
        self.logger = logger
        if let configuration = try ledger.appStoreConfiguration() {
            do {
                verifier = try SignedDataVerifier(configuration)
            } catch {
                throw LedgerError(.corruptRecord, "the store's App Store settings do not make a verifier: \(error)")
            }
        } else {
            verifier = nil
        }
    }

    /// The application serving on `host`:`port` (port 0: any free port, which `onRunning`
    /// is told), each connection held to `limits`' deadlines and their number to
    /// `limits.connections`.
    public func application(host: String = "127.0.0.1", port: Int = 8080,
                            onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let limits = self.limits
        return Application(router: router(), server: HTTPServerBuilder { responder in DeadlinedHTTP1Channel(responder: responder, limits: limits) },
                           configuration: .init(address: .hostname(host, port: port), serverName: "ledger",
                                                availableConnectionsDelegate: MaximumAvailableConnections(limits.connections, logger: logger)),
                           onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) }, logger: logger)
    }

    /// Serves until SIGTERM or SIGINT, then finishes the requests in flight.
    public func run(host: String = "127.0.0.1", port: Int = 8080, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(host: host, port: port, onRunning: onRunning).runService()
    }

    func router() -> Router<ServerContext> {
        let router = Router(context: ServerContext.self)
        router.middlewares.add(NoSniffMiddleware())
        router.middlewares.add(RequestLogMiddleware(.info))
        router.middlewares.add(UnmatchedMetricsMiddleware(metrics: metrics))
        router.middlewares.add(SameOriginMiddleware())
        let routes = Routes(server: self)
        let pages = SupportPages(routes: routes, sessions: sessions)
        let (metrics, logger) = (self.metrics, self.logger)
        /// Adds a route whose answers, and what it throws, `Reply.respond` makes into
        /// responses, counted by the route's template.
        func on(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response) {
            router.on(RouterPath(path), method: method) { request, context in
                let response = await Reply.respond(logger) { try await handler(request, context) }
                metrics.request(route: path, status: response.status)
                return response
            }
        }
        on(.post, "/appstore/v2/notifications") { request, _ in try await routes.notification(request) }
        on(.post, "/v1/events") { request, _ in try await routes.events(request) }
        on(.get, "/v1/subjects/{subject}/status") { request, context in try await routes.status(request, subject: context.parameters.get("subject")) }
        on(.get, "/v1/subjects/{subject}/audit") { request, context in try await routes.audit(request, subject: context.parameters.get("subject"), connected: context.connected) }
        on(.get, "/v1/subjects/{subject}/events") { request, context in try await routes.subjectEvents(request, subject: context.parameters.get("subject"), connected: context.connected) }
        on(.get, "/v1/lookup") { request, _ in try await routes.lookup(request) }
        on(.get, "/v1/due") { request, context in try await routes.due(request, connected: context.connected) }
        on(.get, "/v1/stats") { request, _ in try await routes.stats(request) }
        on(.get, "/healthz") { _, _ in try routes.health() }
        on(.get, "/metrics") { request, context in try routes.metrics(request, loopback: context.isLoopback(request)) }
        on(.get, "/login") { request, _ in try pages.loginPage(request) }
        let trusted = trustedProxies
        on(.post, "/login") { request, context in try await pages.login(request, client: context.client(request, trusting: trusted)) }
        on(.post, "/logout") { request, _ in pages.logout(request) }
        on(.get, "/") { request, _ in try await pages.home(request) }
        on(.get, "/ui/subjects/{subject}") { request, context in try await pages.customer(request, subject: context.parameters.get("subject"), connected: context.connected) }
        return router
    }
}

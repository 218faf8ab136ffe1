import Foundation
import HTTPTypes
import Hummingbird
import LedgerAppStore
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

/// The routes of SPEC §7, each a library call and its command's `--json` shape.
struct Routes: Sendable {
    let server: LedgerServer
    var ledger: Ledger { server.ledger }

    // MARK: Access

    /// The token a request carries (`Authorization: Bearer TOKEN`), if its role reaches
    /// `role`. A missing or unknown token is `401`, a role short of it `403`: checked before
    /// anything else, so neither says whether a subject exists.
    @discardableResult
    func authorize(_ request: Request, _ role: AccessRole) throws -> AccessToken {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { throw Reply.unauthorized }
        let secret = header.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
        guard !secret.isEmpty, let token = try server.tokens.token(forSecret: secret) else { throw Reply.unauthorized }
        guard token.role >= role else { throw Reply.forbidden }
        return token
    }

    // MARK: Writing

    /// `POST /appstore/v2/notifications`: one notification, verified (its signature is the
    /// proof; no token), appended once durable. A retry is `200` with its events as duplicates.
    func notification(_ request: Request) async throws -> Response {
        let body = try await request.body.collect(upTo: LedgerServer.maximumBodyBytes)
        guard server.cluster == nil else {
            throw Reply.error(.serviceUnavailable, "a cluster node does not take App Store notifications yet: deliver them to `ledger serve` on a single store")
        }
        guard let verifier = server.verifier else {
            throw Reply.error(.serviceUnavailable, "the store has no App Store settings: record them with `ledger init --appstore-root PEM --appstore-bundle-id ID --appstore-environment ENV`")
        }
        do throws(LedgerError) {
            let start = ContinuousClock.now
            let result = try await ledger.ingestAppStore(Array(body.readableBytesView), verifier: verifier)
            server.metrics.appended(result, in: ContinuousClock.now - start)
            return Reply.json(result.json)
        } catch {
            // Verification failed, or the notification cannot be mapped: Apple's to fix. Any
            // other failure (a conflict with what is stored included) is the server's: Apple
            // retries a 5xx.
            guard error.code == .invalidEvent else { throw error }
            throw Reply.error(.badRequest, (error.field.map { "\($0): " } ?? "") + error.message)
        }
    }

    /// `POST /v1/events`: a JSONL body, one atomic batch, as `ledger append` takes a file.
    func events(_ request: Request) async throws -> Response {
        try authorize(request, .writer)
        let body = try await request.body.collect(upTo: LedgerServer.maximumBodyBytes)
        let events: [(line: Int, draft: EventDraft)]
        switch JSONLImport.events(in: Array(body.readableBytesView), named: "body") {
        case .success(let checked): events = checked
        case .failure(let problems): throw Self.refusal(problems.problems)
        }
        do throws(LedgerError) {
            let start = ContinuousClock.now
            let drafts = events.map(\.draft)
            let result = if let cluster = server.cluster {
                try await Self.offload { () throws(LedgerError) in try cluster.append(drafts) }
            } else {
                try await ledger.append(drafts)
            }
            server.metrics.appended(result, in: ContinuousClock.now - start)
            return Reply.json(result.json)
        } catch {
            guard error.code == .invalidEvent || error.code == .idConflict else { throw error }
            let line = error.index.flatMap { events.indices.contains($0) ? events[$0].line : nil } ?? 0
            throw Self.refusal([InputProblem(file: "body", line: line, pointer: error.field ?? "/", message: error.message)])
        }
    }

    /// `400` with SPEC §5's error objects.
    static func refusal(_ problems: [InputProblem]) -> Reply {
        Reply(status: .badRequest, body: .object(JSONObject([("errors", .array(problems.map(\.json)))])))
    }

    // MARK: Reading

    /// `GET /v1/subjects/{subject}/status?at=T&knownAt=T|POS`: `status --json`.
    func status(_ request: Request, subject raw: String?) async throws -> Response {
        try authorize(request, .support)
        let subject = try Self.subject(raw)
        let query = Query(request)
        let (at, knownAt) = (try query.time("at") ?? .now(), try query.knownAt())
        if let cluster = server.cluster {
            return Reply.json(try await Self.offload { () throws(LedgerError) in try cluster.status(of: subject, at: at, knownAt: knownAt) })
        }
        return Reply.json(try ledger.status(of: subject, at: at, knownAt: knownAt).json)
    }

    /// `GET /v1/subjects/{subject}/audit?at=T&knownAt=T|POS[&limit=N&cursor=C]`: `audit
    /// --json`, or one page of it (`audit --json --limit N --cursor C`).
    func audit(_ request: Request, subject raw: String?, connected: @escaping @Sendable () -> Bool) async throws -> Response {
        try authorize(request, .support)
        let subject = try Self.subject(raw)
        let query = Query(request)
        let (at, knownAt) = (try query.time("at") ?? .now(), try query.knownAt())
        let (limit, cursor) = (try query.pageLimit(), try query.cursor())
        if let cluster = server.cluster {
            guard limit == nil else { throw Reply.error(.badRequest, "limit: a cluster node does not page audits yet; leave limit and cursor out") }
            return Reply.json(try await Self.offload { () throws(LedgerError) in try cluster.audit(of: subject, at: at, knownAt: knownAt) })
        }
        let ledger = self.ledger
        return try await heavy(while: connected) { () throws(LedgerError) in
            guard let limit else { return Reply.json(try ledger.audit(of: subject, at: at, knownAt: knownAt).json) }
            return Reply.json(try ledger.audit(of: subject, at: at, knownAt: knownAt, limit: limit, after: cursor).json)
        }
    }

    /// `GET /v1/subjects/{subject}/events`: the subject's `export`, JSONL.
    func subjectEvents(_ request: Request, subject raw: String?, connected: @escaping @Sendable () -> Bool) async throws -> Response {
        try authorize(request, .support)
        let subject = try Self.subject(raw)
        var out = ByteBuffer()
        if let cluster = server.cluster {
            for line in try await Self.offload({ () throws(LedgerError) in try cluster.exportLines(of: subject) }) {
                out.writeString(line)
                out.writeInteger(UInt8(0x0A))
            }
        } else {
            let ledger = self.ledger
            out = try await heavy(while: connected) { () throws(LedgerError) in
                var lines = ByteBuffer()
                for event in try ledger.events(of: subject).collect() {
                    lines.writeBytes(try EventLine.export(event))
                    lines.writeInteger(UInt8(0x0A))
                }
                return lines
            }
        }
        return Response(status: .ok, headers: [.contentType: "application/x-ndjson", .cacheControl: "no-store"],
                        body: ResponseBody(byteBuffer: out))
    }

    /// `GET /v1/lookup?transactionId=X` or `?originalTransactionId=X`: who holds it.
    func lookup(_ request: Request) async throws -> Response {
        try authorize(request, .support)
        let query = Query(request)
        let (transaction, original) = (query["transactionId"], query["originalTransactionId"])
        guard (transaction == nil) != (original == nil) else { throw Reply.error(.badRequest, "give one of transactionId or originalTransactionId") }
        let subjects: [String]
        if let cluster = server.cluster {
            subjects = try await Self.offload { () throws(LedgerError) in try cluster.subjects(holdingTransaction: transaction, original: original) }
        } else if let transaction {
            subjects = try ledger.subjects(holdingTransaction: transaction)
        } else {
            subjects = try ledger.subjects(holdingOriginalTransaction: original ?? "")
        }
        return Reply.json(.object(JSONObject([("subjects", .array(subjects.map(JSON.string)))])))
    }

    /// `GET /v1/due?from=T&to=T`: `due --json`.
    func due(_ request: Request, connected: @escaping @Sendable () -> Bool) async throws -> Response {
        try authorize(request, .support)
        let query = Query(request)
        guard let from = try query.time("from") else { throw Reply.error(.badRequest, "from: missing; give an RFC 3339 time with a zone") }
        guard let to = try query.time("to") else { throw Reply.error(.badRequest, "to: missing; give an RFC 3339 time with a zone") }
        guard from < to else { throw Reply.error(.badRequest, "from must be before to") }
        if let cluster = server.cluster {
            return Reply.json(DueItem.json(try await Self.offload { () throws(LedgerError) in try cluster.due(from: from, to: to) }, from: from, to: to))
        }
        // A wide window reads every customer's items in it: a heavy read.
        let ledger = self.ledger
        return try await heavy(while: connected) { () throws(LedgerError) in Reply.json(DueItem.json(try ledger.due(from: from, to: to), from: from, to: to)) }
    }

    /// `GET /v1/stats`: `stats --json`.
    func stats(_ request: Request) async throws -> Response {
        try authorize(request, .support)
        if let cluster = server.cluster { return Reply.json(try await Self.offload { () throws(LedgerError) in try cluster.stats() }) }
        return Reply.json(try ledger.stats().json)
    }

    /// `GET /healthz`: `200 ok` when the store answers and no model is stale; a cluster
    /// node's name and partitions.
    func health() throws -> Response {
        if let cluster = server.cluster { return Reply.json(cluster.health()) }
        let stale = try ledger.stats().models.filter(\.stale).map(\.name)
        guard stale.isEmpty else { return Reply.text("stale: \(stale.joined(separator: ", "))\n", status: .serviceUnavailable) }
        return Reply.text("ok\n")
    }

    /// `GET /metrics`: Prometheus' text; loopback clients need no token, others `support`.
    func metrics(_ request: Request, loopback: Bool) throws -> Response {
        if !loopback { try authorize(request, .support) }
        return Reply.text(try server.metrics.exposition(ledger, heavyReads: server.heavyReads.load), headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"])
    }

    /// `body`, a request over NATS, on a thread of its own (`Offloader.cluster`).
    static func offload<T: Sendable>(_ body: @escaping @Sendable () throws(LedgerError) -> T) async throws(LedgerError) -> T {
        try await Offloader.cluster.run(body)
    }

    /// `body`, a read whose cost grows with a subject's history, on a thread of its own among
    /// the server's `heavyReads`, if its client is still `connected` when its turn comes: one
    /// that left is answered `499` (the log and `/metrics` count it) and nothing is read.
    /// A body that answers with its response writes a long answer's text there too, not on
    /// the threads that answer status.
    func heavy<T: Sendable>(while connected: @escaping @Sendable () -> Bool,
                            _ body: @escaping @Sendable () throws(LedgerError) -> T) async throws -> T {
        let result: Result<T, LedgerError>
        do throws(LedgerError) { result = .success(try await server.heavyReads.run(while: connected, body)) } catch { result = .failure(error) }
        if case .failure(let error) = result, error.code == .unavailable, error.message == Offloader.unwanted {
            throw Reply.error(.clientClosedRequest, error.message)
        }
        return try result.get()
    }

    // MARK: Parameters

    /// The subject a path names, percent-decoded and checked as an event's subject is.
    static func subject(_ raw: String?) throws -> String {
        guard let raw, let subject = raw.removingPercentEncoding else { throw Reply.error(.badRequest, "subject: not a percent-encoded subject") }
        if let problem = EventLimits.subjectProblem(subject) { throw Reply.error(.badRequest, "subject: \(problem)") }
        return subject
    }
}

/// A request's query parameters, each read once by name. An empty one counts as absent (a
/// form's field left blank: "now", "everything recorded").
struct Query {
    let parameters: [String: String]

    init(_ request: Request) {
        parameters = HTML.form(Array((request.uri.query ?? "").utf8)).filter { !$0.value.isEmpty }
    }

    subscript(name: String) -> String? { parameters[name] }

    /// The time parameter `name`, `nil` when absent.
    func time(_ name: String) throws -> Timestamp? {
        guard let text = parameters[name] else { return nil }
        guard let t = Timestamp(rfc3339: text) else {
            throw Reply.error(.badRequest, "\(name): " + (Timestamp.reason(rfc3339: text).map { "\(text) \($0)" }
                ?? "expected an RFC 3339 time with a zone (e.g. 2026-03-05T00:00:00Z), got \(text)"))
        }
        return t
    }

    /// `limit`: how many audit entries a page holds (1 to `AuditPaging.maximumLimit`), `nil`
    /// when absent; with a `cursor` and no limit, 100.
    func pageLimit() throws -> Int? {
        guard let text = parameters["limit"] else { return parameters["cursor"] == nil ? nil : 100 }
        guard let limit = Int(text), (1 ... AuditPaging.maximumLimit).contains(limit) else {
            throw Reply.error(.badRequest, "limit: expected a whole number from 1 to \(AuditPaging.maximumLimit), got \(text)")
        }
        return limit
    }

    /// `cursor`: where a page of an audit starts (a page's `next`), `nil` when absent. It
    /// holds the moment and the knowledge: given with `at` or `knownAt`, it is refused.
    func cursor() throws -> AuditCursor? {
        guard let text = parameters["cursor"] else { return nil }
        guard parameters["at"] == nil && parameters["knownAt"] == nil else {
            throw Reply.error(.badRequest, "cursor: it holds the moment and the knowledge of its first page; leave at and knownAt out")
        }
        guard let cursor = AuditCursor(parsing: text) else {
            throw Reply.error(.badRequest, "cursor: not a cursor a page gave (its `next`), got \(text)")
        }
        return cursor
    }

    /// `knownAt`: a time or a log position, `nil` when absent.
    func knownAt() throws -> KnownAt? {
        guard let text = parameters["knownAt"] else { return nil }
        guard let known = KnownAt(parsing: text) else {
            throw Reply.error(.badRequest, "knownAt: expected an RFC 3339 time with a zone or a log position, got \(text)")
        }
        return known
    }
}

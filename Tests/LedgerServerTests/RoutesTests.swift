import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LedgerAppStore
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
import LedgerServer
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport

import Testing

/// A store with a customer, a support and a writer token, and its server.
struct Served: Sendable {
    let ledger: Ledger
    let support: String
    let writer: String

    static let at = "2026-03-05T00:00:00Z"

    /// The customer: a purchase of store transaction t1 (subscription o1).
    static let customer: [LedgerEvent] = [
        LedgerEvent(subject: "user-42", occurredAt: Timestamp(rfc3339: "2026-03-01T09:00:00Z") ?? .now(), source: .app, data: AccountCreated(signedIn: true).eventData),
        LedgerEvent(subject: "user-42", occurredAt: Timestamp(rfc3339: "2026-03-01T09:30:00Z") ?? .now(), source: .appstore,
                    data: SubscriptionPurchased(productId: "pro.monthly", transactionId: "t1", originalTransactionId: "o1",
                                                purchasedAt: Timestamp(rfc3339: "2026-03-01T09:30:00Z") ?? .now(),
                                                expiresAt: Timestamp(rfc3339: "2026-04-01T09:30:00Z") ?? .now()).eventData),
    ]

    /// Runs `body` against a server of a fresh store holding `customer`, in memory (the
    /// router, no socket) unless `setup` says otherwise; `configure` runs on the store first.
    static func run(_ setup: TestingSetup = .router, configure: (Ledger) throws -> Void = { _ in },
                    _ body: @Sendable @escaping (any TestClientProtocol, Served) async throws -> Void) async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try await ledger.append(customer)
            try configure(ledger)
            let tokens = AccessTokens(ledger)
            let served = Served(ledger: ledger, support: try tokens.create(name: "alice", role: .support),
                                writer: try tokens.create(name: "billing", role: .writer))
            let app = try LedgerServer(ledger: ledger).application(port: 0)
            try await app.test(setup) { client in try await body(client, served) }
        }
    }

    func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }
}

extension TestResponse {
    var text: String { String(buffer: body) }
}

@Suite struct RoutesTests {
    @Test func healthIsOkWithoutAToken() async throws {
        try await Served.run { client, _ async throws in
            let response = try await client.execute(uri: "/healthz", method: .get)
            #expect(response.status == .ok)
            #expect(response.text == "ok\n")
        }
    }

    /// A store whose models another policy built is not healthy until a rebuild.
    @Test func healthIsUnavailableWhileModelsAreStale() async throws {
        try await Served.run(configure: { ledger in
            var longerGrace = Policy.reference
            longerGrace.subscription.billingGraceDays = 10
            try ledger.log.setPolicy(longerGrace)
        }) { client, _ async throws in
            let response = try await client.execute(uri: "/healthz", method: .get)
            #expect(response.status == .serviceUnavailable)
            #expect(response.text.hasPrefix("stale: entitlement, retention, badge"))
        }
    }

    /// A missing, malformed or unknown token is 401, the same for a subject the store has and
    /// one it has not.
    @Test func aRequestWithoutAValidTokenIsUnauthorisedAndSaysNothingMore() async throws {
        try await Served.run { client, _ async throws in
            var bodies: Set<String> = []
            for (uri, headers) in [("/v1/subjects/user-42/status", [:]), ("/v1/subjects/nobody/status", [:]),
                                   ("/v1/subjects/user-42/status", [.authorization: "Bearer ledger_forged"] as HTTPFields),
                                   ("/v1/subjects/nobody/audit", [.authorization: "Basic YWxpY2U6"] as HTTPFields)] {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
                bodies.insert(response.text)
            }
            #expect(bodies == [#"{"error":"a valid access token is required (Authorization: Bearer TOKEN)"}"# + "\n"])
        }
    }

    @Test func aSupportTokenMayNotAppend() async throws {
        try await Served.run { client, served async throws in
            let response = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.support), body: ByteBuffer(string: "\n"))
            #expect(response.status == .forbidden)
            #expect(response.text == #"{"error":"this token's role may not do this"}"# + "\n")
        }
    }

    @Test func aRevokedTokenIsRefusedFromItsNextRequest() async throws {
        try await Served.run { client, served async throws in
            #expect(try await client.execute(uri: "/v1/stats", method: .get, headers: served.bearer(served.support)).status == .ok)
            #expect(try AccessTokens(served.ledger).revoke(name: "alice"))
            #expect(try await client.execute(uri: "/v1/stats", method: .get, headers: served.bearer(served.support)).status == .unauthorized)
        }
    }

    /// Status is `status --json`, byte for byte: the library's JSON and a newline.
    @Test func statusIsTheCommandsJSON() async throws {
        try await Served.run { client, served async throws in
            let at = Timestamp(rfc3339: Served.at) ?? .now()
            let response = try await client.execute(uri: "/v1/subjects/user-42/status?at=\(Served.at)", method: .get, headers: served.bearer(served.support))
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            #expect(response.text == (try served.ledger.status(of: "user-42", at: at)).json.serialized() + "\n")
            #expect(response.text.contains(#""planState":"pro""#))
            let known = try await client.execute(uri: "/v1/subjects/user-42/status?at=\(Served.at)&knownAt=1", method: .get, headers: served.bearer(served.support))
            #expect(known.text == (try served.ledger.status(of: "user-42", at: at, knownAt: .position(1))).json.serialized() + "\n")
            #expect(known.text.contains(#""planState":"free""#))
        }
    }

    /// A subject is percent-decoded from the path.
    @Test func aSubjectWithReservedCharactersIsPercentEncoded() async throws {
        try await Served.run(configure: { ledger in
            try ledger.append([LedgerEvent(subject: "appstore:o 2/x", occurredAt: .now(), source: .app, data: AccountCreated(signedIn: false).eventData)])
        }) { client, served async throws in
            let response = try await client.execute(uri: "/v1/subjects/appstore%3Ao%202%2Fx/events", method: .get, headers: served.bearer(served.support))
            #expect(response.status == .ok)
            #expect(response.text.contains(#""subject":"appstore:o 2/x""#))
        }
    }

    /// Query values are percent-decoded once, `+` is a space, and an empty one is absent (a
    /// form's blank field).
    @Test func queryParametersDecodeAsAFormEncodesThem() async throws {
        try await Served.run { client, served async throws in
            let at = Timestamp(rfc3339: Served.at) ?? .now()
            let expected = (try served.ledger.status(of: "user-42", at: at)).json.serialized() + "\n"
            let encoded = try await client.execute(uri: "/v1/subjects/user-42/status?at=2026-03-05T00%3A00%3A00Z&knownAt=", method: .get,
                                                   headers: served.bearer(served.support))
            #expect(encoded.text == expected)
            let offset = try await client.execute(uri: "/v1/subjects/user-42/status?at=2026-03-05T01:00:00%2B01:00", method: .get,
                                                  headers: served.bearer(served.support))
            #expect(offset.text == expected)
            let spaced = try await client.execute(uri: "/v1/subjects/user-42/status?at=2026-03-05+00:00:00Z", method: .get,
                                                  headers: served.bearer(served.support))
            // A space for the T, as RFC 3339 allows: the + was a space.
            #expect(spaced.text == expected)
        }
    }

    @Test func aBadTimeIsABadRequestNamingTheParameter() async throws {
        try await Served.run { client, served async throws in
            let response = try await client.execute(uri: "/v1/subjects/user-42/status?at=yesterday", method: .get, headers: served.bearer(served.support))
            #expect(response.status == .badRequest)
            #expect(response.text == #"{"error":"at: expected an RFC 3339 time with a zone (e.g. 2026-03-05T00:00:00Z), got yesterday"}"# + "\n")
            let known = try await client.execute(uri: "/v1/subjects/user-42/audit?knownAt=soon", method: .get, headers: served.bearer(served.support))
            #expect(known.status == .badRequest)
            #expect(known.text == #"{"error":"knownAt: expected an RFC 3339 time with a zone or a log position, got soon"}"# + "\n")
        }
    }

    @Test func auditIsTheCommandsJSON() async throws {
        try await Served.run { client, served async throws in
            let at = Timestamp(rfc3339: Served.at) ?? .now()
            let response = try await client.execute(uri: "/v1/subjects/user-42/audit?at=\(Served.at)&knownAt=2", method: .get, headers: served.bearer(served.support))
            #expect(response.status == .ok)
            #expect(response.text == (try served.ledger.audit(of: "user-42", at: at, knownAt: .position(2))).json.serialized() + "\n")
        }
    }

    /// `limit` gives one page and its `next`; the cursor gives the page after, as the library
    /// pages it, the last with `next` null.
    @Test func auditPagesFollowTheirCursor() async throws {
        try await Served.run { client, served async throws in
            let at = Timestamp(rfc3339: Served.at) ?? .now()
            let first = try await client.execute(uri: "/v1/subjects/user-42/audit?at=\(Served.at)&limit=1", method: .get, headers: served.bearer(served.support))
            #expect(first.status == .ok)
            let page = try served.ledger.audit(of: "user-42", at: at, limit: 1)
            #expect(first.text == page.json.serialized() + "\n")
            let next = try #require(page.next)
            let second = try await client.execute(uri: "/v1/subjects/user-42/audit?cursor=\(next.description)&limit=100", method: .get,
                                                  headers: served.bearer(served.support))
            #expect(second.status == .ok)
            let rest = try served.ledger.audit(of: "user-42", limit: 100, after: next)
            #expect(second.text == rest.json.serialized() + "\n")
            #expect(rest.next == nil && second.text.contains(#""next":null"#))
            #expect(page.entries + rest.entries == (try served.ledger.audit(of: "user-42", at: at)).entries)
        }
    }

    /// A limit out of 1…10,000 or not a number, a cursor no page gave, or one beside `at`
    /// or `knownAt`: 400, naming the parameter.
    @Test func aBadLimitOrCursorIsABadRequestNamingIt() async throws {
        try await Served.run { client, served async throws in
            let limit = "limit: expected a whole number from 1 to 10000, got "
            let cases = [
                ("limit=0", limit + "0"), ("limit=10001", limit + "10001"), ("limit=ten", limit + "ten"),
                ("cursor=nonsense", "cursor: not a cursor a page gave (its `next`), got nonsense"),
                ("cursor=1772668800000.p3.1&at=2026-03-05T00:00:00Z",
                 "cursor: it holds the moment and the knowledge of its first page; leave at and knownAt out"),
            ]
            for (query, problem) in cases {
                let response = try await client.execute(uri: "/v1/subjects/user-42/audit?" + query, method: .get, headers: served.bearer(served.support))
                #expect(response.status == .badRequest, "\(query)")
                #expect(response.text == JSON.object(["error": .string(problem)]).serialized() + "\n", "\(query)")
            }
        }
    }

    @Test func eventsAreTheSubjectsExport() async throws {
        try await Served.run { client, served async throws in
            let response = try await client.execute(uri: "/v1/subjects/user-42/events", method: .get, headers: served.bearer(served.support))
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/x-ndjson")
            let lines = try served.ledger.events(of: "user-42").collect().map { event throws(LedgerError) in try event.jsonLine + "\n" }
            #expect(response.text == lines.joined())
        }
    }

    /// A JSONL body is one atomic batch: the append shape, then a duplicate on a retry.
    @Test func aWriterAppendsAJSONLBody() async throws {
        try await Served.run { client, served async throws in
            let line = #"{"id":"6b1f7f5e-0000-4000-8000-000000000001","type":"support.note_added","subject":"user-42","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"called about billing","agent":"bob"}}"#
            let first = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer), body: ByteBuffer(string: line + "\n\n"))
            #expect(first.status == .ok)
            #expect(first.text == #"{"appended":1,"duplicates":0,"firstPosition":3,"lastPosition":3}"# + "\n")
            let again = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer), body: ByteBuffer(string: line))
            #expect(again.text == #"{"appended":0,"duplicates":1,"firstPosition":null,"lastPosition":null}"# + "\n")
        }
    }

    /// A bad line rejects the whole body, named as line N of "body"; nothing is appended.
    @Test func aBadLineRejectsTheBodyWithTheCommandsErrors() async throws {
        try await Served.run { client, served async throws in
            let good = #"{"type":"support.note_added","subject":"user-42","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"ok","agent":"bob"}}"#
            let bad = #"{"type":"support.note_added","subject":"user-42","occurredAt":"2026-03-02","source":"support","data":{"text":"ok","agent":"bob"}}"#
            let response = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer), body: ByteBuffer(string: good + "\n" + bad + "\n"))
            #expect(response.status == .badRequest)
            guard case .object(let object)? = try? JSONParser.parse(Array(response.text.utf8)), case .array(let errors)? = object["errors"],
                  case .object(let error)? = errors.first else {
                Issue.record("not an errors object: \(response.text)")
                return
            }
            #expect(errors.count == 1)
            #expect(error["file"] == "body")
            #expect(error["line"] == .integer(2))
            #expect(error["pointer"] == "/occurredAt")
            #expect(try served.ledger.lastPosition() == 2)
        }
    }

    /// The same id with other content is refused, naming its line.
    @Test func aConflictingIdIsABadRequestNamingItsLine() async throws {
        try await Served.run { client, served async throws in
            let id = "6b1f7f5e-0000-4000-8000-000000000002"
            let note = { (text: String) in #"{"id":"\#(id)","type":"support.note_added","subject":"user-42","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"\#(text)","agent":"bob"}}"# }
            _ = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer), body: ByteBuffer(string: note("one")))
            let response = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer),
                                                    body: ByteBuffer(string: "\n" + note("two")))
            #expect(response.status == .badRequest)
            #expect(response.text.hasPrefix(#"{"errors":[{"file":"body","line":2,"pointer":"/id","message":"event id \#(id) is already stored at position 3"#))
        }
    }

    @Test func aBodyOverOneMebibyteIsTooLarge() async throws {
        try await Served.run { client, served async throws in
            let body = ByteBuffer(repeating: 0x20, count: LedgerServer.maximumBodyBytes + 1)
            let response = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer), body: body)
            #expect(response.status == .contentTooLarge)
            #expect(response.text == #"{"error":"the body is over 1048576 bytes"}"# + "\n")
        }
    }

    @Test func lookupFindsWhoHoldsATransaction() async throws {
        try await Served.run { client, served async throws in
            for query in ["transactionId=t1", "originalTransactionId=o1"] {
                let response = try await client.execute(uri: "/v1/lookup?\(query)", method: .get, headers: served.bearer(served.support))
                #expect(response.text == #"{"subjects":["user-42"]}"# + "\n", "\(query)")
            }
            let none = try await client.execute(uri: "/v1/lookup?transactionId=t9", method: .get, headers: served.bearer(served.support))
            #expect(none.text == #"{"subjects":[]}"# + "\n")
            let neither = try await client.execute(uri: "/v1/lookup", method: .get, headers: served.bearer(served.support))
            #expect(neither.status == .badRequest)
            #expect(neither.text == #"{"error":"give one of transactionId or originalTransactionId"}"# + "\n")
        }
    }

    @Test func dueIsTheCommandsJSONAndNeedsItsRange() async throws {
        try await Served.run { client, served async throws in
            let (from, to) = ("2026-03-01T00:00:00Z", "2026-05-01T00:00:00Z")
            let response = try await client.execute(uri: "/v1/due?from=\(from)&to=\(to)", method: .get, headers: served.bearer(served.support))
            let (start, end) = (Timestamp(rfc3339: from) ?? .now(), Timestamp(rfc3339: to) ?? .now())
            #expect(response.text == DueItem.json(try served.ledger.due(from: start, to: end), from: start, to: end).serialized() + "\n")
            let missing = try await client.execute(uri: "/v1/due?from=\(from)", method: .get, headers: served.bearer(served.support))
            #expect(missing.status == .badRequest)
            #expect(missing.text == #"{"error":"to: missing; give an RFC 3339 time with a zone"}"# + "\n")
        }
    }

    @Test func statsIsTheCommandsJSON() async throws {
        try await Served.run { client, served async throws in
            let response = try await client.execute(uri: "/v1/stats", method: .get, headers: served.bearer(served.support))
            #expect(response.text == (try served.ledger.stats()).json.serialized() + "\n")
        }
    }

    /// `/metrics` counts requests by route template and status, and what appends did; a
    /// client that is not on loopback needs a token.
    @Test func metricsCountRequestsAndAppends() async throws {
        try await Served.run { client, served async throws in
            #expect(try await client.execute(uri: "/metrics", method: .get).status == .unauthorized)
            _ = try await client.execute(uri: "/v1/subjects/user-42/status", method: .get, headers: served.bearer(served.support))
            _ = try await client.execute(uri: "/v1/subjects/nobody/status", method: .get, headers: served.bearer(served.support))
            _ = try await client.execute(uri: "/v2/nothing", method: .get)
            let line = #"{"type":"support.note_added","subject":"user-42","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"m","agent":"a"}}"#
            _ = try await client.execute(uri: "/v1/events", method: .post, headers: served.bearer(served.writer), body: ByteBuffer(string: line))
            let metrics = try await client.execute(uri: "/metrics", method: .get, headers: served.bearer(served.support))
            #expect(metrics.status == .ok)
            let lines = Set(metrics.text.split(separator: "\n").map(String.init))
            #expect(lines.contains(#"ledger_http_requests_total{route="/v1/subjects/{subject}/status",status="200"} 2"#))
            #expect(lines.contains(#"ledger_http_requests_total{route="/metrics",status="401"} 1"#))
            #expect(lines.contains(#"ledger_http_requests_total{route="unmatched",status="404"} 1"#))
            #expect(lines.contains("ledger_events_appended_total 1"))
            #expect(lines.contains("ledger_append_duration_seconds_count 1"))
            #expect(lines.contains(#"ledger_model_lag_events{model="entitlement"} 0.0"#))
        }
    }

    /// Served on a socket, a loopback client reads `/metrics` without a token.
    @Test func aLoopbackClientReadsMetricsWithoutAToken() async throws {
        try await Served.run(.live) { client, _ async throws in
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.status == .ok)
            #expect(metrics.text.contains("# TYPE ledger_events_appended_total counter"))
            let forwarded = try await client.execute(uri: "/metrics", method: .get, headers: [HTTPField.Name("X-Forwarded-For") ?? .via: "203.0.113.9"])
            #expect(forwarded.status == .unauthorized)
        }
    }

    @Test func anUnknownRouteIsNotFound() async throws {
        try await Served.run { client, _ async throws in
            #expect(try await client.execute(uri: "/v2/anything", method: .get).status == .notFound)
        }
    }
}

/// `POST /appstore/v2/notifications`: Apple's deliveries, with no token, verified against
/// the settings recorded in the store.
@Suite struct WebhookTests {
    static let start: Int64 = 1_772_357_400_000   // 2026-03-01T09:30:00Z

    func notification(_ signer: AppStoreSigner, uuid: String) throws -> String {
        let info: JSON = ["transactionId": "2000000100", "originalTransactionId": "2000000100", "bundleId": "com.example.ledger",
                          "productId": "pro.monthly", "environment": "Sandbox", "purchaseDate": .integer(Self.start),
                          "expiresDate": .integer(Self.start + 30 * 86_400_000), "signedDate": .integer(Self.start),
                          "appAccountToken": "4b3f0a5e-8a0c-4e5b-9d0f-2c7e1a9b6d42"]
        return try signer.body("SUBSCRIBED", subtype: "INITIAL_BUY", uuid: uuid, signedDate: Self.start,
                               data: [("signedTransactionInfo", .string(try signer.sign(info)))])
    }

    @Test func withoutAppStoreSettingsTheWebhookIsUnavailable() async throws {
        let signer = try AppStoreSigner()
        let body = try notification(signer, uuid: "40000000-0000-4000-8000-000000000001")
        try await Served.run { client, served async throws in
            let response = try await client.execute(uri: "/appstore/v2/notifications", method: .post, body: ByteBuffer(string: body))
            #expect(response.status == .serviceUnavailable)
            #expect(response.text.hasPrefix(#"{"error":"the store has no App Store settings"#))
            #expect(try served.ledger.lastPosition() == 2)
        }
    }

    /// A delivery is appended once durable and answered with the append shape; a retry is all
    /// duplicates; a forged one is `400` with the reason, nothing stored.
    @Test func aNotificationIsAppendedOnceAndAForgeryRefused() async throws {
        let signer = try AppStoreSigner()
        let body = try notification(signer, uuid: "40000000-0000-4000-8000-000000000002")
        let settings = AppStoreConfiguration(rootCertificates: [signer.rootDER], bundleId: "com.example.ledger", environment: .sandbox)
        try await Served.run(configure: { ledger in try ledger.setAppStoreConfiguration(settings) }) { client, served async throws in
            let first = try await client.execute(uri: "/appstore/v2/notifications", method: .post, body: ByteBuffer(string: body))
            #expect(first.status == .ok)
            #expect(first.text == #"{"appended":2,"duplicates":0,"firstPosition":3,"lastPosition":4}"# + "\n")
            let retry = try await client.execute(uri: "/appstore/v2/notifications", method: .post, body: ByteBuffer(string: body))
            #expect(retry.text == #"{"appended":0,"duplicates":2,"firstPosition":null,"lastPosition":null}"# + "\n")
            // A character in the middle of the signature changed (the last one's low bits may
            // be padding, which a decoder ignores).
            var forged = Array(try notification(signer, uuid: "40000000-0000-4000-8000-000000000003").utf8)
            let index = (forged.lastIndex(of: UInt8(ascii: ".")) ?? 0) + 20
            forged[index] = forged[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let refused = try await client.execute(uri: "/appstore/v2/notifications", method: .post, body: ByteBuffer(bytes: forged))
            #expect(refused.status == .badRequest)
            #expect(refused.text.hasPrefix(#"{"error":"/signedPayload: bad signature"#))
            #expect(try served.ledger.lastPosition() == 4)
            let garbage = try await client.execute(uri: "/appstore/v2/notifications", method: .post, body: ByteBuffer(string: "{}"))
            #expect(garbage.status == .badRequest)
        }
    }
}

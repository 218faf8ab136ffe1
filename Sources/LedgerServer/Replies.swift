import Foundation
import HTTPTypes
import Hummingbird
import Logging
@_spi(Storage) import LedgerCore

/// An answer that ends a request early: a status with a JSON body (`{"error": …}` unless
/// given another), thrown by a route and turned into its response by `Reply.respond`.
struct Reply: Error {
    var status: HTTPResponse.Status
    var body: JSON
    var headers: HTTPFields = [:]

    /// `{"error": message}` with `status`.
    static func error(_ status: HTTPResponse.Status, _ message: String) -> Reply {
        Reply(status: status, body: .object(JSONObject([("error", .string(message))])))
    }

    /// A missing or unknown token. The same words whatever the route and the subject.
    static let unauthorized = Reply(status: .unauthorized, body: .object(JSONObject([("error", "a valid access token is required (Authorization: Bearer TOKEN)")])),
                                    headers: [.wwwAuthenticate: "Bearer"])
    /// A token whose role does not reach the route.
    static let forbidden = Reply.error(.forbidden, "this token's role may not do this")

    /// A `LedgerError` as the client should see it: its input's fault as `400`, a store that is
    /// closed or read-only as `503`, a cluster that cannot answer yet as `503` with
    /// `Retry-After`, anything else as `500` (Apple and clients retry those), whose details go
    /// to the server's log, not to the client.
    static func from(_ error: LedgerError) -> Reply {
        switch error.code {
        case .invalidEvent, .idConflict, .wrongExpectedVersion, .invalidArgument, .unknownModel:
            .error(.badRequest, error.message)
        case .closed, .readOnly, .rebuildRunning:
            .error(.serviceUnavailable, error.message)
        case .unavailable:
            Reply(status: .serviceUnavailable, body: .object(JSONObject([("error", .string(error.message))])), headers: [.retryAfter: "1"])
        default:
            .internalError
        }
    }

    /// What a client learns of a fault of the server's.
    static let internalError = Reply.error(.internalServerError, "the server failed to answer; its log says why")

    /// The response of `body` as JSON text, a line as the command line prints it (controls
    /// escaped, C1 and DEL included: `JSON.Escaping.output`).
    static func json(_ body: JSON, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        return text(body.serialized(escaping: .output) + "\n", status: status, headers: fields)
    }

    /// A response of `text`, plain unless `headers` say otherwise.
    static func text(_ text: String, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        if fields[.contentType] == nil { fields[.contentType] = "text/plain; charset=utf-8" }
        fields[.cacheControl] = "no-store"
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    var response: Response { Reply.json(body, status: status, headers: headers) }

    /// Runs `route`, turning what it throws into its response: a `Reply` as itself, a
    /// `LedgerError` by `from(_:)`, a body over the limit as `413`, anything else as `500`;
    /// a `500`'s cause is logged.
    static func respond(_ logger: Logger, _ route: () async throws -> Response) async -> Response {
        do {
            return try await route()
        } catch let reply as Reply {
            return reply.response
        } catch let error as LedgerError {
            let reply = from(error)
            if reply.status == .internalServerError { logger.error("\(error)") }
            return reply.response
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            return Reply.error(.contentTooLarge, "the body is over \(LedgerServer.maximumBodyBytes) bytes").response
        } catch {
            logger.error("\(error)")
            return internalError.response
        }
    }
}

extension HTTPResponse.Status {
    /// A request whose client left before it was answered (nginx's `499`): what the log and
    /// `/metrics` count for a heavy read dropped before its turn.
    static let clientClosedRequest = HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request")
}

import Foundation
import HTTPTypes
import Hummingbird

/// Refuses a post that a page of another site made a browser send: the support pages' forms
/// act by the session cookie (or, for `/login`, set it), so another site's form could sign a
/// browser out, or into an account of the attacker's (login CSRF). `SameSite=Strict` keeps
/// the cookie off such a post but not the post itself.
///
/// A post (`PUT`, `PATCH`, `DELETE` alike) is refused with `403` when `Sec-Fetch-Site` says it
/// is not `same-origin` (or `none`: the user typed it), or when its `Origin` is not the host
/// the request was sent to (`Host`, or behind a proxy `X-Forwarded-Host` / `Forwarded:
/// host=`). A request with neither header (curl, older browsers) is taken. Requests with a
/// bearer token, the JSON API's, are not cookie-authenticated and pass untouched.
struct SameOriginMiddleware<Context: RequestContext>: RouterMiddleware {
    static var secFetchSite: HTTPField.Name { HTTPField.Name("Sec-Fetch-Site") ?? .via }
    static var host: HTTPField.Name { HTTPField.Name("Host") ?? .via }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let reason = Self.refusal(request) else { return try await next(request, context) }
        var page = HTML.page("Refused", signedIn: false, """
            <h1>Refused</h1>
            <p class="error">\(HTML.escape(reason))</p>
            <p>Sign in and out from the ledger's own pages: <a href="/login">sign in</a>.</p>
            """)
        page.status = .forbidden
        return page
    }

    /// Why `request` is refused as posted from another site; `nil` when it is not.
    static func refusal(_ request: Request) -> String? {
        guard [.post, .put, .patch, .delete].contains(request.method) else { return nil }
        if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") { return nil }
        if let site = request.headers[secFetchSite]?.trimmingCharacters(in: .whitespaces).lowercased(), site != "same-origin", site != "none" {
            return "This form was posted from another site (Sec-Fetch-Site: \(site)); the ledger takes its forms only from its own pages."
        }
        if let origin = request.headers[.origin] {
            let hosts = [request.head.authority, request.headers[host], ProxyHeaders(request.headers).host].compactMap { $0 }
            guard let from = Origin(origin), hosts.contains(where: from.matches) else {
                return "This form was posted from another site (Origin: \(origin)); the ledger takes its forms only from its own pages."
            }
        }
        return nil
    }

    /// An `Origin` header's scheme, host and port (`https://ledger.example.com:8443`).
    struct Origin: Equatable {
        var scheme: String
        var host: String
        var port: Int?

        /// `nil` for `null` (a sandboxed or privacy-sensitive context) and what does not parse.
        init?(_ text: String) {
            guard let separator = text.range(of: "://") else { return nil }
            scheme = text[..<separator.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https",
                  let authority = Self.authority(String(text[separator.upperBound...].prefix { $0 != "/" })) else { return nil }
            host = authority.host
            port = authority.port
        }

        /// The port a URL of this scheme means without one.
        var defaultPort: Int { scheme == "https" ? 443 : 80 }

        /// Whether this origin is `authority` (`host` or `host:port`, as `Host` gives it): the
        /// same host, and the same port (without one in `authority`, the scheme's own).
        func matches(_ authority: String) -> Bool {
            guard let other = Self.authority(authority), other.host == host else { return false }
            return (port ?? defaultPort) == (other.port ?? defaultPort)
        }

        /// `host`, `host:port`, `[v6]` or `[v6]:port` as a lowercased host and a port; `nil`
        /// when it is empty or the port is not a number.
        static func authority(_ text: String) -> (host: String, port: Int?)? {
            let text = text.trimmingCharacters(in: .whitespaces).lowercased()
            let host: Substring
            let rest: Substring
            if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
                host = text[...close]
                rest = text[text.index(after: close)...]
            } else if let colon = text.firstIndex(of: ":") {
                host = text[..<colon]
                rest = text[colon...]
            } else {
                (host, rest) = (Substring(text), "")
            }
            guard !host.isEmpty else { return nil }
            if rest.isEmpty { return (String(host), nil) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (0 ... 65535).contains(port) else { return nil }
            return (String(host), port)
        }
    }
}

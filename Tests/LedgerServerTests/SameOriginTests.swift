import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LedgerServer
import Testing

/// The pages' posts (sign in, sign out) are taken only from the pages themselves: a form
/// another site posts (login CSRF, a forced sign-out) is refused, by what the browser says of
/// where the request comes from (`Sec-Fetch-Site`, `Origin`).
@Suite struct SameOriginTests {
    static func field(_ name: String) -> HTTPField.Name { HTTPField.Name(name) ?? .via }

    static func loginBody(_ token: String) -> ByteBuffer {
        ByteBuffer(string: "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
    }

    /// The router's test client asks for host `localhost`.
    static let crossSite: [(String, String)] = [
        ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Site", "same-site"), ("Origin", "https://evil.example"), ("Origin", "null"),
        ("Origin", "http://localhost:8081"), ("Origin", "http://localhost.evil.example"),
    ]

    @Test func aSignInPostedFromAnotherSiteIsRefused() async throws {
        try await Served.run { client, served async throws in
            for (name, value) in Self.crossSite {
                let response = try await client.execute(uri: "/login", method: .post,
                                                        headers: [.contentType: "application/x-www-form-urlencoded", Self.field(name): value],
                                                        body: Self.loginBody(served.support))
                #expect(response.status == .forbidden, "\(name): \(value)")
                #expect(response.headers[.setCookie] == nil)
                #expect(response.text.contains("posted from another site"), "\(name): \(value)")
            }
        }
    }

    @Test func aSignOutPostedFromAnotherSiteIsRefusedAndTheSessionLives() async throws {
        try await Served.run { client, served async throws in
            let cookie = try await PagesTests.signIn(client, served.support)
            for (name, value) in Self.crossSite {
                var headers = cookie
                headers[Self.field(name)] = value
                let response = try await client.execute(uri: "/logout", method: .post, headers: headers)
                #expect(response.status == .forbidden, "\(name): \(value)")
                #expect(response.headers[.setCookie] == nil)
            }
            #expect(try await client.execute(uri: "/", method: .get, headers: cookie).status == .ok)
        }
    }

    /// What the pages themselves post, and clients that send neither header (curl, older
    /// browsers), are taken.
    @Test func sameOriginPostsAreTaken() async throws {
        try await Served.run { client, served async throws in
            let sameOrigin: [HTTPFields] = [
                [:],
                [Self.field("Sec-Fetch-Site"): "same-origin", Self.field("Origin"): "http://localhost"],
                [Self.field("Sec-Fetch-Site"): "none"],
                [Self.field("Origin"): "http://LOCALHOST:80"],
            ]
            for headers in sameOrigin {
                var login = headers
                login[.contentType] = "application/x-www-form-urlencoded"
                let signedIn = try await client.execute(uri: "/login", method: .post, headers: login, body: Self.loginBody(served.support))
                #expect(signedIn.status == .seeOther, "\(headers)")
                var out = headers
                out[.cookie] = String((signedIn.headers[.setCookie] ?? "").prefix { $0 != ";" })
                let signedOut = try await client.execute(uri: "/logout", method: .post, headers: out)
                #expect(signedOut.status == .seeOther, "\(headers)")
                #expect(signedOut.headers[.location] == "/login")
            }
        }
    }

    /// Behind a proxy, the host the browser asked the proxy for (`X-Forwarded-Host`,
    /// `Forwarded: host=`) is the page's origin.
    @Test func behindAProxyTheForwardedHostIsTheOrigin() async throws {
        try await Served.run { client, served async throws in
            let taken: [HTTPFields] = [
                [Self.field("Origin"): "https://ledger.example.com", Self.field("X-Forwarded-Host"): "ledger.example.com", Self.field("X-Forwarded-Proto"): "https"],
                [Self.field("Origin"): "https://ledger.example.com:8443", Self.field("Forwarded"): #"for=203.0.113.9;host="ledger.example.com:8443";proto=https"#],
            ]
            for headers in taken {
                var login = headers
                login[.contentType] = "application/x-www-form-urlencoded"
                #expect(try await client.execute(uri: "/login", method: .post, headers: login, body: Self.loginBody(served.support)).status == .seeOther,
                        "\(headers)")
            }
            let refused: HTTPFields = [.contentType: "application/x-www-form-urlencoded", Self.field("Origin"): "https://evil.example",
                                       Self.field("X-Forwarded-Host"): "ledger.example.com"]
            #expect(try await client.execute(uri: "/login", method: .post, headers: refused, body: Self.loginBody(served.support)).status == .forbidden)
        }
    }

    /// The JSON API's posts carry a bearer token, not a cookie: where they come from does not
    /// matter.
    @Test func aBearerPostIsNotChecked() async throws {
        try await Served.run { client, served async throws in
            var headers = served.bearer(served.writer)
            headers[Self.field("Origin")] = "https://evil.example"
            headers[Self.field("Sec-Fetch-Site")] = "cross-site"
            let line = #"{"type":"support.note_added","subject":"user-42","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"m","agent":"a"}}"#
            #expect(try await client.execute(uri: "/v1/events", method: .post, headers: headers, body: ByteBuffer(string: line)).status == .ok)
        }
    }
}

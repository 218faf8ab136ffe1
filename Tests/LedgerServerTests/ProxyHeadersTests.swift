import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LedgerServer
import Testing

/// Every form a proxy says things in counts alike: RFC 7239's `Forwarded` (`for=`, `proto=`),
/// `X-Forwarded-For`, `X-Forwarded-Proto` and `X-Real-IP`.
@Suite struct ProxyHeadersTests {
    static func field(_ name: String) -> HTTPField.Name { HTTPField.Name(name) ?? .via }

    /// Signs in with the support token carrying `headers`; returns the `Set-Cookie` header.
    static func signInCookie(_ client: any TestClientProtocol, _ served: Served, _ headers: HTTPFields) async throws -> String {
        var fields = headers
        fields[.contentType] = "application/x-www-form-urlencoded"
        let response = try await client.execute(uri: "/login", method: .post, headers: fields,
                                                body: ByteBuffer(string: "token=" + (served.support.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")))
        #expect(response.status == .seeOther)
        return response.headers[.setCookie] ?? ""
    }

    /// A proxy that says the browser came over HTTPS, in any form, makes the cookie `Secure`.
    @Test func forwardedProtoHttpsMakesTheCookieSecure() async throws {
        try await Served.run { client, served async throws in
            let forms: [HTTPFields] = [
                [Self.field("Forwarded"): "for=203.0.113.9;proto=https"],
                [Self.field("Forwarded"): #"For="[2001:db8:cafe::17]:4711";Proto=HTTPS;host=ledger.example.com"#],
                [Self.field("X-Forwarded-Proto"): "https"],
            ]
            for headers in forms {
                let cookie = try await Self.signInCookie(client, served, headers)
                #expect(cookie.contains("; Secure"), "\(headers)")
            }
            for headers: HTTPFields in [[:], [Self.field("Forwarded"): "for=203.0.113.9;proto=http"]] {
                let cookie = try await Self.signInCookie(client, served, headers)
                #expect(cookie.hasPrefix("ledger_session="))
                #expect(!cookie.contains("Secure"), "\(headers)")
            }
        }
    }

    /// `/metrics` answers without a token only a loopback peer that sent no proxy header of
    /// any form: `Forwarded: for=` and `X-Real-IP` say a proxy is in between as much as
    /// `X-Forwarded-For` does.
    @Test func metricsThroughAProxyOfAnyFormNeedAToken() async throws {
        try await Served.run(.live) { client, served async throws in
            #expect(try await client.execute(uri: "/metrics", method: .get).status == .ok)
            let proxied: [(String, String)] = [
                ("Forwarded", "for=1.2.3.4"), ("Forwarded", #"for="[2001:db8::1]";proto=https"#), ("X-Real-IP", "1.2.3.4"),
                ("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-Proto", "https"),
            ]
            for (name, value) in proxied {
                let bare = try await client.execute(uri: "/metrics", method: .get, headers: [Self.field(name): value])
                #expect(bare.status == .unauthorized, "\(name): \(value)")
                var withToken = served.bearer(served.support)
                withToken[Self.field(name)] = value
                #expect(try await client.execute(uri: "/metrics", method: .get, headers: withToken).status == .ok, "\(name): \(value)")
            }
        }
    }
}

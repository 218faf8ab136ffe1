import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LedgerServer
import Testing

/// Headers every answer carries: `X-Content-Type-Options: nosniff`, whatever the route and
/// status, and on the pages a content security policy that pins the base URL.
@Suite struct ResponseHeadersTests {
    @Test func everyAnswerSaysNosniff() async throws {
        try await Served.run { client, served async throws in
            let answers: [(String, HTTPRequest.Method, HTTPFields, HTTPResponse.Status)] = [
                ("/v1/stats", .get, served.bearer(served.support), .ok),
                ("/v1/subjects/user-42/status?at=\(Served.at)", .get, served.bearer(served.support), .ok),
                ("/v1/stats", .get, [:], .unauthorized),
                ("/v1/due?from=soon", .get, served.bearer(served.support), .badRequest),
                ("/v2/anything", .get, [:], .notFound),
                ("/v1/stats", .delete, [:], .notFound),
                ("/", .get, [:], .seeOther),
                ("/healthz", .get, [:], .ok),
                ("/login", .get, [:], .ok),
            ]
            for (uri, method, headers, status) in answers {
                let response = try await client.execute(uri: uri, method: method, headers: headers)
                #expect(response.status == status, "\(method) \(uri)")
                #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(method) \(uri) \(response.status)")
            }
            let signedIn = try await client.execute(uri: "/login", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                                    body: ByteBuffer(string: "token=" + (served.support.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")))
            #expect(signedIn.status == .seeOther)
            #expect(signedIn.headers[.xContentTypeOptions] == "nosniff")
        }
    }

    /// No `<base>` an injection could add moves where the page's relative links and forms go.
    @Test func thePagesPolicyPinsTheBaseURL() async throws {
        try await Served.run { client, _ async throws in
            let page = try await client.execute(uri: "/login", method: .get)
            let policy = page.headers[.contentSecurityPolicy] ?? ""
            #expect(policy.hasPrefix("default-src 'none'"))
            #expect(policy.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.contains("base-uri 'none'"), "\(policy)")
        }
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
import LedgerServer
import Testing

/// The support pages, through the router: signing in, finding a customer, the card and the
/// timeline at a moment, and escaping what events hold.
@Suite struct PagesTests {
    /// Signs in with `token`; returns the `Cookie` header that carries the session.
    static func signIn(_ client: any TestClientProtocol, _ token: String) async throws -> HTTPFields {
        let response = try await client.execute(uri: "/login", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                                body: ByteBuffer(string: "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")))
        #expect(response.status == .seeOther)
        let cookie = response.headers[.setCookie] ?? ""
        #expect(cookie.hasPrefix("ledger_session="))
        #expect(cookie.contains("HttpOnly"))
        #expect(cookie.contains("SameSite=Strict"))
        return [.cookie: String(cookie.prefix { $0 != ";" })]
    }

    @Test func aPageWithoutASessionSendsTheBrowserToSignIn() async throws {
        try await Served.run { client, _ async throws in
            for uri in ["/", "/ui/subjects/user-42"] {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/login")
            }
            let login = try await client.execute(uri: "/login", method: .get)
            #expect(login.status == .ok)
            #expect(login.text.contains(#"<form method="post" action="/login""#))
        }
    }

    @Test func aWrongTokenDoesNotSignIn() async throws {
        try await Served.run { client, _ async throws in
            let response = try await client.execute(uri: "/login", method: .post, body: ByteBuffer(string: "token=ledger_wrong"))
            #expect(response.status == .unauthorized)
            #expect(response.headers[.setCookie] == nil)
            #expect(response.text.contains("That token is not valid."))
        }
    }

    /// Ten failed sign-ins in a minute from a client, and its next wrong token is refused
    /// outright; a valid token still signs in.
    @Test func failedSignInsAreRateLimited() async throws {
        try await Served.run { client, served async throws in
            for _ in 0 ..< 10 {
                #expect(try await client.execute(uri: "/login", method: .post, body: ByteBuffer(string: "token=ledger_guess")).status == .unauthorized)
            }
            let refused = try await client.execute(uri: "/login", method: .post, body: ByteBuffer(string: "token=ledger_guess"))
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.setCookie] == nil)
            _ = try await Self.signIn(client, served.support)
            #expect(try await client.execute(uri: "/login", method: .post, body: ByteBuffer(string: "token=ledger_guess")).status == .tooManyRequests)
        }
    }

    /// The customer's card and timeline, at a moment: the plan the audit says.
    @Test func theCustomersPageShowsTheCardAndTimelineAtAMoment() async throws {
        try await Served.run { client, served async throws in
            let cookie = try await Self.signIn(client, served.support)
            let now = try await client.execute(uri: "/ui/subjects/user-42?at=2026-03-05T00:00:00Z", method: .get, headers: cookie)
            #expect(now.status == .ok)
            #expect(now.headers[.contentType] == "text/html; charset=utf-8")
            #expect(now.text.contains("<h2>entitlement: <bdi>pro</bdi> (rule storeCoverage, event #2)</h2>"))
            #expect(now.text.contains("#2 <b>subscription.purchased [appstore]</b>"))
            #expect(now.text.contains(#"<td>entitlement.planState</td><td><bdi>free</bdi> → <bdi>pro</bdi></td><td class="rule">storeCoverage</td>"#))
            let before = try await client.execute(uri: "/ui/subjects/user-42?at=2026-03-01T09:15:00Z", method: .get, headers: cookie)
            #expect(before.text.contains("<h2>entitlement: <bdi>free"))
            let known = try await client.execute(uri: "/ui/subjects/user-42?at=2026-03-05T00:00:00Z&knownAt=1", method: .get, headers: cookie)
            #expect(known.text.contains("<h2>entitlement: <bdi>free"))
            #expect(known.text.contains("as known at position 1"))
            let bad = try await client.execute(uri: "/ui/subjects/user-42?at=soon", method: .get, headers: cookie)
            #expect(bad.status == .badRequest)
            #expect(bad.text.contains("at: expected an RFC 3339 time with a zone"))
        }
    }

    /// A long timeline shows 200 entries and a link to the next 200, which holds the rest
    /// and no link.
    @Test func aLongTimelineLinksToItsLaterEntries() async throws {
        try await Served.run(configure: { ledger in
            let start = Timestamp(rfc3339: "2026-03-02T00:00:00Z") ?? .now()
            try ledger.append((0 ..< 250).map { i in
                LedgerEvent(subject: "user-42", occurredAt: start.adding(seconds: Int64(i)), source: .support,
                            data: SupportNoteAdded(text: "note \(i)", agent: "bob").eventData)
            })
        }) { client, served async throws in
            let cookie = try await Self.signIn(client, served.support)
            let first = try await client.execute(uri: "/ui/subjects/user-42?at=2026-03-05T00:00:00Z", method: .get, headers: cookie)
            #expect(first.status == .ok)
            #expect(first.text.components(separatedBy: #"<div class="entry"#).count - 1 == 200)
            let link = try #require(first.text.firstMatch(of: /<a href="(\/ui\/subjects\/user-42\?cursor=[^"]+)">Later entries<\/a>/)?.1)
            let second = try await client.execute(uri: String(link), method: .get, headers: cookie)
            #expect(second.status == .ok)
            let total = try served.ledger.audit(of: "user-42", at: Timestamp(rfc3339: "2026-03-05T00:00:00Z") ?? .now()).entries.count
            #expect(second.text.components(separatedBy: #"<div class="entry"#).count - 1 == total - 200)
            #expect(second.text.contains("note 249"))
            #expect(!second.text.contains("Later entries"))
        }
    }

    /// Event data is untrusted: a note holding a script shows as text.
    @Test func whatAnEventHoldsIsShownAsText() async throws {
        try await Served.run(configure: { ledger in
            try ledger.append([LedgerEvent(subject: "user-42", occurredAt: Timestamp(rfc3339: "2026-03-02T10:00:00Z") ?? .now(), source: .support,
                                           data: SupportNoteAdded(text: "<script>alert('x')</script>\u{1B}[2J", agent: "\"bob\" & <i>co</i>").eventData)])
        }) { client, served async throws in
            let cookie = try await Self.signIn(client, served.support)
            let page = try await client.execute(uri: "/ui/subjects/user-42?at=2026-03-05T00:00:00Z", method: .get, headers: cookie)
            #expect(page.status == .ok)
            #expect(!page.text.contains("<script"))
            #expect(!page.text.contains("<i>co"))
            #expect(!page.text.contains("\u{1B}"))
            #expect(page.text.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"))
            #expect(page.text.contains("&quot;bob&quot; &amp; &lt;i&gt;co&lt;/i&gt;"))
            #expect(page.headers[.contentSecurityPolicy]?.hasPrefix("default-src 'none'") == true)
        }
    }

    @Test func searchFindsASubjectOrWhoHoldsATransaction() async throws {
        try await Served.run { client, served async throws in
            let cookie = try await Self.signIn(client, served.support)
            let subject = try await client.execute(uri: "/?q=user-42&by=subject", method: .get, headers: cookie)
            #expect(subject.status == .seeOther)
            #expect(subject.headers[.location] == "/ui/subjects/user-42")
            let held = try await client.execute(uri: "/?q=t1&by=transactionId", method: .get, headers: cookie)
            #expect(held.text.contains(#"<li><a href="/ui/subjects/user-42"><bdi>user-42</bdi></a></li>"#))
            let none = try await client.execute(uri: "/?q=o9&by=originalTransactionId", method: .get, headers: cookie)
            #expect(none.text.contains("No subject holds originalTransactionId <bdi>o9</bdi>."))
            let stranger = try await client.execute(uri: "/ui/subjects/custmer-42", method: .get, headers: cookie)
            #expect(stranger.text.contains("No events for subject <bdi>custmer-42</bdi>"))
        }
    }

    /// Signing out, or revoking the token, ends the session.
    @Test func signingOutOrRevokingEndsTheSession() async throws {
        try await Served.run { client, served async throws in
            let cookie = try await Self.signIn(client, served.support)
            #expect(try await client.execute(uri: "/", method: .get, headers: cookie).status == .ok)
            let out = try await client.execute(uri: "/logout", method: .post, headers: cookie)
            #expect(out.headers[.location] == "/login")
            #expect(out.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await client.execute(uri: "/", method: .get, headers: cookie).status == .seeOther)
            let again = try await Self.signIn(client, served.support)
            #expect(try AccessTokens(served.ledger).revoke(name: "alice"))
            #expect(try await client.execute(uri: "/", method: .get, headers: again).headers[.location] == "/login")
        }
    }
}

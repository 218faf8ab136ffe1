import Foundation
import HTTPTypes
import Hummingbird
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

/// The support pages (SPEC §7): sign in with a token, find a customer, and read their card and
/// timeline as of any moment, as known at any moment. Server-rendered, usable without
/// JavaScript; every value escaped (`HTML.escape`); the views are the library's, as `status`
/// and `audit` show them.
struct SupportPages: Sendable {
    let routes: Routes
    let sessions: Sessions
    var ledger: Ledger { routes.ledger }

    // MARK: Signing in

    /// The signed-in session's token, or `nil` (the page then sends the browser to `/login`).
    /// A token revoked since signing in ends the session.
    func signedIn(_ request: Request) throws -> AccessToken? {
        guard let id = request.cookies[Sessions.cookie]?.value, let session = sessions.session(id) else { return nil }
        let token = try routes.server.tokens.list().first { $0.name == session.name && $0.digest == session.digest }
        if token == nil { sessions.close(id) }
        return token
    }

    func loginPage(_ request: Request) throws -> Response {
        if try signedIn(request) != nil { return HTML.redirect("/") }
        return loginForm(message: nil)
    }

    func loginForm(message: String?, status: HTTPResponse.Status = .ok) -> Response {
        var response = HTML.page("Sign in", signedIn: false, """
            <h1>Sign in</h1>
            \(message.map { #"<p class="error">\#(HTML.escape($0))</p>"# } ?? "")
            <form method="post" action="/login" class="inline">
            <label>Access token<input type="password" name="token" autocomplete="off" size="50" required autofocus></label>
            <button>Sign in</button>
            </form>
            <p class="muted">A token is made with <code>ledger token create --role support --name NAME</code>.</p>
            """)
        response.status = status
        return response
    }

    /// `POST /login` from `client`. The token is checked first (in constant time), so a valid
    /// one always signs in; only a wrong one counts against its client, and a client past its
    /// limit has its wrong tokens refused (`429`) until its failures leave the window.
    func login(_ request: Request, client: ClientAddress) async throws -> Response {
        let body = try await request.body.collect(upTo: 64 * 1024)
        let secret = HTML.form(Array(body.readableBytesView))["token"]?.trimmingCharacters(in: .whitespaces) ?? ""
        guard !secret.isEmpty, let token = try routes.server.tokens.token(forSecret: secret) else {
            guard sessions.mayFail(client.address) else {
                return loginForm(message: "Too many failed sign-ins from this address; wait a minute and try again.", status: .tooManyRequests)
            }
            sessions.failed(client.address)
            return loginForm(message: "That token is not valid.", status: .unauthorized)
        }
        var response = HTML.redirect("/")
        response.setCookie(Cookie(name: Sessions.cookie, value: sessions.open(for: token), maxAge: Int(Sessions.lifetimeSeconds),
                                  path: "/", secure: Self.isSecure(request), httpOnly: true, sameSite: .strict))
        return response
    }

    func logout(_ request: Request) -> Response {
        if let id = request.cookies[Sessions.cookie]?.value { sessions.close(id) }
        var response = HTML.redirect("/login")
        response.setCookie(Cookie(name: Sessions.cookie, value: "", maxAge: 0, path: "/", secure: Self.isSecure(request), httpOnly: true, sameSite: .strict))
        return response
    }

    /// Whether the browser reached the server over HTTPS (through a proxy that says so, in
    /// any form: `Forwarded: proto=https` or `X-Forwarded-Proto: https`): the cookie is then
    /// `Secure`.
    static func isSecure(_ request: Request) -> Bool {
        ProxyHeaders(request.headers).isHTTPS
    }

    // MARK: Finding a customer

    /// `/`: the search form; with `q`, the subject's page, or who holds a transaction.
    func home(_ request: Request) async throws -> Response {
        guard try signedIn(request) != nil else { return HTML.redirect("/login") }
        let query = Query(request)
        let q = query["q"]?.trimmingCharacters(in: .whitespaces) ?? ""
        let by = query["by"] ?? "subject"
        var results = ""
        if !q.isEmpty {
            switch by {
            case "transactionId", "originalTransactionId":
                let subjects: [String]
                if let cluster = routes.server.cluster {
                    let (transaction, original) = by == "transactionId" ? (q, nil as String?) : (nil as String?, q)
                    subjects = try await Routes.offload { () throws(LedgerError) in try cluster.subjects(holdingTransaction: transaction, original: original) }
                } else {
                    subjects = by == "transactionId" ? try ledger.subjects(holdingTransaction: q) : try ledger.subjects(holdingOriginalTransaction: q)
                }
                results = subjects.isEmpty
                    ? #"<p class="banner">No subject holds \#(by) \#(HTML.isolated(q)).</p>"#
                    : "<h2>Holding \(HTML.escape(by)) \(HTML.isolated(q))</h2><ul>" + subjects.map(Self.subjectLink).map { "<li>\($0)</li>" }.joined() + "</ul>"
            default:
                return HTML.redirect("/ui/subjects/\(HTML.component(q))")
            }
        }
        func option(_ value: String, _ label: String) -> String {
            #"<option value="\#(value)"\#(value == by ? " selected" : "")>\#(label)</option>"#
        }
        return HTML.page("Find a customer", """
            <h1>Find a customer</h1>
            <form method="get" action="/" class="inline">
            <label>Search<input name="q" value="\(HTML.escape(q))" size="40" autofocus></label>
            <label>by<select name="by">\(option("subject", "subject"))\(option("transactionId", "transaction id"))\(option("originalTransactionId", "original transaction id"))</select></label>
            <button>Find</button>
            </form>
            \(results)
            """)
    }

    static func subjectLink(_ subject: String) -> String {
        #"<a href="/ui/subjects/\#(HTML.component(subject))">\#(HTML.isolated(subject))</a>"#
    }

    // MARK: A customer

    /// Timeline entries a page shows.
    static let timelinePage = 200

    /// `/ui/subjects/{subject}?at=T&knownAt=T|POS`: the customer's card and timeline.
    func customer(_ request: Request, subject raw: String?, connected: @escaping @Sendable () -> Bool) async throws -> Response {
        guard try signedIn(request) != nil else { return HTML.redirect("/login") }
        let subject = try Routes.subject(raw)
        let query = Query(request)
        let at: Timestamp
        let known: KnownAt?
        let cursor: AuditCursor?
        do {
            // A later page of the timeline: its cursor holds the moment and the knowledge.
            cursor = try query.cursor()
            at = try cursor?.at ?? query.time("at") ?? .now()
            known = try cursor.map { $0.knownAt } ?? query.knownAt()
        } catch let reply as Reply {
            guard case .object(let object) = reply.body, case .string(let message)? = object["error"] else { throw reply }
            var page = HTML.page(subject, #"<p class="error">\#(HTML.escape(message))</p><p><a href="/ui/subjects/\#(HTML.component(subject))">Now</a></p>"#)
            page.status = .badRequest
            return page
        }
        let page: CustomerPage
        if let cluster = routes.server.cluster {
            page = try await Routes.offload { () throws(LedgerError) in try cluster.customer(subject, at: at, knownAt: known) }
        } else {
            // A page of the timeline at a time: a long history's first page is quick, and each
            // page a heavy read beside the others.
            let ledger = self.ledger
            page = try await routes.heavy(while: connected) { () throws(LedgerError) in
                let status = try ledger.status(of: subject, at: at, knownAt: known)
                return CustomerPage(cards: status.answers.map { ($0.model, $0.view?.card) },
                                    audit: try ledger.audit(of: subject, at: at, knownAt: known, limit: Self.timelinePage, after: cursor),
                                    zone: try ledger.timeZone(of: subject, at: at), version: try ledger.version(of: subject))
            }
        }
        let zone = page.zone
        var html = "<h1>\(HTML.isolated(subject))</h1>"
        html += controls(subject: subject, at: cursor.map { $0.at.description } ?? query["at"] ?? "",
                         knownAt: cursor.map { Self.knownText($0.knownAt) } ?? query["knownAt"] ?? "")
        var scope = "as of \(at)"
        if let zone { scope += " (\(at.local(in: zone)) in \(zone), the zone of the latest session)" }
        switch known {
        case .time(let t): scope += ", as known at \(t)"
        case .position(let p): scope += ", as known at position \(p)"
        case nil: scope += ", everything recorded"
        }
        html += #"<p class="muted">\#(HTML.escape(scope))</p>"#
        if page.version == 0 { html += #"<p class="banner">No events for subject \#(HTML.isolated(subject)): these are the views of a customer the store has never seen.</p>"# }
        html += #"<div class="grid">"#
        for (model, card) in page.cards {
            html += #"<section class="card">"#
            guard let card else {
                html += "<h2>\(HTML.escape(model)): none</h2><p class=\"muted\">the store's policy has no \(HTML.escape(model)) section</p></section>"
                continue
            }
            let headline = card.headline.map { part in
                switch part {
                case .text(let words): HTML.escape(words)
                case .value(let value): HTML.isolated(ViewCard.words(for: value, zone: zone))
                }
            }.joined()
            html += "<h2>\(HTML.escape(model))\(headline.isEmpty ? "" : ": " + headline)</h2><table>"
            for row in card.rows {
                html += #"<tr><td class="label">\#(HTML.escape(row.label))</td><td>\#(HTML.isolated(ViewCard.words(for: row.value, zone: zone)))</td></tr>"#
            }
            html += "</table></section>"
        }
        html += "</div>"
        html += try timeline(page.audit, zone: zone)
        return HTML.page(subject, html)
    }

    /// `knownAt` as the form's field takes it.
    static func knownText(_ knownAt: KnownAt) -> String {
        switch knownAt {
        case .time(let t): t.description
        case .position(let p): String(p)
        }
    }

    func controls(subject: String, at: String, knownAt: String) -> String {
        """
        <form method="get" action="/ui/subjects/\(HTML.component(subject))" class="inline">
        <label>As of (UTC, RFC 3339; empty: now)<input name="at" value="\(HTML.escape(at))" size="26" placeholder="2026-03-05T00:00:00Z"></label>
        <label>As known at (time or position; empty: all)<input name="knownAt" value="\(HTML.escape(knownAt))" size="26"></label>
        <button>Show</button>
        </form>
        """
    }

    /// The audit's timeline: each event and view change, late facts marked, Apple's own words
    /// beside a notification.
    func timeline(_ report: AuditReport, zone: String?) throws -> String {
        var html = "<h2>Timeline</h2>"
        if report.entries.isEmpty { html += #"<p class="muted">no events</p>"# }
        for entry in report.entries {
            var when = entry.occurredAt.description
            if let zone { when += " (\(entry.occurredAt.local(in: zone)))" }
            let head = entry.position.map { "#\($0) " } ?? ""
            let what = entry.type == "time" ? entry.summary : "\(entry.type) [\(entry.source ?? "?")]"
            html += #"<div class="entry\#(entry.type == "time" ? " time" : "")"><div>\#(HTML.escape(when)) · \#(HTML.escape(head))<b>\#(HTML.escape(what))</b></div>"#
            if entry.type != "time" { html += "<div>\(HTML.isolated(entry.summary))</div>" }
            if let lateness = entry.lateness { html += #"<div class="late">late: \#(HTML.escape(lateness))</div>"# }
            if !entry.changes.isEmpty {
                html += "<table>"
                for change in entry.changes {
                    html += "<tr><td>\(HTML.escape(change.model)).\(HTML.escape(change.field))</td><td>\(HTML.isolated(AuditChange.words(change.from))) → \(HTML.isolated(AuditChange.words(change.to)))</td>"
                        + #"<td class="rule">\#(HTML.escape(change.rule))</td></tr>"#
                }
                html += "</table>"
            }
            // Apple's words, from the store (a cluster node's store may not hold the event).
            if routes.server.cluster == nil, entry.type == AppStoreNotification.type, let position = entry.position, let stored = try ledger.event(at: position),
               case .appStoreNotification(let notification) = try stored.data {
                html += "<details><summary>Apple's notification</summary><pre>\(HTML.escape(JSON.object(notification.payload).pretty()))</pre></details>"
            }
            html += "</div>"
        }
        if report.laterEvents > 0 { html += #"<p class="muted">\#(report.laterEvents) later event(s) occurred after this moment and are not shown.</p>"# }
        if let next = report.next {
            let link = "/ui/subjects/\(HTML.component(report.subject))?cursor=\(HTML.component(next.description))"
            html += #"<p><a href="\#(link)">Later entries</a> (\#(Self.timelinePage) a page, as known when the first was read)</p>"#
        }
        return html
    }
}

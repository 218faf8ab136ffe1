import Foundation
import HTTPTypes
import Hummingbird
@_spi(Storage) import LedgerCore

/// The support pages' HTML, built as strings with one escaping function: every value a page
/// shows passes through `escape(_:)`, since event data is untrusted input; an outside value
/// shown in text goes through `isolated(_:)`, which escapes it too.
enum HTML {
    /// `text` safe inside an element or a quoted attribute: `&`, `<`, `>`, `"` and `'` become
    /// entities, and every control, bidirectional or invisible character is shown by the
    /// ledger's one rule (`VisibleText`, as the command line shows it), `‹U+202E›`: never
    /// dropped, so that `nul-a\0b` does not read `nul-ab`, nor acted on. Tab and newline stay:
    /// a page lays them out as spaces (or lines, in a `<pre>`).
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case _ where VisibleText.isHidden(scalar) && !VisibleText.isLayout(scalar): out += VisibleText.name(of: scalar)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// An outside value (a subject, a transaction id, a value of event data) shown inline in
    /// text: escaped (`escape(_:)`) and isolated in `<bdi>`, so that a right-to-left run in it
    /// cannot reorder the page's text around it. An attribute value needs no `<bdi>`.
    static func isolated(_ text: String) -> String {
        "<bdi>" + escape(text) + "</bdi>"
    }

    /// `text` as one component of a URL's path or query.
    static func component(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// A whole page: `title` (escaped here) and `body` (HTML already escaped by its builder).
    static func page(_ title: String, signedIn: Bool = true, _ body: String) -> Response {
        let signOut = signedIn ? #"<form method="post" action="/logout" class="out"><button>Sign out</button></form>"# : ""
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · ledger</title>
            <style>
            body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f7}
            header{background:#1d1d1f;color:#fff;padding:.6em 1.2em;display:flex;gap:1em;align-items:center}
            header a{color:#fff;text-decoration:none;font-weight:600}
            header .out{margin-left:auto}
            main{max-width:1100px;margin:1em auto;padding:0 1em}
            section.card{background:#fff;border:1px solid #ddd;border-radius:8px;padding:.6em 1em;margin:.6em 0}
            h1{font-size:1.35em}h2{font-size:1.05em;margin:.2em 0 .4em}
            table{border-collapse:collapse;width:100%}td,th{text-align:left;vertical-align:top;padding:.15em .6em .15em 0}
            td.label{color:#555;width:14em}
            .grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:.6em}
            .entry{border-left:3px solid #bbb;padding:.2em .8em;margin:.6em 0;background:#fff}
            .entry.time{border-color:#2a7ab0}.late{color:#a15c00}.rule{color:#666}.muted{color:#666}
            .banner{background:#fff3cd;border:1px solid #e0c36b;padding:.5em 1em;border-radius:6px}
            .error{background:#fde2e1;border:1px solid #e39b98;padding:.5em 1em;border-radius:6px}
            pre{white-space:pre-wrap;word-break:break-all;background:#f0f0f2;padding:.5em}
            form.inline{display:flex;gap:.5em;flex-wrap:wrap;align-items:end}
            label{display:flex;flex-direction:column;font-size:.9em;color:#444}
            input,select,button{font:inherit;padding:.25em .4em}
            </style></head>
            <body><header><a href="/">ledger support</a>\(signOut)</header>
            <main>
            \(body)
            </main></body></html>
            """
        return Reply.text(html, headers: [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                                          .xContentTypeOptions: "nosniff"])
    }

    /// A redirect to `location` (303: the browser follows with a GET).
    static func redirect(_ location: String, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.location] = location
        fields[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: fields)
    }

    /// The fields of an `application/x-www-form-urlencoded` body or query (`+` is a space,
    /// then each `%XX` a byte; a field that does not decode is empty).
    static func form(_ bytes: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: bytes, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String { text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            guard let name = parts.first else { continue }
            fields[decode(name)] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }
}

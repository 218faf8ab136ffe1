import Foundation
import HTTPTypes

/// What a request's proxy headers say, every form alike: RFC 7239's `Forwarded` (`for=`,
/// `proto=`, `host=`), `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` and
/// `X-Real-IP`. Only what the proxy nearest the server added counts (the right-most value):
/// what comes before it, the client could have written itself.
///
/// ```swift
/// let said = ProxyHeaders([ProxyHeaders.forwarded: #"for=192.0.2.60;proto=https, for="[2001:db8::17]:4711""#])
/// said.client   // "2001:db8::17"
/// said.isHTTPS  // true
/// ```
struct ProxyHeaders: Sendable, Equatable {
    /// Whether the request carries a proxy header of any form: it came through a proxy.
    var present = false
    /// The client's address as the nearest proxy gives it (`Forwarded: for=`, else
    /// `X-Forwarded-For`, else `X-Real-IP`), without a port or brackets, lowercased; `nil` when
    /// none says, or says `unknown` or an obfuscated name.
    var client: String?
    /// Every address of the form `client` comes from, in order, the nearest proxy's last (`nil`
    /// where one says `unknown` or a name): behind a chain of trusted proxies, the client is
    /// the last that is not one of them.
    var hops: [String?] = []
    /// Whether a proxy says the browser reached it over HTTPS, in any form.
    var isHTTPS = false
    /// The host (with a port, if given) the browser asked the proxy for (`Forwarded: host=`,
    /// else `X-Forwarded-Host`).
    var host: String?

    static let forwarded = HTTPField.Name("Forwarded") ?? .via
    static let forwardedFor = HTTPField.Name("X-Forwarded-For") ?? .via
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto") ?? .via
    static let forwardedHost = HTTPField.Name("X-Forwarded-Host") ?? .via
    static let realIP = HTTPField.Name("X-Real-IP") ?? .via
    /// Every header that says a proxy is in between.
    static let names = [forwarded, forwardedFor, forwardedProto, forwardedHost, realIP]

    init(_ headers: HTTPFields) {
        present = Self.names.contains { !headers[values: $0].isEmpty }
        guard present else { return }
        // Several lines of a header are one list, in order (RFC 9110 §5.3).
        func list(_ name: HTTPField.Name) -> [String] {
            headers[values: name].flatMap { Self.split($0, on: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let elements = list(Self.forwarded).map(Self.parameters)
        func lastForwarded(_ key: String) -> String? { elements.last { $0[key] != nil }?[key] }
        // The first form whose last value is an address.
        let forms = [elements.compactMap { $0["for"] }, list(Self.forwardedFor), list(Self.realIP)]
        if let form = forms.first(where: { $0.last.flatMap(Self.address) != nil }) {
            hops = form.map(Self.address)
            client = hops.last ?? nil
        }
        isHTTPS = [lastForwarded("proto"), list(Self.forwardedProto).last].contains { $0?.lowercased() == "https" }
        host = (lastForwarded("host") ?? list(Self.forwardedHost).last)?.lowercased()
    }

    /// `text` split on `separator` outside double quotes.
    static func split(_ text: String, on separator: Character) -> [String] {
        var parts: [String] = []
        var part = ""
        var quoted = false
        var escaped = false
        for character in text {
            if escaped {
                escaped = false
            } else if quoted && character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == separator && !quoted {
                parts.append(part)
                part = ""
                continue
            }
            part.append(character)
        }
        parts.append(part)
        return parts
    }

    /// One `Forwarded` element's parameters (`for=a;proto=https`), names lowercased, values
    /// unquoted.
    static func parameters(_ element: String) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in split(element, on: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            var value = parts[1].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast()).replacingOccurrences(of: "\\", with: "")
            }
            parameters[parts[0].trimmingCharacters(in: .whitespaces).lowercased()] = value
        }
        return parameters
    }

    /// A node as a proxy writes it (`192.0.2.60`, `192.0.2.60:8080`, `[2001:db8::17]:4711`,
    /// `2001:db8::17`) as its address alone; `nil` for `unknown`, an obfuscated name
    /// (`_hidden`) or nothing.
    static func address(_ node: String) -> String? {
        let node = node.trimmingCharacters(in: .whitespaces).lowercased()
        let address: Substring
        if node.hasPrefix("[") {
            address = node.dropFirst().prefix { $0 != "]" }
        } else if node.filter({ $0 == ":" }).count == 1 {
            address = node.prefix { $0 != ":" }
        } else {
            address = Substring(node)
        }
        guard !address.isEmpty, address != "unknown", !address.hasPrefix("_") else { return nil }
        return String(address)
    }
}

import Foundation
import Glibc
@_spi(Storage) import LedgerTestSupport
import Testing

/// `ledger serve`'s sign-in throttle, on a real server process behind a (pretend) proxy on
/// loopback: one client's wrong guesses lock that client out of guessing, nobody else out,
/// and never refuse a valid token.
@Suite struct SignInThrottleTests {
    /// The status code of one `POST path` with `body` and `headers` to 127.0.0.1:`port`, over a
    /// connection of its own (HTTP/1.1, `Connection: close`; a redirect is not followed).
    static func post(port: Int, _ path: String, body: String, headers: [(String, String)]) throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.init(rawValue: errno) ?? .ECONNREFUSED) }
        var request = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        request += "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n" + body
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            sent += n
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[..<n]
        }
        // "HTTP/1.1 303 See Other"
        let statusLine = String(decoding: answer.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self).split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            Issue.record("no status line: \(String(decoding: answer, as: UTF8.self))")
            return 0
        }
        return status
    }

    static func form(_ token: String) -> String {
        "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
    }

    /// Eleven wrong tokens from client A (a proxy on loopback forwarding for it): A's guesses
    /// are refused from the eleventh on, while B, and A itself, still sign in with a valid
    /// token.
    @Test func oneClientsBadSignInsLockOutNobodyElse() throws {
        try withStorePath { store in
            #expect(try Run(["init", "--store", store]).status == 0)
            let (token, (server, url)) = (try ServeCommandTests.token(.support, store), try ServeCommandTests.serve(store))
            defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
            guard let url, let port = url.port, let token else { return }
            let a = [("X-Forwarded-For", "198.51.100.7")]
            let b = [("X-Forwarded-For", "203.0.113.20, 198.51.100.8")]
            var answers: [Int] = []
            for i in 0 ..< 11 { answers.append(try Self.post(port: port, "/login", body: Self.form("ledger_guess\(i)"), headers: a)) }
            #expect(answers == Array(repeating: 401, count: 10) + [429])
            #expect(try Self.post(port: port, "/login", body: Self.form(token), headers: b) == 303, "another client signs in")
            #expect(try Self.post(port: port, "/login", body: Self.form("ledger_guess"), headers: b) == 401, "another client's guess is only wrong")
            #expect(try Self.post(port: port, "/login", body: Self.form(token), headers: a) == 303, "a valid token is never throttled")
            #expect(try Self.post(port: port, "/login", body: Self.form("ledger_guess"), headers: a) == 429, "A is still over its limit")
            // The same client through the other header forms is the same client.
            #expect(try Self.post(port: port, "/login", body: Self.form("ledger_guess"), headers: [("Forwarded", "for=198.51.100.7")]) == 429)
            #expect(try Self.post(port: port, "/login", body: Self.form("ledger_guess"), headers: [("X-Real-IP", "198.51.100.7")]) == 429)
            kill(server.processIdentifier, SIGTERM)
            server.waitUntilExit()
        }
    }
}

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import Testing

/// `ledger serve` against slow and stalled clients: a real server process, talked to over raw
/// sockets.
@Suite struct ServeLimitsTests {
    /// A request's head sent in part, and no more: `408`, then the connection closes.
    @Test func aHeadSentInPartIsTimedOut() throws {
        try withServer(["--header-timeout", "1"]) { url, _ in
            let client = try #require(RawClient(port: url.port ?? 0))
            defer { client.close() }
            client.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
            let (answer, closed) = client.readUntilClosed(seconds: 20)
            #expect(answer.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "\(answer)")
            #expect(closed)
        }
    }

    /// A connection that sends nothing is closed once idle that long; one that finished a
    /// request is closed the same way.
    @Test func anIdleConnectionIsClosed() throws {
        try withServer(["--idle-timeout", "1"]) { url, _ in
            let silent = try #require(RawClient(port: url.port ?? 0))
            defer { silent.close() }
            let (nothing, closed) = silent.readUntilClosed(seconds: 20)
            #expect(nothing == "")
            #expect(closed)
            let done = try #require(RawClient(port: url.port ?? 0))
            defer { done.close() }
            done.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let (answer, closedAfter) = done.readUntilClosed(seconds: 20)
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(answer)")
            #expect(answer.hasSuffix("ok\n"))
            #expect(closedAfter)
        }
    }

    /// A body sent in part, and no more: the connection closes; nothing is appended.
    @Test func aBodySentInPartIsTimedOut() throws {
        try withServer(["--body-timeout", "1"]) { url, store in
            let token = try #require(try ServeCommandTests.token(.writer, store))
            let client = try #require(RawClient(port: url.port ?? 0))
            defer { client.close() }
            let line = #"{"type":"account.signed_in","subject":"u","occurredAt":"2026-03-02T10:00:00Z","source":"app","data":{}}"#
            client.send("POST /v1/events HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\nContent-Length: \(line.utf8.count)\r\n\r\n"
                        + line.prefix(20))
            let (_, closed) = client.readUntilClosed(seconds: 20)
            #expect(closed)
            #expect(try Run(["subjects", "--store", store]).stdout == "")
        }
    }

    /// A request answered before its body is read (a missing token) holds no connection
    /// open for ever: once the body ends, the idle deadline runs.
    @Test func aConnectionAnsweredBeforeItsBodyStillIdlesOut() throws {
        try withServer(["--idle-timeout", "1", "--body-timeout", "60"]) { url, _ in
            let client = try #require(RawClient(port: url.port ?? 0))
            defer { client.close() }
            client.send("POST /v1/events HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n12345")
            #expect(client.read(seconds: 20).hasPrefix("HTTP/1.1 401 Unauthorized\r\n"))
            client.send("67890")
            let (_, closed) = client.readUntilClosed(seconds: 20)
            #expect(closed)
        }
    }

    /// A client that asks for a long answer (a subject's 12 MB of events, through a small
    /// receive buffer) and reads none of it is closed once the answer has waited that long; it
    /// gets only what the sockets held.
    @Test func anAnswerLeftUnreadIsTimedOut() throws {
        try withServer(["--write-timeout", "1", "--idle-timeout", "60"]) { url, store in
            let (client, head) = try Self.askForNotes(url, store)
            defer { client.close() }
            // The sockets' buffers fill within a deadline or two; none moves after.
            Thread.sleep(forTimeInterval: 5)
            let (rest, closed) = client.readUntilClosed(seconds: 20)
            #expect(head.utf8.count + rest.utf8.count < 12_000_000, "\(head.utf8.count + rest.utf8.count) bytes")
            #expect(closed)
        }
    }

    /// A client reading a long answer slowly but steadily is not cut off: each deadline starts
    /// again once it has read 32 KiB more. 12 MB, more than the sockets hold, read 64 KiB every
    /// 50 ms for five seconds: the answer waits on the client all along.
    @Test func anAnswerReadSlowlyIsNotCutOff() throws {
        try withServer(["--write-timeout", "1", "--idle-timeout", "60"]) { url, store in
            let (client, _) = try Self.askForNotes(url, store)
            defer { client.close() }
            var received = 0
            for _ in 0 ..< 100 {
                let (bytes, closed) = client.readSteadily(64 * 1024, seconds: 10)
                received += bytes
                #expect(!closed, "closed after \(received) bytes")
                if closed { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            #expect(received == 100 * 64 * 1024)
        }
    }

    /// A client that asked the server at `url` for subject `u`'s events — 300 notes of 40,000
    /// characters appended to `store`, 12 MB — through a 4 KiB receive buffer, and the answer's
    /// first bytes (a `200`). The answer is written whole, so from then on it waits on the
    /// client; a heavy read runs at a low priority, slow on a busy machine.
    static func askForNotes(_ url: URL, _ store: String) throws -> (RawClient, String) {
        let text = String(repeating: "n", count: 40_000)
        let lines = (0 ..< 300).map { i in
            #"{"type":"support.note_added","subject":"u","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"\#(i) \#(text)","agent":"a"}}"#
        }
        let file = URL(fileURLWithPath: store).deletingLastPathComponent().appendingPathComponent("notes.jsonl")
        try Data(lines.joined(separator: "\n").utf8).write(to: file)
        #expect(try Run(["append", "--store", store, file.path]).status == 0)
        let token = try #require(try ServeCommandTests.token(.support, store))
        let client = try #require(RawClient(port: url.port ?? 0, receiveBuffer: 4096))
        client.send("GET /v1/subjects/u/events HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\n\r\n")
        let head = client.readFirst(seconds: 300)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
        return (client, head)
    }

    /// Beyond --max-connections a client waits for a connection to close, then is answered.
    @Test func connectionsBeyondTheCapWaitForOneToClose() throws {
        try withServer(["--max-connections", "2", "--idle-timeout", "60"]) { url, _ in
            let held = try (0 ..< 2).map { _ in try #require(RawClient(port: url.port ?? 0)) }
            // Both accepted and idle: a request on each is answered.
            for client in held {
                client.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                #expect(client.read(seconds: 20).hasPrefix("HTTP/1.1 200 OK\r\n"))
            }
            let third = try #require(RawClient(port: url.port ?? 0))
            defer { third.close() }
            third.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(third.read(seconds: 1) == "")
            held[0].close()
            #expect(third.read(seconds: 20).hasPrefix("HTTP/1.1 200 OK\r\n"))
            held[1].close()
        }
    }

    /// `--trusted-proxy` takes addresses and CIDR ranges, which the startup line lists after
    /// loopback; anything else is refused before the server starts, naming it.
    @Test func trustedProxiesAreListedAndABadOneRefused() throws {
        try withStorePath { store in
            #expect(try Run(["init", "--store", store]).status == 0)
            let refused = try Run(["serve", "--store", store, "--port", "0", "--trusted-proxy", "10.0.0.0/8", "--trusted-proxy", "10.0.0.0/40"])
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("--trusted-proxy 10.0.0.0/40: the prefix after / must be 0 to 32"), "\(refused.stderr)")
            let (server, said) = try ServeCommandTests.start(store, ["--trusted-proxy", "10.0.0.0/8", "--trusted-proxy", "2001:db8::7"])
            kill(server.processIdentifier, SIGTERM)
            server.waitUntilExit()
            #expect(said.contains("\nProxies trusted: loopback, 10.0.0.0/8, 2001:db8::7\n"), "\(said)")
        }
    }

    /// Behind a proxy on another machine that `--trusted-proxy` names, one client's failed
    /// sign-ins refuse that client alone; with the proxy not named, every client behind it is
    /// the proxy, and they count together. The proxy is this machine, from its own address off
    /// loopback.
    @Test(.enabled(if: ServeLimitsTests.outwardAddress != nil, "this machine has no IPv4 address off loopback"))
    func aTrustedProxysClientsAreThrottledApart() async throws {
        let address = try #require(Self.outwardAddress)
        for trusted in [true, false] {
            try await withStorePath { store in
                #expect(try Run(["init", "--store", store]).status == 0)
                let (server, listening) = try ServeCommandTests.serve(store, ["--host", address] + (trusted ? ["--trusted-proxy", address] : []))
                defer {
                    kill(server.processIdentifier, SIGTERM)
                    server.waitUntilExit()
                }
                guard let url = listening else { return }
                let session = URLSession(configuration: .ephemeral)
                func signIn(_ client: String) async throws -> Int {
                    var request = URLRequest(url: url.appendingPathComponent("login"))
                    request.httpMethod = "POST"
                    request.setValue(client, forHTTPHeaderField: "X-Forwarded-For")
                    request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
                    request.httpBody = Data("token=ledger_guess".utf8)
                    let (_, response) = try await session.data(for: request)
                    return (response as? HTTPURLResponse)?.statusCode ?? 0
                }
                // Wrong tokens from one client until it is refused (the tenth failure within a
                // minute; more on a loaded machine), then one from another client at once.
                var answers: [Int] = []
                while answers.last != 429 && answers.count < 40 { answers.append(try await signIn("198.51.100.1")) }
                #expect(answers.count >= 11 && answers.dropLast().allSatisfy { $0 == 401 } && answers.last == 429, "\(answers)")
                #expect(try await signIn("198.51.100.2") == (trusted ? 401 : 429), "trusted: \(trusted)")
            }
        }
    }

    /// This machine's first IPv4 address off loopback, if it has one.
    static let outwardAddress: String? = {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            var ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            guard inet_ntop(AF_INET, &ip, &text, socklen_t(text.count)) != nil else { continue }
            let string = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !string.hasPrefix("127.") { return string }
        }
        return nil
    }()

    /// `body` with a server of a new store started with `options`.
    func withServer(_ options: [String], _ body: (URL, String) throws -> Void) throws {
        try withStorePath { store in
            #expect(try Run(["init", "--store", store]).status == 0)
            let (server, url) = try ServeCommandTests.serve(store, options)
            defer {
                if server.isRunning { kill(server.processIdentifier, SIGTERM) }
                server.waitUntilExit()
            }
            guard let url else { return }
            try body(url, store)
        }
    }
}

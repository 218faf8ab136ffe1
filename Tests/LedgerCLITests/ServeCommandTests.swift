import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import Synchronization
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import Testing

/// `ledger token` and `ledger serve` as a user runs them.
@Suite struct ServeCommandTests {
    @Test func aTokenIsShownOnceListedByNameAndRevoked() throws {
        try withStorePath { store in
            #expect(try Run(["init", "--store", store]).status == 0)
            let made = try Run(["token", "create", "--role", "support", "--name", "alice", "--store", store])
            #expect(made.status == 0)
            #expect(made.stdout.hasPrefix("ledger_"))
            #expect(made.stdout.count == "ledger_".count + 43 + 1)
            #expect(made.stderr == "Made support token alice: it is shown this once; the store keeps only its SHA-256.\n")
            let again = try Run(["token", "create", "--role", "writer", "--name", "alice", "--store", store])
            #expect(again.status == 1)
            #expect(again.stderr.contains("a token named alice exists; revoke it first, or choose another name"))
            let list = try Run(["token", "list", "--store", store])
            #expect(list.stdout.hasPrefix("alice  support  made 20"))
            #expect(!list.stdout.contains(made.stdout.trimmingCharacters(in: .newlines)))
            #expect(try Run(["token", "revoke", "alice", "--store", store]).stdout == "Revoked alice.\n")
            let gone = try Run(["token", "revoke", "alice", "--store", store])
            #expect(gone.status == 1)
            #expect(gone.stderr.hasSuffix("no token is named alice; `ledger token list` lists them\n"))
            let unnamed = try Run(["token", "create", "--role", "writer", "--json", "--store", store])
            #expect(unnamed.stdout.hasPrefix(#"{"name":"writer-1","role":"writer","token":"ledger_"#))
            let role = try Run(["token", "create", "--role", "admin", "--store", store])
            #expect(role.status == 2)
            #expect(role.stderr.contains("--role must be support or writer, not admin"))
        }
    }

    /// An existing store takes App Store settings, for the server's webhook; not a policy.
    @Test func initRecordsAppStoreSettingsInAnExistingStore() throws {
        try withStorePath { store in
            #expect(try Run(["init", "--store", store]).status == 0)
            let root = FileManager.default.currentDirectoryPath + "/Schemas/examples/appstore/root.pem"
            let recorded = try Run(["init", "--store", store, "--appstore-root", root, "--appstore-bundle-id", "com.example.ledger",
                                    "--appstore-environment", "Sandbox"])
            #expect(recorded.status == 0, "\(recorded.stderr)")
            #expect(recorded.stdout == "Recorded the App Store settings in \(store).\n")
            let policy = try Run(["init", "--store", store, "--policy", "photolala"])
            #expect(policy.status == 1)
            #expect(policy.stderr.hasSuffix("a store already exists at \(store); use it, or choose another --store (a store's policy changes by `ledger rebuild --policy`)\n"))
        }
    }

    /// SIGTERM while appends are in flight: the server finishes them and exits 0, and every
    /// append it acknowledged is in the store — no more, no fewer.
    @Test func sigtermMidLoadLosesNothingAcknowledged() async throws {
        try await withStorePath { store in
            #expect(try Run(["init", "--store", store]).status == 0)
            let (token, (server, url)) = (try Self.token(.writer, store), try Self.serve(store))
            defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
            guard let url, let token else { return }
            let session = URLSession(configuration: .ephemeral)
            // SIGTERM once 50 appends are acknowledged, the others still coming.
            let answered = Counter()
            let pid = server.processIdentifier
            let acknowledged = try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0 ..< 400 {
                    group.addTask {
                        defer { if answered.increment() == 50 { kill(pid, SIGTERM) } }
                        var request = URLRequest(url: url.appendingPathComponent("v1/events"))
                        request.httpMethod = "POST"
                        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                        request.httpBody = Data(#"{"type":"support.note_added","subject":"user-\#(i % 20)","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"note \#(i)","agent":"load"}}"#.utf8)
                        guard let (data, response) = try? await session.data(for: request) else { return false }
                        return (response as? HTTPURLResponse)?.statusCode == 200 && String(decoding: data, as: UTF8.self).hasPrefix(#"{"appended":1,"#)
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            server.waitUntilExit()
            #expect(server.terminationReason == .exit)
            #expect(server.terminationStatus == 0)
            let stats = try Run(["stats", "--json", "--store", store])
            #expect(stats.stdout.hasPrefix(#"{"events":\#(acknowledged),"#), "acknowledged \(acknowledged)")
            // How many of the rest the server still took (on connections it already had) varies;
            // what it acknowledged, it kept.
            #expect(acknowledged >= 49)
        }
    }
}

extension ServeCommandTests {
    /// Starts `ledger serve` on a free port of `store` with `options`; returns it and where it listens (`nil`,
    /// recorded as an issue, when it does not say).
    static func serve(_ store: String, _ options: [String] = []) throws -> (Process, URL?) {
        let (server, said) = try start(store, options)
        // "Serving STORE on http://127.0.0.1:PORT (…)"
        guard let range = said.range(of: #"http://[0-9.]+:[0-9]+"#, options: .regularExpression), let url = URL(string: String(said[range])) else {
            Issue.record("the server did not say where it listens: \(said)")
            return (server, nil)
        }
        return (server, url)
    }

    /// `ledger serve` of `store` on a free port with `options`, and what it said on starting
    /// (through its last line, the proxies trusted).
    static func start(_ store: String, _ options: [String]) throws -> (Process, String) {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger")
        server.arguments = ["serve", "--store", store, "--port", "0"] + options
        let err = Pipe()
        server.standardError = err
        server.standardOutput = FileHandle.nullDevice
        try server.run()
        var said = ""
        while !said.contains("Proxies trusted:") || !said.hasSuffix("\n") {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            said += String(decoding: chunk, as: UTF8.self)
        }
        // The request log goes on: read it so that the server never blocks on a full pipe,
        // until it ends (at the end, the handler would be called again and again).
        err.fileHandleForReading.readabilityHandler = { handle in
            if handle.availableData.isEmpty { handle.readabilityHandler = nil }
        }
        return (server, said)
    }

    enum Role: String { case support, writer }

    /// A new token of `role` in `store` (`token create --json`); `nil`, recorded as an issue,
    /// when the command does not print one.
    static func token(_ role: Role, _ store: String) throws -> String? {
        let made = try Run(["token", "create", "--role", role.rawValue, "--json", "--store", store])
        guard case .object(let object)? = try? JSONParser.parse(Array(made.stdout.utf8)), case .string(let token)? = object["token"] else {
            Issue.record("no token: \(made.stdout) \(made.stderr)")
            return nil
        }
        return token
    }

    /// The body of a GET of `path` with `token`.
    static func get(_ url: URL, _ path: String, token: String) async throws -> String {
        var request = URLRequest(url: URL(string: url.absoluteString + path) ?? url)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession(configuration: .ephemeral).data(for: request)
        return String(decoding: data, as: UTF8.self)
    }

    /// Each route's body is the command's standard output, byte for byte, on the example store.
    @Test func theRoutesAnswerWhatTheCommandsPrint() async throws {
        try await withStorePath { store in
            let example = FileManager.default.currentDirectoryPath + "/Schemas/examples/alex.jsonl"
            #expect(try Run(["append", "--store", store, "--restore", example]).status == 0)
            let (token, (server, url)) = (try Self.token(.support, store), try Self.serve(store))
            defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
            guard let url, let token else { return }
            let at = "2026-02-20T00:00:00Z"
            let pairs: [(String, [String])] = [
                ("/v1/subjects/alex/status?at=\(at)", ["status", "alex", "--at", at]),
                ("/v1/subjects/alex/status?at=\(at)&knownAt=3", ["status", "alex", "--at", at, "--known-at", "3"]),
                ("/v1/subjects/alex/audit?at=\(at)", ["audit", "alex", "--at", at]),
                ("/v1/due?from=2026-01-01T00:00:00Z&to=2026-12-01T00:00:00Z", ["due", "--from", "2026-01-01T00:00:00Z", "--to", "2026-12-01T00:00:00Z"]),
                ("/v1/lookup?transactionId=t2", ["lookup", "--transaction-id", "t2"]),
                ("/v1/lookup?originalTransactionId=o1", ["lookup", "--original-transaction-id", "o1"]),
            ]
            for (path, command) in pairs {
                let printed = try Run(command + ["--json", "--store", store])
                #expect(printed.status == 0, "\(command): \(printed.stderr)")
                #expect(try await Self.get(url, path, token: token) == printed.stdout, "\(path)")
            }
            let exported = try Run(["export", "--subject", "alex", "--store", store])
            #expect(try await Self.get(url, "/v1/subjects/alex/events", token: token) == exported.stdout)
            kill(server.processIdentifier, SIGTERM)
            server.waitUntilExit()
        }
    }
}

/// A count that tasks share.
final class Counter: Sendable {
    private let count = Mutex(0)

    /// Adds one; returns the new count.
    func increment() -> Int { count.withLock { $0 += 1; return $0 } }
}

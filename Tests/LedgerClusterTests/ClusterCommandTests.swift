import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@_spi(Storage) import LedgerCore
import LedgerTestSupport
@_spi(Cluster) @testable import LedgerCluster

extension ClusterTests {
    /// The `ledger` command with `--cluster`, against `ledger node` processes: what a user runs.
    @Suite("The command line over a cluster")
    struct Commands {
        /// Runs `ledger` with `arguments`; its exit status, standard output and error.
        func ledger(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
            try run(NATSCluster.ledger, arguments, environment: environment)
        }

        /// Runs `executable` with `arguments`; its exit status, standard output and error.
        func run(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }.merging(["NO_COLOR": "1"]) { $1 }
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let printed = out.fileHandleForReading.readDataToEndOfFile(), warned = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: printed, as: UTF8.self), String(decoding: warned, as: UTF8.self))
        }

        /// `text` with every `#N` and `position N` (positions differ between a store and a
        /// cluster) made `#_`.
        func withoutPositions(_ text: String) -> String {
            text.replacing(/#\d+/, with: "#_").replacing(/position \d+/, with: "position _")
        }

        /// `subjects` customers' random histories (from `seed`) written as a JSON Lines file in
        /// the cluster's directory: the events, the file, and the path of a single store beside
        /// the cluster to compare it with.
        func writeHistories(seed: UInt64, subjects: Int, in cluster: NATSCluster) throws -> (events: [EventDraft], file: String, store: String) {
            var history = RandomHistory(seed: seed)
            let events = try history.events(subjects: subjects, perSubject: 2...6).map { try $0.draft() }
            let file = cluster.storePath("events.jsonl")
            let lines = try events.map { String(decoding: try EventLine.line(of: $0), as: UTF8.self) }
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            return (events, file, cluster.storePath("single.lmdb"))
        }

        @Test("append, status, due and verify over --cluster print what they print over a store")
        func sameOutput() throws {
            let cluster = try NATSCluster(nodes: 1)
            defer { cluster.down() }
            let (events, file, store) = try writeHistories(seed: 9, subjects: 6, in: cluster)

            let appended = try ledger(["append", "--cluster", cluster.url, file])
            #expect(appended.status == 0, "\(appended.err)")
            #expect(appended.out.hasPrefix("Appended \(events.count) events"))
            #expect(try ledger(["append", "--store", store, file]).status == 0)
            let again = try ledger(["append", file], environment: ["LEDGER_CLUSTER": cluster.url])
            #expect(again.out == "Appended 0 events; \(events.count) duplicates were already stored.\n")
            // A fact whose personal fields were erased since (the account was deleted) is still
            // the same fact: sent again, a duplicate.
            let examples = NATSCluster.repository.appendingPathComponent("Schemas/examples/valid.jsonl").path
            let deleted = try String(contentsOfFile: examples, encoding: .utf8).split(separator: "\n").filter { $0.contains(#""subject":"user-49""#) }
            #expect(deleted.count == 5 && deleted.contains { $0.contains("account.deleted") } && deleted.contains { $0.contains(#""email""#) })
            let erased = cluster.storePath("erased.jsonl")
            try (deleted.joined(separator: "\n") + "\n").write(toFile: erased, atomically: true, encoding: .utf8)
            #expect(try ledger(["append", "--cluster", cluster.url, erased]).out.hasPrefix("Appended 5 events"))
            let erasedAgain = try ledger(["append", "--cluster", cluster.url, erased])
            #expect(erasedAgain.out == "Appended 0 events; 5 duplicates were already stored.\n", "\(erasedAgain.err)")
            #expect(try ledger(["append", "--store", store, erased]).status == 0)

            for subject in Set(events.map(\.subject)).sorted() {
                let at = ["--at", "2026-06-01T00:00:00Z"]
                let clustered = try ledger(["status", subject, "--cluster", cluster.url] + at)
                let alone = try ledger(["status", subject, "--store", store] + at)
                #expect(clustered.status == 0)

                #expect(withoutPositions(clustered.out) == withoutPositions(alone.out))
                // The timeline too, but for when the stream recorded each event (and the
                // padding, as wide as the longest position).
                func unrecorded(_ text: String) -> String {
                    withoutPositions(text).replacing(/recorded [0-9T:.Z-]+,/, with: "recorded _,").replacing(/\ +/, with: " ")
                }
                let audited = try ledger(["audit", subject, "--cluster", cluster.url] + at)
                #expect(audited.status == 0, "\(audited.err)")
                #expect(unrecorded(audited.out) == unrecorded(try ledger(["audit", subject, "--store", store] + at).out), "\(audited.out)")
            }
            let window = ["--from", "2026-01-01T00:00:00Z", "--to", "2027-01-01T00:00:00Z"]
            #expect(try ledger(["due", "--cluster", cluster.url] + window).out == (try ledger(["due", "--store", store] + window).out))
            let verified = try ledger(["verify", "--cluster", cluster.url])
            #expect(verified.status == 0)
            #expect(verified.out.hasPrefix("OK: \(events.count + 5) events in the stream, each in exactly one node's store"))

            let both = try ledger(["status", "x", "--store", store, "--cluster", cluster.url])
            #expect(both.status == 2)
            #expect(both.err.contains("give --store or --cluster, not both"))
            // A rule change over the cluster, swapped in: what the store's own rebuild gives.
            let policy = ["--policy", "photolala", "--at", "2026-06-01T00:00:00Z"]
            let swap = try ledger(["rebuild", "--cluster", cluster.url] + policy)
            #expect(swap.status == 0, "\(swap.err)")
            #expect(swap.out.hasPrefix("Rebuilt over the cluster, views compared at 2026-06-01T00:00:00.000Z: "))
            #expect(swap.out.contains(" switched in, with "), "\(swap.out)")
            #expect(!swap.err.contains("did not switch"), "\(swap.err)")
            #expect(swap.out.contains("Summary:"), "\(swap.out)")
            // The cluster's policy is the rebuild's now, and every node follows it.
            let stats = try ledger(["stats", "--cluster", cluster.url]).out
            #expect(stats.contains("policy photolala v1 (the last rebuild's)"), "\(stats)")
            #expect(stats.split(separator: "\n").dropFirst(2).allSatisfy { $0.hasSuffix("photolala v1") }, "\(stats)")
            #expect(try ledger(["rebuild", "--store", store] + policy).status == 0)
            for subject in Set(events.map(\.subject)).sorted() {
                let at = ["--at", "2026-06-01T00:00:00Z"]
                let clustered = try ledger(["status", subject, "--cluster", cluster.url] + at).out
                let alone = try ledger(["status", subject, "--store", store] + at).out
                #expect(withoutPositions(clustered) == withoutPositions(alone), "status of \(subject) after the rebuild:\n\(clustered)\n\(alone)")
            }
        }

        /// A GET (or a POST of `body`) to a node's server with `token` (or a session's
        /// `cookie`), redirects not followed: its status, body and `Set-Cookie`.
        func http(_ url: String, token: String, post body: String? = nil, form: Bool = false,
                  cookie: String? = nil) async throws -> (status: Int, body: String, cookie: String?) {
            var request = URLRequest(url: URL(string: url) ?? URL(fileURLWithPath: "/"))
            request.httpMethod = body == nil ? "GET" : "POST"
            if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") } else { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            if form { request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type") }
            request.httpBody = body.map { Data($0.utf8) }
            let session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
            let (data, response) = try await session.data(for: request)
            let http = response as? HTTPURLResponse
            return (http?.statusCode ?? 0, String(decoding: data, as: UTF8.self), http?.value(forHTTPHeaderField: "Set-Cookie"))
        }

        @Test("a node's server answers the JSON routes for every customer, as `ledger serve` on a store does")
        func nodeServesTheCluster() async throws {
            let cluster = try NATSCluster(nodes: 2)
            defer { cluster.down() }
            let (events, file, store) = try writeHistories(seed: 17, subjects: 8, in: cluster)
            #expect(try ledger(["append", "--cluster", cluster.url, file]).status == 0)
            #expect(try ledger(["append", "--store", store, file]).status == 0)

            // Tokens live in the node's own store.
            let made = try ledger(["token", "create", "--role", "writer", "--json", "--store", cluster.storePath("node-1")])
            guard case .object(let o)? = try? JSONParser.parse(Array(made.out.utf8)), case .string(let token)? = o["token"], let node = cluster.nodeURLs.first else {
                Issue.record("no token or node: \(made)")
                return
            }
            // Positions are the stream's, and the times recorded the stream's too.
            func unpositioned(_ text: String) -> String {
                text.replacing(/"position":\d+/, with: "\"position\":_").replacing(/"recordedAt":"[^"]*"/, with: "\"recordedAt\":_")
            }
            let at = "2026-06-01T00:00:00Z"
            // The subjects of both nodes' partitions: every one answered through node 1.
            for subject in Set(events.map(\.subject)).sorted() {
                for (route, command) in [("status", ["status", subject, "--at", at, "--json"]), ("audit", ["audit", subject, "--at", at, "--json"])] {
                    let answered = try await http("\(node)/v1/subjects/\(subject)/\(route)?at=\(at)", token: token)
                    #expect(answered.status == 200)
                    #expect(unpositioned(answered.body) == unpositioned(try ledger(command + ["--store", store]).out), "\(route) of \(subject):\n\(answered.body)")
                }
                let exported = try await http("\(node)/v1/subjects/\(subject)/events", token: token)
                #expect(exported.body.split(separator: "\n").count == events.filter { $0.subject == subject }.count)
            }
            let window = "from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z"
            let due = try await http("\(node)/v1/due?\(window)", token: token)
            #expect(due.body == (try ledger(["due", "--from", "2026-01-01T00:00:00Z", "--to", "2027-01-01T00:00:00Z", "--json", "--store", store]).out))
            let originals = originalTransactionIDs(of: events)
            #expect(!originals.isEmpty)
            for original in originals {
                let found = try await http("\(node)/v1/lookup?originalTransactionId=\(original)", token: token)
                #expect(found.body == (try ledger(["lookup", "--original-transaction-id", original, "--json", "--store", store]).out))
            }
            // An append through the node's server lands in the cluster.
            let extra = try Make.usage(events[0].subject, at: ts("2026-05-01T00:00:00Z")).draft()
            let posted = try await http("\(node)/v1/events", token: token, post: String(decoding: try EventLine.line(of: extra), as: UTF8.self) + "\n")
            #expect(posted.status == 200, "\(posted.body)")
            #expect(try ledger(["status", events[0].subject, "--json", "--cluster", cluster.url]).out.contains("\"subject\""))
            let version = try await http("\(node)/v1/subjects/\(events[0].subject)/events", token: token)
            #expect(version.body.split(separator: "\n").count == events.filter { $0.subject == events[0].subject }.count + 1)
            // The support pages, signed in with the token.
            let signedIn = try await http("\(node)/login", token: "", post: "token=\(token)", form: true)
            guard let cookie = signedIn.cookie?.split(separator: ";").first.map(String.init) else {
                Issue.record("no session: \(signedIn.status) \(signedIn.body)")
                return
            }
            var cites = 0
            for subject in Set(events.map(\.subject)).sorted() {
                let page = try await http("\(node)/ui/subjects/\(subject)?at=\(at)", token: "", cookie: cookie)
                #expect(page.status == 200)
                #expect(page.body.contains("<h2>Timeline</h2>"))
                // The plan the page shows is the store's.
                guard case .object(let status)? = try? JSONParser.parse(Array(try ledger(["status", subject, "--at", at, "--json", "--store", store]).out.utf8)),
                      case .object(let entitlement)? = status["entitlement"], case .string(let plan)? = entitlement["planState"] else {
                    Issue.record("no plan for \(subject)")
                    continue
                }
                #expect(page.body.contains("<h2>entitlement: <bdi>\(plan)"), "\(subject): \(plan)")
                // The plan's card cites the event its JSON names: the cluster's position (each
                // node's store numbers its events otherwise).
                let json = try await http("\(node)/v1/subjects/\(subject)/status?at=\(at)", token: token).body
                if case .object(let o)? = try? JSONParser.parse(Array(json.utf8)), case .object(let entitlement)? = o["entitlement"],
                   case .object(let reason)? = entitlement["reason"], case .number(let position)? = reason["position"], let cited = position.int64 {
                    cites += 1
                    #expect(page.body.contains("event #\(cited))"), "\(subject): \(json)")
                }
            }
            #expect(cites > 0)
            if let original = originals.first {
                let found = try await http("\(node)/?q=\(original)&by=originalTransactionId", token: "", cookie: cookie)
                #expect(found.body.contains("<h2>Holding originalTransactionId <bdi>\(original)</bdi></h2>"))
            }
            // The webhook writes one store: refused.
            #expect(try await http("\(node)/appstore/v2/notifications", token: token, post: "{}").status == 503)
            let health = try await http("\(node)/healthz", token: "")
            #expect(health.status == 200 && health.body.contains("\"partitions\""))
        }

        @Test("a cluster nobody started says how to start one")
        func noCluster() throws {
            let unreachable = try ledger(["status", "x", "--cluster", "nats://127.0.0.1:1"])
            #expect(unreachable.status == 1)
            #expect(unreachable.err.contains("cannot reach NATS at nats://127.0.0.1:1"))
            #expect(unreachable.err.contains("Tools/cluster up"))
        }

        @Test("a node that cannot start fails `Tools/cluster up` at once, with the end of its log, and leaves nothing running")
        func aNodeThatEndsFailsUp() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-cluster-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let broken = directory.appendingPathComponent("ledger")
            try "#!/bin/sh\necho 'the store at this path is damaged' >&2\nexit 3\n".write(to: broken, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: broken.path)
            let up = try run(NATSCluster.repository.appendingPathComponent("Tools/cluster"),
                             ["up", "--dir", directory.appendingPathComponent("cluster").path, "--nodes", "1", "--ledger", broken.path])
            let message = up.err
            #expect(up.status == 1)
            #expect(up.out.isEmpty)
            #expect(message.contains("cluster: ledger node 1 ended with status 3 before it came up"), "\(message)")
            #expect(message.contains("    the store at this path is damaged"), "\(message)")
            // `up` stopped the servers it had started and removed its record of them.
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cluster/processes").path))
        }
    }
}

/// Leaves redirects to the test.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
                    completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}

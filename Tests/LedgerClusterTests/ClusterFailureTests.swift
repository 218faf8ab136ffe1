import Foundation
import Glibc
import Testing
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import LedgerModels
@_spi(Storage) import LedgerProjections
import LedgerTestSupport
@_spi(Cluster) @testable import LedgerCluster

/// Processes killed under load, against a real cluster of `ledger node` processes and NATS
/// servers (Tools/cluster): what is acknowledged stays, folded exactly once. One test at a
/// time, beside `ClusterTests`' one: two clusters at most run at once, each test on a thread
/// of its own.
@Suite("A cluster losing a process under load", .serialized, .onOwnThread,
       .enabled(if: NATSCluster.available, "nats-server is not installed (.ci/run installs it)"))
struct ClusterFailureTests {
    /// Subjects' histories, appended one event per request in an order that keeps each
    /// subject's own; `kill` runs once, after `killAfter` events are acknowledged. An event
    /// refused as unavailable (a partition changing hands, a server gone) is sent again until
    /// acknowledged: appends are idempotent. Returns the acknowledged ids by subject.
    /// An append that stays unavailable for a minute fails the test with what the nodes'
    /// logs say about its partition.
    func load(_ client: ClusterClient, _ cluster: NATSCluster, subjects: Int, killAfter: Int, kill: () -> Void) throws -> (acknowledged: [String: [String]], longestWait: Double, total: Int) {
        var history = RandomHistory(seed: 46)
        var queues = try (0..<subjects).map { s in try history.history(of: "load-\(s)", count: 6).map { try $0.draft() } }
        let total = queues.reduce(0) { $0 + $1.count }
        var acknowledged: [String: [String]] = [:]
        var done = 0, killed = false, longest = 0.0
        while queues.contains(where: { !$0.isEmpty }) {
            for s in queues.indices where !queues[s].isEmpty {
                let draft = queues[s].removeFirst()
                let started = Date()
                let deadline = started.addingTimeInterval(60)
                while true {
                    do throws(LedgerError) {
                        let result = try client.append([draft])
                        #expect(result.outcomes.count == 1)
                        break
                    } catch {
                        guard error.code == .unavailable else { throw error }
                        guard Date() < deadline else {
                            let partition = client.layout.partition(of: draft.subject)
                            throw LedgerError(error.code, "\(error.message)\n\(cluster.logs(about: partition))")
                        }
                        Thread.sleep(forTimeInterval: 0.1)
                    }
                }
                longest = max(longest, Date().timeIntervalSince(started))
                acknowledged[draft.subject, default: []].append(draft.id.description)
                done += 1
                if done == killAfter && !killed { kill(); killed = true }
            }
        }
        return (acknowledged, longest, total)
    }

    /// Each subject's events, as the cluster answers them, hold exactly the acknowledged ids,
    /// once each, in order; and its version counts them.
    func expectExactlyOnce(_ client: ClusterClient, _ acknowledged: [String: [String]]) throws {
        for (subject, ids) in acknowledged.sorted(by: { $0.key < $1.key }) {
            guard case .array(let lines) = try client.read("events", subject: subject) else {
                Issue.record("no events answer for \(subject)")
                continue
            }
            let stored = lines.compactMap { line -> String? in
                guard case .string(let text) = line, case .object(let o)? = try? JSONParser.parse(Array(text.utf8)) else { return nil }
                return ClusterWire.string(o["id"])
            }
            #expect(stored == ids, "\(subject): stored \(stored.count) events for \(ids.count) acknowledged")
            #expect(try client.read("version", subject: subject) == .integer(Int64(ids.count)))
        }
    }

    /// `verify`, asked again while the servers are still electing leaders after a death (as
    /// an operator would).
    func verified(_ client: ClusterClient) throws -> ClusterClient.Verification {
        let deadline = Date().addingTimeInterval(60)
        while true {
            do throws(LedgerError) {
                return try client.verify()
            } catch {
                guard error.code == .unavailable, Date() < deadline else { throw error }
                Thread.sleep(forTimeInterval: 1)
            }
        }
    }

    /// Two ledger nodes taking appends of 60 subjects, the process `victim` names SIGKILLed
    /// after 120 acknowledged: every acknowledged event is folded exactly once and verify finds
    /// nothing, before and after `check` reads the cluster. The events and the longest wait.
    func killedUnderLoad(_ victim: (NATSCluster) -> Int32?, check: (NATSCluster) throws -> Void = { _ in }) throws -> (total: Int, longest: Double) {
        let cluster = try NATSCluster(nodes: 2)
        defer { cluster.down() }
        let client = try ClusterClient(urls: cluster.url)
        defer { client.close() }
        let pid = try #require(victim(cluster))
        let (acknowledged, longest, total) = try load(client, cluster, subjects: 60, killAfter: 120) { kill(pid, SIGKILL) }
        #expect(acknowledged.values.reduce(0) { $0 + $1.count } == total)
        try expectExactlyOnce(client, acknowledged)
        try check(cluster)
        #expect(try verified(client).problems == [])
        return (total, longest)
    }

    @Test("a ledger node SIGKILLed during appends: its partitions move, every acknowledged event is folded exactly once")
    func nodeKilled() throws {
        let (total, longest) = try killedUnderLoad({ $0.nodePIDs.first }) { cluster in
            // The survivor holds every partition now.
            let survivor = try #require(cluster.nodeURLs.last)
            let health = try JSONParser.parse(Array(Data(contentsOf: URL(string: "\(survivor)/healthz")!)))
            guard case .object(let o) = health, case .array(let held)? = o["partitions"] else { Issue.record("no health from \(survivor)"); return }
            #expect(held.count == ClusterLayout.defaultPartitions)
        }
        print("node killed: \(total) events acknowledged and folded once; the longest append waited \(String(format: "%.1f", longest)) s while its partitions moved")
    }

    @Test("a NATS server SIGKILLed during appends: nothing acknowledged is lost and appends go on")
    func serverKilled() throws {
        let (total, longest) = try killedUnderLoad { $0.serverPIDs.first }
        print("server killed: \(total) events acknowledged and folded once; the longest append waited \(String(format: "%.1f", longest)) s")
    }

    @Test("a node that joins takes its share of the partitions, and every view stays the same")
    func nodeJoins() throws {
        let cluster = try NATSCluster(nodes: 1)
        defer { cluster.down() }
        let client = try ClusterClient(urls: cluster.url)
        defer { client.close() }
        let (acknowledged, _, _) = try load(client, cluster, subjects: 30, killAfter: 0) {}
        let at = ts("2026-09-01T00:00:00Z")
        let before = try acknowledged.keys.sorted().map { try client.status(of: $0, at: at).json }

        let joining = try cluster.startNode("joining")
        defer { joining.terminate(); joining.waitUntilExit() }
        // The joining node's store fills from the stream; its log says what it took.
        let took = eventually(60) {
            let log = (try? String(contentsOfFile: cluster.storePath("joining.log"), encoding: .utf8)) ?? ""
            return log.components(separatedBy: "holds partition").count - 1 >= ClusterLayout.defaultPartitions / 2
        }
        #expect(took, "the joining node took no share")
        let after = try acknowledged.keys.sorted().map { try client.status(of: $0, at: at).json }
        #expect(after == before)
        try expectExactlyOnce(client, acknowledged)
    }
}

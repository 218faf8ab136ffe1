import Foundation
import Synchronization
import Testing
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import LedgerModels
@_spi(Storage) import LedgerProjections
import LedgerTestSupport
@_spi(Cluster) @testable import LedgerCluster

extension ClusterTests {
    @Test("a rebuild under a new policy while appends go on switches every node, and a node that joins later follows it")
    func rebuildWhileAppending() throws {
        let cluster = try NATSCluster()
        defer { cluster.down() }
        var nodes = try startNodes(2, on: cluster)
        defer { stopTogether(nodes) }
        let client = try ClusterClient(urls: cluster.url)
        defer { client.close() }

        var history = RandomHistory(seed: 4446)
        let events = try history.events(subjects: 24, perSubject: 2...8).map { try $0.draft() }
        // Half before the rebuild; the rest one event per append, on another thread and
        // another connection, while it runs.
        let half = events.count / 2
        for start in stride(from: 0, to: half, by: 10) { _ = try client.append(Array(events[start..<min(start + 10, half)])) }
        let appended = Atomic<Int>(half)
        let failure = Mutex<String?>(nil)
        let rest = Array(events[half...]), url = cluster.url
        let appender = Thread {
            do {
                let writer = try ClusterClient(urls: url)
                defer { writer.close() }
                for event in rest {
                    _ = try writer.append([event])
                    appended.add(1, ordering: .relaxed)
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }
        appender.start()
        #expect(eventually { appended.load(ordering: .relaxed) > half + 2 })
        let photolala = try Self.photolala()
        let at = ts("2026-06-01T00:00:00Z")
        let before = appended.load(ordering: .relaxed)
        let report = try client.rebuild(policy: photolala, at: at)
        let after = appended.load(ordering: .relaxed)
        #expect(eventually(60) { appended.load(ordering: .relaxed) == events.count || failure.withLock { $0 } != nil })
        #expect(failure.withLock { $0 } == nil)
        #expect(after > before, "no append was acknowledged while the rebuild ran")

        // Every node switched in, and follows the cluster's policy.
        guard case .object(let o) = report, case .object(let switched)? = o["nodes"] else { Issue.record("no nodes in \(report)"); return }
        #expect(o["dryRun"] == .bool(false))
        guard case .array(let changes)? = o["changes"] else { Issue.record("no changes in \(report)"); return }
        #expect(!changes.isEmpty, "the new policy changes no view of the events appended before it")
        #expect(switched.members.map(\.key).sorted() == ["node-1", "node-2"])
        for node in switched.members {
            guard case .object(let answer) = node.value else { Issue.record("\(node.key): \(node.value)"); continue }
            #expect(answer["error"] == nil && answer["caughtUp"] != nil, "\(node.key): \(node.value.serialized())")
        }
        #expect(try nodes[0].clusterPolicy()?.hash == photolala.hash)
        for node in nodes { #expect(try node.ledger.policy().hash == photolala.hash) }

        // Every view is the one a single store under that policy gives the same events.
        try withStorePath { path in
            let single = try Ledger(path: path, policy: photolala)
            defer { single.close() }
            try single.append(events)
            for subject in Set(events.map(\.subject)).sorted() {
                let clustered = try client.status(of: subject, at: at).json
                let alone = try single.status(of: subject, at: at).json
                #expect(withoutPositions(clustered) == withoutPositions(alone), "status of \(subject):\n\(clustered.serialized())\n\(alone.serialized())")
            }
        }
        let verified = try client.verify()
        #expect(verified.problems == [])
        #expect(verified.events == events.count)

        // A node that joins with a new store folds under the cluster's policy from the start.
        let joining = try ClusterNode(urls: cluster.url, path: cluster.storePath("node-3"), name: "node-3", partitions: 8)
        nodes.append(joining)
        #expect(try joining.ledger.policy().hash == photolala.hash)
    }

    @Test("a node that follows another policy than the one the cluster recorded rebuilds under it by itself")
    func nodeAdoptsRecordedPolicy() throws {
        try withCluster(nodes: 1, partitions: 4) { cluster, client in
            let t = ts("2026-03-01T00:00:00Z")
            let events = try [
                Make.purchase("u1", at: t, txn: "t1", expires: days(30, after: t)).draft(),
                Make.renewalFailed("u1", at: days(30, after: t), original: "t1").draft(),
            ]
            #expect(try client.append(events).appended == 2)
            let photolala = try Self.photolala()
            let at = days(50, after: t)
            let expected = try withStorePath { path in
                let single = try Ledger(path: path, policy: photolala)
                defer { single.close() }
                try single.append(events)
                return withoutPositions(try single.status(of: "u1", at: at).json)
            }
            #expect(withoutPositions(try client.status(of: "u1", at: at).json) != expected, "the policies give the same view: the test shows nothing")
            // What a coordinator records, with no node prepared.
            let settings = try KeyValueBucket(client.connection, name: ClusterLayout.settingsBucket, replicas: ClusterNode.replicas, create: false)
            #expect(try settings.create(ClusterLayout.rebuildKey, Array(RebuildRecord(id: "elsewhere", policy: photolala).json.serialized().utf8)) != nil)
            #expect(eventually(20) { (try? client.status(of: "u1", at: at).json).map(withoutPositions) == expected })
            #expect(try client.verify().problems == [])
        }
    }

    @Test("a rebuild whose coordinator went is abandoned if it was not recorded, switched in if it was, and one claim keeps a second out")
    func coordinatorGone() throws {
        let cluster = try NATSCluster()
        defer { cluster.down() }
        let nodes = try startNodes(1, on: cluster, partitions: 4)
        defer { stopTogether(nodes) }
        let node = nodes[0]
        let client = try ClusterClient(urls: cluster.url)
        defer { client.close() }
        let t = ts("2026-03-01T00:00:00Z")
        #expect(try client.append([Make.purchase("u1", at: t, txn: "t1", expires: days(30, after: t)).draft()]).appended == 1)
        let photolala = try Self.photolala()
        let reference = try node.ledger.policy().hash
        let holders = try client.holders()

        // Prepared, then the coordinator goes before recording it: abandoned, nothing changed.
        let first = try RebuildClaim(client.connection, id: "first")
        let refused = #expect(throws: LedgerError.self) { try client.rebuild(policy: photolala, at: t) }   // the claim keeps it out
        #expect(refused?.code == .rebuildRunning)
        let prepared = client.askNodes(holders, ["step": "prepare", "id": "first", "policy": photolala.json], timeout: 60_000)
        #expect(prepared.allSatisfy { (try? $0.value.get()) != nil })
        #expect(node.pendingRebuild.withLock { $0?.id } == "first")
        first.release()
        #expect(eventually(10) { node.pendingRebuild.withLock { $0 == nil } })
        #expect(try node.ledger.policy().hash == reference)
        // The node's rebuild lock is free again, once the abandoned generation is deleted.
        #expect(eventually(10) { (try? client.rebuildDryRun(policy: photolala, at: t)) != nil })

        // Prepared and recorded, then the coordinator goes before the switch: switched in.
        let second = try RebuildClaim(client.connection, id: "second")
        _ = client.askNodes(holders, ["step": "prepare", "id": "second", "policy": photolala.json], timeout: 60_000)
        let settings = try KeyValueBucket(client.connection, name: ClusterLayout.settingsBucket, replicas: ClusterNode.replicas, create: false)
        #expect(try settings.create(ClusterLayout.rebuildKey, Array(RebuildRecord(id: "second", policy: photolala).json.serialized().utf8)) != nil)
        second.release()
        #expect(eventually(10) { node.lastSwitched.withLock { $0 } == "second" })
        #expect(try node.ledger.policy().hash == photolala.hash)
        #expect(try client.verify().problems == [])
    }

    static func photolala() throws -> Policy {
        try Policy.decode(Array(Data(contentsOf: NATSCluster.repository.appendingPathComponent("Schemas/policies/photolala.json")))).get()
    }
}

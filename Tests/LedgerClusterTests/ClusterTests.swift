import Foundation
import Testing
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import LedgerModels
@_spi(Storage) import LedgerProjections
import LedgerTestSupport
@_spi(Cluster) @testable import LedgerCluster

/// Nodes and clients against a real 3-server JetStream cluster (Tools/cluster), one test at a
/// time (and one of `ClusterFailureTests` beside it), each on a thread of its own: each
/// starts its own cluster.
@Suite("A cluster on NATS JetStream", .serialized, .onOwnThread,
       .enabled(if: NATSCluster.available, "nats-server is not installed (.ci/run installs it)"))
struct ClusterTests {
    /// Runs `body` against a new 3-server cluster with `count` nodes in this process (each
    /// with a store of its own) that together hold every partition, and a client; stops them
    /// all after.
    func withCluster(nodes count: Int, partitions: Int = 8, _ body: (NATSCluster, ClusterClient) throws -> Void) throws {
        let cluster = try NATSCluster()
        defer { cluster.down() }
        let nodes = try startNodes(count, on: cluster, partitions: partitions)
        defer { stopTogether(nodes) }
        let client = try ClusterClient(urls: cluster.url)
        defer { client.close() }
        try body(cluster, client)
    }

    /// Starts `count` nodes on `cluster` and waits until together they hold every partition.
    func startNodes(_ count: Int, on cluster: NATSCluster, partitions: Int = 8) throws -> [ClusterNode] {
        let nodes = try (1...count).map { k in
            try ClusterNode(urls: cluster.url, path: cluster.storePath("node-\(k)"), name: "node-\(k)", partitions: partitions)
        }
        nodes.forEach { $0.start() }
        let held = eventually { Set(nodes.flatMap(\.partitions)).count == partitions }
        #expect(held, "the nodes hold \(Set(nodes.flatMap(\.partitions)).count) of \(partitions) partitions")
        return nodes
    }

    @Test("appends in any order, with duplicates, give the views a single store gives")
    func sameViewsAsOneStore() throws {
        try withCluster(nodes: 2) { cluster, client in
            var history = RandomHistory(seed: 44)
            let events = try history.events(subjects: 12, perSubject: 1...8).map { try $0.draft() }
            var shuffler = DataGenerator(state: 7)
            let shuffled = events.shuffled(using: &shuffler)
            // In batches of up to 5, each sent twice: the second time every event is a duplicate.
            var appended = 0, duplicates = 0
            for start in stride(from: 0, to: shuffled.count, by: 5) {
                let batch = Array(shuffled[start..<min(start + 5, shuffled.count)])
                let first = try client.append(batch)
                let again = try client.append(batch)
                appended += first.appended
                duplicates += again.duplicates
                #expect(again.outcomes.map(\.position) == first.outcomes.map(\.position))
            }
            #expect(appended == events.count)
            #expect(duplicates == events.count)

            try withStorePath { path in
                let single = try Ledger(path: path)
                defer { single.close() }
                try single.append(events)
                let at = ts("2026-06-01T00:00:00Z")
                for subject in Set(events.map(\.subject)).sorted() {
                    let clustered = try client.status(of: subject, at: at).json
                    let alone = try single.status(of: subject, at: at).json
                    // Positions differ (the cluster's are stream sequences); each names the same event.
                    #expect(withoutPositions(clustered) == withoutPositions(alone), "status of \(subject):\n\(clustered.serialized())\n\(alone.serialized())")
                    let ids = try eventIDs(client.read("events", subject: subject))
                    let clusteredIDs = positions(in: clustered).map { ids[$0] }
                    let aloneIDs = try positions(in: alone).map { try single.event(at: $0)?.id.description }
                    #expect(clusteredIDs == aloneIDs, "the positions in \(subject)'s status name other events")
                    #expect(try client.read("version", subject: subject) == .integer(Int64(try single.version(of: subject))))
                }
                #expect(try client.due(from: ts("2026-01-01T00:00:00Z"), to: ts("2027-01-01T00:00:00Z"))
                        == (try single.due(from: ts("2026-01-01T00:00:00Z"), to: ts("2027-01-01T00:00:00Z")).map(\.json)))
                // Who holds a subscription, asked of every node.
                let originals = originalTransactionIDs(of: events)
                #expect(!originals.isEmpty)
                for original in originals {
                    #expect(try client.lookup(originalTransactionId: original) == single.subjects(holdingOriginalTransaction: original).sorted())
                }
                // Every event is in one node's store, and the stats say so.
                guard case .object(let stats) = try client.stats(), case .object(let perNode)? = stats["nodes"] else { Issue.record("no stats"); return }
                let stored = perNode.members.reduce(Int64(0)) { sum, node in
                    guard case .object(let n) = node.value else { return sum }
                    return sum + (ClusterWire.integer(n["events"]) ?? 0)
                }
                #expect(stored == Int64(events.count))
                #expect(stats["lastSequence"] == .integer(Int64(events.count)))
            }
            // A rule change: the nodes' dry runs, gathered, find the single store's changes.
            let pack = NATSCluster.repository.appendingPathComponent("Schemas/policies/photolala.json")
            let photolala = try Policy.decode(Array(Data(contentsOf: pack))).get()
            let at = ts("2026-06-01T00:00:00Z")
            let gathered = try client.rebuildDryRun(policy: photolala, at: at)
            try withStorePath { path in
                let single = try Ledger(path: path)
                defer { single.close() }
                try single.append(events)
                let alone = try single.rebuild(policy: photolala, dryRun: true, at: at)
                guard case .object(let o) = gathered, case .array(let changes)? = o["changes"] else { Issue.record("no changes in \(gathered)"); return }
                func shown(_ change: JSON) -> String {
                    guard case .object(let c) = change, case .string(let field)? = c["field"] else { return "" }
                    return field.hasSuffix("position") ? "\(c["subject"]?.serialized() ?? "") \(field)" : change.serialized(sortedKeys: true)
                }
                #expect(!alone.changes.isEmpty)
                #expect(changes.map(shown).sorted() == alone.changes.map { shown($0.json) }.sorted())
                guard case .object(let aloneJSON) = alone.json else { return }
                #expect(o["summary"] == aloneJSON["summary"])
            }
            let verified = try client.verify()
            #expect(verified.problems == [])
            #expect(verified.events == events.count)
            #expect(verified.nodes.values.reduce(0, +) == 8)
            // A request tried again (its answer lost) finds what its first try stored: appended.
            // Events stored by other calls stay duplicates.
            let retried = Array(events.prefix(3)) + [
                try Make.session("retried", at: ts("2026-03-01T00:00:00Z"), zone: "UTC").draft(),
                try Make.session("retried", at: ts("2026-03-02T00:00:00Z"), zone: "UTC").draft(),
            ]
            let firstTry = try client.append(retried, expecting: [:], call: "retried")
            let secondTry = try client.append(retried, expecting: [:], call: "retried", retried: true)
            #expect(firstTry.appended == 2)
            #expect(secondTry.outcomes == firstTry.outcomes)
            // Sent anew (not a retry), or by another call, they are duplicates.
            #expect(try client.append(retried, expecting: [:], call: "retried").duplicates == retried.count)
            #expect(try client.append(retried, expecting: [:], call: "another", retried: true).duplicates == retried.count)
            // A call's name goes into a header: anything but a short token is refused.
            #expect(throws: LedgerError.self) { try client.append(retried, expecting: [:], call: "a\r\nNats-Msg-Id: x") }
        }
    }

    @Test("a message published around the ledger is refused by the node that folds it, and verify names it")
    func foreignMessage() throws {
        try withCluster(nodes: 1, partitions: 4) { cluster, client in
            let t = ts("2026-03-01T00:00:00Z")
            #expect(try client.append([Make.purchase("u1", at: t, txn: "t1", expires: days(30, after: t)).draft()]).appended == 1)
            // Straight into the stream, not through the node: bytes that are no event.
            let raw = try NATSConnection(urls: cluster.url, name: "test")
            defer { raw.close() }
            let foreign = try raw.publish([.init(subject: client.layout.natsSubject(of: "u1"), data: Array("{not an event".utf8), messageID: nil, expectedLastSubjectSequence: nil)])[0].get()
            // The node goes on: the next append folds after it.
            let renewal = try Make.renewal("u1", at: days(30, after: t), txn: "t2", original: "t1", expires: days(60, after: t)).draft()
            #expect(try client.append([renewal]).appended == 1)
            #expect(try client.read("version", subject: "u1") == .integer(2))
            let verified = try client.verify()
            #expect(verified.problems.count == 1)
            #expect(verified.problems.first?.contains("1 event of the stream missing (first at \(foreign.sequence))") == true)
        }
    }

    @Test("an expected version that does not hold, and an id stored with other content, are refused and write nothing")
    func conflicts() throws {
        try withCluster(nodes: 1, partitions: 4) { cluster, client in
            let t = ts("2026-03-01T00:00:00Z")
            let first = try Make.purchase("u1", at: t, txn: "t1", expires: days(30, after: t)).draft()
            let second = try Make.renewal("u1", at: days(30, after: t), txn: "t2", original: "t1", expires: days(60, after: t)).draft()
            #expect(try client.append([first], expecting: ["u1": .noStream]).appended == 1)

            do throws(LedgerError) {
                _ = try client.append([second], expecting: ["u1": .exact(0)])
                Issue.record("a wrong expected version was accepted")
            } catch {
                #expect(error.code == .wrongExpectedVersion)
                #expect(error.expectedVersion == .exact(0))
                #expect(error.actualVersion == 1)
                #expect(error.subject == "u1")
            }
            var other = second
            other.id = first.id
            do throws(LedgerError) {
                _ = try client.append([second, other])
                Issue.record("an id stored with other content was accepted")
            } catch {
                #expect(error.code == .idConflict)
                #expect(error.index == 1)
            }
            #expect(try client.read("version", subject: "u1") == .integer(1))
            let result = try client.append([second], expecting: ["u1": .exact(1)])
            #expect(result.outcomes.count == 1)
            if case .appended(_, let version)? = result.outcomes.first { #expect(version == 2) } else { Issue.record("not appended: \(result.outcomes)") }
        }
    }

    @Test("writes sent together each expect their own revision: those that hold are written, the others refused, and one read finds every key")
    func leasesWrittenTogether() throws {
        let cluster = try NATSCluster()
        defer { cluster.down() }
        let connection = try NATSConnection(urls: cluster.url, name: "test")
        defer { connection.close() }
        let bucket = try KeyValueBucket(connection, name: "test-writes", replicas: ClusterNode.replicas, ttl: ClusterNode.leaseMilliseconds)
        #expect(try bucket.entries() == [:])
        typealias Write = KeyValueBucket.Write
        // Revision 0: only a key that holds nothing.
        let created = bucket.write(["a", "b", "c"].map { Write(key: $0, value: Array("n1".utf8), revision: 0) }).map { try? $0.get() }
        let (a, b, c) = (try #require(created[0] ?? nil), try #require(created[1] ?? nil), try #require(created[2] ?? nil))
        #expect(Set([a, b, c]).count == 3)
        #expect(try bucket.entries() == ["a": .init(value: Array("n1".utf8), revision: a), "b": .init(value: Array("n1".utf8), revision: b),
                                          "c": .init(value: Array("n1".utf8), revision: c)])

        // a at its revision is written; b expected empty and c at a revision it never had are refused.
        let second = bucket.write([Write(key: "a", value: Array("n2".utf8), revision: a), Write(key: "b", value: Array("n2".utf8), revision: 0),
                                   Write(key: "c", value: Array("n2".utf8), revision: c + 100), Write(key: "d", value: [], revision: 0)])
            .map { try? $0.get() }
        let a2 = try #require(second[0] ?? nil)
        #expect(a2 > c)
        #expect(second[1] == .some(nil))
        #expect(second[2] == .some(nil))
        let d = try #require(second[3] ?? nil)
        // An empty value (a lease given back) is read as a key with nothing in it.
        #expect(try bucket.entries() == ["a": .init(value: Array("n2".utf8), revision: a2), "b": .init(value: Array("n1".utf8), revision: b),
                                          "c": .init(value: Array("n1".utf8), revision: c), "d": .init(value: [], revision: d)])
        #expect(try bucket.get("a") == .init(value: Array("n2".utf8), revision: a2))
    }
}

/// `json` without its `position` members.
func withoutPositions(_ json: JSON) -> JSON {
    switch json {
    case .object(let object): .object(JSONObject(object.members.filter { $0.key != "position" }.map { ($0.key, withoutPositions($0.value)) }))
    case .array(let items): .array(items.map(withoutPositions))
    default: json
    }
}

/// Every `position` member's value in `json`, in document order.
func positions(in json: JSON) -> [UInt64] {
    switch json {
    case .object(let object):
        object.members.flatMap { member -> [UInt64] in
            if member.key == "position", case .number(let n) = member.value, let p = n.int64 { return [UInt64(p)] }
            return positions(in: member.value)
        }
    case .array(let items): items.flatMap(positions(in:))
    default: []
    }
}

/// The ids of an `events` answer's lines by their positions.
func eventIDs(_ json: JSON) throws -> [UInt64: String] {
    guard case .array(let lines) = json else { return [:] }
    var ids: [UInt64: String] = [:]
    for case .string(let line) in lines {
        guard case .object(let o)? = try? JSONParser.parse(Array(line.utf8)), case .number(let p)? = o["position"], let position = p.int64,
              case .string(let id)? = o["id"] else { continue }
        ids[UInt64(position)] = id
    }
    return ids
}

/// The subscriptions (`originalTransactionId`s) the events name, sorted.
func originalTransactionIDs(of events: [EventDraft]) -> [String] {
    Set(events.compactMap { event -> String? in
        guard case .object(let o)? = try? JSONParser.parse(EventLine.line(of: event)), case .object(let data)? = o["data"] else { return nil }
        return ClusterWire.string(data["originalTransactionId"])
    }).sorted()
}

@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import LedgerModels
import LedgerProjections

/// A client of a ledger cluster: the `ledger` command with `--cluster`, tests and tools. It
/// sends each request to the node that holds the subject's partition (NATS request–reply on
/// the partition's service subject), and gathers answers from every partition where a read
/// spans them (`due`).
///
/// While a partition changes hands (a node died, one joined) nobody answers it for a few
/// seconds; the client retries until `patience` runs out, then throws `.unavailable`.
@_spi(Cluster) public final class ClusterClient: @unchecked Sendable {
    let connection: NATSConnection
    package let layout: ClusterLayout
    /// How long a request waits for a partition to find a holder, in milliseconds.
    package var patience: Int64 = 60_000

    /// Connects to the cluster at `urls` (comma-separated `nats://host:port`).
    /// - Throws: `.unavailable` when NATS cannot be reached or no node ever started there.
    public init(urls: String) throws(LedgerError) {
        connection = try NATSConnection(urls: urls, name: "ledger client")
        let missing = LedgerError(.unavailable, "no ledger cluster at \(urls) yet: start a node there (`ledger node --nats \(urls) --store PATH`)")
        let settings: KeyValueBucket
        do throws(LedgerError) {
            settings = try KeyValueBucket(connection, name: ClusterLayout.settingsBucket, replicas: ClusterNode.replicas, create: false)
        } catch {
            throw error.code == .invalidArgument ? missing : error
        }
        guard let stored = try settings.get("partitions"), let count = Int(String(decoding: stored.value, as: UTF8.self)) else { throw missing }
        layout = ClusterLayout(partitions: count)
    }

    public func close() { connection.close() }

    // MARK: Appends

    /// Appends a batch: the events of each partition go to its holder, which checks them as a
    /// single store does and returns once JetStream has stored them and it has folded them.
    ///
    /// A batch is atomic per partition only when each partition's part is one event or the
    /// checks refuse it whole: JetStream has no transaction over several messages. A batch
    /// that fails part-way has the parts before stored; retrying it whole is safe (they count
    /// as duplicates). The error's `index` is the failing event's index in `drafts`. The
    /// retries the client makes by itself (a node that did not answer in time) count what an
    /// earlier try stored as appended.
    public func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion] = [:]) throws(LedgerError) -> AppendResult {
        // Names this call in its requests and the messages they publish: a retry of a request
        // whose answer was lost finds its events stored by this call, and says appended.
        try append(drafts, expecting: expecting, call: String(UInt64.random(in: 0...UInt64.max), radix: 16))
    }

    /// `append(_:expecting:)` as the call named `call` (each of its tries sends the same name);
    /// `retried`: its first send is already a retry (as a test has it).
    func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion], call: String, retried: Bool = false) throws(LedgerError) -> AppendResult {
        var groups: [Int: [Int]] = [:]
        for (i, draft) in drafts.enumerated() { groups[layout.partition(of: draft.subject), default: []].append(i) }
        var expectations: [Int: [String: ExpectedVersion]] = [:]
        for (subject, expected) in expecting { expectations[layout.partition(of: subject), default: [:]][subject] = expected }
        // Each partition's part is its own request, all sent at once: the holders check and
        // publish them in parallel.
        let partitions = Set(groups.keys).union(expectations.keys).sorted()
        var requests: [(partition: Int, indexes: [Int], request: JSONObject)] = []
        for partition in partitions {
            let indexes = groups[partition] ?? []
            var lines: [JSON] = []
            for i in indexes {
                do throws(LedgerError) { lines.append(.string(String(decoding: try EventLine.line(of: drafts[i]), as: UTF8.self))) } catch {
                    var error = error
                    error.index = i
                    throw error
                }
            }
            var request: JSONObject = ["lines": .array(lines), "call": .string(call)]
            if let expected = expectations[partition] {
                request["expecting"] = .object(JSONObject(expected.sorted { $0.key < $1.key }.map { ($0.key, ClusterWire.json(of: $0.value)) }))
            }
            requests.append((partition, indexes, request))
        }
        let answers = askAll(requests.map { ($0.partition, "append", $0.request) }, retried: retried)
        var outcomes = [AppendOutcome?](repeating: nil, count: drafts.count)
        var firstFailure: LedgerError?
        for (k, (partition, indexes, _)) in requests.enumerated() {
            switch answers[k] {
            case .failure(var error):
                if let index = error.index, index < indexes.count { error.index = indexes[index] }
                if firstFailure.map({ (error.index ?? Int.max) < ($0.index ?? Int.max) }) ?? true { firstFailure = error }
            case .success(let answer):
                guard case .object(let object) = answer, case .array(let items)? = object["outcomes"], items.count == indexes.count else {
                    throw LedgerError(.storage, "partition \(partition) answered an append without its outcomes")
                }
                for (i, item) in zip(indexes, items) { outcomes[i] = ClusterWire.outcome(item) }
            }
        }
        if let firstFailure { throw firstFailure }
        return AppendResult(outcomes: outcomes.map { $0 ?? .duplicate(position: 0) })
    }

    // MARK: Reads

    /// A subject's status as the cluster answers it.
    package struct SubjectStatus: Sendable {
        /// What `Ledger.status(of:at:knownAt:).json` gives, positions being the cluster's.
        package var json: JSON
        /// Each model's card for people (`nil`: the policy has no such model).
        package var cards: [(model: String, card: ViewCard?)]
        package var stale: [String]
        /// The zone of the subject's latest session, if any.
        package var zone: String?
        /// How many events the subject has.
        package var version: UInt64
    }

    /// A subject's status from its partition's holder.
    package func status(of subject: String, at t: Timestamp? = nil, knownAt: String? = nil) throws(LedgerError) -> SubjectStatus {
        let answer = try read("status", subject: subject, at: t, knownAt: knownAt)
        guard case .object(let o) = answer, let json = o["status"], case .array(let cards)? = o["cards"] else {
            throw LedgerError(.storage, "the status of \(subject) came back without its parts")
        }
        var stale: [String] = []
        if case .array(let names)? = o["stale"] { stale = names.compactMap { ClusterWire.string($0) } }
        return SubjectStatus(
            json: json,
            cards: cards.compactMap { item in
                guard case .object(let c) = item, let model = ClusterWire.string(c["model"]) else { return nil }
                return (model, c["card"].flatMap(ClusterWire.card))
            },
            stale: stale, zone: ClusterWire.string(o["zone"]), version: UInt64(clamping: ClusterWire.integer(o["version"]) ?? 0))
    }

    /// A subject's audit as the cluster answers it, positions being the cluster's.
    package func audit(of subject: String, at t: Timestamp? = nil, knownAt: String? = nil) throws(LedgerError) -> AuditReport {
        let answer = try read("audit", subject: subject, at: t, knownAt: knownAt)
        guard case .object(let o) = answer, let json = o["audit"],
              let report = AuditReport(json: json, laterEvents: Int(ClusterWire.integer(o["laterEvents"]) ?? 0), timeZone: ClusterWire.string(o["zone"])) else {
            throw LedgerError(.storage, "the audit of \(subject) came back without its parts")
        }
        return report
    }

    /// One read of a subject (`status`, `audit`, `events`, `version`) from its partition's holder.
    public func read(_ kind: String, subject: String, at t: Timestamp? = nil, knownAt: String? = nil) throws(LedgerError) -> JSON {
        var request: JSONObject = ["kind": .string(kind), "subject": .string(subject)]
        if let t { request["at"] = .string(t.description) }
        if let knownAt { request["knownAt"] = .string(knownAt) }
        return try askAll([(layout.partition(of: subject), "read", request)])[0].get()
    }

    /// What falls due at from ≤ at < to in every partition, in `Ledger.due`'s order.
    package func due(from: Timestamp, to: Timestamp) throws(LedgerError) -> [JSON] {
        var items: [(key: (Int64, String, String, String), item: JSON)] = []
        let request: JSONObject = ["kind": "due", "from": .string(from.description), "to": .string(to.description)]
        let answers = askAll((0..<layout.partitions).map { ($0, "read", request) })
        for (partition, answer) in answers.enumerated() {
            guard case .array(let list) = try answer.get() else { throw LedgerError(.storage, "partition \(partition) answered due without a list") }
            for item in list {
                guard case .object(let o) = item else { continue }
                let at = ClusterWire.string(o["at"]).flatMap { Timestamp(rfc3339: $0) }?.milliseconds ?? 0
                let detail = o["detail"].map { $0.serialized(sortedKeys: true) } ?? ""
                items.append(((at, ClusterWire.string(o["subject"]) ?? "", ClusterWire.string(o["kind"]) ?? "", detail), item))
            }
        }
        return items.sorted { $0.key < $1.key }.map(\.item)
    }

    /// `due(from:to:)` as `DueItem`s.
    /// - Throws: `.storage` naming an item that is not one.
    package func dueItems(from: Timestamp, to: Timestamp) throws(LedgerError) -> [DueItem] {
        try due(from: from, to: to).enumerated().map { (i, json) throws(LedgerError) -> DueItem in
            guard let item = DueItem(json: json) else { throw LedgerError(.storage, "due item \(i) came back as no due item: \(json.serialized())") }
            return item
        }
    }

    /// What `verify` found.
    public struct Verification: Sendable {
        /// Events in the stream, up to each partition's checkpoint.
        public var events = 0
        /// Each node's name and how many partitions it holds.
        public var nodes: [String: Int] = [:]
        /// What is wrong, one line each; empty when the cluster is sound.
        public var problems: [String] = []
    }

    /// Checks the stream against the nodes: every event of a partition, up to its holder's
    /// checkpoint, is in that holder's store exactly once, in stream order, and nothing else
    /// of the partition is; and each node's read models equal a fresh fold of its store.
    public func verify() throws(LedgerError) -> Verification {
        var result = Verification()
        // Each node once: its partitions' checkpoints and stored sequences, and its models.
        var parts: [Int: (node: String, checkpoint: UInt64, stored: [UInt64])] = [:]
        for answer in try askEachNode(["kind": "verify"], timeout: Self.longTimeout) {
            guard case .object(let o) = try answer.value.get(), case .object(let held)? = o["partitions"],
                  case .array(let problems)? = o["modelProblems"] else {
                throw LedgerError(.storage, "\(answer.node) answered verify without its parts")
            }
            result.nodes[answer.node] = held.keys.count
            for member in held.members {
                guard let partition = Int(member.key), case .object(let part) = member.value, let checkpoint = ClusterWire.integer(part["checkpoint"]),
                      case .array(let list)? = part["sequences"] else { continue }
                parts[partition] = (answer.node, UInt64(clamping: checkpoint), list.compactMap { ClusterWire.integer($0).map { UInt64(clamping: $0) } })
            }
            result.problems += problems.compactMap { ClusterWire.string($0).map { "\(answer.node): read model \($0)" } }
        }
        for partition in 0..<layout.partitions where parts[partition] == nil {
            result.problems.append("partition \(partition): no node holds it")
        }
        let stream = try streamSequences(through: parts.values.map(\.checkpoint).max() ?? 0)
        for (partition, (node, checkpoint, stored)) in parts.sorted(by: { $0.key < $1.key }) {
            let streamed = (stream[partition] ?? []).filter { $0 <= checkpoint }
            result.events += streamed.count
            if stored != streamed {
                let missing = Set(streamed).subtracting(stored).sorted(), extra = Set(stored).subtracting(streamed).sorted()
                let twice = Dictionary(grouping: stored, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
                var words: [String] = []
                func events(_ n: Int) -> String { n == 1 ? "1 event" : "\(n) events" }
                if !missing.isEmpty { words.append("\(events(missing.count)) of the stream missing (first at \(missing[0]))") }
                if !extra.isEmpty { words.append("\(events(extra.count)) not in the stream (first at \(extra[0]))") }
                if !twice.isEmpty { words.append("\(events(twice.count)) folded twice (first at \(twice[0]))") }
                if words.isEmpty { words.append("events out of stream order") }
                result.problems.append("partition \(partition) on \(node): " + words.joined(separator: "; "))
            }
        }
        if let strays = stream[-1], !strays.isEmpty {
            result.problems.append("\(strays.count == 1 ? "1 message" : "\(strays.count) messages") of the stream \(strays.count == 1 ? "is" : "are") not the ledger's (first at \(strays[0]))")
        }
        return result
    }

    /// Which node holds each partition, by node.
    func holders() throws(LedgerError) -> [String: [Int]] {
        var nodes: [String: [Int]] = [:]
        for (partition, answer) in askAll((0..<layout.partitions).map { ($0, "read", ["kind": "node"] as JSONObject) }).enumerated() {
            guard let node = ClusterWire.string(try answer.get()) else { throw LedgerError(.storage, "partition \(partition) did not say its node") }
            nodes[node, default: []].append(partition)
        }
        return nodes
    }

    /// The subjects holding a transaction (`transactionId`) or a subscription
    /// (`originalTransactionId`), from every node, sorted.
    public func lookup(transactionId: String? = nil, originalTransactionId: String? = nil) throws(LedgerError) -> [String] {
        var subjects: Set<String> = []
        for answer in try askEachNode(["kind": "lookup", "transactionId": transactionId.map(JSON.string) ?? .null,
                                       "originalTransactionId": originalTransactionId.map(JSON.string) ?? .null]) {
            guard case .array(let list) = try answer.value.get() else { throw LedgerError(.storage, "\(answer.node) answered a lookup without a list") }
            subjects.formUnion(list.compactMap { ClusterWire.string($0) })
        }
        return subjects.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Each node's `stats --json`, with the partitions it holds and their checkpoints, by node;
    /// the stream's last sequence; and the cluster's policy (`name`, `version`, `hash`; `null`
    /// while no rebuild over the cluster set one).
    public func stats() throws(LedgerError) -> JSON {
        var nodes = JSONObject()
        for answer in try askEachNode(["kind": "stats"]) { nodes[answer.node] = try answer.value.get() }
        let settings = try KeyValueBucket(connection, name: ClusterLayout.settingsBucket, replicas: ClusterNode.replicas, create: false)
        let policy: JSON = try RebuildRecord.read(settings)?.record.policy.map { policy in
            ["name": .string(policy.name), "version": .integer(policy.version), "hash": .string(policy.hash)]
        } ?? .null
        return ["partitions": .integer(Int64(layout.partitions)),
                "lastSequence": .integer(Int64(clamping: try connection.lastSequence(of: ClusterLayout.stream))), "policy": policy, "nodes": .object(nodes)]
    }

    /// Sends `request` once to every node holding partitions, on its own subject, naming the
    /// partitions it holds in `partitions`; the answers by node name.
    func askEachNode(_ request: JSONObject, timeout: Int64 = 15_000) throws(LedgerError) -> [(node: String, value: Result<JSON, LedgerError>)] {
        askNodes(try holders(), request, timeout: timeout)
    }

    /// A dry-run rebuild on every node (each on its own store, changes kept to the partitions
    /// it holds), gathered: `RebuildReport.json`'s shape, the changes sorted by subject, model
    /// and field, the summary's counts added up. Nothing is swapped.
    public func rebuildDryRun(_ models: [String] = [], policy: Policy? = nil, at t: Timestamp) throws(LedgerError) -> JSON {
        var request: JSONObject = ["kind": "rebuild", "at": .string(t.description), "models": .array(models.map { .string($0) })]
        if let policy { request["policy"] = policy.json }
        var reports: [JSON] = []
        for answer in try askEachNode(request, timeout: Self.longTimeout) { reports.append(try answer.value.get()) }
        return try Self.gather(reports, at: t)
    }

    /// The nodes' rebuild reports as one: `RebuildReport.json`'s shape, the changes sorted by
    /// subject, model and field, the summary's counts added up.
    static func gather(_ reports: [JSON], at t: Timestamp) throws(LedgerError) -> JSON {
        var changes: [JSON] = [], summary: [String: [String: Int64]] = [:], notCompared: Set<String> = []
        var policies: JSON = .null, dryRun: JSON = .bool(true)
        for answer in reports {
            guard case .object(let report) = answer else { throw LedgerError(.storage, "a node answered the rebuild without a report") }
            if case .array(let list)? = report["changes"] { changes += list }
            if case .object(let counts)? = report["summary"] {
                for field in counts.members {
                    guard case .object(let transitions) = field.value else { continue }
                    for t in transitions.members { summary[field.key, default: [:]][t.key, default: 0] += ClusterWire.integer(t.value) ?? 0 }
                }
            }
            if case .array(let names)? = report["notCompared"] { notCompared.formUnion(names.compactMap { ClusterWire.string($0) }) }
            policies = report["policy"] ?? policies
            dryRun = report["dryRun"] ?? dryRun
        }
        func key(_ change: JSON) -> String {
            guard case .object(let o) = change else { return "" }
            return [o["subject"], o["model"], o["field"]].map { ClusterWire.string($0) ?? "" }.joined(separator: "\u{0}")
        }
        return [
            "at": .string(t.description), "dryRun": dryRun, "policy": policies,
            "changes": .array(changes.sorted { key($0) < key($1) }),
            "summary": .object(JSONObject(summary.keys.sorted().map { field in
                (field, JSON.object(JSONObject((summary[field] ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, JSON.integer($0.value)) })))
            })),
            "notCompared": .array(notCompared.sorted().map(JSON.string)),
        ]
    }

    /// The stream sequences of every partition's messages up to `last`, by partition, read in
    /// one pass with a consumer of their own. A message that is not one of the ledger's
    /// counts under partition -1.
    ///
    /// Right after a server's death the servers may make no consumer for a while (one is
    /// placed on a server they still count): the stream is then read message by message from
    /// its leader, slower but answered.
    func streamSequences(through last: UInt64) throws(LedgerError) -> [Int: [UInt64]] {
        guard last > 0 else { return [:] }
        var sequences: [Int: [UInt64]] = [:]
        let consumer: PullConsumer
        do throws(LedgerError) {
            consumer = try PullConsumer(connection, stream: ClusterLayout.stream, filter: "ledger.*.*", name: "ledger-verify-\(Timestamp.now().milliseconds)",
                                        startSequence: 1, oneOff: true)
        } catch {
            guard error.code == .unavailable else { throw error }
            for sequence in 1...last {
                guard let message = try connection.message(in: ClusterLayout.stream, at: sequence) else { continue }
                sequences[layout.parse(natsSubject: message.subject)?.partition ?? -1, default: []].append(sequence)
            }
            return sequences
        }
        defer { consumer.stop(); consumer.remove() }
        var read: UInt64 = 0
        while read < last {
            let messages = try consumer.fetch(batch: 1_000, timeout: 1_000)
            if messages.isEmpty { break }
            for message in messages where message.sequence <= last {
                sequences[layout.parse(natsSubject: message.subject)?.partition ?? -1, default: []].append(message.sequence)
            }
            read = messages.last?.sequence ?? last
        }
        return sequences
    }

    /// How long a node may take over a whole-store request (a rebuild's fold, a verify), in
    /// milliseconds.
    static let longTimeout: Int64 = 3_600_000

    /// Sends each partition's request to its holder (`ask`).
    func askAll(_ requests: [(partition: Int, what: String, request: JSONObject)], timeout: Int64 = 15_000, retried: Bool = false) -> [Result<JSON, LedgerError>] {
        ask(requests.map { (ClusterLayout.service(partition: $0.partition, $0.what), $0.request) }, timeout: timeout, retried: retried)
    }

    /// Sends `request` to each node named on its own subject (`ClusterLayout.nodeService`),
    /// naming the partitions it holds in `partitions`; the answers by node name, in name order.
    func askNodes(_ nodes: [String: [Int]], _ request: JSONObject, timeout: Int64) -> [(node: String, value: Result<JSON, LedgerError>)] {
        let sorted = nodes.sorted { $0.key < $1.key }
        let answers = ask(sorted.map { node in
            var asked = request
            asked["partitions"] = .array(node.value.map { .integer(Int64($0)) })
            return (ClusterLayout.nodeService(node.key), asked)
        }, timeout: timeout)
        return zip(sorted, answers).map { ($0.0.key, $0.1) }
    }

    /// Sends every request at once, each to its subject, waiting `timeout` milliseconds for
    /// each answer; those nobody answers yet are sent again until `patience` runs out.
    func ask(_ requests: [(subject: String, request: JSONObject)], timeout: Int64, retried: Bool = false) -> [Result<JSON, LedgerError>] {
        var results = [Result<JSON, LedgerError>?](repeating: nil, count: requests.count)
        let deadline = Timestamp.now().milliseconds + patience
        var again = retried
        while true {
            let open = results.indices.filter { results[$0] == nil }
            // A request sent again says so: an append then asks which of its events an
            // earlier try stored.
            let sent = open.map { k in
                var request = requests[k].request
                if again { request["retry"] = .bool(true) }
                return (requests[k].subject, ClusterWire.encode(request))
            }
            again = true
            let answers = connection.requests(sent.map { (subject: $0.0, data: $0.1) }, timeout: timeout)
            var retry = false
            for (k, answer) in zip(open, answers) {
                let result: Result<JSON, LedgerError>
                switch answer {
                case .success(let bytes):
                    do throws(LedgerError) { result = .success(try ClusterWire.result(bytes, from: sent[open.firstIndex(of: k) ?? 0].0)) } catch { result = .failure(error) }
                case .failure(let error):
                    result = .failure(error)
                }
                if case .failure(let error) = result, error.code == .unavailable, Timestamp.now().milliseconds < deadline {
                    retry = true
                } else {
                    results[k] = result
                }
            }
            if !retry { break }
            pause(milliseconds: 100)
        }
        return results.map { $0 ?? .failure(LedgerError(.unavailable, "no ledger node answered in time; retry")) }
    }
}

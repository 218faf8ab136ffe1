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
    /// as duplicates). The error's `index` is the failing event's index in `drafts`.
    public func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion] = [:]) throws(LedgerError) -> AppendResult {
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
            var request: JSONObject = ["lines": .array(lines)]
            if let expected = expectations[partition] {
                request["expecting"] = .object(JSONObject(expected.sorted { $0.key < $1.key }.map { ($0.key, ClusterWire.json(of: $0.value)) }))
            }
            requests.append((partition, indexes, request))
        }
        let answers = askAll(requests.map { ($0.partition, "append", $0.request) })
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

    /// One read of a subject (`status`, `audit`, `events`, `version`) from its partition's holder.
    public func read(_ kind: String, subject: String, at t: Timestamp? = nil, knownAt: String? = nil) throws(LedgerError) -> JSON {
        var request: JSONObject = ["kind": .string(kind), "subject": .string(subject)]
        if let t { request["at"] = .string(t.description) }
        if let knownAt { request["knownAt"] = .string(knownAt) }
        return try ask(layout.partition(of: subject), "read", request)
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

    /// Sends every request at once; those no node answers yet are sent again until
    /// `patience` runs out.
    func askAll(_ requests: [(partition: Int, what: String, request: JSONObject)]) -> [Result<JSON, LedgerError>] {
        var results = [Result<JSON, LedgerError>?](repeating: nil, count: requests.count)
        let deadline = Timestamp.now().milliseconds + patience
        while true {
            let open = results.indices.filter { results[$0] == nil }
            let sent = open.map { k in (ClusterLayout.service(partition: requests[k].partition, requests[k].what), ClusterWire.encode(requests[k].request)) }
            let answers = connection.requests(sent.map { (subject: $0.0, data: $0.1) }, timeout: 15_000)
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

    /// Sends `request` to `partition`'s holder, retrying while the partition has none.
    func ask(_ partition: Int, _ what: String, _ request: JSONObject) throws(LedgerError) -> JSON {
        let subject = ClusterLayout.service(partition: partition, what)
        let deadline = Timestamp.now().milliseconds + patience
        while true {
            do throws(LedgerError) {
                return try ClusterWire.result(try connection.request(ClusterWire.encode(request), to: subject, timeout: 15_000), from: subject)
            } catch {
                guard error.code == .unavailable, Timestamp.now().milliseconds < deadline else { throw error }
                pause(milliseconds: 100)
            }
        }
    }
}

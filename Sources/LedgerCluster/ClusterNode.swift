@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import LedgerModels
@_spi(Storage) import LedgerProjections
import Synchronization
import Glibc

/// A ledger node of a cluster: it holds leases on some partitions, folds their events from the
/// stream into its own store (the same engine and read models as a single store), and answers
/// their requests.
///
/// Leases live in a key-value bucket whose values expire: a node looks at its leases every
/// second and renews those a third of their life old, and a node that stops renewing (killed,
/// cut off) loses them within `leaseMilliseconds`; the others then take its partitions and
/// build them from the stream. A watcher thread follows the cluster's rebuilds
/// (`watchRebuilds`).
/// Each node aims at its fair share (partitions ÷ live nodes, rounded up): it takes free
/// partitions up to it and gives back those above it, so that a node that joins gets some.
package final class ClusterNode: @unchecked Sendable {
    package let name: String
    let connection: NATSConnection
    package let ledger: Ledger
    package let layout: ClusterLayout
    let leases: KeyValueBucket
    private let nodes: KeyValueBucket
    /// The cluster's settings: its partition count, and the policy every node folds under.
    let settings: KeyValueBucket
    /// A rebuild prepared for a coordinator (`ClusterClient.rebuild`), waiting to be switched
    /// in, by its id.
    let pendingRebuild = Mutex<(id: String, prepared: PreparedRebuild)?>(nil)
    /// The rebuild this node last switched in.
    let lastSwitched = Mutex<String?>(nil)
    /// The watcher is switching a rebuild in, or rebuilding under the cluster's policy.
    let adopting = Atomic<Bool>(false)
    /// Answers the requests for this node as a whole (a rebuild's steps) on its own subject.
    private var nodeService: Service?
    /// Follows the cluster's rebuilds (`watchRebuilds`), on a thread of its own.
    private var watcher: JoinableThread?
    /// The partitions held: each one's worker, its lease's revision, and when it was last
    /// written (UTC milliseconds).
    private let workers = Mutex<[Int: (worker: PartitionWorker, revision: UInt64, renewed: Int64)]>([:])
    /// A lease is renewed once it is this old: a third of its life, so that two renewals may
    /// fail (a server's death) before it lapses; each renewal is a replicated write.
    static let renewAfterMilliseconds: Int64 = leaseMilliseconds / 3
    let running = Atomic<Bool>(true)
    private var keeper: JoinableThread?
    /// Threads finishing the workers of partitions given back; joined when the node stops.
    private let finishing = Mutex<[JoinableThread]>([])
    private let logger: @Sendable (String) -> Void

    /// How long a lease lasts without renewal.
    /// A JetStream asset whose leader died answers nothing for some seconds while its others
    /// elect a new one: a lease outlasts that, and a dead node's partitions wait that long.
    package static let leaseMilliseconds: Int64 = 15_000
    /// How many copies JetStream keeps of the stream and the buckets.
    package static let replicas = 3

    /// Connects to the cluster at `urls`, creating its stream and buckets on first use (with
    /// `partitions` partitions; an existing cluster keeps its own count), and opens the store
    /// at `path`. Call `start()` to take partitions.
    package init(urls: String, path: String, name: String? = nil, partitions: Int = ClusterLayout.defaultPartitions,
                 replicas: Int = ClusterNode.replicas, log: @escaping @Sendable (String) -> Void = { _ in }) throws(LedgerError) {
        if let name, let problem = Self.nameProblem(name) {
            throw LedgerError(.invalidArgument, "the node name \(name) \(problem)")
        }
        self.name = name ?? Self.defaultName()
        logger = log
        connection = try NATSConnection(urls: urls, name: "ledger node \(self.name)")
        try connection.awaitJetStream()
        (layout, settings) = try Self.layout(connection, partitions: partitions, replicas: replicas)
        // The duplicate window (2 minutes) covers a client's retries after a timeout; beyond it
        // the holder's check of the id against its store does.
        try connection.ensureStream(ClusterLayout.stream, subjects: ["ledger.*.*"], replicas: replicas, duplicateWindow: 120)
        leases = try KeyValueBucket(connection, name: ClusterLayout.leasesBucket, replicas: replicas, ttl: Self.leaseMilliseconds)
        nodes = try KeyValueBucket(connection, name: ClusterLayout.nodesBucket, replicas: replicas, ttl: Self.leaseMilliseconds)
        ledger = try Ledger(path: path)
        // A store that was rebuilt under another policy than the cluster's (a new store, or
        // one that missed a cluster rebuild) folds nothing before it follows the cluster's.
        do throws(LedgerError) { try adoptClusterPolicy() } catch {
            ledger.close()
            connection.close()
            throw error
        }
    }

    /// The cluster's layout: the partition count recorded when it was created.
    static func layout(_ connection: NATSConnection, partitions: Int, replicas: Int) throws(LedgerError) -> (ClusterLayout, KeyValueBucket) {
        let settings = try KeyValueBucket(connection, name: ClusterLayout.settingsBucket, replicas: replicas)
        // Right after the servers start, JetStream may not answer yet: retried. A node that
        // loses the race to record the count reads it, and a read served by a replica that has
        // not applied the winner's write yet finds nothing for a moment: retried too.
        let stored = try connection.retrying("recording the partition count") { () throws(LedgerError) -> [UInt8] in
            let ours = Array(String(partitions).utf8)
            if try settings.create("partitions", ours) != nil { return ours }
            guard let entry = try settings.get("partitions") else {
                throw LedgerError(.unavailable, "the cluster's partition count (bucket \(ClusterLayout.settingsBucket), key partitions) is being recorded")
            }
            return entry.value
        }
        guard let count = Int(String(decoding: stored, as: UTF8.self)), count > 0 else {
            throw LedgerError(.corruptRecord, "the cluster's partition count (bucket \(ClusterLayout.settingsBucket), key partitions) is not a number")
        }
        return (ClusterLayout(partitions: count), settings)
    }

    private static func defaultName() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        let hostname = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let safe = String(hostname.unicodeScalars.map { nameProblem(String($0)) == nil ? Character($0) : "-" })
        return "\(safe.isEmpty ? "node" : safe)-\(getpid())"
    }

    /// What is wrong with a node's name, `nil` when nothing is: it names the node's key in the
    /// key-value buckets, which takes ASCII letters, digits, `-`, `_` and `.`.
    package static func nameProblem(_ name: String) -> String? {
        if name.isEmpty || name.utf8.count > 64 { return "must be 1 to 64 characters" }
        let allowed = name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
        return allowed ? nil : "may hold only ASCII letters, digits, -, _ and ."
    }

    func log(_ line: String) { logger("node \(name): \(line)") }

    /// When `start()` was called (UTC milliseconds).
    private var startedAt: Int64 = 0

    /// Starts taking and renewing leases, on a thread of its own.
    package func start() {
        startedAt = Timestamp.now().milliseconds
        do throws(LedgerError) {
            nodeService = try Service(connection, subject: ClusterLayout.nodeService(name), queue: "ledger-node", handler: { [self] in answerNode($0) })
        } catch {
            log("cannot answer on \(ClusterLayout.nodeService(name)): \(error.message); a rebuild over the cluster cannot reach this node")
        }
        watcher = JoinableThread { [self] in watchRebuilds() }
        keeper = JoinableThread { [self] in
            while running.load(ordering: .relaxed) {
                let began = Timestamp.now().milliseconds
                do throws(LedgerError) { try balance() } catch { log("leases: \(error.message)") }
                let took = Timestamp.now().milliseconds - began
                if took >= Self.renewAfterMilliseconds / 2 {
                    log("a round of the leases took \(took) ms (the NATS servers answer slowly); a lease not renewed for \(Self.leaseMilliseconds - Self.renewAfterMilliseconds) ms is given up")
                }
                let round = Timestamp.now().milliseconds - startedAt < 1_500 ? 500 : 1_000
                pause(milliseconds: round) { running.load(ordering: .relaxed) }
            }
        }
        if keeper?.isStarted != true { log("the system refused a thread to keep the leases: this node takes no partition") }
    }

    /// Gives back every lease, stops folding and answering, and closes the store.
    package func stop() {
        running.store(false, ordering: .relaxed)
        keeper?.join()
        keeper = nil
        nodeService?.stop()
        nodeService?.finish()
        nodeService = nil
        if adopting.load(ordering: .relaxed) { log("finishing the rebuild under way before stopping") }
        watcher?.join()
        watcher = nil
        if let pending = pendingRebuild.withLock({ pending in defer { pending = nil }; return pending }) {
            // Its coordinator finds it gone and abandons the rebuild everywhere.
            try? pending.prepared.abandon()
        }
        finishing.withLock { threads in
            threads.forEach { $0.join() }
            threads = []
        }
        let held = workers.withLock { workers in defer { workers = [:] }; return workers }
        for entry in held.values { entry.worker.beginStopping() }
        for entry in held.values { entry.worker.finishStopping() }
        giveBack(held.map { ($0.key, $0.value.revision) })
        // Gone from the live nodes at once: the others take its share now, not when its
        // heartbeat lapses.
        try? nodes.remove(name)
        connection.close()
        ledger.close()
    }

    /// The partitions this node holds now.
    package var partitions: [Int] { workers.withLock { $0.keys.sorted() } }

    static func leaseKey(_ partition: Int) -> String { "p\(partition)" }

    /// One round of the lease keeper: heartbeat, renew, give back above the fair share, take
    /// free partitions up to it. Each step is one round trip to the servers however many
    /// partitions it moves: under load a replicated write takes a long while, and writing a
    /// lease at a time let a node with many fall behind its renewals.
    private func balance() throws(LedgerError) {
        // A lease not renewed for two thirds of its life may have lapsed: stop answering for
        // it before another node can hold it (it is taken again if still free).
        let now = Timestamp.now().milliseconds
        let lapsing = workers.withLock { $0.filter { now - $0.value.renewed >= Self.leaseMilliseconds - Self.renewAfterMilliseconds }.keys.sorted() }
        if !lapsing.isEmpty {
            log("could not renew the leases of partitions \(lapsing.map(String.init).joined(separator: ", ")) in time: stopped answering for them")
            release(lapsing, givingBack: false)
        }
        do throws(LedgerError) { try nodes.put(name, Array(name.utf8)) } catch { log("heartbeat: \(error.message)") }
        renewLeases(now: now)
        // Nodes started together see each other before any takes a share.
        guard Timestamp.now().milliseconds - startedAt >= 1_500 else { return }
        let live = max(1, try nodes.keys().count)
        let fair = (layout.partitions + live - 1) / live
        // Give back above the fair share (the highest partitions first), so that a node that
        // joined finds free ones.
        let held = workers.withLock { $0.keys.sorted() }
        if held.count > fair { release(Array(held.suffix(held.count - fair)), givingBack: true) }
        if held.count < fair { try take(fair - held.count) }
    }

    /// Renews the leases a third of their life old, together. A lease renewed by nobody else
    /// is still ours; one failing does not keep the others from renewal.
    private func renewLeases(now: Int64) {
        let due = workers.withLock { $0.filter { now - $0.value.renewed >= Self.renewAfterMilliseconds }.map { ($0.key, $0.value.revision) } }.sorted { $0.0 < $1.0 }
        let value = Array(name.utf8)
        let written = leases.write(due.map { KeyValueBucket.Write(key: Self.leaseKey($0.0), value: value, revision: $0.1) })
        var lost: [Int] = []
        for ((partition, _), result) in zip(due, written) {
            do throws(LedgerError) {
                // Refused: the lease may be at a later revision this node wrote (an
                // acknowledgement lost); `reclaim` reads it back.
                var next = try result.get()
                if next == nil { next = try reclaim(partition) }
                if let next {
                    workers.withLock { $0[partition]?.revision = next; $0[partition]?.renewed = now }
                } else {
                    log("lost the lease of partition \(partition)")
                    lost.append(partition)
                }
            } catch {
                log("renewing partition \(partition): \(error.message)")
            }
        }
        release(lost, givingBack: false)
    }

    /// Takes up to `wanted` free partitions (never held, lapsed or given back), starting at one
    /// of this node's own so that nodes starting together do not all race for partition 0: all
    /// their leases read in one pass and written together.
    private func take(_ wanted: Int) throws(LedgerError) {
        let current = try leases.entries()
        let held = workers.withLock { Set($0.keys) }
        let start = Int(layout.partition(of: name))
        var free: [(partition: Int, revision: UInt64)] = []
        for step in 0..<layout.partitions where free.count < wanted {
            let partition = (start + step) % layout.partitions
            let lease = current[Self.leaseKey(partition)]
            if held.contains(partition) || lease?.value.isEmpty == false { continue }
            free.append((partition, lease?.revision ?? 0))
        }
        let value = Array(name.utf8)
        let written = leases.write(free.map { KeyValueBucket.Write(key: Self.leaseKey($0.partition), value: value, revision: $0.revision) })
        for ((partition, _), result) in zip(free, written) where running.load(ordering: .relaxed) {
            // Another node took it first; or no answer came, and a lease written all the same
            // lapses unrenewed.
            guard case .success(let revision?) = result else { continue }
            do throws(LedgerError) {
                let worker = try PartitionWorker(partition: partition, node: self)
                workers.withLock { $0[partition] = (worker, revision, Timestamp.now().milliseconds) }
                log("holds partition \(partition) from sequence \(worker.foldedSequence + 1)")
            } catch {
                log("cannot start partition \(partition): \(error.message)")
                _ = try? leases.delete(Self.leaseKey(partition), revision: revision)
            }
        }
    }

    /// Renews the lease of `partition` after a write at the revision this node knew was
    /// refused; `nil` when another node holds it now. A renewal JetStream stored but whose
    /// acknowledgement was lost (a server died) leaves the lease at a later revision than this
    /// node knows: read back, if it still names this node, it is still ours.
    private func reclaim(_ partition: Int) throws(LedgerError) -> UInt64? {
        let key = Self.leaseKey(partition), value = Array(name.utf8)
        guard let entry = try leases.get(key) else { return try leases.create(key, value) }
        guard entry.value == value else { return nil }
        return try leases.update(key, value, revision: entry.revision)
    }

    /// Frees the leases of `partitions` (each at the revision this node wrote), together: an
    /// empty value, which every reader takes as "nobody holds it".
    private func giveBack(_ partitions: [(partition: Int, revision: UInt64)]) {
        _ = leases.write(partitions.map { KeyValueBucket.Write(key: Self.leaseKey($0.partition), value: [], revision: $0.revision) })
    }

    /// Stops the workers of `partitions` together and, when `givingBack`, frees their leases.
    /// The keeper does not wait for them to finish (a fold thread may be making a consumer):
    /// they stop answering at once, and finish on a thread of their own.
    private func release(_ partitions: [Int], givingBack: Bool) {
        let entries = workers.withLock { workers in partitions.compactMap { p in workers.removeValue(forKey: p).map { (p, $0) } } }
        guard !entries.isEmpty else { return }
        for (_, entry) in entries { entry.worker.beginStopping() }
        if givingBack {
            giveBack(entries.map { ($0.0, $0.1.revision) })
            for (partition, _) in entries { log("gave back partition \(partition)") }
        }
        let stopping = entries.map(\.1.worker)
        finishing.withLock { $0.append(JoinableThread(inlineIfRefused: true) { stopping.forEach { $0.finishStopping() } }) }
    }

    // MARK: Reads

    /// Answers a read for one of this node's partitions, with the JSON the single-store call
    /// gives.
    func answer(_ request: JSONObject, partition: Int) throws(LedgerError) -> JSON {
        let kind = ClusterWire.string(request["kind"]) ?? ""
        let at = try time(request["at"], "at") ?? .now()
        let knownAt = try ClusterWire.string(request["knownAt"]).map { text throws(LedgerError) -> KnownAt in
            guard let knownAt = KnownAt(parsing: text) else { throw LedgerError(.invalidArgument, "knownAt \(text) is not a time") }
            return knownAt
        }
        switch kind {
        case "status":
            let subject = try subject(request, partition)
            let status = try ledger.status(of: subject, at: at, knownAt: local(knownAt, of: subject))
            var cards: [JSON] = []
            for answer in status.answers {
                var view = answer.view
                // The plan's card cites the event behind it: the cluster's position, as in the JSON.
                if var entitlement = view as? EntitlementView, let local = entitlement.reason.position {
                    entitlement.reason.position = try ledger.log.origin(of: local) ?? local
                    view = entitlement
                }
                cards.append(.object(["model": .string(answer.model), "card": view.map { ClusterWire.json(of: $0.card) } ?? .null]))
            }
            return .object([
                "status": try clusterPositions(in: status.json), "cards": .array(cards), "stale": .array(status.stale.map { .string($0) }),
                "zone": try ledger.timeZone(of: subject, at: at).map { .string($0) } ?? .null,
                "version": .integer(Int64(clamping: try ledger.version(of: subject))),
            ])
        case "audit":
            let subject = try subject(request, partition)
            var report = try ledger.audit(of: subject, at: at, knownAt: local(knownAt, of: subject))
            report.knownAt = knownAt   // as asked: a known-at position is the stream's
            // With what the JSON leaves out, so that the client can print the timeline.
            return ["audit": try clusterPositions(in: report.json), "laterEvents": .integer(Int64(report.laterEvents)),
                    "zone": report.timeZone.map(JSON.string) ?? .null]
        case "version":
            return .integer(Int64(clamping: try ledger.version(of: subject(request, partition))))
        case "events":
            let subject = try subject(request, partition)
            var lines: [JSON] = []
            var events = ledger.events(of: subject).makeBlockingIterator()
            while let stored = try events.next() {
                var event = stored
                event.position = try ledger.log.origin(of: stored.position) ?? stored.position
                lines.append(.string(try event.jsonLine))
            }
            return .array(lines)
        case "verify":
            // For each partition named (those this node holds), its checkpoint and the stream
            // sequences of its events in this node's store, in store order, read in one pass;
            // and whether the node's read models equal a fresh fold of its store.
            let held = Set(partitions(in: request, else: partition))
            var sequences: [Int: [JSON]] = [:]
            var events = ledger.events().makeBlockingIterator()
            while let event = try events.next() {
                let p = layout.partition(of: event.subject)
                guard held.contains(p), let origin = try ledger.log.origin(of: event.position) else { continue }
                sequences[p, default: []].append(.integer(Int64(clamping: origin)))
            }
            var parts = JSONObject()
            for p in held.sorted() {
                let checkpoint = try ledger.log.setting(PartitionWorker.checkpointName(p)).flatMap { ClusterWire.integer($0["sequence"]) } ?? 0
                parts[String(p)] = ["checkpoint": .integer(checkpoint), "sequences": .array(sequences[p] ?? [])]
            }
            return ["partitions": .object(parts), "modelProblems": .array(try ledger.verifyModels().map { .string($0.description) })]
        case "node":
            return .string(name)
        case "lookup":
            // The subjects of the partitions named (this node's) holding a transaction or a
            // subscription.
            let held = Set(partitions(in: request, else: partition))
            let subjects: [String]
            if let id = ClusterWire.string(request["transactionId"]) {
                subjects = try ledger.subjects(holdingTransaction: id)
            } else if let id = ClusterWire.string(request["originalTransactionId"]) {
                subjects = try ledger.subjects(holdingOriginalTransaction: id)
            } else {
                throw LedgerError(.invalidArgument, "a lookup needs transactionId or originalTransactionId")
            }
            return .array(subjects.filter { held.contains(layout.partition(of: $0)) }.map(JSON.string))
        case "stats":
            // This node's store: `stats --json`, with the partitions it holds and each one's
            // checkpoint.
            var stats = JSONObject()
            if case .object(let object) = try ledger.stats().json { stats = object }
            var checkpoints = JSONObject()
            for p in partitions {
                let checkpoint = try ledger.log.setting(PartitionWorker.checkpointName(p)).flatMap { ClusterWire.integer($0["sequence"]) } ?? 0
                checkpoints[String(p)] = .integer(checkpoint)
            }
            stats["partitions"] = .object(checkpoints)
            return .object(stats)
        case "rebuild":
            // A dry run on this node's store, its changes kept to the partitions named (those
            // this node holds: its store may keep others it held before).
            let (models, policy) = try rebuildArguments(request)
            let held = Set(partitions(in: request, else: partition))
            return try clusterReport(try ledger.rebuild(models, policy: policy, dryRun: true, at: at), held: held)
        case "due":
            guard let from = try time(request["from"], "from"), let to = try time(request["to"], "to") else {
                throw LedgerError(.invalidArgument, "a due request needs from and to")
            }
            return .array(try ledger.due(from: from, to: to).filter { layout.partition(of: $0.subject) == partition }.map(\.json))
        default:
            throw LedgerError(.invalidArgument, "no read called \(kind)")
        }
    }

    /// A rebuild request's models and policy.
    func rebuildArguments(_ request: JSONObject) throws(LedgerError) -> (models: [String], policy: Policy?) {
        var models: [String] = []
        if case .array(let names)? = request["models"] { models = names.compactMap { ClusterWire.string($0) } }
        guard let document = request["policy"], document != .null else { return (models, nil) }
        switch Policy.decode(document) {
        case .success(let decoded): return (models, decoded)
        case .failure(let problems): throw LedgerError(.invalidArgument, "the policy does not decode: \(problems)")
        }
    }

    /// A rebuild's report as the cluster gives it: the changes of the partitions `held` (a
    /// store may keep others it held before), each position the cluster's.
    func clusterReport(_ report: RebuildReport, held: Set<Int>) throws(LedgerError) -> JSON {
        var report = report
        report.changes = report.changes.filter { held.contains(layout.partition(of: $0.subject)) }
        // A field that cites a position (`reason.position`) cites the cluster's.
        for i in report.changes.indices where report.changes[i].field.hasSuffix("position") {
            for value in [\ViewChange.from, \ViewChange.to] {
                if case .number(let n) = report.changes[i][keyPath: value], let local = n.int64, local > 0 {
                    report.changes[i][keyPath: value] = .integer(Int64(clamping: try ledger.log.origin(of: UInt64(local)) ?? UInt64(local)))
                }
            }
        }
        return try clusterPositions(in: report.json)
    }

    /// `json` with every `"position": N` (a position in this node's store) replaced by the
    /// event's position in the cluster: its stream sequence.
    func clusterPositions(in json: JSON) throws(LedgerError) -> JSON {
        switch json {
        case .object(let object):
            var mapped = JSONObject()
            for member in object.members {
                if member.key == "position", case .number(let n) = member.value, let local = n.int64, local > 0 {
                    mapped[member.key] = .integer(Int64(clamping: try ledger.log.origin(of: UInt64(local)) ?? UInt64(local)))
                } else {
                    mapped[member.key] = try clusterPositions(in: member.value)
                }
            }
            return .object(mapped)
        case .array(let items):
            var mapped: [JSON] = []
            for item in items { mapped.append(try clusterPositions(in: item)) }
            return .array(mapped)
        default:
            return json
        }
    }

    /// A known-at position of the cluster (a stream sequence) as this node's: the last of the
    /// subject's events stored at or before it. Times stay as they are.
    func local(_ knownAt: KnownAt?, of subject: String) throws(LedgerError) -> KnownAt? {
        guard case .position(let sequence)? = knownAt else { return knownAt }
        var last: UInt64 = 0
        var events = ledger.events(of: subject).makeBlockingIterator()
        while let event = try events.next() {
            guard let origin = try ledger.log.origin(of: event.position), origin <= sequence else { break }
            last = event.position
        }
        return .position(last)
    }

    /// The partitions a request for a whole node names (`ClusterClient.askEachNode`), else
    /// the one it came through (-1 for a request on the node's own subject that names none).
    func partitions(in request: JSONObject, else partition: Int) -> [Int] {
        guard case .array(let list)? = request["partitions"] else { return [partition] }
        return list.compactMap { ClusterWire.integer($0).map(Int.init) }
    }

    private func subject(_ request: JSONObject, _ partition: Int) throws(LedgerError) -> String {
        guard let subject = ClusterWire.string(request["subject"]), layout.partition(of: subject) == partition else {
            throw LedgerError(.invalidArgument, "the request names no subject of partition \(partition)")
        }
        return subject
    }

    func time(_ json: JSON?, _ name: String) throws(LedgerError) -> Timestamp? {
        guard let json else { return nil }
        guard let text = ClusterWire.string(json), let t = Timestamp(rfc3339: text) else {
            throw LedgerError(.invalidArgument, "\(name) is not an RFC 3339 time")
        }
        return t
    }
}

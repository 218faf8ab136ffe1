import Synchronization
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections

// A rebuild over the cluster, in two steps (the Cluster article says why):
//
// 0. claim: the coordinator (`ClusterClient.rebuild`) creates the rebuild key in the leases
//    bucket, whose values lapse, and renews it while it runs: one rebuild at a time, and the
//    nodes know whether its coordinator is still there.
// 1. prepare: every node rebuilds its store into a new generation (appends go on into the
//    served one) and reports the changes of its partitions; nothing is served from it yet.
// 2. commit and switch: once every node is ready and the partitions did not move meanwhile,
//    the coordinator records the rebuild (and its policy) in the settings bucket, the commit
//    point, then every node catches its new generation up and swaps it in.
//
// A node whose coordinator's claim lapsed (the command killed) swaps its prepared generation in
// if the rebuild was recorded, and abandons it otherwise; a node that follows another policy
// than the recorded one (it missed the rebuild, or started later) rebuilds under it by itself.

/// The last rebuild over the cluster that committed, as the settings bucket records it.
struct RebuildRecord {
    var id: String
    /// The policy every node folds under, `nil` while no rebuild set one.
    var policy: Policy?

    var json: JSON { ["id": .string(id), "policy": policy?.json ?? .null] }

    static func read(_ settings: KeyValueBucket) throws(LedgerError) -> (record: RebuildRecord, revision: UInt64)? {
        guard let entry = try settings.get(ClusterLayout.rebuildKey), !entry.value.isEmpty else { return nil }
        let what = "the record of the cluster's last rebuild (bucket \(ClusterLayout.settingsBucket), key \(ClusterLayout.rebuildKey))"
        let object = try ClusterWire.object(entry.value, what: what)
        guard let id = ClusterWire.string(object["id"]) else { throw LedgerError(.corruptRecord, "\(what) names no rebuild") }
        guard let document = object["policy"], document != .null else { return (RebuildRecord(id: id, policy: nil), entry.revision) }
        switch Policy.decode(document) {
        case .success(let policy): return (RebuildRecord(id: id, policy: policy), entry.revision)
        case .failure(let problems): throw LedgerError(.corruptRecord, "the policy in \(what) does not decode: \(problems)")
        }
    }
}

extension ClusterNode {
    /// Answers a request for this node as a whole (`ClusterLayout.nodeService`): a rebuild's
    /// step, or a read of every partition it holds (`verify`, `stats`, `lookup`, a dry-run
    /// `rebuild`), which may take long and so waits on no partition's service.
    func answerNode(_ bytes: [UInt8]) -> [UInt8] {
        do throws(LedgerError) {
            let request = try ClusterWire.object(bytes, what: "node request")
            return ClusterWire.ok(request["step"] == nil ? try answer(request, partition: -1) : try answerRebuildStep(request))
        } catch {
            return ClusterWire.failure(error)
        }
    }

    private func answerRebuildStep(_ request: JSONObject) throws(LedgerError) -> JSON {
        guard let id = ClusterWire.string(request["id"]) else { throw LedgerError(.invalidArgument, "a rebuild step needs the rebuild's id") }
        switch ClusterWire.string(request["step"]) ?? "" {
        case "prepare":
            let (models, policy) = try rebuildArguments(request)
            let at = try time(request["at"], "at") ?? .now()
            // One prepared at a time: one whose coordinator went is abandoned by the watcher.
            if let other = pendingRebuild.withLock({ $0?.id }), other != id {
                throw LedgerError(.rebuildRunning, "node \(name) holds rebuild \(other), prepared for another coordinator; wait for it")
            }
            log("rebuild \(id): preparing\(policy.map { " under policy \($0.name) v\($0.version)" } ?? "")")
            let prepared = try ledger.prepareRebuild(models, policy: policy, dryRun: false, at: at)
            let report: JSON
            do throws(LedgerError) {
                report = try clusterReport(prepared.report, held: Set(partitions(in: request, else: -1)))
            } catch {
                try? prepared.abandon()
                throw error
            }
            pendingRebuild.withLock { $0 = (id, prepared) }
            log("rebuild \(id): ready, \(prepared.report.events) events folded")
            return report
        case "ready":
            guard pendingRebuild.withLock({ $0?.id }) == id else {
                throw LedgerError(.unavailable, "rebuild \(id) is no longer prepared on node \(name) (the node restarted, or its coordinator was taken for gone)")
            }
            return .bool(true)
        case "switch":
            guard let pending = takePending(id) else {
                // Switched in meanwhile by the watcher?
                pause(milliseconds: 600_000) { adopting.load(ordering: .relaxed) }
                if lastSwitched.withLock({ $0 }) == id { return ["caughtUp": 0] }
                throw LedgerError(.unavailable, "rebuild \(id) is not prepared on node \(name); it rebuilds under the cluster's policy by itself")
            }
            let report = try pending.swap()
            lastSwitched.withLock { $0 = id }
            log("rebuild \(id): switched in, \(report.caughtUp) events appended meanwhile")
            return ["caughtUp": .integer(Int64(clamping: report.caughtUp))]
        case "abandon":
            if let pending = takePending(id) {
                try pending.abandon()
                log("rebuild \(id): abandoned")
            }
            return .null
        default:
            throw LedgerError(.invalidArgument, "no rebuild step called \(ClusterWire.string(request["step"]) ?? "")")
        }
    }

    /// The prepared rebuild `id`, taken out of `pendingRebuild` (`nil` when another or none is).
    private func takePending(_ id: String) -> PreparedRebuild? {
        pendingRebuild.withLock { pending in
            guard let held = pending, held.id == id else { return nil }
            pending = nil
            return held.prepared
        }
    }

    /// The cluster's policy, `nil` while no rebuild over the cluster set one.
    func clusterPolicy() throws(LedgerError) -> Policy? {
        try RebuildRecord.read(settings)?.record.policy
    }

    /// Brings the store to the cluster's policy when it follows another: rebuilds under it
    /// (`ClusterNode.init`, before any partition is taken; the watcher, when no rebuild is
    /// under way).
    func adoptClusterPolicy() throws(LedgerError) {
        guard let policy = try clusterPolicy(), try ledger.policy().hash != policy.hash else { return }
        log("rebuilding under the cluster's policy \(policy.name) v\(policy.version)")
        let report = try ledger.rebuild(policy: policy)
        log("rebuilt under the cluster's policy: \(report.events) events folded")
    }

    /// Follows the cluster's rebuilds every second until the node stops, on the watcher's
    /// thread (a rebuild may take longer than a lease lives, so the lease keeper does not wait
    /// for it): a prepared rebuild whose coordinator's claim lapsed is switched in if it was
    /// recorded and abandoned if not; with nothing prepared and no rebuild under way, a store
    /// that follows another policy than the cluster's is rebuilt under it. After a failure it
    /// waits 30 s before trying again.
    func watchRebuilds() {
        while running.load(ordering: .relaxed) {
            var wait = 1_000
            do throws(LedgerError) { try followRebuilds() } catch {
                log("following the cluster's rebuilds: \(error.message); trying again in 30 s")
                wait = 30_000
            }
            pause(milliseconds: wait) { running.load(ordering: .relaxed) }
        }
    }

    private func followRebuilds() throws(LedgerError) {
        adopting.store(true, ordering: .relaxed)
        defer { adopting.store(false, ordering: .relaxed) }
        let claim = try leases.get(ClusterLayout.rebuildKey).map { String(decoding: $0.value, as: UTF8.self) }
        if let pendingID = pendingRebuild.withLock({ $0?.id }) {
            guard claim != pendingID else { return }   // its coordinator is still at work
            guard let prepared = takePending(pendingID) else { return }
            if try RebuildRecord.read(settings)?.record.id == pendingID {
                _ = try prepared.swap()
                lastSwitched.withLock { $0 = pendingID }
                log("rebuild \(pendingID): switched in (its coordinator went after recording it)")
            } else {
                try prepared.abandon()
                log("rebuild \(pendingID): abandoned (its coordinator went before recording it)")
            }
            return
        }
        guard claim == nil || claim?.isEmpty == true else { return }
        try adoptClusterPolicy()
    }
}

extension ClusterClient {
    /// Rebuilds every node's store (for a new policy, or new code) and switches all of them in
    /// together: each node prepares a new generation and reports the changes of its partitions;
    /// once all are ready, the rebuild (with its policy, which becomes the cluster's) is
    /// recorded and each node swaps its generation in. Appends go on meanwhile. Returns
    /// `rebuild --json`'s shape, gathered (as `rebuildDryRun`), with `dryRun` false and, under
    /// `nodes`, each node's switch: `caughtUp` (events applied after its prepare) or `error`.
    ///
    /// - Throws: `.rebuildRunning` when another rebuild over the cluster is under way; when a
    ///   node cannot prepare, or the partitions moved while the nodes prepared (a node joined or
    ///   died): every prepared generation is abandoned and nothing changes. Once the rebuild is
    ///   recorded, a node that does not answer the switch swaps in by itself.
    public func rebuild(_ models: [String] = [], policy: Policy? = nil, at t: Timestamp) throws(LedgerError) -> JSON {
        let settings = try KeyValueBucket(connection, name: ClusterLayout.settingsBucket, replicas: ClusterNode.replicas, create: false)
        let id = EventID.random().description
        let claim = try RebuildClaim(connection, id: id)
        defer { claim.release() }
        let before = try RebuildRecord.read(settings)
        let nodes = try holders()
        var request: JSONObject = ["step": "prepare", "id": .string(id), "at": .string(t.description), "models": .array(models.map { .string($0) })]
        if let policy { request["policy"] = policy.json }
        var reports: [JSON] = []
        do throws(LedgerError) {
            for (node, answer) in askNodes(nodes, request, timeout: Self.longTimeout) {
                do throws(LedgerError) { reports.append(try answer.get()) } catch {
                    throw LedgerError(error.code, "node \(node) could not prepare the rebuild: \(error.message); nothing was changed")
                }
            }
            guard try holders() == nodes else {
                throw LedgerError(.unavailable, "partitions moved while the nodes rebuilt (a node joined or left); nothing was changed: run the rebuild again")
            }
            for (node, answer) in askNodes(nodes, ["step": "ready", "id": .string(id)], timeout: 60_000) {
                do throws(LedgerError) { _ = try answer.get() } catch {
                    throw LedgerError(error.code, "\(error.message); nothing was changed: run the rebuild again (node \(node))")
                }
            }
            // The commit point.
            let record = RebuildRecord(id: id, policy: policy ?? before?.record.policy)
            let value = Array(record.json.serialized().utf8)
            let committed = if let before {
                try settings.update(ClusterLayout.rebuildKey, value, revision: before.revision)
            } else {
                try settings.create(ClusterLayout.rebuildKey, value)
            }
            guard committed != nil else {
                throw LedgerError(.rebuildRunning, "another rebuild was recorded meanwhile; nothing was changed: run the rebuild again")
            }
        } catch {
            _ = askNodes(nodes, ["step": "abandon", "id": .string(id)], timeout: 60_000)
            throw error
        }
        var switched = JSONObject()
        for (node, answer) in askNodes(nodes, ["step": "switch", "id": .string(id)], timeout: 600_000) {
            switch answer {
            case .success(let value): switched[node] = value
            case .failure(let error): switched[node] = ["error": .string(error.message)]
            }
        }
        var gathered = try Self.gather(reports, at: t)
        if case .object(var object) = gathered {
            object["dryRun"] = false
            object["nodes"] = .object(switched)
            gathered = .object(object)
        }
        return gathered
    }
}

/// A coordinator's claim on the cluster's one rebuild: the rebuild key in the leases bucket,
/// whose values lapse (15 s), renewed every 3 s on a thread of its own until released.
final class RebuildClaim: @unchecked Sendable {
    // @unchecked: `revision` is touched by the renewing thread alone until `release` joins it.
    private let leases: KeyValueBucket
    private let id: String
    private var revision: UInt64
    private let running = Atomic<Bool>(true)
    private var renewer: JoinableThread?

    init(_ connection: NATSConnection, id: String) throws(LedgerError) {
        leases = try KeyValueBucket(connection, name: ClusterLayout.leasesBucket, replicas: ClusterNode.replicas, create: false)
        self.id = id
        // A claim released leaves an empty value (`KeyValueBucket.delete`), taken over by revision.
        let claimed: UInt64?
        if let entry = try leases.get(ClusterLayout.rebuildKey) {
            claimed = entry.value.isEmpty ? try leases.update(ClusterLayout.rebuildKey, Array(id.utf8), revision: entry.revision) : nil
        } else {
            claimed = try leases.create(ClusterLayout.rebuildKey, Array(id.utf8))
        }
        guard let revision = claimed else {
            throw LedgerError(.rebuildRunning, "another rebuild over the cluster is under way; wait for it (a claim lapses 15 s after its command stops)")
        }
        self.revision = revision
        renewer = JoinableThread { [self] in
            while running.load(ordering: .relaxed) {
                pause(milliseconds: 3_000) { running.load(ordering: .relaxed) }
                guard running.load(ordering: .relaxed) else { break }
                if let next = try? leases.update(ClusterLayout.rebuildKey, Array(self.id.utf8), revision: self.revision) { self.revision = next }
            }
        }
    }

    /// Stops renewing and removes the claim.
    func release() {
        running.store(false, ordering: .relaxed)
        renewer?.join()
        renewer = nil
        _ = try? leases.delete(ClusterLayout.rebuildKey, revision: revision)
    }
}

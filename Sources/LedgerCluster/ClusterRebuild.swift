@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections

// A rebuild over the cluster, in two steps (the Cluster article says why):
//
// 1. prepare: every node rebuilds its store into a new generation (appends go on into the
//    served one) and reports the changes of its partitions; nothing is served from it yet.
// 2. switch: once every node is ready and the partitions did not move meanwhile, the new
//    policy becomes the cluster's (a revision-checked write to the settings bucket: the commit
//    point), then every node catches its new generation up and swaps it in.
//
// A node that misses step 2 (killed, cut off) or starts later sees that its store's policy is
// not the cluster's and rebuilds under it by itself (`adoptClusterPolicy`).

extension ClusterNode {
    /// Answers a request for this node as a whole (`ClusterLayout.nodeService`).
    func answerNode(_ bytes: [UInt8]) -> [UInt8] {
        do throws(LedgerError) {
            let request = try ClusterWire.object(bytes, what: "node request")
            return ClusterWire.ok(try answerRebuildStep(request))
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
            // A rebuild prepared for a coordinator that never came back goes.
            if let stale = pendingRebuild.withLock({ pending in defer { pending = nil }; return pending }) {
                log("abandoned rebuild \(stale.id), never switched in")
                try stale.prepared.abandon()
            }
            log("rebuild \(id): preparing\(policy.map { " under policy \($0.name) v\($0.version)" } ?? "")")
            let prepared = try ledger.prepareRebuild(models, policy: policy, dryRun: false, at: at)
            let held = Set(partitions(in: request, else: -1))
            let report = try clusterReport(prepared.report, held: held)
            pendingRebuild.withLock { $0 = (id, prepared, Timestamp.now().milliseconds) }
            log("rebuild \(id): ready, \(prepared.report.events) events folded")
            return report
        case "switch":
            guard let pending = pendingRebuild.withLock({ pending -> PreparedRebuild? in
                guard let held = pending, held.id == id else { return nil }
                pending = nil
                return held.prepared
            }) else {
                // Switched in meanwhile by this node itself (`adoptClusterPolicy`)?
                if let hash = ClusterWire.string(request["policyHash"]), try ledger.policy().hash == hash { return ["caughtUp": 0] }
                throw LedgerError(.invalidArgument, "rebuild \(id) is not prepared on node \(name); run the rebuild again")
            }
            let report = try pending.swap()
            log("rebuild \(id): switched in, \(report.caughtUp) events appended meanwhile")
            return ["caughtUp": .integer(Int64(clamping: report.caughtUp))]
        case "abandon":
            if let pending = pendingRebuild.withLock({ pending -> PreparedRebuild? in
                guard let held = pending, held.id == id else { return nil }
                pending = nil
                return held.prepared
            }) {
                try pending.abandon()
                log("rebuild \(id): abandoned")
            }
            return .null
        default:
            throw LedgerError(.invalidArgument, "no rebuild step called \(ClusterWire.string(request["step"]) ?? "")")
        }
    }

    /// The cluster's policy, `nil` while no rebuild over the cluster set one.
    func clusterPolicy() throws(LedgerError) -> Policy? {
        guard let entry = try settings.get(ClusterLayout.policyKey), !entry.value.isEmpty else { return nil }
        switch Policy.decode(entry.value) {
        case .success(let policy): return policy
        case .failure(let problems):
            throw LedgerError(.corruptRecord, "the cluster's policy (bucket \(ClusterLayout.settingsBucket), key \(ClusterLayout.policyKey)) does not decode: \(problems)")
        }
    }

    /// Rebuilds the store under the cluster's policy when it folds under another. A rebuild
    /// prepared under that policy is switched in instead once its coordinator has had
    /// `coordinatorMilliseconds` to do it (`waitingForCoordinator`); a prepared one under
    /// another policy is left to its coordinator as long, then abandoned.
    func adoptClusterPolicy(waitingForCoordinator: Bool) throws(LedgerError) {
        guard let policy = try clusterPolicy(), try ledger.policy().hash != policy.hash else { return }
        let now = Timestamp.now().milliseconds
        let waiting = waitingForCoordinator ? Self.coordinatorMilliseconds : 0
        let pending = pendingRebuild.withLock { pending -> (PreparedRebuild, matches: Bool)? in
            guard let held = pending, now - held.since >= waiting else { return nil }
            pending = nil
            return (held.prepared, held.prepared.newPolicy?.hash == policy.hash)
        }
        if let (prepared, matches) = pending {
            if matches {
                _ = try prepared.swap()
                log("switched in rebuild under the cluster's policy \(policy.name) v\(policy.version) (its coordinator did not)")
                return
            }
            try prepared.abandon()
        } else if pendingRebuild.withLock({ $0 != nil }) {
            return
        }
        log("rebuilding under the cluster's policy \(policy.name) v\(policy.version)")
        let report = try ledger.rebuild(policy: policy)
        log("rebuilt under the cluster's policy: \(report.events) events folded")
    }

    /// How long a prepared rebuild waits for its coordinator's switch before the node decides.
    static let coordinatorMilliseconds: Int64 = 60_000

    /// Starts `adoptClusterPolicy` on a thread of its own unless one runs: a rebuild may take
    /// longer than a lease lives, so the keeper does not wait for it.
    func checkPolicy() {
        guard !adopting.load(ordering: .relaxed) else { return }
        // A prepared rebuild is its coordinator's to switch in, for a while.
        if let since = pendingRebuild.withLock({ $0?.since }), Timestamp.now().milliseconds - since < Self.coordinatorMilliseconds { return }
        do throws(LedgerError) {
            guard let policy = try clusterPolicy(), try ledger.policy().hash != policy.hash else { return }
        } catch {
            log("policy: \(error.message)")
            return
        }
        guard adopting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        finishLater { [self] in
            defer { adopting.store(false, ordering: .releasing) }
            do throws(LedgerError) { try adoptClusterPolicy(waitingForCoordinator: true) } catch { log("adopting the cluster's policy: \(error.message)") }
        }
    }
}

extension ClusterClient {
    /// Rebuilds every node's store (for a new policy, or new code) and switches all of them in
    /// together: each node prepares a new generation and reports the changes of its partitions;
    /// once all are ready, the policy becomes the cluster's and each node swaps its generation
    /// in. Appends go on meanwhile. Returns `rebuild --json`'s shape, gathered (as
    /// `rebuildDryRun`), with `dryRun` false.
    ///
    /// - Throws: when a node cannot prepare, or the partitions moved while the nodes prepared
    ///   (a node joined or died): every prepared generation is abandoned and nothing changes;
    ///   `.rebuildRunning` when another rebuild set the cluster's policy meanwhile. Once the policy is
    ///   the cluster's, a node that does not answer the switch rebuilds under it by itself.
    public func rebuild(_ models: [String] = [], policy: Policy? = nil, at t: Timestamp) throws(LedgerError) -> JSON {
        let settings = try KeyValueBucket(connection, name: ClusterLayout.settingsBucket, replicas: ClusterNode.replicas, create: false)
        let before = try settings.get(ClusterLayout.policyKey)
        let nodes = try holders()
        let id = EventID.random().description
        var request: JSONObject = ["step": "prepare", "id": .string(id), "at": .string(t.description), "models": .array(models.map { .string($0) })]
        if let policy { request["policy"] = policy.json }
        let prepared = askNodes(nodes, request, timeout: 3_600_000)
        func abandon() {
            _ = askNodes(nodes, ["step": "abandon", "id": .string(id)], timeout: 60_000)
        }
        var reports: [JSON] = []
        for (node, answer) in prepared {
            switch answer {
            case .success(let report): reports.append(report)
            case .failure(let error):
                abandon()
                throw LedgerError(error.code, "node \(node) could not prepare the rebuild: \(error.message); nothing was changed")
            }
        }
        guard try holders() == nodes else {
            abandon()
            throw LedgerError(.unavailable, "partitions moved while the nodes rebuilt (a node joined or left); nothing was changed: run the rebuild again")
        }
        if let policy {
            let value = Array(policy.json.serialized().utf8)
            let committed: UInt64?
            if let before {
                committed = try settings.update(ClusterLayout.policyKey, value, revision: before.revision)
            } else {
                committed = try settings.create(ClusterLayout.policyKey, value)
            }
            guard committed != nil else {
                abandon()
                throw LedgerError(.rebuildRunning, "another rebuild set the cluster's policy meanwhile; nothing was changed: run the rebuild again")
            }
        }
        var switched = JSONObject()
        var switchRequest: JSONObject = ["step": "switch", "id": .string(id)]
        if let policy { switchRequest["policyHash"] = .string(policy.hash) }
        for (node, answer) in askNodes(nodes, switchRequest, timeout: 600_000) {
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

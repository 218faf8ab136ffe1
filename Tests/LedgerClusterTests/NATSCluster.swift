import Foundation
@_spi(Storage) import LedgerCore
@_spi(Cluster) @testable import LedgerCluster

/// A real 3-server NATS JetStream cluster on loopback, started with `Tools/cluster up` in a
/// temporary directory and stopped with `Tools/cluster down`: what operators run.
final class NATSCluster {
    let directory: URL
    let url: String
    /// `nats-server pid N` lines, in the order `up` printed them.
    let serverPIDs: [Int32]

    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Whether this machine can run one (`nats-server` installed; `.ci/run` installs it).
    static var available: Bool {
        ((ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin") + ":/usr/sbin").split(separator: ":")
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/nats-server") }
    }

    /// `ledger node pid N` lines, in the order `up` printed them.
    let nodePIDs: [Int32]
    /// Each node's HTTP URL (`node K URL` lines), in the same order.
    let nodeURLs: [String]

    /// Starts the servers and `nodes` ledger nodes (`ledger node` processes, which tests may
    /// SIGKILL).
    init(nodes: Int = 0) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-cluster-\(UUID().uuidString)")
        let output = try Self.run(["up", "--dir", directory.path, "--nodes", String(nodes), "--ledger", Self.ledger.path])
        let lines = output.split(separator: "\n").map(String.init)
        guard let first = lines.first, first.hasPrefix("nats://") else {
            throw LedgerError(.unavailable, "Tools/cluster up printed no NATS URL: \(output)")
        }
        url = first
        func pids(_ prefix: String) -> [Int32] { lines.compactMap { $0.hasPrefix(prefix) ? Int32($0.dropFirst(prefix.count)) : nil } }
        serverPIDs = pids("nats-server pid ")
        nodeURLs = lines.compactMap { line in
            let parts = line.split(separator: " ")
            return parts.count == 3 && parts[0] == "node" ? String(parts[2]) : nil
        }
        nodePIDs = pids("ledger node pid ")
    }

    /// The `ledger` executable, built beside the test bundle.
    static var ledger: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger")
    }

    /// Starts one more `ledger node` on the cluster (a node joining); stopped by `down` only if
    /// the test stops it itself.
    func startNode(_ name: String) throws -> Process {
        let process = Process()
        process.executableURL = Self.ledger
        process.arguments = ["node", "--nats", url, "--store", storePath(name), "--name", name]
        let log = FileHandle(forWritingAtPath: storePath("\(name).log")) ?? {
            FileManager.default.createFile(atPath: storePath("\(name).log"), contents: nil)
            return FileHandle(forWritingAtPath: storePath("\(name).log"))
        }()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        return process
    }

    /// Stops the servers and removes their data.
    func down() {
        _ = try? Self.run(["down", "--dir", directory.path])
        try? FileManager.default.removeItem(at: directory)
    }

    /// What the nodes' logs say about `partition` (and about their leases as a whole), the
    /// last `lines` of it: for a test that waited in vain for the partition to be answered.
    func logs(about partition: Int, lines: Int = 30) -> String {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".log") && !$0.hasPrefix("nats") }.sorted()
        let mentions = [" partition \(partition) ", " partition \(partition):", "partitions", "leases", "heartbeat", "stopping"]
        return files.map { file in
            let text = (try? String(contentsOfFile: storePath(file), encoding: .utf8)) ?? ""
            let relevant = text.split(separator: "\n").filter { line in mentions.contains { line.contains($0) } || line.hasSuffix(" partition \(partition)") }
            return "\(file):\n" + relevant.suffix(lines).map { "    \($0)" }.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// A fresh store path inside the cluster's directory.
    func storePath(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = repository.appendingPathComponent("Tools/cluster")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

/// Stops `nodes` at once, each on a thread of its own: a node's stop waits up to a couple of
/// seconds for its partitions' fetches to end.
func stopTogether(_ nodes: [ClusterNode]) {
    DispatchQueue.concurrentPerform(iterations: nodes.count) { nodes[$0].stop() }
}

/// Polls `condition` every 50 ms for up to `seconds`.
func eventually(_ seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return try condition()
}

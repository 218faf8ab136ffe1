import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Cluster) import LedgerCluster

/// The cluster cases: a 3-server NATS JetStream cluster with 1, 2 and 3 `ledger node`
/// processes (`Tools/cluster up`), each fed the same events through a `ClusterClient` in this
/// process.
enum ClusterBench {
    /// The repository (this file is Tools/Benchmarks/Sources/Benchmarks/ClusterBench.swift).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// The `ledger` command the nodes run: the release build `Tools/bench` makes.
    static let ledger = repository.appendingPathComponent(".build/release/ledger")

    static let nodeCounts = [1, 2, 3]

    /// Whether this machine can run the cases: `nats-server` and the release `ledger`.
    static var available: String? {
        let paths = ((ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/sbin").split(separator: ":")
        guard paths.contains(where: { FileManager.default.isExecutableFile(atPath: "\($0)/nats-server") }) else {
            return "nats-server is not installed (Tools/setup installs it)"
        }
        guard FileManager.default.isExecutableFile(atPath: ledger.path) else {
            return "no release ledger at \(ledger.path) (Tools/bench builds it)"
        }
        return nil
    }

    struct Figures {
        /// Events per second, appended in batches of `Bench.batch`.
        var perSecond: Double
        /// One-event appends, one after another: each returns once its holder has folded the
        /// event (read-your-writes), so this is the time from publishing to visible.
        var visibleP50ms: Double
        var visibleP99ms: Double
    }

    /// Starts a cluster with `nodes` nodes in `directory`, appends `events` in batches, then
    /// `singles` one at a time, and stops it.
    static func measure(nodes: Int, events: [EventDraft], singles: [EventDraft], directory: URL) throws -> Figures {
        let output = try tool(["up", "--nodes", String(nodes), "--dir", directory.path, "--ledger", ledger.path])
        defer { _ = try? tool(["down", "--dir", directory.path]) }
        guard let url = output.split(separator: "\n").first.map(String.init), url.hasPrefix("nats://") else {
            throw BenchFailure("Tools/cluster up printed no NATS URL: \(output)")
        }
        let client = try ClusterClient(urls: url)
        defer { client.close() }
        // A first append reaches every partition once (their holders have caught up).
        _ = try client.append(Array(events.prefix(64)))
        let rest = Array(events.dropFirst(64))
        let start = ContinuousClock.now
        for batch in stride(from: 0, to: rest.count, by: Bench.batch) {
            _ = try client.append(Array(rest[batch ..< min(batch + Bench.batch, rest.count)]))
        }
        let seconds = (ContinuousClock.now - start).seconds
        var latencies: [Double] = []
        for single in singles {
            let began = ContinuousClock.now
            _ = try client.append([single])
            latencies.append((ContinuousClock.now - began).seconds * 1000)
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        return Figures(perSecond: Double(rest.count) / max(seconds, 1e-9), visibleP50ms: percentile(0.5), visibleP99ms: percentile(0.99))
    }

    private static func tool(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = repository.appendingPathComponent("Tools/cluster")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchFailure("Tools/cluster \(arguments.joined(separator: " ")) failed") }
        return String(decoding: data, as: UTF8.self)
    }
}

import Foundation
@_spi(Storage) import LedgerCore
@testable import LedgerCluster

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
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":")
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/nats-server") }
    }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-cluster-\(UUID().uuidString)")
        let output = try Self.run(["up", "--dir", directory.path])
        let lines = output.split(separator: "\n").map(String.init)
        guard let first = lines.first, first.hasPrefix("nats://") else {
            throw LedgerError(.unavailable, "Tools/cluster up printed no NATS URL: \(output)")
        }
        url = first
        serverPIDs = lines.compactMap { line in line.hasPrefix("nats-server pid ") ? Int32(line.dropFirst("nats-server pid ".count)) : nil }
    }

    /// Stops the servers and removes their data.
    func down() {
        _ = try? Self.run(["down", "--dir", directory.path])
        try? FileManager.default.removeItem(at: directory)
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

/// Polls `condition` every 50 ms for up to `seconds`.
func eventually(_ seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return try condition()
}

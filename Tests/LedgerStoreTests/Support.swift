import Foundation
import Glibc
import LedgerCore
import LedgerStore

/// A path for a store in a fresh temporary directory, removed when `body` returns.
func withStorePath<R>(_ body: (String) throws -> R) throws -> R {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tests-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try body(dir.appendingPathComponent("store.lmdb").path)
}

func withStorePath<R>(_ body: (String) async throws -> R) async throws -> R {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tests-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try await body(dir.appendingPathComponent("store.lmdb").path)
}

/// A small valid event (`usage.recorded`); `n` varies every field that matters. A `payload`
/// given replaces the encoded data as is.
func draft(_ subject: String, _ n: Int = 0, payload: [UInt8]? = nil) -> EventDraft {
    var usage = UsageRecorded()
    usage.feature = "feature \(n)"
    usage.count = Int64(n) + 1
    return EventDraft(subject: subject, type: UsageRecorded.type, schemaVersion: UsageRecorded.schemaVersion,
                      occurredAt: Timestamp(milliseconds: 1_772_357_400_000 + Int64(n)),
                      source: .app, meta: ["n": "\(n)"], payload: payload ?? EventCatalog.encode(usage.eventData))
}

/// The `ledger-test-child` executable, built beside the test bundle.
func childExecutable() -> URL {
    let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    return exe.deletingLastPathComponent().appendingPathComponent("ledger-test-child")
}

/// A running child process whose standard output can be read line by line.
final class Child {
    let process = Process()
    private let output = Pipe()
    private var buffer = Data()

    init(_ arguments: [String]) throws {
        process.executableURL = childExecutable()
        process.arguments = arguments
        process.standardOutput = output
        try process.run()
    }

    /// Reads until a line equal to `line` (or starting with it) arrives, or the child exits.
    func waitFor(lineStartingWith prefix: String) -> String? {
        while true {
            if let text = String(data: buffer, encoding: .utf8),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                return String(line)
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// SIGKILL, then everything it printed.
    func kill() -> [String] {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        buffer.append(output.fileHandleForReading.readDataToEndOfFile())
        return String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Waits for a normal exit and returns everything it printed.
    func finish() -> (status: Int32, lines: [String]) {
        buffer.append(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init))
    }
}

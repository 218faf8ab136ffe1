import Foundation
import Glibc

/// A path for a store in a fresh temporary directory, removed when `body` returns.
public func withStorePath<R>(_ body: (String) throws -> R) throws -> R {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tests-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try body(dir.appendingPathComponent("store.lmdb").path)
}

public func withStorePath<R>(_ body: (String) async throws -> R) async throws -> R {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tests-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try await body(dir.appendingPathComponent("store.lmdb").path)
}

/// The `ledger-test-child` executable, built beside the test bundle.
public func childExecutable() -> URL {
    let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    return exe.deletingLastPathComponent().appendingPathComponent("ledger-test-child")
}

/// A running child process whose standard output can be read line by line.
public final class Child {
    public let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private var buffer = Data()

    public init(_ arguments: [String]) throws {
        process.executableURL = childExecutable()
        process.arguments = arguments
        process.standardOutput = output
        process.standardInput = input
        try process.run()
    }

    /// Writes `line` to the child's standard input.
    public func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Reads until a line equal to `line` (or starting with it) arrives, or the child exits.
    public func waitFor(lineStartingWith prefix: String) -> String? {
        waitFor { $0.hasPrefix(prefix) }
    }

    /// Reads until a line `matches` arrives (the first of all it printed; the last may be cut
    /// short), or the child exits.
    public func waitFor(line matches: (Substring) -> Bool) -> String? {
        while true {
            if let text = String(data: buffer, encoding: .utf8), let line = text.split(separator: "\n").first(where: matches) {
                return String(line)
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// SIGKILL, then everything it printed.
    public func kill() -> [String] {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        buffer.append(output.fileHandleForReading.readDataToEndOfFile())
        return String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Waits for a normal exit and returns everything it printed.
    public func finish() -> (status: Int32, lines: [String]) {
        buffer.append(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init))
    }
}

import Foundation
@_spi(Storage) import LedgerDemo

/// A failure of the benchmark itself, printed as `ledger-bench: message`.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A progress line on standard error, redrawn at most ten times a second: only on a terminal,
/// never with --json.
final class Progress {
    private let enabled: Bool
    private var lastDraw = ContinuousClock.now
    private var drawn = false

    init(enabled: Bool) { self.enabled = enabled && isatty(2) == 1 }

    func update(_ phase: String, done: Int, total: Int, unit: String = "events") {
        guard enabled, ContinuousClock.now - lastDraw >= .milliseconds(100) else { return }
        lastDraw = .now
        FileHandle.standardError.write(Data("\r\u{1B}[K\(phase) \(formatCount(done))/\(formatCount(total)) \(unit)".utf8))
        drawn = true
    }

    func clear() {
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        drawn = false
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

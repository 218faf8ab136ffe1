import Foundation

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

/// 1234567 → "1,234,567".
func formatCount(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return (n < 0 ? "-" : "") + out
}

/// Rows as aligned columns.
func tableLines(_ rows: [[String]], indent: String = "", rightAligned: Set<Int> = []) -> [String] {
    guard let columns = rows.map(\.count).max() else { return [] }
    var widths = [Int](repeating: 0, count: columns)
    for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
    return rows.map { row in
        let cells = row.enumerated().map { i, cell in
            let pad = String(repeating: " ", count: widths[i] - cell.count)
            return rightAligned.contains(i) ? pad + cell : (i == row.count - 1 ? cell : cell + pad)
        }
        return indent + cells.joined(separator: "  ")
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// 1234567 → "1,234,567": counts as the demo, the command line and the benchmark print them.
@_spi(Storage) public func formatCount(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return (n < 0 ? "-" : "") + out
}

/// Rows as columns padded to their widest cell, two spaces apart, trailing spaces trimmed; the
/// columns in `rightAligned` (numbers) are padded on the left.
@_spi(Storage) public func tableLines(_ rows: [[String]], indent: String = "", rightAligned: Set<Int> = []) -> [String] {
    guard let columns = rows.map(\.count).max() else { return [] }
    var widths = [Int](repeating: 0, count: columns)
    for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
    return rows.map { row in
        let cells = row.enumerated().map { i, cell in
            let pad = String(repeating: " ", count: widths[i] - cell.count)
            if rightAligned.contains(i) { return pad + cell }
            return i == row.count - 1 ? cell : cell + pad
        }
        let line = indent + cells.joined(separator: "  ")
        return String(line[..<(line.lastIndex { $0 != " " }.map { line.index(after: $0) } ?? line.startIndex)])
    }
}

import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerDemo
import LedgerModels
@_spi(Storage) import LedgerProjections

/// What the command line may do to its output: colour only on a terminal and never when
/// `NO_COLOR` is set (no-color.org); progress only on a terminal.
enum Terminal {
    static let environment = ProcessInfo.processInfo.environment

    /// Standard error's terminal width: the terminal's own, else `$COLUMNS`, else 80.
    static var columns: Int {
        var size = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let text = environment["COLUMNS"], let columns = Int(text), columns > 0 { return columns }
        return 80
    }

    /// Standard output is a terminal that takes colour.
    static let colourOut = isatty(1) == 1 && allowsColour
    /// Standard error is a terminal that takes colour.
    static let colourErr = isatty(2) == 1 && allowsColour

    static var allowsColour: Bool {
        (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
    }

    enum Style: String {
        case bold = "1", dim = "2", red = "31", green = "32", yellow = "33", blue = "34", cyan = "36"
    }

    /// `text` in `style` when standard output takes colour, else as it is.
    static func paint(_ text: String, _ style: Style, stderr: Bool = false) -> String {
        guard stderr ? colourErr : colourOut else { return text }
        return "\u{1B}[\(style.rawValue)m\(text)\u{1B}[0m"
    }

    /// Writes a line to standard error.
    static func warn(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// `text` from outside (event data, a subject, a key, a file name, a message quoting
    /// input) made harmless for a terminal by the ledger's one rule, `VisibleText.shown`:
    /// every control (C0, DEL, C1: escape sequences, carriage returns, newlines), bidirectional
    /// and invisible character written as `‹U+XXXX›`, so that data can neither recolour, clear
    /// nor overwrite what a support agent reads, nor reorder or hide part of it. JSON output
    /// escapes controls instead (`JSON.Escaping.output`).
    static func safe(_ text: String) -> String { VisibleText.shown(text) }

    /// `safe(_:)` line by line: a message of several lines keeps its line breaks.
    static func safeLines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { safe(String($0)) }.joined(separator: "\n")
    }

    /// Input problems on standard error, one `FILE:LINE: POINTER: MESSAGE` line each (SPEC §5),
    /// each made safe: a key, a file name or a value the message quotes is outside text.
    static func report(_ problems: [InputProblem], then more: String? = nil) {
        warn((problems.map { safe($0.description) } + (more.map { [$0] } ?? [])).joined(separator: "\n"))
    }
}

/// A progress bar on standard error, redrawn in place at most ten times a second, with the rate
/// and the time left: only on a terminal, never with --json. `clear()` removes it before the
/// command prints its result.
/// Whether a progress line is on standard error now: Ctrl-C then ends it before the process
/// stops (`ProgressBar.endLineOnInterrupt`). Written only by the main thread's progress bar.
nonisolated(unsafe) private var progressLineOpen = false

final class ProgressBar {
    private let enabled: Bool
    private var lastDraw = ContinuousClock.now
    private var phaseStart = ContinuousClock.now
    private var phase = ""
    private var drawn = false
    /// The terminal's width: a line never wraps (a wrapped line leaves a stale copy per redraw).
    private let columns = Terminal.columns
    /// TERM=dumb takes no escape sequence: a line is cleared by writing spaces over it.
    private let dumb = Terminal.environment["TERM"] == "dumb"
    private var lastLength = 0

    init(enabled: Bool) {
        self.enabled = enabled && isatty(2) == 1
        if self.enabled { Self.endLineOnInterrupt() }
    }

    /// On Ctrl-C, ends an open progress line (so the shell's prompt starts on its own line) and
    /// stops with the usual status, 130.
    private static func endLineOnInterrupt() {
        signal(SIGINT) { _ in
            if progressLineOpen { _ = write(2, "\n", 1) }
            _exit(130)
        }
    }

    /// Writes `line` over the current one, cut to the terminal's width.
    private func draw(_ line: String) {
        var shown = line
        if shown.count > columns - 1 { shown = String(shown.prefix(max(columns - 2, 1))) + "…" }
        let text = dumb ? "\r" + shown + String(repeating: " ", count: max(0, lastLength - shown.count)) : "\r\u{1B}[K" + shown
        lastLength = shown.count
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// `done` of `total` (nil: unknown) units of `phase`, e.g. ("appending", 1200, 5000, "events").
    func update(_ phase: String, done: Int, total: Int?, unit: String = "events") {
        guard enabled else { return }
        let now = ContinuousClock.now
        if phase != self.phase {
            self.phase = phase
            phaseStart = now
        } else if now - lastDraw < .milliseconds(100) {
            return
        }
        lastDraw = now
        let elapsed = (now - phaseStart).seconds
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var line = phase
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let width = 24
            let filled = Int(fraction * Double(width))
            line += " [" + String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled) + "]"
            line += " \(formatCount(done))/\(formatCount(total)) \(unit)"
            if rate > 0 { line += String(format: ", %@/s, ETA %@", formatCount(Int(rate)), formatDuration(Double(total - min(done, total)) / rate)) }
        } else {
            line += " \(formatCount(done)) \(unit)"
            if rate > 0 { line += ", \(formatCount(Int(rate)))/s" }
        }
        draw(line)
        drawn = true
        progressLineOpen = true
    }

    /// A rebuild's or verify's own progress report.
    func show(_ progress: RebuildProgress) {
        update(progress.phase.rawValue, done: Int(progress.done), total: Int(progress.total),
               unit: progress.phase == .writing ? "states" : "events")
    }

    func clear() {
        if drawn {
            FileHandle.standardError.write(Data((dumb ? "\r" + String(repeating: " ", count: lastLength) + "\r" : "\r\u{1B}[K").utf8))
        }
        drawn = false
        progressLineOpen = false
        lastLength = 0
    }
}

/// `items` after a bold `label`, `separator` between them, broken between items into lines of
/// at most `width` columns, the lines after the first indented by two spaces: a summary line
/// that fits the terminal. An item is never split; one longer than a line stands alone.
func wrapped(_ label: String, _ items: [String], separator: String = "   ", width: Int = Terminal.columns) -> String {
    var lines: [String] = []
    var line = label.isEmpty ? "" : label + "  "
    var painted = label.isEmpty ? "" : Terminal.paint(label, .bold) + "  "
    var fresh = true
    for item in items {
        if fresh || line.count + separator.count + item.count <= width {
            let joined = (fresh ? "" : separator) + item
            line += joined
            painted += joined
        } else {
            lines.append(painted)
            line = "  " + item
            painted = line
        }
        fresh = false
    }
    lines.append(painted)
    return lines.joined(separator: "\n")
}

/// Prose after a bold `label`, wrapped at spaces to the terminal (`wrapped(_:_:separator:width:)`).
func wrapped(_ label: String, prose: String, width: Int = Terminal.columns) -> String {
    wrapped(label, prose.split(separator: " ").map(String.init), separator: " ", width: width)
}

/// "1 customer", "2 customers", "147,155 customers" (`formatCount`).
func counted<N: BinaryInteger>(_ n: N, _ singular: String, _ plural: String? = nil) -> String {
    "\(formatCount(Int(clamping: n))) \(n == 1 ? singular : plural ?? singular + "s")"
}

/// Seconds as "42 s" or "3 min 5 s".
func formatDuration(_ seconds: Double) -> String {
    guard seconds.isFinite, seconds >= 0 else { return "?" }
    let s = Int(seconds.rounded())
    return s < 60 ? "\(s) s" : "\(s / 60) min \(s % 60) s"
}



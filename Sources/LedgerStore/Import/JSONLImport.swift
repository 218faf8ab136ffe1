import Glibc
import LedgerCore

/// Why a JSONL append appended nothing.
public enum ImportError: Error, Sendable, CustomStringConvertible {
    /// Lines that break the event format: every one found up to the report limit, and how many
    /// there were in all.
    case input(InputProblems, total: Int)
    /// The input could not be read, or the log refused the batch (an id conflict, storage).
    case ledger(LedgerError)

    public var description: String {
        switch self {
        case .input(let problems, let total):
            let more = total - problems.problems.count
            return problems.description + (more > 0 ? "\n… and \(more) more problem\(more == 1 ? "" : "s")" : "")
        case .ledger(let error):
            return error.description
        }
    }
}

/// Appending JSONL files (SPEC §2.1, §5): each file one atomic batch, checked in full first.
///
/// Two passes over each file, both streaming: the first decodes every line and collects
/// every problem (nothing is written, no lock is held); only when no file has any does the
/// second decode again and append each file inside one write transaction. Memory stays
/// bounded however many lines a file has. Standard input (`-`) is copied to a temporary file
/// during the first pass so that it can be read twice.
public enum JSONLImport {
    /// How many problems are reported in detail; the rest are counted.
    public static let problemLimit = 100

    /// The result of checking one input.
    public struct Check: Sendable {
        /// The input as named (`-` for standard input).
        public var name: String
        /// The file the second pass reads (a temporary copy for standard input).
        public var path: String
        /// Events found (blank lines are skipped).
        public var events = 0
        /// Problems, up to the limit.
        public var problems: [InputProblem] = []
        /// All problems found.
        public var problemCount = 0
    }

    /// Reads and checks one input without appending anything.
    /// - Throws: `LedgerError` when the input cannot be read.
    public static func check(_ name: String, restoring: Bool, limit: Int = problemLimit) throws(LedgerError) -> Check {
        var reader = try LineReader(path: name, keepBytes: EnvelopeDecoder.maxEventBytes + 1)
        var spool: Spool? = name == "-" ? try Spool() : nil
        var check = Check(name: name, path: spool?.path ?? name)
        var finished = false
        defer { if !finished, let spool { unlink(spool.path) } }
        var lastPosition: (line: Int, position: UInt64)?
        while let line = try reader.next() {
            try spool?.write(line.bytes)
            if isBlank(line.bytes) { continue }
            check.events += 1
            var problems: [InputProblem] = []
            switch EnvelopeDecoder.decode(line.bytes, length: line.length, file: name, line: line.number) {
            case .failure(let failure):
                problems = failure.problems
            case .success(let envelope) where restoring:
                if envelope.position == nil {
                    problems.append(InputProblem(file: name, line: line.number, pointer: "/position", message: "missing; --restore keeps the positions that export wrote"))
                }
                if envelope.recordedAt == nil {
                    problems.append(InputProblem(file: name, line: line.number, pointer: "/recordedAt", message: "missing; --restore keeps the recordedAt that export wrote"))
                }
                if let position = envelope.position {
                    if let last = lastPosition, position != last.position + 1 {
                        problems.append(InputProblem(file: name, line: line.number, pointer: "/position",
                                                     message: "expected \(last.position + 1) after position \(last.position) on line \(last.line); a restore keeps positions gap-free"))
                    }
                    lastPosition = (line.number, position)
                }
            case .success:
                break
            }
            check.problemCount += problems.count
            check.problems.append(contentsOf: problems.prefix(max(0, limit - check.problems.count)))
        }
        try spool?.finish()
        finished = true
        return check
    }

    /// Checks every input, then appends each as one atomic batch.
    /// - Throws: `ImportError.input` with every problem of every input when any has one
    ///   (nothing appended); `ImportError.ledger` when an input cannot be read or a batch is
    ///   refused (earlier inputs stay appended; that batch and later ones are not).
    public static func append(_ names: [String], to log: EventLog, restoring: Bool = false) throws(ImportError) -> StreamSummary {
        var checks: [Check] = []
        defer { for check in checks where check.path != check.name { unlink(check.path) } }
        var problems: [InputProblem] = []
        var total = 0
        do {
            for name in names {
                let check = try Self.check(name, restoring: restoring, limit: problemLimit - problems.count)
                checks.append(check)
                problems += check.problems
                total += check.problemCount
            }
        } catch {
            throw .ledger(error)
        }
        guard total == 0 else { throw .input(InputProblems(problems), total: total) }

        var summary = StreamSummary()
        for check in checks {
            do {
                let batch = try log.appendStream(restoring: restoring) { () throws -> any StreamedEvents in
                    try JSONLEvents(path: check.path, name: check.name)
                }
                summary = summary.merged(with: batch)
            } catch {
                throw .ledger(error)
            }
        }
        return summary
    }

    static func isBlank(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }
}

/// The events of a checked JSONL input, decoded again one line at a time.
final class JSONLEvents: StreamedEvents {
    private var reader: LineReader
    private let name: String

    init(path: String, name: String) throws(LedgerError) {
        reader = try LineReader(path: path, keepBytes: EnvelopeDecoder.maxEventBytes + 1)
        self.name = name
    }

    func next() throws -> StreamedEvent? {
        while let line = try reader.next() {
            if JSONLImport.isBlank(line.bytes) { continue }
            switch EnvelopeDecoder.decode(line.bytes, length: line.length, file: name, line: line.number) {
            case .success(let envelope):
                return StreamedEvent(draft: envelope.draft, file: name, line: line.number,
                                     position: envelope.position, recordedAt: envelope.recordedAt)
            case .failure(let problems):
                // The input changed between the two passes.
                var error = LedgerError(.invalidEvent, problems.description, field: problems.problems.first?.pointer)
                error.file = name
                error.line = line.number
                throw error
            }
        }
        return nil
    }
}

/// A temporary file holding a copy of standard input.
private struct Spool {
    let path: String
    private let fd: Int32
    private var buffer: [UInt8] = []

    init() throws(LedgerError) {
        let directory = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(directory)/ledger-stdin-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw LedgerError(.storage, "cannot create a temporary file in \(directory) to hold standard input: \(String(cString: strerror(errno))); set TMPDIR")
        }
        self.fd = fd
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    mutating func write(_ line: [UInt8]) throws(LedgerError) {
        buffer.append(contentsOf: line)
        buffer.append(0x0A)
        if buffer.count >= 1 << 20 { try flush() }
    }

    mutating func finish() throws(LedgerError) {
        try flush()
        close(fd)
    }

    private mutating func flush() throws(LedgerError) {
        var offset = 0
        while offset < buffer.count {
            let written = buffer[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else {
                throw LedgerError(.storage, "cannot write the copy of standard input to \(path): \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

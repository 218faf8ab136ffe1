import Glibc
@_spi(Storage) import LedgerCore

/// Why a JSONL append appended nothing.
@_spi(Storage) public enum ImportError: Error, Sendable, CustomStringConvertible {
    /// Lines that break the event format: every one found up to the report limit, and how many
    /// there were in all.
    case input(InputProblems, total: Int)
    /// The input could not be read, or the log refused a batch (an id conflict, storage):
    /// `appended` says what the inputs before it appended (each input is a batch of its own).
    case ledger(LedgerError, appended: StreamSummary = StreamSummary())

    public var description: String {
        switch self {
        case .input(let problems, let total):
            let more = total - problems.problems.count
            return problems.description + (more > 0 ? "\n… and \(more) more problem\(more == 1 ? "" : "s")" : "")
        case .ledger(let error, _):
            return error.description
        }
    }
}

/// Appending JSONL files (SPEC §2.1, §5): each file one atomic batch, checked in full first.
///
/// Two streaming passes: the first decodes and checks every line of every file, collecting
/// every problem, and writes each checked event, already encoded, to a temporary spool file
/// (nothing is appended, no lock is held). Only when no file has a problem does the second
/// pass read each spool back and append it inside one write transaction. Memory stays bounded
/// however many lines a file has, each line is parsed once, and standard input (`-`) works
/// like any file.
@_spi(Storage) public enum JSONLImport {
    /// How many problems are reported in detail; the rest are counted.
    public static let problemLimit = 100

    /// The result of checking one input.
    public struct Check: Sendable {
        /// The input as named (`-` for standard input).
        public var name: String
        /// The spool the second pass reads: the checked events, encoded.
        public var spool: Spool
        /// Problems, up to the limit.
        public var problems: [InputProblem] = []
        /// All problems found.
        public var problemCount = 0
        /// Events spooled (what the second pass appends when there is no problem).
        public var events = 0
    }

    /// How far an import has got, for a progress display.
    public struct Progress: Sendable, Hashable {
        public enum Phase: String, Sendable {
            /// Reading and checking the inputs: `done` and `total` count bytes.
            case checking
            /// Appending the checked events: `done` and `total` count events.
            case appending
        }
        public var phase: Phase
        public var done: Int
        /// `nil` when unknown (standard input while checking).
        public var total: Int?
    }

    /// Reads and checks one input without appending anything, spooling its encoded events
    /// until the first problem. The spool has no name: it goes when the check does.
    /// - Throws: `LedgerError` when the input cannot be read or the spool cannot be written.
    public static func check(_ name: String, restoring: Bool, limit: Int = problemLimit,
                             progress: (_ bytesRead: Int) -> Void = { _ in }) throws(LedgerError) -> Check {
        var bytesRead = 0
        var reader = try LineReader(path: name, keepBytes: EnvelopeDecoder.maxLineBytes + 1)
        var spool = try SpoolWriter()
        var check = Check(name: name, spool: spool.spool)
        var lastPosition: (line: Int, position: UInt64)?
        while let line = try reader.next() {
            bytesRead += line.length + 1
            if line.number % 4096 == 0 { progress(bytesRead) }
            if isBlank(line.bytes) { continue }
            var problems: [InputProblem] = []
            switch EnvelopeDecoder.decode(line.bytes, length: line.length, file: name, line: line.number) {
            case .failure(let failure):
                problems = failure.problems
            case .success(let envelope):
                if restoring {
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
                }
                if problems.isEmpty && check.problemCount == 0 {
                    try spool.write(StreamedEvent(draft: envelope.draft, line: line.number,
                                                  position: restoring ? envelope.position : nil,
                                                  recordedAt: restoring ? envelope.recordedAt : nil))
                    check.events += 1
                }
            }
            check.problemCount += problems.count
            check.problems.append(contentsOf: problems.prefix(max(0, limit - check.problems.count)))
        }
        try spool.flush()
        return check
    }

    /// Checks every input, then appends each as one atomic batch.
    /// - Throws: `ImportError.input` with every problem of every input when any has one
    ///   (nothing appended); `ImportError.ledger` when an input cannot be read or a batch is
    ///   refused (earlier inputs stay appended, and the error says what they appended; that
    ///   batch and later ones are not).
    /// - Parameters:
    ///   - names: the JSONL files, each one batch, in order (`-` is standard input).
    ///   - log: the log to append to.
    ///   - restoring: whether the inputs are an export being restored: every line must then
    ///     carry its `position` (gap-free) and `recordedAt`, which the log keeps.
    ///   - progress: called now and then with how far it has got.
    ///   - commitEvery: commit after this many events instead of once per input: memory then
    ///     stays bounded however long an input is (one write transaction keeps what it writes
    ///     in memory until it commits, LMDB up to 512 MiB of pages and the read models their
    ///     changes), but an input refused half-way stays appended in part (the error says how
    ///     far). `nil`: each input is one atomic batch.
    public static func append(_ names: [String], to log: EventLog, restoring: Bool = false, commitEvery: Int? = nil,
                              progress: (Progress) -> Void = { _ in }) throws(ImportError) -> StreamSummary {
        var checks: [Check] = []
        var problems: [InputProblem] = []
        var total = 0
        do {
            let sizes = names.map { name -> Int? in
                var info = stat()
                return name != "-" && stat(name, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) : nil
            }
            let totalBytes = sizes.contains { $0 == nil } ? nil : sizes.reduce(0) { $0 + ($1 ?? 0) }
            var before = 0
            for name in names {
                let check = try Self.check(name, restoring: restoring, limit: problemLimit - problems.count) { read in
                    progress(Progress(phase: .checking, done: before + read, total: totalBytes))
                }
                before += sizes[checks.count] ?? 0
                checks.append(check)
                problems += check.problems
                total += check.problemCount
            }
        } catch {
            throw .ledger(error)
        }
        guard total == 0 else { throw .input(InputProblems(problems), total: total) }

        var summary = StreamSummary()
        let events = checks.reduce(0) { $0 + $1.events }
        var appended = 0
        let limit = max(commitEvery ?? Int.max, 1)
        for check in checks {
            var offset: off_t = 0
            var left = check.events
            repeat {
                do {
                    let before = appended
                    var next: off_t = 0
                    // The reader lives only inside this call, so the closure does not really escape.
                    let batch = try withoutActuallyEscaping(progress) { report throws(LedgerError) in
                        try log.appendStream(restoring: restoring) { () throws -> any StreamedEvents in
                            try SpoolReader(check.spool, name: check.name, from: offset, limit: limit) { read, at in
                                next = at
                                report(Progress(phase: .appending, done: before + read, total: events))
                            }
                        }
                    }
                    let count = min(left, limit)
                    (appended, left, offset) = (appended + count, left - count, next)
                    summary = summary.merged(with: batch)
                } catch {
                    throw .ledger(error, appended: summary)
                }
            } while left > 0
        }
        return summary
    }

    /// The events of a JSONL batch held in memory (a request's body) named `name`, checked as
    /// `check(_:restoring:limit:progress:)` checks a file, each with its line number; or its
    /// first problems (at most `limit`).
    public static func events(in bytes: [UInt8], named name: String, limit: Int = problemLimit)
        -> Result<[(line: Int, draft: EventDraft)], InputProblems> {
        var events: [(line: Int, draft: EventDraft)] = []
        var problems: [InputProblem] = []
        var number = 0
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            let text = Array(line)
            if isBlank(text) { continue }
            switch EnvelopeDecoder.decode(text, file: name, line: number) {
            case .failure(let failure): problems += failure.problems
            case .success(let envelope): events.append((number, envelope.draft))
            }
            if problems.count >= limit { break }
        }
        return problems.isEmpty ? .success(events) : .failure(InputProblems(Array(problems.prefix(limit))))
    }

    static func isBlank(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }
}

/// The checked events of one input, in a temporary file that is unlinked as soon as it is
/// created: it lives as long as its descriptor, so a killed append leaves nothing behind.
@_spi(Storage) public final class Spool: Sendable {
    let descriptor: Int32
    /// Where it was created, for messages (the name is gone).
    let directory: String

    init() throws(LedgerError) {
        let directory = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(directory)/ledger-append-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else {
            throw LedgerError(.storage, "cannot create a temporary file in \(directory) for the checked events: \(String(cString: strerror(errno))); set TMPDIR")
        }
        template.withUnsafeBufferPointer { buffer in _ = buffer.baseAddress.map { unlink($0) } }
        (self.descriptor, self.directory) = (fd, directory)
    }

    deinit { close(descriptor) }
}

/// Writes a spool: each event as
/// `u64 line ‖ u64 position (0: none) ‖ u8 has recordedAt ‖ u32 length ‖ record`, the record in
/// the log's own format (version and hash zero, recordedAt the one to restore), all little-endian.
private struct SpoolWriter {
    let spool: Spool
    private var fd: Int32 { spool.descriptor }
    private var buffer: [UInt8] = []

    init() throws(LedgerError) { spool = try Spool() }

    mutating func write(_ event: StreamedEvent) throws(LedgerError) {
        let record = EventRecord.encode(event.draft, version: 0, recordedAt: event.recordedAt ?? Timestamp(milliseconds: 0))
        buffer.appendLittleEndian(UInt64(event.line ?? 0))
        buffer.appendLittleEndian(event.position ?? 0)
        buffer.append(event.recordedAt == nil ? 0 : 1)
        buffer.appendLittleEndian(UInt32(record.count))
        buffer.append(contentsOf: record)
        if buffer.count >= 1 << 20 { try flush() }
    }

    mutating func flush() throws(LedgerError) {
        var offset = 0
        while offset < buffer.count {
            let written = buffer[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else {
                throw LedgerError(.storage, "cannot write the checked events to a temporary file in \(spool.directory): \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Reads a spool back from its start, one event at a time, in bounded memory.
private final class SpoolReader: StreamedEvents {
    private let spool: Spool
    private var fd: Int32 { spool.descriptor }
    private var offset: off_t = 0
    private var path: String { "a temporary file in \(spool.directory)" }
    private let name: String
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    private var read = 0
    private let limit: Int
    /// The spool's offset of the next event (`offset` less what the buffer holds unread).
    private var consumed: off_t { offset - off_t(buffer.count - start) }
    private let progress: (_ read: Int, _ consumed: off_t) -> Void

    /// A reader of `limit` events from the spool's byte `from` (an event's start); `progress`
    /// hears how many it has read and the offset after them.
    init(_ spool: Spool, name: String, from: off_t = 0, limit: Int = .max,
         progress: @escaping (_ read: Int, _ consumed: off_t) -> Void) throws(LedgerError) {
        (self.spool, self.name, self.offset, self.limit, self.progress) = (spool, name, from, limit, progress)
    }

    /// Makes at least `count` unread bytes available; `false` at the end of the file.
    private func fill(_ count: Int) throws(LedgerError) -> Bool {
        while buffer.count - start < count {
            if atEnd { return false }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            var chunk = [UInt8](repeating: 0, count: max(1 << 20, count))
            let got = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
            offset += off_t(max(got, 0))
            guard got >= 0 else { throw LedgerError(.storage, "cannot read the checked events in \(path): \(String(cString: strerror(errno)))") }
            if got == 0 { atEnd = true } else { buffer.append(contentsOf: chunk[..<got]) }
        }
        return true
    }

    private func integer<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        var value: T = 0
        for i in 0..<MemoryLayout<T>.size { value |= T(buffer[offset + i]) << (8 * i) }
        return value
    }

    func next() throws -> StreamedEvent? {
        guard read < limit else { return nil }
        let header = 8 + 8 + 1 + 4
        guard try fill(header) else { return nil }
        let line = Int(integer(UInt64.self, at: start))
        let position = integer(UInt64.self, at: start + 8)
        let hasRecordedAt = buffer[start + 16] == 1
        let length = Int(integer(UInt32.self, at: start + 17))
        guard try fill(header + length) else {
            throw LedgerError(.storage, "the checked events in \(path) end early; append the input again")
        }
        var record = Array(buffer[(start + header)..<(start + header + length)])
        start += header + length
        record.append(contentsOf: [UInt8](repeating: 0, count: EventRecord.hashSize))
        let stored = try record.withUnsafeBytes { raw throws(LedgerError) in try EventRecord.decode(raw, position: UInt64(line)) }
        read += 1
        if read % 4096 == 0 || read == limit { progress(read, consumed) }
        return StreamedEvent(draft: stored.draft, file: name, line: line, position: position == 0 ? nil : position,
                             recordedAt: hasRecordedAt ? stored.recordedAt : nil)
    }
}

extension [UInt8] {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

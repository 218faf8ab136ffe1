import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

struct AppendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "append",
        abstract: "Append events from JSONL files; each file is one atomic batch.",
        discussion: """
            One event per line (SPEC §2.1). Every file is checked in full first: if any line of any file \
            is bad, every problem is reported as FILE:LINE: POINTER: MESSAGE and nothing is appended (exit 2). \
            An event whose id is already stored with the same content is a duplicate and skipped; a line \
            without an id gets one derived from its content, so appending a file twice appends it once. \
            The store is created (with the reference policy) if it does not exist.

            --restore keeps the position and recordedAt of each line (as `ledger export` wrote them); the \
            positions must continue the store's, so restore into an empty store.

            A file is one write transaction, which keeps what it writes in memory until it commits (LMDB \
            up to 512 MiB of pages, then it spills them; the read models their changes). For files of \
            millions of events, --commit-every N commits every N events: memory stays bounded, and a file \
            refused half-way stays appended up to the batch before (the error says how far).

            With --cluster, the files are checked whole first all the same, then go in batches of up \
            to 500 events, each event stored once whatever is sent again, but no file or batch atomic \
            as a whole (--restore and --commit-every do not apply).

            Examples:
              ledger append events.jsonl more.jsonl
              some-producer | ledger append -
              ledger export --store old.lmdb | ledger append --store new.lmdb --restore -
              ledger append --commit-every 50000 year.jsonl
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(name: .long, help: "Keep each line's position and recordedAt (restore an export into an empty store).")
    var restore = false

    @Option(name: .long, help: ArgumentHelp("Commit every N events rather than once per file: memory stays bounded however long a file is, but a file refused half-way stays appended in part.", valueName: "N"))
    var commitEvery: Int?

    @Argument(help: "JSONL files to append, or - for standard input.")
    var files: [String]

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one JSONL file, or - for standard input") }
        guard files.filter({ $0 == "-" }).count <= 1 else { throw ValidationError("standard input (-) can be read only once") }
        if let commitEvery, commitEvery < 1 { throw ValidationError("--commit-every must be at least 1") }
    }

    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        // A file that cannot be read is an input error, found before any store is made.
        for file in files where file != "-" && !FileManager.default.isReadableFile(atPath: file) {
            let why = FileManager.default.fileExists(atPath: file) ? "it cannot be read (permissions)" : "no such file"
            throw CommandFailure.input("cannot read \(file): \(why)")
        }
        if let url = try cluster.url(global) { return try appendToCluster(url) }
        let created = !FileManager.default.fileExists(atPath: global.storePath + "/data.mdb")
        let ledger = try global.openLedger(create: true)
        var closed = false
        defer { if !closed { ledger.close() } }
        /// A store this command made and appended nothing to goes again.
        func removeIfMade() {
            guard created else { return }
            ledger.close()
            closed = true
            try? FileManager.default.removeItem(atPath: global.storePath)
        }
        let summary: StreamSummary
        let progress = ProgressBar(enabled: !global.json)
        do {
            // The read models are updated in each file's own transaction.
            summary = try JSONLImport.append(files, to: ledger.log, restoring: restore, commitEvery: commitEvery) { step in
                progress.update(step.phase.rawValue, done: step.done, total: step.total, unit: step.phase == .checking ? "bytes" : "events")
            }
            progress.clear()
        } catch .input(let problems, let total) {
            progress.clear()
            removeIfMade()
            report(problems.problems, total: total)
            throw ExitCode(2)
        } catch .ledger(let error, let appended) {
            progress.clear()
            let before = appended.appended + appended.duplicates > 0 ? appended : nil
            // Each file (or each --commit-every batch) commits on its own: what committed before
            // the refused batch stays, and is said.
            let kept = before.map { "\(Self.sentence($0)) before this error (\(commitEvery == nil ? "the files before it" : "the batches before it")); nothing after was appended." }
            guard let file = error.file, let line = error.line else {
                if let kept { FileHandle.standardError.write(Data("ledger: \(kept)\n".utf8)) }
                throw error
            }
            // A batch the log refused because of one of its lines (an id conflict): report it
            // like an input problem, naming the line, with what committed before it.
            report([InputProblem(file: file, line: line, pointer: error.field ?? "/", message: error.message)], total: 1, appended: before)
            if let kept, !global.json { print(kept) }
            throw ExitCode(error.code == .storage ? 1 : 2)
        }
        if global.json {
            print(Self.shape(summary).text)
        } else {
            print(Self.sentence(summary) + ".")
        }
    }

    /// SPEC §5's `append` shape.
    static func shape(_ summary: StreamSummary) -> JSON {
        AppendResult.json(appended: summary.appended, duplicates: summary.duplicates, firstPosition: summary.firstPosition, lastPosition: summary.lastPosition)
    }

    /// "Appended 3 events at positions 7…9; 1 duplicate was already stored".
    static func sentence(_ summary: StreamSummary, verb: String = "Appended") -> String {
        var text = "\(verb) \(counted(summary.appended, "event"))"
        if let first = summary.firstPosition, let last = summary.lastPosition {
            text += first == last ? " at position \(first)" : " at positions \(first)…\(last)"
        }
        if summary.duplicates > 0 { text += "; \(counted(summary.duplicates, "duplicate")) \(summary.duplicates == 1 ? "was" : "were") already stored" }
        return text
    }

    /// Problems one per line on stderr (SPEC §5) and, with --json, as a list on stdout: with the
    /// `append` shape of what earlier files appended, when they did.
    private func report(_ problems: [InputProblem], total: Int, appended: StreamSummary? = nil) {
        Terminal.report(problems, then: total > problems.count
            ? "… and \(total - problems.count) more problems (the first \(problems.count) are shown); nothing was appended" : nil)
        if global.json {
            let errors = problems.map(\.json)
            var object = JSONObject()
            if let appended, case .object(let shape) = Self.shape(appended) { object = shape }
            object["errors"] = .array(errors)
            print(JSON.object(object).text)
        }
    }
}

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write events as canonical JSONL that `ledger append` reads back.",
        discussion: """
            One event per line in position order: sorted keys, UTC millisecond times, each event's data \
            in the schema version it was stored in, plus its position and recordedAt. Plain `append` \
            ignores those two; `append --restore` into an empty store keeps them.

            Examples:
              ledger export > all.jsonl
              ledger export --subject user-42
              ledger export --from 1001 > tail.jsonl
              ledger export --from 1001 --to 2000
              ledger export --subject user-42 --limit 10
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .long, help: "Only this subject's events.")
    var subject: String?

    @Option(name: .long, help: "Start at this position.")
    var from: UInt64 = 1

    @Option(name: .long, help: "End at this position (default: the last).")
    var to: UInt64?

    @Option(name: .long, help: "At most this many events.")
    var limit: Int?

    func validate() throws {
        guard from >= 1 else { throw ValidationError("--from is a position, from 1") }
        if let to, to < from { throw ValidationError("--to must not be before --from") }
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        if let subject, subject.isEmpty { throw ValidationError("--subject must not be empty") }
    }

    func run() throws {
        try global.requireStore()
        // A damaged page would make liblmdb fault half-way through the export: look first.
        if let problem = try EventLog.checkPages(path: global.storePath) {
            throw CommandFailure.failure("the store cannot be exported: \(problem)")
        }
        let log = try global.openLogForReading()
        defer { log.close() }
        // Positions are gap-free: a limit bounds a range read as well.
        let through = [to, limit.map { from + UInt64($0) - 1 }].compactMap { $0 }.min()
        if limit == 0 { return }
        let events = subject.map { log.events(subject: $0) } ?? log.events(from: from, through: through)
        var out: [UInt8] = []
        out.reserveCapacity(1 << 16)
        var written = 0
        try events.forEach { event in
            guard event.position >= from, event.position <= to ?? .max, written < limit ?? .max else { return }
            written += 1
            out.append(contentsOf: try EventLine.export(event))
            out.append(0x0A)
            if out.count >= 1 << 16 {
                FileHandle.standardOutput.write(Data(out))
                out.removeAll(keepingCapacity: true)
            }
        }
        FileHandle.standardOutput.write(Data(out))
    }
}

struct SchemasCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schemas",
        abstract: "Write the JSON Schemas of the event format, generated from the event catalog.",
        discussion: """
            Without --output, prints the schema of one event line. With it, writes event.schema.json and \
            events/<type>.v<version>.schema.json under the directory (the repository keeps them in Schemas/). \
            With --personal, lists the personal fields ("x-personal": true): the log stores them sealed \
            under their subject's key, and `ledger erase` makes them read as "[Deleted User]".

            Examples:
              ledger schemas --output Schemas
              ledger schemas --personal
            """
    )

    @Option(name: .long, help: "Directory to write every schema file into.")
    var output: String?

    @Flag(name: .long, help: "List the personal fields, by event type and JSON pointer.")
    var personal = false

    @Flag(name: .long, help: "Machine-readable JSON output (the schema on one line, or what was written).")
    var json = false

    func run() throws {
        if personal {
            let fields = PersonalData.catalogFields.flatMap { entry in entry.pointers.map { (entry.type, $0) } }
                + PersonalData.metaKeys.map { ("*", "/meta/" + $0) }
            if json {
                print(JSON.object([("personal", .array(fields.map { .object([("type", .string($0.0)), ("pointer", .string($0.1))]) }))]).text)
            } else {
                print("Personal fields (sealed under their subject's key; \"[Deleted User]\" once it is erased):")
                for (type, pointer) in fields { print("  " + (type == "*" ? "every type" : type).padding(toLength: 28, withPad: " ", startingAt: 0) + " " + pointer) }
            }
            return
        }
        guard let output else {
            print(json ? EventSchemas.envelope().serialized() : EventSchemas.envelope().pretty())
            return
        }
        for file in EventSchemas.files() {
            let url = URL(fileURLWithPath: output).appendingPathComponent(file.path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data((file.schema.pretty() + "\n").utf8).write(to: url)
        }
        if json {
            print(JSON.object([("directory", .string(output)), ("files", .int(EventSchemas.files().count))]).text)
        } else {
            print("Wrote \(EventSchemas.files().count) schema files under \(output).")
        }
    }
}

import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

struct IngestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Take in what a store outside sends.",
        subcommands: [IngestAppStoreCommand.self]
    )
}

struct IngestAppStoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore",
        abstract: "Ingest App Store Server Notifications V2; each file is one atomic batch.",
        discussion: """
            Each line is one POST body as the App Store sends it, {"signedPayload": "<JWS>"}. Every \
            notification is verified as Apple's App Store Server Library verifies it: ES256, an x5c of \
            three certificates chaining to a --root (never the x5c's own), Apple's OIDs, validity at \
            its signedDate, the bundle id and environment (and, in production, --app-apple-id). Every \
            file is verified in full first: if any line fails, each failure is reported as \
            FILE:LINE: POINTER: REASON and nothing is appended (exit 2). A notification delivered \
            again is a duplicate. --history takes the JSON of Apple's Get Notification History \
            response instead, to take in what an outage missed.

            Examples:
              ledger ingest appstore --root AppleRootCA-G3.cer --bundle-id com.example.app \\
                --environment Production --app-apple-id 1234 notifications.jsonl
              ledger ingest appstore --root AppleRootCA-G3.cer --bundle-id com.example.app \\
                --environment Sandbox --history history.json
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .long, help: ArgumentHelp("A trusted root certificate, PEM or DER (repeatable).", valueName: "PEM"))
    var root: [String] = []

    @Option(name: .customLong("bundle-id"), help: "The app's bundle id.")
    var bundleId: String

    @Option(name: .long, help: "Production or Sandbox.")
    var environment: String

    @Option(name: .customLong("app-apple-id"), help: "In production, the app's Apple id every notification must name.")
    var appAppleId: Int64?

    @Option(name: .long, help: ArgumentHelp("Apple's Get Notification History response (JSON), instead of JSONL files (repeatable).", valueName: "FILE"))
    var history: [String] = []

    @Argument(help: "JSONL files of POST bodies, or - for standard input.")
    var files: [String] = []

    func validate() throws {
        guard !root.isEmpty else { throw ValidationError("name the root certificate the chains must reach with --root (Apple Root CA G3, or a test root)") }
        guard AppStoreEnvironment(rawValue: environment) != nil else { throw ValidationError("--environment is Production or Sandbox, not \(environment)") }
        guard !files.isEmpty || !history.isEmpty else { throw ValidationError("name at least one JSONL file (- for standard input) or a --history file") }
        guard files.filter({ $0 == "-" }).count <= 1 else { throw ValidationError("standard input (-) can be read only once") }
    }

    /// One batch: a file's POST bodies, each with the line (or history entry) it came from.
    struct Batch {
        var file: String
        var bodies: [(line: Int, body: [UInt8])]
    }

    func run() throws {
        var roots: [[UInt8]] = []
        for path in root {
            guard let bytes = FileManager.default.contents(atPath: path) else { throw CommandFailure.input("\(path): cannot read the root certificate") }
            roots += try AppStoreConfiguration.certificates(inFile: Array(bytes), named: path)
        }
        let configuration = AppStoreConfiguration(rootCertificates: roots, bundleId: bundleId,
                                                  environment: AppStoreEnvironment(rawValue: environment) ?? .production, appAppleId: appAppleId)
        let verifier = try SignedDataVerifier(configuration)
        let batches = try files.map(readLines) + history.map(readHistory)

        // Every body of every file verified before anything is appended.
        var problems: [InputProblem] = []
        for batch in batches {
            for (line, body) in batch.bodies {
                do {
                    _ = try Blocking.run { try await verifier.verifyNotification(body: body) }
                } catch let error as AppStoreRejection {
                    problems.append(InputProblem(file: batch.file, line: line, pointer: "/signedPayload", message: error.summary))
                }
            }
        }
        guard problems.isEmpty else {
            FileHandle.standardError.write(Data(problems.map { $0.description + "\n" }.joined().utf8))
            if global.json {
                let errors = problems.map { p in
                    JSON.object([("file", .string(p.file)), ("line", .int(p.line)), ("pointer", .string(p.pointer)), ("message", .string(p.message))])
                }
                print(JSON.object([("errors", .array(errors))]).text)
            }
            throw ExitCode(2)
        }

        let ledger = try global.openLedger(create: true)
        defer { ledger.close() }
        var outcomes: [AppendOutcome] = []
        for batch in batches where !batch.bodies.isEmpty {
            let bodies = batch.bodies.map(\.body)
            let result = try Blocking.run { try await ledger.ingestAppStore(bodies, verifier: verifier) }
            outcomes += result.outcomes
        }
        let summary = Summary(outcomes)
        if global.json {
            print(JSON.object([("appended", .int(summary.appended)), ("duplicates", .int(summary.duplicates)),
                               ("firstPosition", .uint(summary.first)), ("lastPosition", .uint(summary.last))]).text)
        } else {
            var text = "Ingested \(summary.appended) event\(summary.appended == 1 ? "" : "s")"
            if let first = summary.first, let last = summary.last { text += first == last ? " at position \(first)" : " at positions \(first)…\(last)" }
            if summary.duplicates > 0 { text += "; \(summary.duplicates) duplicate\(summary.duplicates == 1 ? " was" : "s were") already stored" }
            print(text + ".")
        }
    }

    /// A JSONL file's non-empty lines.
    private func readLines(_ file: String) throws -> Batch {
        let data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: file)
        guard let data else { throw CommandFailure.input("\(file): cannot read it") }
        var bodies: [(Int, [UInt8])] = []
        for (index, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.last == UInt8(ascii: "\r") ? line.dropLast() : line[...]
            if trimmed.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            bodies.append((index + 1, Array(trimmed)))
        }
        return Batch(file: file, bodies: bodies)
    }

    /// The signed payloads of a Get Notification History response, each as a POST body; the
    /// "line" is the entry's place in `notificationHistory`, from 1.
    private func readHistory(_ file: String) throws -> Batch {
        guard let data = FileManager.default.contents(atPath: file) else { throw CommandFailure.input("\(file): cannot read it") }
        guard case .object(let response)? = try? JSONParser.parse(Array(data)), case .array(let entries)? = response["notificationHistory"] else {
            throw CommandFailure.input("\(file):1: /notificationHistory: not a Get Notification History response (a JSON object with a notificationHistory array)")
        }
        var bodies: [(Int, [UInt8])] = []
        for (index, entry) in entries.enumerated() {
            guard case .object(let object) = entry, case .string(let signed)? = object["signedPayload"] else {
                throw CommandFailure.input("\(file):\(index + 1): /notificationHistory/\(index)/signedPayload: missing")
            }
            bodies.append((index + 1, Array(JSON.object([("signedPayload", .string(signed))]).text.utf8)))
        }
        return Batch(file: file, bodies: bodies)
    }

    /// What the batches appended, in the `append` shape.
    struct Summary {
        var appended = 0
        var duplicates = 0
        var first: UInt64?
        var last: UInt64?

        init(_ outcomes: [AppendOutcome]) {
            for outcome in outcomes {
                switch outcome {
                case .appended(let position, _):
                    appended += 1
                    first = min(first ?? position, position)
                    last = max(last ?? position, position)
                case .duplicate:
                    duplicates += 1
                }
            }
        }
    }
}

/// Runs async work to its end from synchronous code (a command's `run`): on a task of its own,
/// the calling thread waiting. Never from inside a task.
enum Blocking {
    static func run<R: Sendable>(_ work: @escaping @Sendable () async throws -> R) throws -> R {
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<R>()
        Task {
            box.result = await Result(catching: work)
            done.signal()
        }
        done.wait()
        return try (box.result ?? .failure(CancellationError())).get()
    }

    private final class ResultBox<R>: @unchecked Sendable {
        // @unchecked: written once by the task before the semaphore's signal, read after the wait.
        var result: Result<R, any Error>?
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

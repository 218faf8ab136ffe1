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
              ledger ingest appstore --root AppleRootCA-G3.cer \\
                --bundle-id com.example.app --environment Production notifications.jsonl
              ledger ingest appstore --root AppleRootCA-G3.cer \\
                --bundle-id com.example.app --environment Sandbox --history history.json
              ledger ingest appstore notifications.jsonl   # with the store's settings
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var appStore: AppStoreOptions

    @Option(name: .long, help: ArgumentHelp("Apple's Get Notification History response (JSON), instead of JSONL files (repeatable).", valueName: "FILE"))
    var history: [String] = []

    @Argument(help: "JSONL files of POST bodies, or - for standard input.")
    var files: [String] = []

    func validate() throws {
        try appStore.validate(required: false)
        guard !files.isEmpty || !history.isEmpty else { throw ValidationError("name at least one JSONL file (- for standard input) or a --history file") }
        guard files.filter({ $0 == "-" }).count <= 1 else { throw ValidationError("standard input (-) can be read only once") }
    }

    /// One batch: a file's POST bodies, each with the line (or history entry) it came from.
    struct Batch {
        var file: String
        var bodies: [(line: Int, body: [UInt8])]
    }

    func run() throws {
        // The flags, else what `ledger init --appstore-…` recorded in the store.
        var configuration = try appStore.configuration()
        if configuration == nil, FileManager.default.fileExists(atPath: global.storePath + "/data.mdb") {
            let ledger = try global.openLedger()
            defer { ledger.close() }
            configuration = try ledger.appStoreConfiguration()
        }
        guard let configuration else {
            throw CommandFailure.input("give --root, --bundle-id and --environment, or record them in the store with `ledger init --appstore-root … --appstore-bundle-id … --appstore-environment …`")
        }
        let verifier = try SignedDataVerifier(configuration)
        let batches = try files.map(readLines) + history.map(readHistory)

        // Every body of every file verified, then put under its subject and mapped, before
        // anything is appended.
        var problems: [InputProblem] = []
        var verified: [[VerifiedNotification]] = []
        for batch in batches {
            var notifications: [VerifiedNotification] = []
            for (line, body) in batch.bodies {
                do {
                    notifications.append(try Blocking.run { try await verifier.verifyNotification(body: body) })
                } catch let error as AppStoreRejection {
                    problems.append(InputProblem(file: batch.file, line: line, pointer: "/signedPayload", message: error.summary))
                }
            }
            verified.append(notifications)
        }
        guard problems.isEmpty else { try refuse(problems) }
        let created = !FileManager.default.fileExists(atPath: global.storePath)
        let ledger = try global.openLedger(create: true)
        defer { ledger.close() }
        var context = AppStoreIngestContext()
        var prepared: [[LedgerEvent]] = []
        for (batch, notifications) in zip(batches, verified) {
            do throws(LedgerError) {
                prepared.append(try ledger.prepareAppStore(notifications, bundleId: configuration.bundleId, context: &context))
            } catch {
                guard error.code == .invalidEvent else { throw error }
                let line = error.index.flatMap { batch.bodies.indices.contains($0) ? batch.bodies[$0].line : nil } ?? 1
                problems.append(InputProblem(file: batch.file, line: line, pointer: error.field ?? "/signedPayload", message: error.message))
            }
        }
        guard problems.isEmpty else {
            // Nothing was appended: a store this command made goes again.
            ledger.close()
            if created { try? FileManager.default.removeItem(atPath: global.storePath) }
            try refuse(problems)
        }
        var summary = StreamSummary()
        for events in prepared where !events.isEmpty {
            let result = try Blocking.run { try await ledger.append(events) }
            summary = summary.merged(with: StreamSummary(result))
        }
        if global.json {
            print(AppendCommand.shape(summary).text)
        } else {
            print(AppendCommand.sentence(summary, verb: "Ingested") + ".")
        }
    }

    /// Reports `problems` (SPEC §5: FILE:LINE: POINTER: REASON on stderr; with --json, the
    /// list on stdout) and exits 2.
    private func refuse(_ problems: [InputProblem]) throws -> Never {
        Terminal.report(problems)
        if global.json {
            let errors = problems.map(\.json)
            print(JSON.object([("errors", .array(errors))]).text)
        }
        throw ExitCode(2)
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

/// The App Store settings a command takes: `ingest appstore` as `--root`, `--bundle-id`, …;
/// `init` as `--appstore-root`, … (see `AppStoreOptions.init`).
struct AppStoreOptions: ParsableArguments {
    @Option(name: [.customLong("root"), .customLong("appstore-root")], help: ArgumentHelp("A trusted root certificate, PEM or DER (repeatable): Apple Root CA G3, or a test root.", valueName: "PEM"))
    var root: [String] = []

    @Option(name: [.customLong("bundle-id"), .customLong("appstore-bundle-id")], help: "The app's bundle id.")
    var bundleId: String?

    @Option(name: [.customLong("environment"), .customLong("appstore-environment")], help: "Production or Sandbox.")
    var environment: String?

    @Option(name: [.customLong("app-apple-id"), .customLong("appstore-app-apple-id")], help: "In production, the app's Apple id every notification must name.")
    var appAppleId: Int64?

    /// All of root, bundle id and environment, or (unless `required`) none.
    func validate(required: Bool) throws {
        let given = [!root.isEmpty, bundleId != nil, environment != nil]
        if given.contains(true) || required {
            guard !root.isEmpty else { throw ValidationError("name the root certificate the chains must reach with --root (Apple Root CA G3, or a test root)") }
            guard bundleId != nil else { throw ValidationError("name the app's bundle id with --bundle-id") }
            guard let environment else { throw ValidationError("name the environment with --environment Production or Sandbox") }
            guard AppStoreEnvironment(rawValue: environment) != nil else { throw ValidationError("--environment is Production or Sandbox, not \(environment)") }
        } else if appAppleId != nil {
            throw ValidationError("--app-apple-id goes with --root, --bundle-id and --environment")
        }
    }

    /// The configuration the flags give, `nil` when none is given.
    func configuration() throws -> AppStoreConfiguration? {
        guard !root.isEmpty, let bundleId, let environment, let chosen = AppStoreEnvironment(rawValue: environment) else { return nil }
        var roots: [[UInt8]] = []
        for path in root {
            guard let bytes = FileManager.default.contents(atPath: path) else { throw CommandFailure.input("\(path): cannot read the root certificate") }
            roots += try AppStoreConfiguration.certificates(inFile: Array(bytes), named: path)
        }
        return AppStoreConfiguration(rootCertificates: roots, bundleId: bundleId, environment: chosen, appAppleId: appAppleId)
    }
}

extension StreamSummary {
    /// What one append did, in the streamed append's terms.
    init(_ result: AppendResult) {
        self.init()
        for outcome in result.outcomes {
            switch outcome {
            case .appended(let position, _):
                appended += 1
                firstPosition = min(firstPosition ?? position, position)
                lastPosition = max(lastPosition ?? position, position)
            case .duplicate:
                duplicates += 1
            }
        }
    }
}

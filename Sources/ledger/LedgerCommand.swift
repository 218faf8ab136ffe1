import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerStore

/// `ledger`: the command line over the EntitlementLedger library.
@main
struct LedgerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "An event-sourced entitlement ledger: append facts, then ask who has access, why, and since when.",
        discussion: """
            The store is --store PATH (before or after the subcommand), else $LEDGER_STORE, else ./ledger.lmdb. \
            --json gives machine output with stable keys (times in UTC). Times on the command line are RFC 3339 \
            with a zone. Exit codes: 0 ok, 1 failure, 2 usage or input error. Colour only on a terminal, never \
            with NO_COLOR set; progress bars only on a terminal.

            A first session:
              ledger demo --store demo.lmdb                    # 10,000 realistic customers
              ledger status customer-17 --store demo.lmdb      # every read model, now
              ledger audit customer-17 --store demo.lmdb       # how, and why
              ledger rebuild --store demo.lmdb --policy photolala --dry-run
            """,
        version: LedgerCommand.version,
        groupedSubcommands: [
            CommandGroup(name: "Customer views", subcommands: [StatusCommand.self, AuditCommand.self, DueCommand.self, SubjectsCommand.self, LookupCommand.self,
                                                                EventCommand.self]),
            CommandGroup(name: "The store", subcommands: [InitCommand.self, AppendCommand.self, ExportCommand.self, RebuildCommand.self,
                                                          VerifyCommand.self, StatsCommand.self, PolicyCommand.self, EraseCommand.self, IngestCommand.self]),
            CommandGroup(name: "Serving", subcommands: [ServeCommand.self, TokenCommand.self, NodeCommand.self]),
            CommandGroup(name: "Tools", subcommands: [SchemasCommand.self, DemoCommand.self]),
        ]
    )

    /// The subcommands' names.
    static var subcommandNames: [String] {
        configuration.groupedSubcommands.flatMap(\.subcommands).map { $0._commandName }
    }

    /// The first argument, when it names no subcommand (nor asks for help or the version).
    static func unknownSubcommand(_ arguments: [String]) -> String? {
        guard let first = arguments.first, !first.hasPrefix("-"), first != "help", !subcommandNames.contains(first) else { return nil }
        return first
    }

    /// The subcommand nearest `word` (by edit distance, at most 2), if any.
    static func closestSubcommand(to word: String) -> String? {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            var previous = Array(0 ... b.count)
            for (i, x) in a.enumerated() {
                var current = [i + 1]
                for (j, y) in b.enumerated() { current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))) }
                previous = current
            }
            return previous[b.count]
        }
        let scored = subcommandNames.map { ($0, distance(Array(word), Array($0))) }.filter { $0.1 <= 2 }
        return scored.min { ($0.1, $0.0) < ($1.1, $1.0) }?.0
    }

    /// What `ledger --version` prints.
    static let version = "ledger 0.9.0 (store layout 5)"

    /// Runs the command with SPEC §5's exit codes: usage errors exit 2 (argument-parser's
    /// default is 64), failures exit 1.
    static func main() {
        let prefix = Terminal.paint("ledger:", .red, stderr: true)
        let arguments = GlobalOptions.movingStoreAfterSubcommand(Array(CommandLine.arguments.dropFirst()))
        if let unknown = unknownSubcommand(arguments) {
            let suggestion = closestSubcommand(to: unknown).map { "; did you mean `\($0)`?" } ?? ""
            FileHandle.standardError.write(Data("\(prefix) unknown command `\(Terminal.safe(unknown))`\(suggestion) (`ledger --help` lists them)\n".utf8))
            Foundation.exit(2)
        }
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch let failure as CommandFailure {
            FileHandle.standardError.write(Data("\(prefix) \(Terminal.safeLines(failure.message))\n".utf8))
            Foundation.exit(failure.exitCode)
        } catch let error as LedgerError {
            // The library's errors already say what went wrong and what to do; what they quote
            // of the input (a subject, a field) is made safe for a terminal.
            FileHandle.standardError.write(Data("\(prefix) \(Terminal.safeLines("\(error)"))\n".utf8))
            Foundation.exit(error.code == .invalidEvent ? 2 : 1)
        } catch let code as ExitCode {
            // A command that has printed its own result and only sets the status (verify).
            Foundation.exit(code.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)
            }
            if code == .validationFailure {
                // Argument parser's messages quote the arguments, which are outside text too.
                FileHandle.standardError.write(Data((Terminal.safeLines(fullMessage(for: error)) + "\n").utf8))
                Foundation.exit(2)
            }
            FileHandle.standardError.write(Data("\(prefix) \(Terminal.safeLines(fullMessage(for: error)))\n".utf8))
            Foundation.exit(1)
        }
    }
}

/// A failure the command has already explained: printed as `ledger: message`, exit code as given.
struct CommandFailure: Error {
    let message: String
    let exitCode: Int32

    static func failure(_ message: String) -> CommandFailure { CommandFailure(message: message, exitCode: 1) }
    static func input(_ message: String) -> CommandFailure { CommandFailure(message: message, exitCode: 2) }
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "The store directory (default: $LEDGER_STORE, else ./ledger.lmdb).")
    var store: String?

    @Flag(name: .long, help: "Machine-readable JSON output.")
    var json = false

    /// The store path after the fallbacks (an empty `LEDGER_STORE` counts as unset).
    var storePath: String {
        store ?? ProcessInfo.processInfo.environment["LEDGER_STORE"].flatMap { $0.isEmpty ? nil : $0 } ?? "ledger.lmdb"
    }

    func validate() throws {
        if let store, store.isEmpty { throw ValidationError("--store must not be empty") }
    }

    /// Opens the store with its read models (caught up to the log), creating it with `policy`
    /// (default: the reference policy) when `create` allows; errors say what to do.
    func openLedger(create: Bool = false, policy: Policy? = nil) throws -> Ledger {
        try requireStore(unless: create)
        var options = EventLog.Options()
        // A store on a read-only mount is read as it is (its read models are not caught up);
        // a command that writes is refused when it tries.
        options.readOnly = !create && Environment.onReadOnlyFileSystem(storePath)
        return try Ledger(path: storePath, policy: policy, options: options)
    }

    /// Opens only the store's log, for reading (export needs no read models).
    func openLogForReading() throws -> EventLog {
        try requireStore(unless: false)
        var options = EventLog.Options()
        options.readOnly = true
        return try EventLog(path: storePath, options: options)
    }

    /// Checks that `storePath` is a store, or (when `create`) a place one can be made: never a
    /// file, never a directory of other files; errors say what the path is, in plain words.
    func requireStore(unless create: Bool = false) throws {
        let path = storePath
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        if exists && !isDirectory.boolValue {
            throw CommandFailure.failure("\(path) is a file, not a store (a store is a directory the ledger made); choose another --store")
        }
        if FileManager.default.fileExists(atPath: path + "/data.mdb") { return }
        if exists {
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            if !contents.isEmpty {
                throw CommandFailure.failure("\(path) is a directory of other files, not a store; choose another --store (the ledger makes its store in a new or empty directory)")
            }
        }
        if !create {
            throw CommandFailure.failure("no store at \(path); create one with `ledger init --store \(path)`, or name another with --store")
        }
    }

    /// `--store` and `--json` may come before the subcommand (`ledger --store s stats`);
    /// argument-parser reads a subcommand's options only after its name, so move them there.
    static func movingStoreAfterSubcommand(_ arguments: [String]) -> [String] {
        var moved: [String] = []
        var rest: [String] = []
        var i = 0
        var seenSubcommand = false
        while i < arguments.count {
            let argument = arguments[i]
            if !seenSubcommand && argument == "--store" && i + 1 < arguments.count {
                moved += [argument, arguments[i + 1]]
                i += 2
                continue
            }
            if !seenSubcommand && (argument.hasPrefix("--store=") || argument == "--json") {
                moved.append(argument)
                i += 1
                continue
            }
            if !argument.hasPrefix("-") && !seenSubcommand {
                seenSubcommand = true
                rest.append(argument)
                rest += moved
                moved = []
                i += 1
                continue
            }
            rest.append(argument)
            i += 1
        }
        return rest + moved
    }
}

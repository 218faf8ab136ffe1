import ArgumentParser
import Foundation
import LedgerCore
import LedgerStore

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create an empty store with a policy (the reference policy by default).",
        discussion: """
            Creates the store directory (mode 0700) and its files (mode 0600: they hold customers' data), \
            and records the policy its read models are built with. The policy is a JSON document \
            (Schemas/policy.schema.json); Schemas/policies/ has one pack per source app.

            Examples:
              ledger init --store customers.lmdb
              ledger init --store photos.lmdb --policy Schemas/policies/photolala.json
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .long, help: "A policy document (default: the reference policy).")
    var policy: String?

    func run() throws {
        let path = global.storePath
        if FileManager.default.fileExists(atPath: path + "/data.mdb") {
            throw CommandFailure.failure("a store already exists at \(path); use it, or choose another --store")
        }
        let chosen = try policy.map(readPolicy) ?? Policy.reference
        let log = try global.openLog(create: true)
        defer { log.close() }
        try log.setPolicy(chosen)
        if global.json {
            print(JSON.object([
                ("store", .string(path)), ("created", .bool(true)),
                ("policy", .object([("name", .string(chosen.name)), ("version", .integer(chosen.version)), ("hash", .string(chosen.hash))])),
            ]).text)
        } else {
            print("Created an empty store at \(path) with policy \(chosen.name) v\(chosen.version).")
        }
    }
}

/// Reads a policy file strictly; its problems are input errors (exit 2), one per line as
/// `FILE: POINTER: MESSAGE`.
func readPolicy(_ file: String) throws -> Policy {
    guard let data = FileManager.default.contents(atPath: file) else {
        throw CommandFailure.input("cannot read the policy file \(file)")
    }
    switch Policy.decode(Array(data)) {
    case .success(let policy):
        return policy
    case .failure(let failure):
        throw CommandFailure.input(failure.violations.map { "\(file): \($0.field): \($0.message)" }.joined(separator: "\nledger: "))
    }
}

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Counts, positions and sizes of a store.",
        discussion: """
            Example:
              ledger stats --store customers.lmdb --json
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let log = try global.openLog(readOnly: true)
        let stats = try log.stats()
        if global.json {
            // The read models arrive with the projection engine; until then none is listed.
            let policy = try log.policy()
            print(JSON.object([
                ("events", .uint(stats.events)),
                ("subjects", .uint(stats.subjects)),
                ("lastPosition", .uint(stats.lastPosition)),
                ("policy", policy.map { p in .object([("name", .string(p.name)), ("version", .integer(p.version)), ("hash", .string(p.hash))]) } ?? .null),
                ("models", .object([])),
                ("storeBytes", .int(stats.usedBytes)),
            ]).text)
        } else {
            print("""
                Store          \(log.path)
                Events         \(stats.events)
                Subjects       \(stats.subjects)
                Last position  \(stats.lastPosition)
                Policy         \((try log.policy()).map { "\($0.name) v\($0.version) (\($0.hash.prefix(12))…)" } ?? "none recorded")
                Size           \(formatBytes(stats.usedBytes)) used of a \(formatBytes(stats.mapSize)) map
                """)
        }
    }
}

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check the log: gap-free positions, the hash chain, both indexes.",
        discussion: """
            Walks every event, recomputes its SHA-256 link to its predecessor, and checks the id and
            (subject, version) indexes both ways. Reports the first bad position and what is wrong;
            exits 1 when it finds a problem.

            Example:
              ledger verify --store customers.lmdb
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let log = try global.openLog(readOnly: true)
        let report = try log.verify()
        if global.json {
            print(JSON.object([
                ("ok", .bool(report.isValid)),
                ("eventsChecked", .uint(report.eventsChecked)),
                ("problem", report.problem.map { p in
                    .object([("kind", .string(p.kind.rawValue)), ("position", .uint(p.position)), ("message", .string(p.message))])
                } ?? .null),
            ]).text)
        } else if let problem = report.problem {
            print("FAILED after \(report.eventsChecked) good events: \(problem)")
        } else {
            print("OK: \(report.eventsChecked) events; positions gap-free, hash chain intact, indexes complete.")
        }
        if !report.isValid { throw ExitCode(1) }
    }
}

func formatBytes(_ bytes: Int) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
}

import ArgumentParser
import Foundation
import LedgerCore
import LedgerStore

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create an empty store.",
        discussion: """
            Creates the store directory (mode 0700) and its files (mode 0600: they hold customers' data).

            Example:
              ledger init --store customers.lmdb
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let path = global.storePath
        if FileManager.default.fileExists(atPath: path + "/data.mdb") {
            throw CommandFailure.failure("a store already exists at \(path); use it, or choose another --store")
        }
        let log = try global.openLog(create: true)
        log.close()
        if global.json {
            print(JSON.object([("store", .string(path)), ("created", .bool(true))]).text)
        } else {
            print("Created an empty store at \(path).")
        }
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
            // The policy and read models arrive with later parts of the ledger; until then the
            // policy is null and no model is listed.
            print(JSON.object([
                ("events", .uint(stats.events)),
                ("subjects", .uint(stats.subjects)),
                ("lastPosition", .uint(stats.lastPosition)),
                ("policy", .null),
                ("models", .object([])),
                ("storeBytes", .int(stats.usedBytes)),
            ]).text)
        } else {
            print("""
                Store          \(log.path)
                Events         \(stats.events)
                Subjects       \(stats.subjects)
                Last position  \(stats.lastPosition)
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

import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import Testing

/// Runs the built `ledger` binary (beside the test bundle) and captures what it says.
struct Run {
    let status: Int32
    let stdout: String
    let stderr: String

    /// Runs `ledger` (or `executable`) with `arguments`.
    init(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil, executable: String? = nil) throws {
        let process = Process()
        process.executableURL = executable.map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("ledger")
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        if stdin != nil { process.standardInput = input }
        try process.run()
        if let stdin {
            // Written from another thread so a large input cannot block against a full stdout.
            let handle = input.fileHandleForWriting
            Thread.detachNewThread {
                handle.write(Data(stdin.utf8))
                try? handle.close()
            }
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        status = process.terminationStatus
        stdout = String(decoding: outData, as: UTF8.self)
        stderr = String(decoding: errData, as: UTF8.self)
    }

    /// stdout parsed as one JSON object.
    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
        return try #require(object as? [String: Any])
    }
}

func withDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    return try body(dir.path)
}

@Suite struct CLITests {
    @Test func initCreatesAnEmptyStoreThatStatsDescribes() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let created = try Run(["init", "--store", store])
            #expect(created.status == 0)
            #expect(created.stdout == "Created an empty store at \(store) with policy reference v1.\n")
            let stats = try Run(["stats", "--store", store, "--json"])
            #expect(stats.status == 0)
            let json = try stats.json()
            #expect(json["events"] as? Int == 0)
            #expect(json["subjects"] as? Int == 0)
            #expect(json["lastPosition"] as? Int == 0)
            let policy = try #require(json["policy"] as? [String: Any])
            #expect(policy["name"] as? String == "reference")
            #expect(policy["version"] as? Int == 1)
            #expect(policy["hash"] as? String == Policy.reference.hash)
            #expect(json["models"] is [String: Any])
            let again = try Run(["init", "--store", store])
            #expect(again.status == 1)
            #expect(again.stderr.contains("already exists"))
        }
    }

    @Test func initRecordsTheChosenPolicyAndRejectsABadOneNamingTheField() throws {
        try withDirectory { dir in
            let packs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Schemas/policies").path
            let store = dir + "/photos.lmdb"
            let created = try Run(["init", "--store", store, "--policy", packs + "/photolala.json", "--json"])
            #expect(created.status == 0)
            let policy = try #require(try created.json()["policy"] as? [String: Any])
            #expect(policy["name"] as? String == "photolala")
            let stats = try #require(try Run(["stats", "--store", store, "--json"]).json()["policy"] as? [String: Any])
            #expect(stats["hash"] as? String == policy["hash"] as? String)

            let bad = dir + "/bad.json"
            try Data(#"{"name":"x","version":1,"subscription":{"trialDays":"seven"}}"#.utf8).write(to: URL(fileURLWithPath: bad))
            let refused = try Run(["init", "--store", dir + "/other.lmdb", "--policy", bad])
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("\(bad):1: /subscription/trialDays: expected a whole number of days from 1 to 36500 (100 years), got \"seven\"\n"))
            #expect(refused.stderr.contains("\(bad):1: /subscription/billingGraceDays: missing; every key of a present section is required\n"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/other.lmdb"))
        }
    }

    @Test func theStoreComesFromTheOptionBeforeOrAfterTheSubcommandOrTheEnvironment() throws {
        try withDirectory { (dir) throws in
            let store = dir + "/s.lmdb"
            #expect(try Run(["--store", store, "init"]).status == 0)
            #expect(try Run(["stats", "--json"], environment: ["LEDGER_STORE": store]).status == 0)
            #expect(try Run(["--store=\(store)", "verify"]).status == 0)
        }
    }

    @Test func aMissingStoreFailsWithExitOneAndSaysWhatToDo() throws {
        try withDirectory { dir in
            let run = try Run(["stats", "--store", dir + "/none.lmdb"])
            #expect(run.status == 1)
            #expect(run.stderr == "ledger: no store at \(dir)/none.lmdb; create one with `ledger init --store \(dir)/none.lmdb`, or name another with --store\n")
        }
    }

    @Test func aUsageErrorExitsTwo() throws {
        let run = try Run(["stats", "--bogus"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("Unknown option '--bogus'"))
        let bad = try Run(["demo", "--now", "yesterday"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--now: expected an RFC 3339 time with a zone (e.g. 2026-03-05T00:00:00Z), got yesterday"))
    }

    /// SPEC §5: `--store` goes before or after the subcommand, with the same result.
    @Test func theStoreGoesBeforeOrAfterTheSubcommand() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            #expect(try Run(["--store", store, "init"]).status == 0)
            let after = try Run(["stats", "--store", store, "--json"])
            let before = try Run(["--store", store, "stats", "--json"])
            #expect(after.status == 0 && before.status == 0)
            #expect(after.stdout == before.stdout)
            #expect(try after.json()["events"] as? Int == 0)
        }
    }

    /// `ledger --help` lists the commands in three groups.
    @Test func theHelpGroupsTheCommands() throws {
        let help = try Run(["--help"]).stdout
        let groups = ["CUSTOMER VIEWS", "THE STORE", "TOOLS"].map { help.range(of: $0)?.lowerBound }
        #expect(groups.allSatisfy { $0 != nil }, "\(help)")
        #expect(groups.compactMap { $0 } == groups.compactMap { $0 }.sorted())
        let views = try #require(help.range(of: "CUSTOMER VIEWS")).upperBound
        let store = try #require(help.range(of: "THE STORE")).lowerBound
        #expect(help[views ..< store].contains("status") && help[views ..< store].contains("audit"))
    }

    @Test func verifyOfAGoodStoreSaysOKWithEveryKey() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            #expect(try Run(["demo", "--store", store, "--subjects", "50", "--now", "2026-11-21T00:00:00Z", "--json"]).status == 0)
            let run = try Run(["verify", "--store", store, "--json"])
            #expect(run.status == 0)
            let json = try run.json()
            #expect(Array(json.keys).sorted() == ["eventsChecked", "models", "ok", "personalData", "problem"])
            #expect(((json["personalData"] as? [String: Any])?.keys.sorted()) == ["erased", "erasedSubjects", "inTheClear", "keysDestroyed", "opened"])
            #expect(json["ok"] as? Bool == true)
            #expect(json["problem"] is NSNull)
            #expect((json["models"] as? [Any])?.isEmpty == true)
            #expect((json["eventsChecked"] as? Int ?? 0) > 50)
        }
    }

    @Test func verifyExitsOneAndNamesTheBadPositionOfATamperedStore() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            #expect(try Run(["demo", "--store", store, "--subjects", "20", "--json"]).status == 0)
            do {
                let env = try Environment(path: store)
                let events = try env.openDatabase(LogSchema.events)
                try env.write { txn in
                    let record = try #require(try txn.get(events, key: LogSchema.key(5)).map { Array($0) })
                    var altered = record
                    altered[altered.count - 1] ^= 0xFF          // the stored hash
                    try txn.put(events, key: LogSchema.key(5), value: altered)
                }
            }
            let run = try Run(["verify", "--store", store, "--json"])
            #expect(run.status == 1)
            #expect(run.stderr == "", "the report is the output; nothing else is said")
            let human = try Run(["verify", "--store", store])
            #expect(human.status == 1)
            #expect(human.stdout.hasPrefix("FAILED after 4 good events: position 5: hashMismatch"))
            #expect(human.stderr == "")
            let json = try run.json()
            #expect(json["ok"] as? Bool == false)
            #expect(json["eventsChecked"] as? Int == 4)
            let problem = try #require(json["problem"] as? [String: Any])
            #expect(problem["kind"] as? String == "hashMismatch")
            #expect(problem["position"] as? Int == 5)
        }
    }
}

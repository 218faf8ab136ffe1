import Foundation
import LMDB
import LedgerCore
import LedgerStore
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
            #expect(refused.stderr.contains("ledger: \(bad): /subscription/trialDays: expected a whole number from 1, got \"seven\"\n"))
            #expect(refused.stderr.contains("ledger: \(bad): /subscription/billingGraceDays: missing; every key of a present section is required\n"))
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
            #expect(run.stderr == "ledger: no store at \(dir)/none.lmdb; create one with `ledger init --store \(dir)/none.lmdb` or pass --store\n")
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

    @Test func benchQuickJSONOnATinySizeHasEveryKey() throws {
        let run = try Run(["bench", "--quick", "--json", "--subjects", "150"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty)
        let json = try run.json()
        let machine = try #require(json["machine"] as? [String: Any])
        #expect(machine.keys.sorted() == ["cores", "eventBytes", "events", "quick", "subjects"])
        #expect(machine["cores"] as? Int == ProcessInfo.processInfo.activeProcessorCount)
        #expect(machine["subjects"] as? Int == 150)
        #expect(machine["quick"] as? Bool == true)
        #expect((machine["events"] as? Int ?? 0) > 150 * 5)
        let results = try #require(json["results"] as? [String: Double])
        #expect(results.keys.sorted() == [
            "append.groupCommit", "append.ledger", "append.raw", "append.singleCommit", "append.sqlite",
            "payload.bytesPerEvent", "rebuild.ledger", "rebuild.sqlite", "scan.raw",
            "status.p50us", "status.p99us", "storage.bytesPerEvent",
        ])
        for (name, value) in results { #expect(value > 0, "\(name)") }
        #expect(try #require(results["status.p50us"]) <= (try #require(results["status.p99us"])))
        // The ledger's store holds the raw records and more (indexes, read models).
        #expect(try #require(results["storage.bytesPerEvent"]) > (try #require(results["payload.bytesPerEvent"])))
        #expect(try #require(results["payload.bytesPerEvent"]) > (machine["eventBytes"] as? Double ?? .infinity))
    }

    @Test func benchPrintsEachFigureAndTarget() throws {
        let run = try Run(["bench", "--quick", "--subjects", "100", "--case", "status.p50us"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("status.p50us"))
        #expect(run.stdout.contains("status.p99us"))
        // The storage figure is broken down by table, and the parts add up to it.
        let storage = try #require(run.stdout.split(separator: "\n").first { $0.contains("storage.bytesPerEvent") })
        let words = String(storage).split(separator: " ").map { String($0).trimmingCharacters(in: .punctuationCharacters) }
        let figures = words.compactMap { Double($0) }
        let names = words.filter { $0.first?.isLetter == true }
        #expect(names == ["storage.bytesPerEvent", "bytes/event", "events", "ids", "streams", "models", "free", "other"])
        #expect(figures.count == 7)
        #expect(abs(figures.dropFirst().reduce(0, +) - (figures.first ?? 0)) <= 3, "\(storage)")
        #expect(run.stdout.contains("Targets"))
        #expect(run.stdout.contains("status p50"))
        #expect(!run.stdout.contains("append.sqlite"))
        let bad = try Run(["bench", "--case", "append.fast"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("no case named append.fast; the cases are append.raw, append.ledger"))
    }

    /// The append cases say how many bytes they wrote per event: at least the record itself
    /// (every record reaches a page that is written), and for the ledger more than for raw LMDB
    /// (the same records, plus the indexes' and the read models' pages).
    @Test func benchSaysWhatEachAppendWritesPerEvent() throws {
        let run = try Run(["bench", "--quick", "--subjects", "100", "--case", "append.ledger"])
        #expect(run.status == 0, "\(run.stderr)")
        let raw = try Run(["bench", "--quick", "--subjects", "100", "--case", "append.raw"])
        #expect(raw.status == 0, "\(raw.stderr)")
        func written(_ output: String, _ name: String) throws -> Double {
            let line = try #require(output.split(separator: "\n").first { $0.contains(name) })
            let words = line.split(separator: " ")
            let index = try #require(words.firstIndex(of: "writes"), "\(line)")
            #expect(words.count > index + 2 && words[index + 2] == "bytes/event", "\(line)")
            return try #require(Double(words[index + 1]), "\(line)")
        }
        let ledger = try written(run.stdout, "append.ledger")
        let rawBytes = try written(raw.stdout, "append.raw")
        #expect(rawBytes >= 100, "\(raw.stdout)")
        #expect(ledger > rawBytes, "\(run.stdout)")
    }

    @Test func verifyOfAGoodStoreSaysOKWithEveryKey() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            #expect(try Run(["demo", "--store", store, "--subjects", "50", "--now", "2026-11-21T00:00:00Z", "--json"]).status == 0)
            let run = try Run(["verify", "--store", store, "--json"])
            #expect(run.status == 0)
            let json = try run.json()
            #expect(Array(json.keys).sorted() == ["eventsChecked", "models", "ok", "problem"])
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

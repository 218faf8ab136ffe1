import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import Testing

/// What an operator hits first: a bad policy file, a missing input, a store path that is no
/// store, a mistyped command. Each says what is wrong in plain words and changes nothing.
@Suite struct OperatorErrorsTests {
    static let badPolicy = "{\n  \"name\": 3,\n  \"version\": 1,\n  \"subscription\": {\"trialDays\": 7}\n}\n"

    @Test func aBadPolicyFileIsReportedAsFileLinePointerMessage() throws {
        try withDirectory { dir in
            try Self.badPolicy.write(toFile: dir + "/p.json", atomically: true, encoding: .utf8)
            let initRun = try Run(["init", "--policy", dir + "/p.json", "--store", dir + "/s.lmdb"])
            #expect(initRun.status == 2)
            #expect(initRun.stderr.hasPrefix("\(dir)/p.json:2: /name: expected a non-empty string, got 3\n"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/s.lmdb"))
            #expect(try Run(["init", "--store", dir + "/s.lmdb"]).status == 0)
            let rebuild = try Run(["rebuild", "--policy", dir + "/p.json", "--json", "--store", dir + "/s.lmdb"])
            #expect(rebuild.status == 2)
            #expect(rebuild.stdout.hasPrefix(#"{"errors":[{"file":"\#(dir)/p.json","line":2,"pointer":"/name","message":"expected a non-empty string, got 3"}"#))
        }
    }

    /// A file that is missing, or refused, exits 2 and leaves no store behind.
    @Test func aMissingOrRefusedFileMakesNoStore() throws {
        try withDirectory { dir in
            let missing = try Run(["append", dir + "/none.jsonl", "--store", dir + "/a.lmdb"])
            #expect(missing.status == 2)
            #expect(missing.stderr == "ledger: cannot read \(dir)/none.jsonl: no such file\n")
            #expect(!FileManager.default.fileExists(atPath: dir + "/a.lmdb"))
            try "{\"x\":1}\n".write(toFile: dir + "/bad.jsonl", atomically: true, encoding: .utf8)
            let refused = try Run(["append", dir + "/bad.jsonl", "--store", dir + "/b.lmdb"])
            #expect(refused.status == 2)
            #expect(!FileManager.default.fileExists(atPath: dir + "/b.lmdb"))
        }
    }

    /// A file, or a directory of other files, is not a store, and never becomes one.
    @Test func aStorePathThatIsNoStoreIsNamedForWhatItIs() throws {
        try withDirectory { dir in
            try "hi\n".write(toFile: dir + "/f", atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(atPath: dir + "/d", withIntermediateDirectories: true)
            try "x".write(toFile: dir + "/d/x", atomically: true, encoding: .utf8)
            for path in [dir + "/f", "/etc/passwd"] {
                let run = try Run(["stats", "--store", path])
                #expect(run.status == 1)
                #expect(run.stderr == "ledger: \(path) is a file, not a store (a store is a directory the ledger made); choose another --store\n")
            }
            for command in [["stats"], ["init"], ["append", "-"]] {
                let run = try Run(command + ["--store", dir + "/d"], stdin: "")
                #expect(run.status == 1, "\(command)")
                #expect(run.stderr.contains("ledger: \(dir)/d is a directory of other files, not a store"), "\(command)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/d") == ["x"])
            for run in [try Run(["stats", "--store", dir + "/f"]), try Run(["stats", "--store", dir + "/d"])] {
                #expect(!run.stderr.contains("MDB_"))
                #expect(!run.stderr.contains("NSCocoaErrorDomain"))
                #expect(!run.stderr.contains("ledger init"))
            }
        }
    }

    /// Rebuilding one model under another policy rebuilds the whole generation under it: the
    /// report names every model rebuilt, and none is left stale (so there is nothing to warn of).
    @Test func rebuildingOneModelUnderANewPolicyLeavesNoneStale() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            #expect(try Run(["append", "--store", store, "--restore", FileManager.default.currentDirectoryPath + "/Schemas/examples/alex.jsonl"]).status == 0)
            let run = try Run(["rebuild", "entitlement", "--policy", "photolala", "--store", store])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.hasPrefix("Rebuilt entitlement: "))
            #expect(run.stdout.contains("The other models (retention, badge, access, limits, deletion, due, holders, transactions) were rebuilt with it, under the same policy: none is stale"))
            #expect(run.stderr == "")
            let stats = try Run(["stats", "--json", "--store", store]).stdout
            #expect(stats.contains(#""stale":false"#))
            #expect(!stats.contains(#""stale":true"#))
        }
    }

    @Test func anEmptyLedgerStoreCountsAsUnset() throws {
        let run = try Run(["stats"], environment: ["LEDGER_STORE": ""])
        #expect(run.stderr.contains("no store at ledger.lmdb;"))
        #expect(try Run(["stats", "--store", ""]).status == 2)
    }

    @Test func aMistypedCommandIsNamedWithTheNearestOne() throws {
        let run = try Run(["stat", "--store", "x.lmdb"])
        #expect(run.status == 2)
        #expect(run.stderr == "ledger: unknown command `stat`; did you mean `stats`? (`ledger --help` lists them)\n")
        #expect(try Run(["frobnicate"]).stderr == "ledger: unknown command `frobnicate` (`ledger --help` lists them)\n")
    }

    /// A rebuild's report is the same on every run — transitions by count, then by name — and
    /// cuts no value; counts read one way (`1,234`), a single one in the singular.
    @Test func aRebuildReportIsStableWholeAndCountedOneWay() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            #expect(try Run(["demo", "--store", store, "--subjects", "400", "--now", "2026-11-21T00:00:00Z", "--json"]).status == 0)
            func report() throws -> [String] {
                let run = try Run(["rebuild", "--policy", "photolala", "--dry-run", "--at", "2026-11-21T00:00:00Z", "--limit", "0", "--store", store])
                #expect(run.status == 0, "\(run.stderr)")
                // The timings aside.
                return run.stdout.split(separator: "\n").map(String.init).filter { !$0.contains(" s (") && !$0.hasPrefix("Policy ") }
            }
            let first = try report(), second = try report()
            #expect(first == second)
            let summary = first.drop { $0 != "Summary:" }.dropFirst().prefix { !$0.isEmpty }
            #expect(!summary.isEmpty)
            var previous: (field: String, count: Int, name: String)?
            for row in summary {
                let cells = row.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
                guard cells.count >= 3, let count = Int(cells[cells.count - 1].replacingOccurrences(of: ",", with: "")) else { continue }
                let (field, name) = (cells[0], cells[1 ..< cells.count - 1].joined(separator: " "))
                if let previous, previous.field == field, !name.hasPrefix("…") {
                    #expect(previous.count > count || previous.count == count && previous.name < name, "\(row)")
                }
                previous = (field, count, name)
                #expect(!name.hasSuffix("…") || name.hasPrefix("…"), "a value was cut: \(row)")
            }
            let changes = try #require(first.first { $0.hasSuffix("subjects:") || $0.hasSuffix("subject:") })
            #expect(changes.range(of: #"^[0-9]{1,3}(,[0-9]{3})* field changes? in [0-9]{1,3}(,[0-9]{3})* subjects?:$"#, options: .regularExpression) != nil, "\(changes)")
        }
        let one = try withDirectory { dir in
            try Run(["append", "--store", dir + "/o.lmdb", "-"], stdin: #"{"type":"account.created","subject":"a","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"# + "\n")
        }
        #expect(one.stdout == "Appended 1 event at position 1.\n")
    }
}

import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import Testing

/// Finding a customer and an event, the policy and the version, as a support agent or an
/// operator asks for them.
@Suite struct FindCommandsTests {
    /// A store holding the example customer (alex) and three others.
    func withStore(_ body: (String) throws -> Void) throws {
        try withStorePath { store in
            let example = FileManager.default.currentDirectoryPath + "/Schemas/examples/alex.jsonl"
            #expect(try Run(["append", "--store", store, "--restore", example]).status == 0)
            let others = ["bo", "alexandra", "al"].map { subject in
                #"{"type":"account.created","subject":"\#(subject)","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#
            }
            #expect(try Run(["append", "--store", store, "-"], stdin: others.joined(separator: "\n") + "\n").status == 0)
            try body(store)
        }
    }

    @Test func subjectsAreListedInByteOrderByPrefix() throws {
        try withStore { store in
            #expect(try Run(["subjects", "--store", store]).stdout == "al\nalex\nalexandra\nbo\n")
            #expect(try Run(["subjects", "--prefix", "alex", "--store", store]).stdout == "alex\nalexandra\n")
            #expect(try Run(["subjects", "--prefix", "a", "--limit", "2", "--json", "--store", store]).stdout == #"{"subjects":["al","alex"]}"# + "\n")
            let none = try Run(["subjects", "--prefix", "zz", "--store", store])
            #expect(none.stdout == "")
            #expect(none.stderr == "ledger: no subject starts with zz\n")
        }
    }

    @Test func oneEventByPositionOrIdAsExportWritesIt() throws {
        try withStore { store in
            let third = try Run(["export", "--from", "3", "--to", "3", "--store", store]).stdout
            #expect(third.hasPrefix(#"{"data":{"#))
            #expect(try Run(["event", "3", "--json", "--store", store]).stdout == third)
            guard case .object(let object)? = try? JSONParser.parse(Array(third.utf8)), case .string(let id)? = object["id"] else {
                Issue.record("no id in \(third)")
                return
            }
            #expect(try Run(["event", id, "--json", "--store", store]).stdout == third)
            let human = try Run(["event", "3", "--store", store]).stdout
            #expect(human.contains("type                            subscription.purchased\n") || human.contains("subscription.purchased"))
            #expect(human.contains("data.transactionId"))
            let missing = try Run(["event", "999", "--store", store])
            #expect(missing.status == 1)
            #expect(missing.stderr.hasSuffix("no event at position 999 (the log ends at 12)\n"))
            let bad = try Run(["event", "third", "--store", store])
            #expect(bad.status == 2)
            #expect(bad.stderr.contains("expected a log position or an event id (a UUID), got third"))
        }
    }

    @Test func exportTakesAnEndAndALimit() throws {
        try withStore { store in
            func positions(_ arguments: [String]) throws -> [Int64] {
                try Run(["export", "--store", store] + arguments).stdout.split(separator: "\n").compactMap { line in
                    guard case .object(let object)? = try? JSONParser.parse(Array(line.utf8)), case .number(let number)? = object["position"], let position = number.int64 else { return nil }
                    return position
                }
            }
            #expect(try positions(["--from", "2", "--to", "4"]) == [2, 3, 4])
            #expect(try positions(["--from", "5", "--limit", "2"]) == [5, 6])
            #expect(try positions(["--subject", "alex", "--from", "3", "--limit", "2"]) == [3, 4])
            #expect(try positions(["--limit", "0"]) == [])
            let backwards = try Run(["export", "--from", "5", "--to", "4", "--store", store])
            #expect(backwards.status == 2)
            #expect(backwards.stderr.contains("--to must not be before --from"))
        }
    }

    @Test func exportHelpStatesItsDefaultOnce() throws {
        let help = try Run(["export", "--help"]).stdout
        let flat = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(flat.contains("Start at this position. (default: 1)"), "\(help)")
        #expect(!flat.contains("(default 1)"))
    }

    @Test func policyPrintsTheStoresDocumentWithItsHash() throws {
        try withStore { store in
            let stats = try Run(["stats", "--json", "--store", store]).stdout
            let json = try Run(["policy", "--json", "--store", store]).stdout
            guard case .object(let object)? = try? JSONParser.parse(Array(json.utf8)), case .string(let hash)? = object["hash"],
                  case .object(let document)? = object["policy"] else {
                Issue.record("not a policy object: \(json)")
                return
            }
            #expect(stats.contains(#""hash":"\#(hash)""#))
            #expect(document["name"] == "reference")
            #expect(try Run(["policy", "--store", store]).stdout.hasPrefix("reference v1  sha256 \(hash)\n{\n"))
        }
    }

    @Test func versionIsPrinted() throws {
        let run = try Run(["--version"])
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("ledger "))
    }
}

import Foundation
import Testing

/// The example corpus every event type appears in.
let validExamples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Schemas/examples/valid.jsonl").path

@Suite struct AppendExportTests {
    let good = #"{"type":"account.created","subject":"user-1","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#

    @Test func appendReportsWhatItWroteAndIsIdempotentWithoutIds() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let first = try Run(["append", "--store", store, "--json", validExamples])
            #expect(first.status == 0)
            #expect(first.stderr == "")
            #expect(first.stdout == #"{"appended":56,"duplicates":0,"firstPosition":1,"lastPosition":56}"# + "\n")
            let again = try Run(["--json", "--store", store, "append", validExamples])
            #expect(again.stdout == #"{"appended":0,"duplicates":56,"firstPosition":null,"lastPosition":null}"# + "\n")
            let text = try Run(["append", "--store", store, "-"], stdin: good + "\n")
            #expect(text.stdout == "Appended 1 event at position 57.\n")
        }
    }

    /// A session in a zone the time-zone database does not know is an input error naming
    /// /data/timeZone, and nothing of the file is appended: never a silent UTC.
    @Test func aSessionInAnUnknownZoneIsRefused() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let file = dir + "/sessions.jsonl"
            let session = { (zone: String) in
                #"{"type":"session.started","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"deviceId":"d-1","timeZone":"\#(zone)"}}"#
            }
            try Data([good, session("Europe/Zurich"), session("Mars/Olympus_Mons")].joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", store, file])
            #expect(run.status == 2)
            #expect(run.stderr == "\(file):3: /data/timeZone: unknown time zone \"Mars/Olympus_Mons\"; expected an IANA name such as \"Europe/Berlin\"\n")
            #expect(try Run(["export", "--store", store]).stdout == "")
        }
    }

    /// One time outside years 0000–9999 once in UTC made a whole export unrestorable (exported
    /// as 10000-01-01…, which append refuses): it is refused on input, by file, line and
    /// pointer, and nothing of the file is appended.
    @Test func aTimeOutsideFourDigitYearsOnceInUTCIsRefusedAndNothingAppended() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let file = dir + "/events.jsonl"
            let late = good.replacingOccurrences(of: "2026-03-01T09:00:00Z", with: "9999-12-31T23:59:59-00:01")
            try Data([good, late].joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", store, file])
            #expect(run.status == 2)
            #expect(run.stderr == "\(file):2: /occurredAt: \"9999-12-31T23:59:59-00:01\" is outside years 0000–9999 once in UTC (10000-01-01T00:00:59.000Z)\n")
            #expect(try Run(["export", "--store", store]).stdout == "")
        }
    }

    /// The command line's times (`--at`, `--now`, `--known-at`, `--from`, `--to`) go through
    /// the same parser: out of years 0000–9999 once in UTC is a usage error saying so.
    @Test func aCommandLineTimeOutsideFourDigitYearsIsAUsageError() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            #expect(try Run(["init", "--store", store]).status == 0)
            let late = "9999-12-31T23:59:59-00:01", early = "0000-01-01T00:00:00+00:01"
            let runs: [(arguments: [String], option: String, time: String)] = [
                (["status", "u", "--at", late], "--at", late),
                (["audit", "u", "--at", early], "--at", early),
                (["audit", "u", "--known-at", late], "--known-at", late),
                (["rebuild", "--at", late], "--at", late),
                (["due", "--from", early, "--to", "2026-01-01T00:00:00Z"], "--from", early),
                (["due", "--from", "2026-01-01T00:00:00Z", "--to", late], "--to", late),
                (["demo", "--now", late], "--now", late),
            ]
            for (arguments, option, time) in runs {
                let run = try Run(arguments + ["--store", store])
                #expect(run.status == 2, "\(arguments)")
                let utc = time == late ? "10000-01-01T00:00:59.000Z" : "-0001-12-31T23:59:00.000Z"
                #expect(run.stderr.contains("\(option): \(time) is outside years 0000–9999 once in UTC (\(utc))"), "\(arguments): \(run.stderr)")
            }
        }
    }

    /// A task due on a day the calendar does not have is an input error naming /data/dueDate,
    /// and nothing of the file is appended.
    @Test func aDueDateThatIsNotACalendarDateIsRefused() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let file = dir + "/tasks.jsonl"
            let task = #"{"type":"maintenance.scheduled","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"system","data":{"taskId":"t","dueDate":"2026-02-31"}}"#
            try Data([good, task].joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", store, file])
            #expect(run.status == 2)
            #expect(run.stderr == "\(file):2: /data/dueDate: \"2026-02-31\" is not a calendar date: February 2026 has 28 days\n")
            #expect(try Run(["export", "--store", store]).stdout == "")
        }
    }

    @Test func badLinesAreReportedOnePerLineWithExitTwoAndNothingAppended() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let file = dir + "/events.jsonl"
            var lines = Array(repeating: good, count: 10)
            lines[2] = #"{"type":"account.created","subject":"","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#
            lines[6] = #"{"type":"account.created","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true,"x":1}}"#
            try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", store, "--json", file])
            #expect(run.status == 2)
            #expect(run.stderr == """
                \(file):3: /subject: must not be empty
                \(file):7: /data/x: unknown key; account.created data has signedIn

                """)
            let errors = try #require(try run.json()["errors"] as? [[String: Any]])
            #expect(errors.map { $0["line"] as? Int } == [3, 7])
            #expect(errors.map { $0["pointer"] as? String } == ["/subject", "/data/x"])
            #expect(errors.first?["file"] as? String == file)
            #expect(errors.first?["message"] as? String == "must not be empty")
            #expect(try Run(["export", "--store", store]).stdout == "")
        }
    }

    @Test func exportAppendsBackAndRestoresByteForByte() throws {
        try withDirectory { dir in
            let original = dir + "/a.lmdb", copy = dir + "/b.lmdb", restored = dir + "/c.lmdb"
            #expect(try Run(["append", "--store", original, validExamples]).status == 0)
            let exported = try Run(["export", "--store", original]).stdout
            #expect(exported.split(separator: "\n").count == 56)

            #expect(try Run(["append", "--store", restored, "--restore", "-"], stdin: exported).status == 0)
            #expect(try Run(["export", "--store", restored]).stdout == exported)

            #expect(try Run(["append", "--store", copy, "-"], stdin: exported).status == 0)
            let strip = { (text: String) in text.replacingOccurrences(of: #","recordedAt":"[^"]*""#, with: "", options: .regularExpression) }
            #expect(strip(try Run(["export", "--store", copy]).stdout) == strip(exported))

            // A restore into a store that is not empty is refused, naming the line.
            let refused = try Run(["append", "--store", copy, "--restore", "-"], stdin: exported)
            #expect(refused.status == 2)
            #expect(refused.stderr.hasPrefix("-:1: /position: position 1 already holds another event"))
            // Restoring again into the restored store is a no-op.
            let rerun = try Run(["append", "--store", restored, "--restore", "--json", "-"], stdin: exported)
            #expect(rerun.stdout == #"{"appended":0,"duplicates":56,"firstPosition":null,"lastPosition":null}"# + "\n")
        }
    }

    @Test func exportFiltersBySubjectAndPosition() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            #expect(try Run(["append", "--store", store, validExamples]).status == 0)
            let subject = try Run(["export", "--store", store, "--subject", "user-49"]).stdout.split(separator: "\n")
            #expect(subject.count == 5)
            #expect(subject.allSatisfy { $0.contains(#""subject":"user-49""#) })
            let tail = try Run(["export", "--store", store, "--from", "55"]).stdout.split(separator: "\n")
            #expect(tail.count == 2)
            #expect(tail.first?.contains(#""position":55,"#) == true)
        }
    }

    @Test func theTemporarySpoolIsRemovedWhetherTheAppendSucceedsOrNot() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb", tmp = dir + "/tmp"
            try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
            let ok = try Run(["append", "--store", store, validExamples, "-"], environment: ["TMPDIR": tmp], stdin: good + "\n")
            #expect(ok.status == 0)
            let bad = try Run(["append", "--store", store, validExamples, "-"], environment: ["TMPDIR": tmp], stdin: "{}\n")
            #expect(bad.status == 2)
            #expect(try FileManager.default.contentsOfDirectory(atPath: tmp) == [])
        }
    }
}

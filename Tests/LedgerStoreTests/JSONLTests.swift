import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// Writes `lines` as a JSONL file in a fresh directory and passes its path.
func withJSONL<R>(_ lines: [String], _ body: (String) throws -> R) throws -> R {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-jsonl-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let file = dir.appendingPathComponent("events.jsonl")
    try Data(lines.map { $0 + "\n" }.joined().utf8).write(to: file)
    return try body(file.path)
}

/// The log's events as `ledger export` writes them.
func exportLines(_ log: EventLog, subject: String? = nil) throws -> [String] {
    let events = try (subject.map { log.events(subject: $0) } ?? log.events()).collect()
    return try events.map { String(decoding: try EventLine.export($0), as: UTF8.self) }
}

/// An exported line without the two keys only export adds.
func withoutStamps(_ line: String) throws -> String {
    guard case .object(var object) = try JSONParser.parse(line) else { return line }
    object["position"] = nil
    object["recordedAt"] = nil
    return JSON.object(object).serialized(sortedKeys: true)
}

let accountCreated = #"{"type":"account.created","subject":"user-1","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#

/// `n` distinct valid lines.
func validLines(_ n: Int) -> [String] {
    (1...n).map { accountCreated.replacingOccurrences(of: "09:00:00Z", with: "09:00:\($0 < 10 ? "0" : "")\($0)Z") }
}

@Suite struct JSONLTests {
    @Test func aFileWithBadLinesThreeAndSevenReportsBothAndAppendsNothing() throws {
        var lines = validLines(10)
        lines[2] = "{not json"
        lines[6] = lines[6].replacingOccurrences(of: #""signedIn":true"#, with: #""signedIn":"yes""#)
        try withStorePath { path in
            let log = try EventLog(path: path)
            try withJSONL(lines) { file in
                let error = #expect(throws: ImportError.self) { try JSONLImport.append([file], to: log) }
                guard case .input(let problems, let total)? = error else { Issue.record("expected input problems"); return }
                #expect(total == 2)
                #expect(problems.problems == [
                    InputProblem(file: file, line: 3, pointer: "/", message: "not valid JSON: expected a key in double quotes at byte 2"),
                    InputProblem(file: file, line: 7, pointer: "/data/signedIn", message: #"expected true or false, got "yes""#),
                ])
            }
            #expect(try log.lastPosition() == 0)
        }
    }

    @Test func aBadFileAmongGoodOnesAppendsNoFileAtAll() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            _ = try withJSONL(validLines(3)) { good in
                try withJSONL(["{}"]) { bad in
                    #expect(throws: ImportError.self) { try JSONLImport.append([good, bad], to: log) }
                }
            }
            #expect(try log.lastPosition() == 0)
        }
    }

    @Test func reappendingAFileWithoutIdsAppendsNothingNew() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try withJSONL(validLines(5) + [""]) { file in
                let first = try JSONLImport.append([file], to: log)
                #expect(first.appended == 5 && first.firstPosition == 1 && first.lastPosition == 5)
                let second = try JSONLImport.append([file], to: log)
                #expect(second == { var s = StreamSummary(); s.duplicates = 5; return s }())
            }
            #expect(try log.lastPosition() == 5)
        }
    }

    @Test func aLineWhoseIdIsStoredWithOtherContentRejectsItsWholeFileNamingTheLine() throws {
        let id = #""id":"0b6d2f4e-8a1c-4c3b-9f00-1234567890ab","#
        let stored = accountCreated.replacingOccurrences(of: "{", with: "{" + id, options: .anchored)
        let clash = stored.replacingOccurrences(of: "user-1", with: "user-2")
        try withStorePath { path in
            let log = try EventLog(path: path)
            try withJSONL([stored]) { file in _ = try JSONLImport.append([file], to: log) }
            try withJSONL(validLines(3) + [clash]) { file in
                let error = #expect(throws: ImportError.self) { try JSONLImport.append([file], to: log) }
                guard case .ledger(let ledgerError, _)? = error else { Issue.record("expected a ledger error"); return }
                #expect(ledgerError.code == .idConflict)
                #expect(ledgerError.file == file && ledgerError.line == 4 && ledgerError.field == "/id")
            }
            #expect(try log.lastPosition() == 1)
        }
    }

    @Test func exportThenAppendIntoAFreshStoreThenExportIsIdentical() async {
        await checkProperty(count: 25, input: Gen.uint64(), Gen.int(in: 1...40)) { seed, count in
            var generator = DataGenerator(state: seed)
            let lines = (0..<count).map { _ in generator.eventLine() }
            try withStorePath { first in
                try withStorePath { second in
                    try withStorePath { third in
                        let original = try EventLog(path: first)
                        try withJSONL(lines) { file in _ = try JSONLImport.append([file], to: original) }
                        let exported = try exportLines(original)

                        // Plain append: the same events, restamped.
                        let copy = try EventLog(path: second)
                        try withJSONL(exported) { file in _ = try JSONLImport.append([file], to: copy) }
                        #expect(try exportLines(copy).map(withoutStamps) == exported.map(withoutStamps))

                        // Restore: byte for byte, positions and recordedAt included.
                        let restored = try EventLog(path: third)
                        try withJSONL(exported) { file in _ = try JSONLImport.append([file], to: restored, restoring: true) }
                        #expect(try exportLines(restored) == exported)
                    }
                }
            }
        }
    }

    @Test func anExportedLineIsTheCanonicalEventPlusExactlyPositionAndRecordedAt() throws {
        let line = #"{"meta":{"z":"1","a":"2"},"source":"appstore","type":"subscription.renewal_failed","id":"0B6D2F4E-8A1C-4C3B-9F00-1234567890AB","subject":"user-42","occurredAt":"2026-04-08T11:30:00.5+02:00","data":{"gracePeriodExpiresAt":"2026-04-11T09:30:00Z","originalTransactionId":"o1"}}"#
        try withStorePath { path in
            var options = EventLog.Options()
            options.clock = { Timestamp(milliseconds: 1_775_700_000_000) }
            let log = try EventLog(path: path, options: options)
            try withJSONL([line]) { file in _ = try JSONLImport.append([file], to: log) }
            #expect(try exportLines(log) == [
                #"{"data":{"gracePeriodExpiresAt":"2026-04-11T09:30:00.000Z","originalTransactionId":"o1"},"id":"0b6d2f4e-8a1c-4c3b-9f00-1234567890ab","meta":{"a":"2","z":"1"},"occurredAt":"2026-04-08T09:30:00.500Z","position":1,"recordedAt":"2026-04-09T02:00:00.000Z","schemaVersion":1,"source":"appstore","subject":"user-42","type":"subscription.renewal_failed"}"#,
            ])
        }
    }

    @Test func aRestoreMustContinueTheStoresPositions() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try withJSONL(validLines(2)) { file in _ = try JSONLImport.append([file], to: log) }
            let exported = try exportLines(log)
            try withStorePath { other in
                let target = try EventLog(path: other)
                try withJSONL([accountCreated.replacingOccurrences(of: "user-1", with: "someone")]) { file in _ = try JSONLImport.append([file], to: target) }
                try withJSONL(exported) { file in
                    let error = #expect(throws: ImportError.self) { try JSONLImport.append([file], to: target, restoring: true) }
                    guard case .ledger(let ledgerError, _)? = error else { Issue.record("expected a ledger error"); return }
                    #expect(ledgerError.field == "/position" && ledgerError.line == 1)
                }
                #expect(try target.lastPosition() == 1)
            }
            // Gaps inside the file are input problems, found before anything is written.
            try withStorePath { other in
                let target = try EventLog(path: other)
                _ = try withJSONL([exported[1]]) { file in
                    #expect(throws: ImportError.self) { try JSONLImport.append([file], to: target, restoring: true) }
                }
                try withJSONL([accountCreated]) { file in
                    let error = #expect(throws: ImportError.self) { try JSONLImport.append([file], to: target, restoring: true) }
                    guard case .input(let problems, _)? = error else { Issue.record("expected input problems"); return }
                    #expect(problems.problems.map(\.pointer) == ["/position", "/recordedAt"])
                }
                #expect(try target.lastPosition() == 0)
            }
        }
    }

    @Test func aVersionOneUsageEventStaysVersionOneAndReadsAsVersionTwo() throws {
        let v1 = #"{"type":"usage.recorded","subject":"u","occurredAt":"2026-03-02T09:00:00Z","source":"app","schemaVersion":1,"data":{"feature":"scan"}}"#
        try withStorePath { path in
            let log = try EventLog(path: path)
            try withJSONL([v1]) { file in _ = try JSONLImport.append([file], to: log) }
            let stored = try #require(try log.event(at: 1))
            #expect(stored.schemaVersion == 1)
            #expect(try exportLines(log).first?.contains(#""data":{"feature":"scan"},"#) == true)
            var expected = UsageRecorded()
            expected.feature = "scan"
            expected.count = 1
            #expect(try RecordedEvent(stored).data == .usageRecorded(expected))
            #expect(try RecordedEvent(stored).storedSchemaVersion == 1)
        }
    }

    @Test func problemsBeyondTheLimitAreCountedNotListed() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try withJSONL(Array(repeating: "nope", count: 150)) { file in
                let error = #expect(throws: ImportError.self) { try JSONLImport.append([file], to: log) }
                guard case .input(let problems, let total)? = error else { Issue.record("expected input problems"); return }
                #expect(problems.problems.count == JSONLImport.problemLimit)
                #expect(total == 150)
            }
        }
    }
}

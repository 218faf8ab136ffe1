import Foundation
import Testing

/// Runs the built benchmark (beside the test bundle) and captures what it says.
struct Run {
    let status: Int32
    let stdout: String
    let stderr: String

    init(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("Benchmarks")
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
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

/// The benchmark's output on tiny sizes: every key, the floors, the bytes each append writes.
/// (`swift test --package-path Tools/Benchmarks`; not part of the ledger's own tests.)
@Suite struct BenchOutputTests {
    @Test func benchQuickJSONOnATinySizeHasEveryKey() throws {
        let run = try Run(["--quick", "--json", "--subjects", "150"])
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
            "append.groupCommit", "append.ledger", "append.longHistory", "append.raw", "append.rawLayout", "append.singleCommit", "append.sqlite",
            "append.sqliteModels", "audit.longHistory", "audit.longHistoryGrowth", "due.windowUs", "payload.bytesPerEvent", "rebuild.ledger", "rebuild.sqlite", "scan.raw",
            "status.longHistory", "status.p50us", "status.p99us", "storage.bytesPerEvent",
        ])
        for (name, value) in results { #expect(value > 0, "\(name)") }
        #expect(try #require(results["status.p50us"]) <= (try #require(results["status.p99us"])))
        // The ledger's store holds the raw records and more (indexes, read models).
        #expect(try #require(results["storage.bytesPerEvent"]) > (try #require(results["payload.bytesPerEvent"])))
        #expect(try #require(results["payload.bytesPerEvent"]) > (machine["eventBytes"] as? Double ?? .infinity))
    }

    @Test func benchPrintsEachFigureAndTarget() throws {
        let run = try Run(["--quick", "--subjects", "100", "--case", "status.p50us"])
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
        #expect(run.stdout.contains("Floors"))
        #expect(run.stdout.contains("status p50"))
        #expect(!run.stdout.contains("append.sqlite"))
        let bad = try Run(["--case", "append.fast"])
        #expect(bad.status == 64)   // argument-parser's usage error
        #expect(bad.stderr.contains("no case named append.fast; the cases are append.raw, append.rawLayout, append.ledger"))
    }

    /// The append cases say how many bytes they wrote per event: at least the record itself
    /// (every record reaches a page that is written), and for the ledger more than for raw LMDB
    /// (the same records, plus the indexes' and the read models' pages).
    @Test func benchSaysWhatEachAppendWritesPerEvent() throws {
        let run = try Run(["--quick", "--subjects", "100", "--case", "append.ledger"])
        #expect(run.status == 0, "\(run.stderr)")
        let raw = try Run(["--quick", "--subjects", "100", "--case", "append.raw"])
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
}

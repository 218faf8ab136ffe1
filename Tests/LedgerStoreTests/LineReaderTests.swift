import Foundation
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

@Suite struct LineReaderTests {
    func lines(of contents: [UInt8], keepBytes: Int = 1 << 20) throws -> [LineReader.Line] {
        try withStorePath { path in
            let file = path + ".jsonl"
            _ = FileManager.default.createFile(atPath: file, contents: Data(contents))
            var reader = try LineReader(path: file, keepBytes: keepBytes)
            var out: [LineReader.Line] = []
            while let line = try reader.next() { out.append(line) }
            return out
        }
    }

    @Test func splitsOnNewlinesDropsCarriageReturnsAndNumbersFromOne() throws {
        let read = try lines(of: Array("a\r\nbb\n\nccc".utf8))
        #expect(read == [
            LineReader.Line(number: 1, bytes: Array("a".utf8), length: 1),
            LineReader.Line(number: 2, bytes: Array("bb".utf8), length: 2),
            LineReader.Line(number: 3, bytes: [], length: 0),
            LineReader.Line(number: 4, bytes: Array("ccc".utf8), length: 3),
        ])
    }

    @Test func aFinalNewlineDoesNotMakeAnEmptyLine() throws {
        #expect(try lines(of: Array("a\nb\n".utf8)).map(\.number) == [1, 2])
        #expect(try lines(of: []).isEmpty)
    }

    @Test func linesLongerThanAChunkArriveWhole() throws {
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: 200_000)
        let read = try lines(of: long + [0x0A] + Array("y".utf8))
        #expect(read.map(\.length) == [200_000, 1])
        #expect(read[0].bytes == long)
    }

    @Test func aLineOverTheKeepLimitIsCutButItsLengthIsKnown() throws {
        let read = try lines(of: [UInt8](repeating: 0x41, count: 100_000) + [0x0A, 0x42], keepBytes: 1_000)
        #expect(read[0].bytes.count == 1_000)
        #expect(read[0].length == 100_000)
        #expect(read[0].isCut)
        #expect(read[1] == LineReader.Line(number: 2, bytes: [0x42], length: 1))
    }

    @Test func aMissingFileIsAnErrorNamingIt() throws {
        do {
            _ = try LineReader(path: "/nonexistent/events.jsonl")
            Issue.record("opening a missing file should fail")
        } catch {
            #expect(error.file == "/nonexistent/events.jsonl")
            #expect(error.message == "cannot read /nonexistent/events.jsonl: No such file or directory")
        }
    }
}

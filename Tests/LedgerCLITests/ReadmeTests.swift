import Foundation
import Testing

/// The README's library example is `Tests/ReadmeExample/main.swift`, built with every build of
/// the package: these keep the two the same, and run it.
@Suite struct ReadmeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The first Swift block after `heading` in the README.
    static func swiftBlock(after heading: String) throws -> String {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: heading)).upperBound
        let open = try #require(readme.range(of: "```swift\n", range: section ..< readme.endIndex))
        let close = try #require(readme.range(of: "```", range: open.upperBound ..< readme.endIndex))
        return String(readme[open.upperBound ..< close.lowerBound])
    }

    /// The README stands alone: the specification and the issue list are not in the
    /// repository, so it cites neither.
    @Test func theReadmeCitesNothingOutsideTheRepository() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(!readme.contains("SPEC"))
        #expect(!readme.contains("`issues`"))
    }

    @Test func theLibraryExampleIsTheOneTheBuildCompiles() throws {
        let built = try String(contentsOf: Self.root.appendingPathComponent("Tests/ReadmeExample/main.swift"), encoding: .utf8)
        #expect(try Self.swiftBlock(after: "## The library in five minutes") == built,
                "README.md's library example and Tests/ReadmeExample/main.swift differ: change both")
    }

    /// Runs the example executable `name`, built beside the tests, in `dir`: its exit status
    /// and what it printed.
    static func runExample(_ name: String, in dir: String) throws -> (status: Int32, printed: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name)
        process.currentDirectoryURL = URL(fileURLWithPath: dir)
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, printed)
    }

    @Test func theLibraryExampleRuns() throws {
        try withDirectory { dir in
            let (status, printed) = try Self.runExample("readme-example", in: dir)
            #expect(status == 0)
            // The loop over the log prints the purchase: position 1, a week's trial.
            #expect(printed == "1 2026-03-08T09:30:00.000Z\n")
            #expect(FileManager.default.fileExists(atPath: dir + "/customers.lmdb/data.mdb"))
        }
    }
}

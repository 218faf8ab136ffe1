import Foundation
import Testing

/// The DocC articles' Swift blocks are the files of `Tests/DocCExamples`, built with every build
/// of the package (the `docc-examples` executable): these keep the two the same, and run them.
@Suite struct DocCExamplesTests {
    static let root = ReadmeTests.root

    /// Every ```swift block of every article in the DocC catalogs, with the article's path.
    static func articleBlocks() throws -> [(article: String, block: String)] {
        let sources = root.appendingPathComponent("Sources")
        var blocks: [(String, String)] = []
        for module in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let catalog = sources.appendingPathComponent(module).appendingPathComponent("\(module).docc")
            guard let articles = try? FileManager.default.contentsOfDirectory(atPath: catalog.path) else { continue }
            for article in articles.sorted() where article.hasSuffix(".md") {
                let text = try String(contentsOf: catalog.appendingPathComponent(article), encoding: .utf8)
                var rest = text[...]
                while let open = rest.range(of: "```swift\n") {
                    guard let close = rest.range(of: "```", range: open.upperBound ..< rest.endIndex) else { break }
                    blocks.append(("Sources/\(module)/\(module).docc/\(article)", String(rest[open.upperBound ..< close.lowerBound])))
                    rest = rest[close.upperBound...]
                }
            }
        }
        return blocks
    }

    /// The example files, by name, but `main.swift` (which runs them).
    static func exampleFiles() throws -> [String: String] {
        let folder = root.appendingPathComponent("Tests/DocCExamples")
        var files: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasSuffix(".swift") && name != "main.swift" {
            files[name] = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
        }
        return files
    }

    @Test func everyArticleBlockIsAFileTheBuildCompiles() throws {
        let blocks = try Self.articleBlocks()
        let files = try Self.exampleFiles()
        #expect(blocks.count >= 3)
        for (article, block) in blocks {
            #expect(files.values.contains(block), "\(article) has a Swift block that is no file of Tests/DocCExamples: put it there as it stands (or change both)")
        }
        for (name, text) in files {
            #expect(blocks.contains { $0.block == text }, "Tests/DocCExamples/\(name) is in no DocC article: an example nobody reads, or one an article changed")
        }
    }

    @Test func theExamplesRun() throws {
        try withDirectory { dir in
            let (status, printed) = try ReadmeTests.runExample("docc-examples", in: dir)
            #expect(status == 0)
            #expect(printed == """
                6 trial
                rebuild: 1 events, 0 changes
                devices: 2 ipad
                stale version appended: false
                current version appended: true
                new subject appended: true

                """)
        }
    }
}

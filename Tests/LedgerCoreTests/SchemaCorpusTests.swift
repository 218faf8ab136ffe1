import Foundation
@_spi(Storage) import LedgerCore
import Testing

/// `Schemas/` in the repository.
let schemasDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Schemas")

func schemaFile(_ path: String) throws -> String {
    try String(contentsOf: schemasDirectory.appendingPathComponent(path), encoding: .utf8)
}

/// One example of `Schemas/examples/invalid.json`.
struct InvalidExample {
    var name: String
    var pointer: String
    var beyondSchema: Bool
    var line: String
}

func invalidExamples() throws -> [InvalidExample] {
    guard case .array(let items) = try JSONParser.parse(try schemaFile("examples/invalid.json")) else { return [] }
    return items.compactMap { item in
        guard case .object(let o) = item, case .string(let name)? = o["name"], case .string(let pointer)? = o["pointer"],
              case .string(let line)? = o["line"] else { return nil }
        return InvalidExample(name: name, pointer: pointer, beyondSchema: o["schema"] == .bool(false), line: line)
    }
}

@Suite struct SchemaCorpusTests {
    @Test func theCommittedSchemasAreWhatTheCatalogGenerates() throws {
        for file in EventSchemas.files() {
            let committed = try schemaFile(file.path)
            #expect(committed == file.schema.pretty() + "\n", "Schemas/\(file.path) is stale: run `ledger schemas --output Schemas`")
        }
        let committedEvents = try FileManager.default.contentsOfDirectory(atPath: schemasDirectory.appendingPathComponent("events").path)
        #expect(Set(committedEvents) == Set(EventSchemas.files().map(\.path).filter { $0.hasPrefix("events/") }.map { String($0.dropFirst(7)) }))
    }

    @Test func theDecoderAcceptsEveryValidExampleAndEveryLayoutHasOne() throws {
        let lines = try schemaFile("examples/valid.jsonl").split(separator: "\n")
        var seen: Set<String> = []
        for (i, line) in lines.enumerated() {
            switch EnvelopeDecoder.decode(Array(line.utf8), file: "valid.jsonl", line: i + 1) {
            case .success(let envelope): seen.insert("\(envelope.type) v\(envelope.schemaVersion)")
            case .failure(let problems): Issue.record("\(problems)")
            }
        }
        let layouts = EventCatalog.typeNames.flatMap { type in EventCatalog.versions(of: type).map { "\(type) v\($0)" } }
        #expect(Set(layouts).subtracting(seen).isEmpty, "no valid example of \(Set(layouts).subtracting(seen).sorted())")
    }

    @Test func theDecoderRejectsEveryInvalidExampleAtItsStatedField() throws {
        let examples = try invalidExamples()
        #expect(examples.count >= 30)
        for (i, example) in examples.enumerated() {
            let bytes = Array(example.line.utf8)
            switch EnvelopeDecoder.decode(bytes, file: "invalid.json", line: i + 1) {
            case .success:
                Issue.record("\(example.name): accepted")
            case .failure(let problems):
                #expect(problems.problems.map(\.pointer).contains(example.pointer),
                        "\(example.name): expected a problem at \(example.pointer), got \(problems)")
            }
        }
    }

    @Test func theInvalidExamplesCoverEveryKindOfInputError() throws {
        let names = Set(try invalidExamples().map(\.name))
        for kind in ["not JSON", "unknown type", "missing envelope field", "missing data field", "extra envelope field", "extra data field",
                     "wrong JSON type in the envelope", "wrong JSON type in data", "bad UUID", "bad timestamp", "zone-less timestamp",
                     "unknown source", "empty subject", "oversized event"] {
            #expect(names.contains(kind), "no invalid example of \(kind)")
        }
    }

    @Test func everyPolicyPackIsStrictJSONNamedAfterItsFile() throws {
        for name in ["reference", "handz", "photolala", "facerecall", "careguide", "stampbook"] {
            guard case .object(let pack) = try JSONParser.parse(try schemaFile("policies/\(name).json")) else {
                Issue.record("policies/\(name).json is not an object")
                continue
            }
            #expect(pack["name"] == .string(name))
            #expect(pack["subscription"] != nil)
        }
    }
}

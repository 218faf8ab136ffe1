@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

@Suite struct JSONParserTests {
    func parse(_ text: String) -> JSON? { try? JSONParser.parse(text) }

    func failure(_ text: String) -> JSONSyntaxError? {
        do { _ = try JSONParser.parse(text); return nil } catch { return error }
    }

    @Test func objectsKeepTheirMembersInInputOrder() throws {
        let value = try JSONParser.parse(#" {"b": 1, "a": [true, false, null], "c": {"d": "e"}} "#)
        guard case .object(let object) = value else { Issue.record("not an object"); return }
        #expect(object.keys == ["b", "a", "c"])
        #expect(object["a"] == .array([.bool(true), .bool(false), .null]))
        #expect(object["c"] == .object(JSONObject([("d", .string("e"))])))
    }

    @Test func numbersKeepTheirLiteralTextAndSayWhetherTheyAreWhole() throws {
        guard case .object(let object) = try JSONParser.parse(#"{"a": 1, "b": 1.0, "c": -0, "d": 2.5e-3, "e": 9223372036854775808}"#) else {
            Issue.record("not an object"); return
        }
        func number(_ key: String) -> JSONNumber? { if case .number(let n)? = object[key] { n } else { nil } }
        #expect(number("a")?.int64 == 1)
        #expect(number("b")?.isInteger == false)
        #expect(number("b")?.text == "1.0")
        #expect(number("c")?.int64 == 0)
        #expect(number("d")?.double == 0.0025)
        #expect(number("e")?.int64 == nil, "too large for 64 bits")
    }

    @Test func escapesDecodeIncludingSurrogatePairs() throws {
        #expect(try JSONParser.parse(#""a\"b\\c\/d\n\t\u00e9\ud83d\ude00""#) == .string("a\"b\\c/d\n\té😀"))
    }

    @Test(arguments: [
        (#"{"a": 1, "a": 2}"#, "duplicate key \"a\"", "/a"),
        (#"{"a": [1, 2,]}"#, "expected a value, found ']'", "/a/2"),
        (#"{"a": 01}"#, "a number may not start with 0", "/a"),
        (#"{"a": 1.}"#, "expected a digit after '.'", "/a"),
        (#"{"a": "x"#, "unterminated string", "/a"),
        (#"{"a": "\ud800"}"#, "lone surrogate \\ud800 in a string", "/a"),
        (#"{"a": "\q"}"#, "invalid escape \\'q'", "/a"),
        (#"{"a": tru}"#, "expected true", "/a"),
        (#"{"a": 1} x"#, "unexpected text after the value", "/"),
        (#"{'a': 1}"#, "expected a key in double quotes", "/"),
        ("", "expected a value, found the end", "/"),
    ])
    func rejectsWhatRFC8259Forbids(text: String, message: String, pointer: String) {
        let error = failure(text)
        #expect(error?.message == message)
        #expect(error?.pointer == pointer)
    }

    /// The parser looks for a duplicate among an object's first 16 members one by one, then in
    /// a set: a key repeated anywhere, on either side of that, is found.
    @Test(arguments: [1, 15, 16, 17, 40])
    func aDuplicateKeyIsFoundAfterAnyNumberOfMembers(before: Int) {
        let members = (0 ..< before).map { "\"k\($0)\": \($0)" }
        #expect(parse("{" + members.joined(separator: ", ") + "}") != nil)
        for repeated in [0, before - 1] {
            let text = "{" + (members + ["\"k\(repeated)\": true", "\"z\": 1"]).joined(separator: ", ") + "}"
            #expect(failure(text)?.message == "duplicate key \"k\(repeated)\"")
            #expect(failure(text)?.pointer == "/k\(repeated)")
        }
    }

    @Test func rejectsRawControlCharactersAndInvalidUTF8InStrings() throws {
        #expect(failure("\"a\u{01}b\"")?.message == "control character byte 0x1 in a string; escape it")
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(failure(deep)?.message == "nested deeper than 64 levels")
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(parse(ok) != nil)
    }

    @Test func pointersEscapeTildeAndSlash() {
        #expect(JSONPointer.make([]) == "/")
        #expect(JSONPointer.make(["data", "a/b~c", "0"]) == "/data/a~1b~0c/0")
    }
}

/// Generated JSON trees, three levels deep, with awkward strings.
let jsonGenerator: Generator<JSON, AnySequence<Any>> = {
    let text = Gen.character(in: "\u{0}"..."ʯ").string(of: 0...8)
    let leaf = Gen<JSON>.oneOf(
        Gen.always(JSON.null).eraseToAnySequence(),
        Gen.bool.map { JSON.bool($0) }.eraseToAnySequence(),
        Gen.int64().map { JSON.integer($0) }.eraseToAnySequence(),
        text.map { JSON.string($0) }.eraseToAnySequence()
    ).eraseToAny()
    func level(_ inner: Generator<JSON, AnySequence<Any>>) -> Generator<JSON, AnySequence<Any>> {
        Gen<JSON>.oneOf(
            inner.eraseToAnySequence(),
            inner.array(of: 0...4).map { JSON.array($0) }.eraseToAnySequence(),
            zip(Gen.lowercaseLetter.string(of: 1...4), inner).array(of: 0...4).map { JSON.object(JSONObject($0)) }.eraseToAnySequence()
        ).eraseToAny()
    }
    return level(level(level(leaf)))
}()

@Suite struct JSONWriterTests {
    /// A whole number's text is its decimal form: single digits come from a table, the rest
    /// from `String(_:)`, and the two meet at 9 and 10.
    @Test func wholeNumbersAreWrittenAsTheirDecimalText() async {
        for value: Int64 in [-10, -1, 0, 1, 9, 10, 11, .min, .max] {
            #expect(JSONNumber(value).text == String(value))
            #expect(JSON.integer(value).serialized() == String(value))
        }
        await checkProperty(count: 300, input: Gen.int64()) { value in
            #expect(JSONNumber(value).text == String(value))
        }
    }

    @Test func writingThenParsingGivesBackTheSameValue() async {
        await checkProperty(count: 300, input: jsonGenerator) { (value) throws in
            let parsed = try JSONParser.parse(value.serialized())
            #expect(parsed == value)
        }
    }

    @Test func sortedKeysWriteTheCanonicalForm() throws {
        let value = try JSONParser.parse(#"{"b": {"z": 1, "y": 2}, "a": "\u0001é", "é": 0, "B": null}"#)
        #expect(value.serialized(sortedKeys: true) == #"{"B":null,"a":"\u0001é","b":{"y":2,"z":1},"é":0}"#)
        #expect(value.serialized() == #"{"b":{"z":1,"y":2},"a":"\u0001é","é":0,"B":null}"#)
    }
}

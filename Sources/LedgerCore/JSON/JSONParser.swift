/// Why a text is not valid JSON, and where.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The byte offset (from 0) where the problem was found.
    public let offset: Int
    /// The JSON pointer of the value being read (`/` at the top).
    public let pointer: String
    /// What is wrong.
    public let message: String

    public var description: String { "\(message) at byte \(offset + 1)" }
}

/// A strict RFC 8259 parser: one value, no trailing text, UTF-8 only, no duplicate keys,
/// nesting at most `maxDepth` deep (so no input can exhaust the stack).
public enum JSONParser {
    /// How deep arrays and objects may nest.
    public static let maxDepth = 64
    /// The longest number literal accepted.
    public static let maxNumberLength = 64

    /// Parses one JSON value from UTF-8 bytes.
    /// - Throws: `JSONSyntaxError` naming the offset and what was expected.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONSyntaxError) -> JSON {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    /// Parses one JSON value from UTF-8 bytes.
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSON {
        let result: Result<JSON, JSONSyntaxError> = bytes.withUnsafeBytes { raw in
            Result { () throws(JSONSyntaxError) -> JSON in try parse(raw) }
        }
        return try result.get()
    }

    /// Parses one JSON value from a string.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSON {
        try parse(Array(text.utf8))
    }
}

private struct Parser {
    let bytes: UnsafeRawBufferPointer
    var index = 0
    var path: [String] = []

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    func error(_ message: String) -> JSONSyntaxError {
        JSONSyntaxError(offset: index, pointer: JSONPointer.make(path), message: message)
    }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while let c = current, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { index += 1 }
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSON {
        guard let c = current else { throw error("expected a value, found the end") }
        switch c {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("expected a value, found \(describe(c))")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count,
              (0..<count).allSatisfy({ bytes[index + $0] == word.utf8Start[$0] })
        else { throw error("expected \(word)") }
        index += count
    }

    mutating func object(depth: Int) throws(JSONSyntaxError) -> JSON {
        guard depth <= JSONParser.maxDepth else { throw error("nested deeper than \(JSONParser.maxDepth) levels") }
        index += 1
        var members: [(String, JSON)] = []
        // A duplicate key is looked for among the members before; past 16 of them, in a set
        // of their keys (empty until then).
        var seen = Set<String>()
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(JSONObject(unique: members))
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw error("expected a key in double quotes") }
            let key = try string()
            path.append(key)
            if members.count >= 16 && seen.isEmpty { seen = Set(members.map(\.0)) }
            let duplicate = members.count < 16 ? members.contains { $0.0 == key } : !seen.insert(key).inserted
            guard !duplicate else { throw error("duplicate key \"\(key)\"") }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw error("expected ':' after the key") }
            index += 1
            skipWhitespace()
            members.append((key, try value(depth: depth)))
            path.removeLast()
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(JSONObject(unique: members))
            default: throw error("expected ',' or '}' after an object member")
            }
        }
    }

    mutating func array(depth: Int) throws(JSONSyntaxError) -> JSON {
        guard depth <= JSONParser.maxDepth else { throw error("nested deeper than \(JSONParser.maxDepth) levels") }
        index += 1
        var items: [JSON] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            path.append(String(items.count))
            items.append(try value(depth: depth))
            path.removeLast()
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(items)
            default: throw error("expected ',' or ']' after an array element")
            }
        }
    }

    mutating func number() throws(JSONSyntaxError) -> JSONNumber {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { throw error("expected a digit") }
        index += 1
        if first == UInt8(ascii: "0"), let c = current, isDigit(c) { throw error("a number may not start with 0") }
        while let c = current, isDigit(c) { index += 1 }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let c = current, isDigit(c) else { throw error("expected a digit after '.'") }
            while let c = current, isDigit(c) { index += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let c = current, isDigit(c) else { throw error("expected a digit in the exponent") }
            while let c = current, isDigit(c) { index += 1 }
        }
        guard index - start <= JSONParser.maxNumberLength else { throw error("number longer than \(JSONParser.maxNumberLength) characters") }
        return JSONNumber(literal: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        index += 1          // the opening quote
        let start = index
        // Fast path: no escapes.
        while let c = current, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\") {
            guard c >= 0x20 else { throw error("control character \(describe(c)) in a string; escape it") }
            index += 1
        }
        guard let stop = current else { throw error("unterminated string") }
        if stop == UInt8(ascii: "\"") {
            let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
            guard let text = StrictUTF8.string(raw) else { throw error("string is not valid UTF-8") }
            index += 1
            return text
        }
        // Slow path: decode escapes into a buffer.
        var out = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard let c = current else { throw error("unterminated string") }
            if c == UInt8(ascii: "\"") {
                index += 1
                break
            }
            if c < 0x20 { throw error("control character \(describe(c)) in a string; escape it") }
            if c != UInt8(ascii: "\\") {
                out.append(c)
                index += 1
                continue
            }
            index += 1
            guard let e = current else { throw error("unterminated escape") }
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("lone surrogate \\u\(String(scalar, radix: 16)) in a string")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw error("lone surrogate \\u\(String(scalar, radix: 16)) in a string") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw error("lone surrogate \\u\(String(scalar, radix: 16)) in a string")
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(unicode)).utf8))
            default:
                throw error("invalid escape \\\(describe(e))")
            }
        }
        guard let text = StrictUTF8.string(out) else { throw error("string is not valid UTF-8") }
        return text
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("expected four hex digits after \\u") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("expected four hex digits after \\u")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    func describe(_ c: UInt8) -> String {
        c >= 0x20 && c < 0x7F ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x" + String(c, radix: 16)
    }
}

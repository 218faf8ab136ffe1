@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import LedgerModels

/// The JSON of the requests and answers between a cluster's clients and its nodes. Every
/// answer is an object with `ok` (what the single-node call returns, as its JSON) or `error`.
enum ClusterWire {
    /// Keys keep their order: an answer prints as the single-store command prints it.
    static func encode(_ object: JSONObject) -> [UInt8] {
        var out: [UInt8] = []
        JSON.object(object).write(into: &out)
        return out
    }

    static func object(_ bytes: [UInt8], what: String) throws(LedgerError) -> JSONObject {
        guard case .object(let object)? = try? JSONParser.parse(bytes) else {
            throw LedgerError(.storage, "the \(what) is not a JSON object; are the nodes and this client the same version?")
        }
        return object
    }

    /// An answer: `{"ok": …}`.
    static func ok(_ value: JSON) -> [UInt8] { encode(["ok": value]) }

    /// An answer: `{"error": …}`.
    static func failure(_ error: LedgerError) -> [UInt8] { encode(["error": .object(json(of: error))]) }

    /// What an answer holds: its `ok`, or its `error` thrown.
    static func result(_ bytes: [UInt8], from subject: String) throws(LedgerError) -> JSON {
        let answer = try object(bytes, what: "answer on \(subject)")
        if case .object(let error)? = answer["error"] { throw ledgerError(error) }
        guard let value = answer["ok"] else { throw LedgerError(.storage, "the answer on \(subject) has neither ok nor error") }
        return value
    }

    static func json(of error: LedgerError) -> JSONObject {
        var object: JSONObject = ["code": .string(error.code.rawValue), "message": .string(error.message)]
        if let index = error.index { object["index"] = .integer(Int64(index)) }
        if let field = error.field { object["field"] = .string(field) }
        if let subject = error.subject { object["subject"] = .string(subject) }
        if let expected = error.expectedVersion { object["expected"] = json(of: expected) }
        if let actual = error.actualVersion { object["actual"] = .integer(Int64(clamping: actual)) }
        if let position = error.position { object["position"] = .integer(Int64(clamping: position)) }
        if !error.violations.isEmpty {
            object["violations"] = .array(error.violations.map { .object(["field": .string($0.field), "message": .string($0.message)]) })
        }
        return object
    }

    static func ledgerError(_ object: JSONObject) -> LedgerError {
        var error = LedgerError(LedgerError.Code(rawValue: string(object["code"]) ?? "storage"), string(object["message"]) ?? "a node failed",
                                index: integer(object["index"]).map(Int.init), field: string(object["field"]), subject: string(object["subject"]),
                                position: integer(object["position"]).map { UInt64(clamping: $0) })
        error.expectedVersion = object["expected"].flatMap(expectedVersion)
        error.actualVersion = integer(object["actual"]).map { UInt64(clamping: $0) }
        if case .array(let items)? = object["violations"] {
            error.violations = items.compactMap { item in
                guard case .object(let v) = item, let field = string(v["field"]), let message = string(v["message"]) else { return nil }
                return LedgerError.Violation(field: field, message: message)
            }
        }
        return error
    }

    static func json(of expected: ExpectedVersion) -> JSON {
        switch expected {
        case .any: "any"
        case .noStream: "noStream"
        case .exact(let v): .integer(Int64(clamping: v))
        }
    }

    static func expectedVersion(_ json: JSON) -> ExpectedVersion? {
        switch json {
        case .string("any"): .any
        case .string("noStream"): .noStream
        case .number(let n): n.int64.flatMap { $0 >= 0 ? .exact(UInt64($0)) : nil }
        default: nil
        }
    }

    static func json(of outcome: AppendOutcome) -> JSON {
        switch outcome {
        case .appended(let position, let version):
            .object(["position": .integer(Int64(clamping: position)), "version": .integer(Int64(clamping: version))])
        case .duplicate(let position):
            .object(["duplicate": .integer(Int64(clamping: position))])
        }
    }

    static func outcome(_ json: JSON) -> AppendOutcome? {
        guard case .object(let object) = json else { return nil }
        if let duplicate = integer(object["duplicate"]) { return .duplicate(position: UInt64(clamping: duplicate)) }
        guard let position = integer(object["position"]), let version = integer(object["version"]) else { return nil }
        return .appended(position: UInt64(clamping: position), version: UInt64(clamping: version))
    }

    static func json(of card: ViewCard) -> JSON {
        .object([
            "headline": .array(card.headline.map { part in
                switch part {
                case .text(let words): .object(["text": .string(words)])
                case .value(let value): .object(["value": value])
                }
            }),
            "rows": .array(card.rows.map { .array([.string($0.label), $0.value]) }),
        ])
    }

    static func card(_ json: JSON) -> ViewCard? {
        guard case .object(let object) = json, case .array(let headline)? = object["headline"], case .array(let rows)? = object["rows"] else { return nil }
        let parts: [ViewCard.Part] = headline.compactMap { part in
            guard case .object(let p) = part else { return nil }
            if let words = string(p["text"]) { return .text(words) }
            return p["value"].map { .value($0) }
        }
        let labelled: [(label: String, value: JSON)] = rows.compactMap { row in
            guard case .array(let pair) = row, pair.count == 2, let label = string(pair[0]) else { return nil }
            return (label, pair[1])
        }
        return ViewCard(headline: parts, rows: labelled)
    }

    static func string(_ json: JSON?) -> String? {
        if case .string(let s)? = json { return s }
        return nil
    }

    static func integer(_ json: JSON?) -> Int64? {
        if case .number(let n)? = json { return n.int64 }
        return nil
    }
}

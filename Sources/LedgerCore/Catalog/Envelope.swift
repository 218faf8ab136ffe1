/// One event as read from a JSONL line (SPEC §2.1), every field checked: the envelope, and
/// `data` checked against its type's layout and encoded as the log stores it.
/// (`EventCatalog.decode` or the layout turns `payload` back into typed data or JSON.)
@_spi(Storage) public struct Envelope: Sendable, Hashable {
    /// The idempotency key, when the line gives one (otherwise it is derived from the content).
    public var id: EventID?
    /// A type of SPEC §2.3.
    public var type: String
    /// The account the fact is about.
    public var subject: String
    /// Business time.
    public var occurredAt: Timestamp
    /// Where it came from.
    public var source: EventSource
    /// The version of the type's data layout (defaults to the type's current version).
    public var schemaVersion: UInt16
    /// The line's `data`, as the binary payload of its layout version.
    public var payload: [UInt8]
    /// Correlation, causation, actor, device…
    public var meta: [String: String]
    /// Only in exported lines: the position the event had.
    public var position: UInt64?
    /// Only in exported lines: when the ledger recorded it.
    public var recordedAt: Timestamp?

    public init(id: EventID?, type: String, subject: String, occurredAt: Timestamp, source: EventSource, schemaVersion: UInt16,
                payload: [UInt8], meta: [String: String], position: UInt64? = nil, recordedAt: Timestamp? = nil) {
        self.payload = payload
        self.id = id
        self.type = type
        self.subject = subject
        self.occurredAt = occurredAt
        self.source = source
        self.schemaVersion = schemaVersion
        self.meta = meta
        self.position = position
        self.recordedAt = recordedAt
    }
}

/// One problem with one line of input, reported as `FILE:LINE: POINTER: MESSAGE` (SPEC §5).
@_spi(Storage) public struct InputProblem: Sendable, Hashable, CustomStringConvertible {
    /// The file, as named on the command line (`-` for standard input).
    public var file: String
    /// The line, from 1.
    public var line: Int
    /// The JSON pointer of the offending field, `/` for the line itself.
    public var pointer: String
    /// What is wrong, and what was expected.
    public var message: String

    public init(file: String, line: Int, pointer: String, message: String) {
        self.file = file
        self.line = line
        self.pointer = pointer
        self.message = message
    }

    public var description: String { "\(file):\(line): \(pointer): \(message)" }

    /// SPEC §5's error object, as `--json` lists it and the server answers it.
    public var json: JSON {
        .object(JSONObject([("file", .string(file)), ("line", .integer(Int64(line))), ("pointer", .string(pointer)), ("message", .string(message))]))
    }
}

/// Every problem found in some input: a batch with any is rejected whole.
@_spi(Storage) public struct InputProblems: Error, Sendable, Hashable, CustomStringConvertible {
    /// The problems, in input order.
    public var problems: [InputProblem]

    public init(_ problems: [InputProblem]) { self.problems = problems }

    /// One problem per line, as `FILE:LINE: POINTER: MESSAGE`.
    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// Reads JSONL lines into envelopes, strictly: no unknown or missing keys, no wrong JSON types,
/// times with a zone, known types and sources. Every problem of a line is reported.
@_spi(Storage) public enum EnvelopeDecoder {
    /// The longest line read, in bytes: room for any event within `EventLimits.maxEventBytes`
    /// however it is spelt (a control character in a string takes six bytes as `\u0001`), and
    /// a bound on the memory one line takes. The limit itself is on the event, encoded.
    public static let maxLineBytes = 8 * EventLimits.maxEventBytes

    /// The top-level keys an event line may have. `position` and `recordedAt` appear in
    /// exported lines; plain append ignores them.
    public static let keys = ["id", "type", "subject", "occurredAt", "source", "schemaVersion", "data", "meta", "position", "recordedAt"]

    /// Decodes one line (`length` is its full length when `bytes` was cut short).
    public static func decode(_ bytes: [UInt8], length: Int? = nil, file: String, line: Int) -> Result<Envelope, InputProblems> {
        func problem(_ pointer: String, _ message: String) -> InputProblem {
            InputProblem(file: file, line: line, pointer: pointer, message: message)
        }
        let size = length ?? bytes.count
        guard size <= maxLineBytes else {
            return .failure(InputProblems([problem("/", "line is \(size) bytes, over the \(maxLineBytes)-byte limit of a line (an event is at most \(EventLimits.maxEventBytes) bytes encoded)")]))
        }
        let json: JSON
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            return .failure(InputProblems([problem("/", "not valid JSON: \(error.message) at byte \(error.offset + 1)")]))
        }
        guard case .object(let object) = json else {
            return .failure(InputProblems([problem("/", "expected a JSON object, got \(describe(json))")]))
        }

        var problems: [InputProblem] = []
        for key in object.keys where !keys.contains(key) {
            problems.append(problem(JSONPointer.make([key]), "unknown key; an event has id, type, subject, occurredAt, source, schemaVersion, data and meta"))
        }

        func required(_ key: String, _ what: String) -> JSON? {
            guard let value = object[key] else {
                problems.append(problem("/" + key, "missing; \(what)"))
                return nil
            }
            return value
        }
        func string(_ key: String, _ value: JSON) -> String? {
            guard case .string(let s) = value else {
                problems.append(problem("/" + key, "expected a string, got \(describe(value))"))
                return nil
            }
            return s
        }
        func time(_ key: String, _ value: JSON) -> Timestamp? {
            guard case .string(let s) = value, let t = Timestamp(rfc3339: s) else {
                problems.append(problem("/" + key, Timestamp.inputProblem(value)))
                return nil
            }
            return t
        }

        var id: EventID?
        if let value = object["id"], let text = string("id", value) {
            id = EventID(text)
            if id == nil { problems.append(problem("/id", "expected a UUID such as 0b6d2f4e-8a1c-4c3b-9f00-1234567890ab, got \(describe(value))")) }
        }

        var type: String?
        if let value = required("type", "every event names its type, such as subscription.purchased"), let text = string("type", value) {
            if EventCatalog.currentVersions[text] != nil { type = text } else { problems.append(problem("/type", "unknown event type \(describe(value))")) }
        }

        var subject: String?
        if let value = required("subject", "every event names the account it is about"), let text = string("subject", value) {
            if let message = EventLimits.subjectProblem(text) { problems.append(problem("/subject", message)) } else { subject = text }
        }

        let occurredAt = required("occurredAt", "every event says when it happened").flatMap { time("occurredAt", $0) }

        var source: EventSource?
        if let value = required("source", "one of appstore, app, support, system, import"), let text = string("source", value) {
            source = EventSource(rawValue: text)
            if source == nil { problems.append(problem("/source", "expected one of appstore, app, support, system, import, got \(describe(value))")) }
        }

        var schemaVersion: UInt16?
        if let value = object["schemaVersion"] {
            if case .number(let n) = value, let v = n.int64, v >= 1, v <= Int64(UInt16.max) {
                schemaVersion = UInt16(v)
                if let type, case let accepted = EventCatalog.versions(of: type), !accepted.contains(UInt16(v)) {
                    let list = accepted.map(String.init).joined(separator: ", ")
                    problems.append(problem("/schemaVersion", "\(type) has schema version\(accepted.count == 1 ? "" : "s") \(list), got \(v)"))
                }
            } else {
                problems.append(problem("/schemaVersion", "expected a whole number from 1, got \(describe(value))"))
            }
        }

        // The data is checked against its layout once the type and version are known.
        var data = JSONObject()
        var payload: [UInt8] = []
        var dataIsObject = true
        if let value = object["data"] {
            if case .object(let o) = value { data = o } else {
                dataIsObject = false
                problems.append(problem("/data", "expected an object, got \(describe(value))"))
            }
        }
        if dataIsObject, let type, let layout = EventCatalog.layout(of: type, version: schemaVersion ?? EventCatalog.currentVersions[type] ?? 1) {
            let required = layout.fields.filter(\.isRequired).map(\.name)
            if object["data"] == nil && !required.isEmpty {
                problems.append(problem("/data", "missing; \(type) data has \(required.joined(separator: ", "))"))
            } else {
                switch layout.decode(data) {
                case .success(let value):
                    payload = layout.binary(value)
                case .failure(let failure):
                    for violation in failure.violations {
                        problems.append(problem(JSONPointer.make(["data", violation.field]), violation.message))
                    }
                }
            }
        }

        var meta: [String: String] = [:]
        if let value = object["meta"] {
            if case .object(let o) = value {
                for member in o.members {
                    if case .string(let s) = member.value {
                        meta[member.key] = s
                    } else {
                        problems.append(problem(JSONPointer.make(["meta", member.key]), "expected a string, got \(describe(member.value))"))
                    }
                }
                if let metaProblem = EventLimits.metaProblem(meta) { problems.append(problem(metaProblem.pointer, metaProblem.message)) }
            } else {
                problems.append(problem("/meta", "expected an object of strings, got \(describe(value))"))
            }
        }

        var position: UInt64?
        if let value = object["position"] {
            if case .number(let n) = value, let v = n.int64, v >= 1 { position = UInt64(v) } else {
                problems.append(problem("/position", "expected a whole number from 1, got \(describe(value))"))
            }
        }
        let recordedAt = object["recordedAt"].flatMap { time("recordedAt", $0) }

        guard problems.isEmpty, let type, let subject, let occurredAt, let source else { return .failure(InputProblems(problems)) }
        let version = schemaVersion ?? EventCatalog.currentVersions[type] ?? 1
        let encoded = EventRecord.eventSize(type: type, subject: subject, schemaVersion: version, meta: meta, payloadBytes: payload.count)
        guard encoded <= EventLimits.maxEventBytes else {
            return .failure(InputProblems([problem("/", "event is \(encoded) bytes, over the \(EventLimits.maxEventBytes)-byte limit")]))
        }
        return .success(Envelope(id: id, type: type, subject: subject, occurredAt: occurredAt, source: source,
                                 schemaVersion: version, payload: payload, meta: meta,
                                 position: position, recordedAt: recordedAt))
    }

    /// A value as messages quote it: its JSON, cut at 60 characters.
    static func describe(_ value: JSON) -> String {
        let text = value.serialized()
        return text.count > 60 ? String(text.prefix(57)) + "…" : text
    }
}

import Foundation

/// Where a fact came from.
public enum EventSource: String, Sendable, Hashable, CaseIterable, Codable {
    case appstore, app, support, system, `import`

    /// The one-byte code used in the binary record.
    public var code: UInt8 {
        switch self {
        case .appstore: 1
        case .app: 2
        case .support: 3
        case .system: 4
        case .import: 5
        }
    }

    /// The source for a record code, `nil` for an unknown one.
    public init?(code: UInt8) {
        switch code {
        case 1: self = .appstore
        case 2: self = .app
        case 3: self = .support
        case 4: self = .system
        case 5: self = .import
        default: return nil
        }
    }
}

/// The size limits of the envelope, in UTF-8 bytes.
public enum EventLimits {
    /// A subject is 1…256 bytes.
    public static let maxSubjectBytes = 256
    /// A type name is 1…128 bytes of `a-z A-Z 0-9 . _ -`.
    public static let maxTypeBytes = 128
    /// A whole event, encoded (`EventRecord.eventSize`), is at most 64 KiB: the same figure
    /// however its JSON line is spelt, so an export always appends back.
    public static let maxEventBytes = 65_536
    /// Meta, encoded (keys, values and their lengths), is at most 4 KiB.
    public static let maxMetaBytes = 4_096

    /// What is wrong with a subject, `nil` if nothing: the one rule both JSON input and
    /// `EventDraft.validate()` apply.
    public static func subjectProblem(_ subject: String) -> String? {
        let count = subject.utf8.count
        if count == 0 { return "must not be empty" }
        if count > maxSubjectBytes { return "is \(count) bytes, over the \(maxSubjectBytes)-byte limit" }
        // Swift's String equality is canonical equivalence, the store's keys are bytes: "café"
        // spelt two ways would be one customer to one and two to the other. Only NFC, the one
        // spelling of each, is accepted (ASCII is NFC already).
        if !subject.utf8.allBytes({ $0 < 0x80 }),
           !subject.precomposedStringWithCanonicalMapping.utf8.elementsEqual(subject.utf8) {
            return "is not in Unicode normalization form C; normalize it (NFC), so that one name has one spelling"
        }
        return nil
    }

    /// What is wrong with meta, as (JSON pointer, message), `nil` if nothing.
    public static func metaProblem(_ meta: [String: String]) -> (pointer: String, message: String)? {
        if meta.keys.contains("") { return ("/meta/", "keys must not be empty") }
        let size = EventRecord.encodedMetaSize(meta)
        if size > maxMetaBytes { return ("/meta", "is \(size) bytes encoded, over the \(maxMetaBytes)-byte limit") }
        return nil
    }
}

/// An event not yet in the log: what a caller appends.
///
/// ```swift
/// let draft = EventDraft(subject: "user-42", type: "account.created",
///                        occurredAt: Timestamp(rfc3339: "2026-03-01T09:30:00Z")!,
///                        source: .app, payload: encodedData)
/// ```
public struct EventDraft: Sendable, Hashable {
    /// The idempotency key.
    public var id: EventID
    /// The account the fact is about: one stream per subject.
    public var subject: String
    /// The event type, such as `subscription.purchased`.
    public var type: String
    /// The version of the type's data layout.
    public var schemaVersion: UInt16
    /// When it happened (business time).
    public var occurredAt: Timestamp
    /// Where it came from.
    public var source: EventSource
    /// Correlation, causation, actor, device…
    public var meta: [String: String]
    /// The type-specific data, already encoded.
    public var payload: [UInt8]

    /// Creates a draft. Nothing is checked until it is appended (or `validate()` is called).
    public init(id: EventID = .random(), subject: String, type: String, schemaVersion: UInt16 = 1,
                occurredAt: Timestamp, source: EventSource, meta: [String: String] = [:], payload: [UInt8] = []) {
        self.id = id
        self.subject = subject
        self.type = type
        self.schemaVersion = schemaVersion
        self.occurredAt = occurredAt
        self.source = source
        self.meta = meta
        self.payload = payload
    }

    /// Creates a draft whose subject arrives as raw bytes (from a file or a network body),
    /// checking that they are UTF-8.
    /// - Throws: `LedgerError.invalidEvent` with field `/subject` for invalid UTF-8.
    public init(id: EventID = .random(), subjectBytes: some Collection<UInt8>, type: String, schemaVersion: UInt16 = 1,
                occurredAt: Timestamp, source: EventSource, meta: [String: String] = [:], payload: [UInt8] = []) throws(LedgerError) {
        let subject = try Self.decodeUTF8(subjectBytes, field: "/subject")
        self.init(id: id, subject: subject, type: type, schemaVersion: schemaVersion, occurredAt: occurredAt,
                  source: source, meta: meta, payload: payload)
    }

    /// Decodes bytes that must be UTF-8.
    /// - Throws: `LedgerError.invalidEvent` naming `field` when they are not.
    public static func decodeUTF8(_ bytes: some Collection<UInt8>, field: String) throws(LedgerError) -> String {
        guard let text = StrictUTF8.string(bytes) else {
            throw LedgerError(.invalidEvent, "is not valid UTF-8", field: field)
        }
        return text
    }

    /// Checks the envelope's limits (occurredAt within years 0000–9999 among them), then that
    /// the type and schema version are in the event catalog and the payload decodes under that
    /// layout (`EventCatalog.check`): what the log runs on every event it appends.
    /// - Returns: the typed data, decoded and upcast (see `EventCatalog.check`).
    /// - Throws: `LedgerError.invalidEvent` naming the first field that breaks a rule.
    @discardableResult
    public func validate() throws(LedgerError) -> EventData {
        if let problem = EventLimits.subjectProblem(subject) {
            throw LedgerError(.invalidEvent, "subject " + problem, field: "/subject", subject: subject.isEmpty ? nil : subject)
        }
        let typeBytes = type.utf8
        if typeBytes.isEmpty || typeBytes.count > EventLimits.maxTypeBytes || !typeBytes.allBytes(Self.isTypeCharacter) {
            throw LedgerError(.invalidEvent, "type must be 1…\(EventLimits.maxTypeBytes) characters of a-z, A-Z, 0-9, '.', '_', '-'",
                              field: "/type", subject: subject)
        }
        if let problem = Timestamp.rangeProblem(occurredAt) {
            throw LedgerError(.invalidEvent, problem, field: "/occurredAt", subject: subject)
        }
        if schemaVersion == 0 {
            throw LedgerError(.invalidEvent, "schemaVersion starts at 1", field: "/schemaVersion", subject: subject)
        }
        if let problem = EventLimits.metaProblem(meta) {
            throw LedgerError(.invalidEvent, "meta " + problem.message, field: problem.pointer, subject: subject)
        }
        let size = EventRecord.eventSize(of: self)
        if size > EventLimits.maxEventBytes {
            throw LedgerError(.invalidEvent, "event is \(size) bytes, over the \(EventLimits.maxEventBytes)-byte limit", field: "/", subject: subject)
        }
        return try EventCatalog.check(self)
    }

    private static func isTypeCharacter(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

/// An event as the log holds it: the draft plus what the ledger stamped on it.
public struct StoredEvent: Sendable, Hashable {
    /// Global position, gap-free from 1.
    public var position: UInt64
    /// Version within the subject's stream, gap-free from 1.
    public var version: UInt64
    /// When the ledger recorded it (append time).
    public var recordedAt: Timestamp
    /// SHA-256 of the predecessor's hash and this record's bytes.
    public var hash: [UInt8]
    /// What was appended.
    public var draft: EventDraft

    public init(position: UInt64, version: UInt64, recordedAt: Timestamp, hash: [UInt8], draft: EventDraft) {
        self.position = position
        self.version = version
        self.recordedAt = recordedAt
        self.hash = hash
        self.draft = draft
    }

    public var id: EventID { draft.id }
    public var subject: String { draft.subject }
    public var type: String { draft.type }
    public var schemaVersion: UInt16 { draft.schemaVersion }
    public var occurredAt: Timestamp { draft.occurredAt }
    public var source: EventSource { draft.source }
    public var meta: [String: String] { draft.meta }
    public var payload: [UInt8] { draft.payload }
}

/// What an append expects a subject's stream to be at (optimistic concurrency).
public enum ExpectedVersion: Sendable, Hashable, CustomStringConvertible {
    /// No check.
    case any
    /// The subject has no events yet.
    case noStream
    /// The subject's last event has exactly this version.
    case exact(UInt64)

    /// Whether a stream at `actual` (0 = no events) satisfies this expectation.
    public func isSatisfied(by actual: UInt64) -> Bool {
        switch self {
        case .any: true
        case .noStream: actual == 0
        case .exact(let v): actual == v
        }
    }

    public var description: String {
        switch self {
        case .any: "any version"
        case .noStream: "no stream"
        case .exact(let v): "version \(v)"
        }
    }
}

/// Strict UTF-8 decoding, fast: the standard library's `String(decoding:)` is specialized and
/// quick but repairs bad bytes. ASCII (most ids, types and subjects) needs no check; otherwise
/// decoding is the identity exactly on valid UTF-8, so comparing the result with the input
/// rejects what it repaired. (`String(validating:)` is several times slower.)
public enum StrictUTF8 {
    @inlinable
    public static func string<C: Collection<UInt8>>(_ bytes: C) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if bytes.allSatisfy({ $0 < 0x80 }) { return text }
        return text.utf8.elementsEqual(bytes) ? text : nil
    }
}

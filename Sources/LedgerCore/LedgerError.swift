/// An error from the ledger: bad input, a conflict, or trouble in the storage underneath.
///
/// `code` says which; `message` says what went wrong and what to do. Input errors name the
/// event (`index` in its batch, and `file`/`line` when it came from a file) and the field as a
/// JSON pointer (`/subject`, `/data/expiresAt`).
public struct LedgerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of error this is. Extensible: compare against the static members.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// An event breaks a rule of the envelope (size, UTF-8, empty subject…). Nothing of its batch was written.
        public static let invalidEvent = Code(rawValue: "invalidEvent")
        /// An event's id is already stored with other content.
        public static let idConflict = Code(rawValue: "idConflict")
        /// A subject's version is not what the append expected (optimistic concurrency).
        public static let wrongExpectedVersion = Code(rawValue: "wrongExpectedVersion")
        /// The storage underneath failed (disk, permissions, LMDB); `storageCode` has LMDB's code.
        public static let storage = Code(rawValue: "storage")
        /// A stored record cannot be decoded: the store is damaged.
        public static let corruptRecord = Code(rawValue: "corruptRecord")
        /// The store was written by a newer version of this software.
        public static let unsupportedFormat = Code(rawValue: "unsupportedFormat")
        /// The log has been closed.
        public static let closed = Code(rawValue: "closed")
        /// The store was opened read-only (`EventLog.Options.readOnly`): appends, rebuilds and
        /// erasures need it opened for writing.
        public static let readOnly = Code(rawValue: "readOnly")
        /// A read model was asked for by a name the ledger does not have; the message lists
        /// the names it has.
        public static let unknownModel = Code(rawValue: "unknownModel")
        /// A rebuild is already running in this process; wait for it to finish.
        public static let rebuildRunning = Code(rawValue: "rebuildRunning")
        /// An argument that is not an event is refused (a token's name taken or too long…);
        /// the message says what it must be.
        public static let invalidArgument = Code(rawValue: "invalidArgument")
        /// A cluster's servers (NATS JetStream) or the node that owns a subject did not answer
        /// in time. An append may or may not have been stored: retry it, since appends are
        /// idempotent.
        public static let unavailable = Code(rawValue: "unavailable")
    }

    /// One thing wrong with an event's input: the field as a JSON pointer, and what is wrong.
    public struct Violation: Sendable, Hashable {
        public var field: String
        public var message: String
        public init(field: String, message: String) {
            self.field = field
            self.message = message
        }
    }

    /// What kind of error this is.
    public var code: Code
    /// What went wrong and what to do.
    public var message: String
    /// The event's index (from 0) in the batch it came in.
    public var index: Int?
    /// The file the event came from, for input read from files.
    public var file: String?
    /// The line in `file` (from 1).
    public var line: Int?
    /// The offending field as a JSON pointer, `/` for the event as a whole.
    public var field: String?
    /// The subject concerned.
    public var subject: String?
    /// For `.wrongExpectedVersion`: what the append expected.
    public var expectedVersion: ExpectedVersion?
    /// For `.wrongExpectedVersion`: the subject's actual version (0 = no events).
    public var actualVersion: UInt64?
    /// A position in the log the error is about (the stored duplicate, the damaged record).
    public var position: UInt64?
    /// For `.storage`: LMDB's (or the OS's) return code.
    public var storageCode: Int32?
    /// For `.invalidEvent` from a payload's rules: every field that breaks its own rule, in
    /// field order (`field` is the first of them), so that a form can mark them all at once; the
    /// rules across fields are checked, and listed here, once every field holds on its own.
    public var violations: [Violation] = []

    /// Creates an error.
    public init(_ code: Code, _ message: String, index: Int? = nil, field: String? = nil, subject: String? = nil,
                position: UInt64? = nil) {
        self.code = code
        self.message = message
        self.index = index
        self.field = field
        self.subject = subject
        self.position = position
    }

    /// `.invalidEvent` for the payload rules `violations` break (fields relative to `data`):
    /// the first as `field`, its message (with the other fields named) as `message`, all of
    /// them in `violations`.
    static func invalidData(_ violations: [FieldViolation], subject: String) -> LedgerError {
        let all = violations.map { Violation(field: JSONPointer.make(["data", $0.field]), message: $0.message) }
        var error = LedgerError(.invalidEvent, all[0].message, field: all[0].field, subject: subject)
        if all.count > 1 {
            error.message += " (and \(all.count - 1) more: \(all.dropFirst().map(\.field).joined(separator: ", ")))"
        }
        error.violations = all
        return error
    }

    public var description: String {
        var prefix = ""
        if let file { prefix += "\(file):" }
        if let line { prefix += "\(line):" }
        if prefix.isEmpty, let index { prefix = "event \(index):" }
        if let field { prefix += prefix.isEmpty ? "\(field):" : " \(field):" }
        return prefix.isEmpty ? message : "\(prefix) \(message)"
    }
}

extension LedgerError {
    /// `subject` is at `actual`, not at the version an append `expected`: what a single store
    /// and a cluster's node both say.
    package static func wrongExpectedVersion(subject: String, expected: ExpectedVersion, actual: UInt64) -> LedgerError {
        var error = LedgerError(.wrongExpectedVersion, "subject \(subject) is at version \(actual), but the append expected \(expected); read the stream again and retry",
                                subject: subject)
        error.expectedVersion = expected
        error.actualVersion = actual
        return error
    }

    /// Event `id` is stored at `position` with other content than the draft's.
    package static func idConflict(_ id: EventID, storedAt position: UInt64, index: Int?, subject: String) -> LedgerError {
        LedgerError(.idConflict, "event id \(id) is already stored at position \(position) with other content; an id names one fact, so give a new fact a new id",
                    index: index, field: "/id", subject: subject, position: position)
    }
}

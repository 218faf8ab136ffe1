@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// One event of a streamed batch, with where it came from (for error messages) and, for a
/// restore, the position and recordedAt it had.
@_spi(Storage) public struct StreamedEvent: Sendable {
    /// What to append.
    public var draft: EventDraft
    /// The input file, for messages.
    public var file: String?
    /// The input line, for messages.
    public var line: Int?
    /// For a restore: the position the event must get.
    public var position: UInt64?
    /// For a restore: the recordedAt it keeps.
    public var recordedAt: Timestamp?
    /// For a replica (`EventLog.replicate`): the event's sequence in the log it comes from (a
    /// cluster's stream), kept beside its position here (`EventLog.origin(of:)`).
    package var origin: UInt64?

    public init(draft: EventDraft, file: String? = nil, line: Int? = nil, position: UInt64? = nil, recordedAt: Timestamp? = nil) {
        self.draft = draft
        self.file = file
        self.line = line
        self.position = position
        self.recordedAt = recordedAt
    }

    /// `error` with this event's file, line and subject filled in.
    func locate(_ error: LedgerError) -> LedgerError {
        var error = error
        error.file = error.file ?? file
        error.line = error.line ?? line
        error.subject = error.subject ?? (draft.subject.isEmpty ? nil : draft.subject)
        return error
    }
}

/// A source of events for a streamed batch: yields them one at a time, `nil` at the end.
@_spi(Storage) public protocol StreamedEvents {
    mutating func next() throws -> StreamedEvent?
}

/// What a streamed batch did.
@_spi(Storage) public struct StreamSummary: Sendable, Hashable {
    /// Events written.
    public var appended = 0
    /// Events already stored with the same content (nothing written).
    public var duplicates = 0
    /// The first position written, `nil` if nothing was.
    public var firstPosition: UInt64?
    /// The last position written, `nil` if nothing was.
    public var lastPosition: UInt64?

    public init() {}

    /// This summary followed by `next` (a later batch).
    public func merged(with next: StreamSummary) -> StreamSummary {
        var merged = self
        merged.appended += next.appended
        merged.duplicates += next.duplicates
        merged.firstPosition = firstPosition ?? next.firstPosition
        merged.lastPosition = next.lastPosition ?? lastPosition
        return merged
    }
}

extension EventLog {
    /// Appends a batch of any size atomically in bounded memory: the events are pulled from
    /// the source one at a time inside one write transaction. Duplicates (same id, same
    /// content) are skipped; the first conflict or invalid event aborts the whole batch.
    ///
    /// With `restoring`, every event keeps the `position` and `recordedAt` it carries: the
    /// positions must continue the store's exactly (so an export restores into an empty store).
    ///
    /// `makeEvents` must start from the beginning each time it is called: if the map fills,
    /// the transaction is retried from scratch with a grown map. The calling thread holds the
    /// store's write lock for the whole batch, so other appends wait.
    /// - Throws: `LedgerError` with the event's file and line; nothing is written.
    @_spi(Storage) public func appendStream(restoring: Bool = false, _ makeEvents: () throws -> any StreamedEvents) throws(LedgerError) -> StreamSummary {
        guard writer != nil else { throw LedgerError(.readOnly, "the log was opened read-only; open it without `readOnly` to append") }
        do {
            return try storage.commitStream(restoring: restoring, makeEvents)
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.storage(error, doing: "appending a batch")
        }
    }

    /// Appends events another store recorded (a cluster node folding its partitions of the
    /// stream): each keeps the `recordedAt` it carries, raised to the previous event's when
    /// it is earlier, and takes the next position; duplicates are skipped; the ledger derives
    /// nothing (the stream holds what was derived). `settings` are written in the same
    /// transaction, so a checkpoint commits with the events and their read models.
    /// - Throws: `LedgerError` for the first invalid or conflicting event; nothing is written.
    package func replicate(_ events: [StreamedEvent], settings: [String: JSONObject]) throws(LedgerError) -> StreamSummary {
        guard writer != nil else { throw LedgerError(.readOnly, "the log was opened read-only; open it without `readOnly` to append") }
        do {
            return try storage.commitStream(restoring: false, replicating: true, settings: settings) { () -> any StreamedEvents in
                ListedEvents(events: events)
            }
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.storage(error, doing: "appending a replicated batch")
        }
    }
}

/// Events already in memory, as a `StreamedEvents` source.
struct ListedEvents: StreamedEvents {
    let events: [StreamedEvent]
    var index = 0
    init(events: [StreamedEvent]) { self.events = events }
    mutating func next() throws -> StreamedEvent? {
        guard index < events.count else { return nil }
        defer { index += 1 }
        return events[index]
    }
}

extension EventLog {
    /// The sequence the event at `position` has in the log it was replicated from (a
    /// cluster's stream), `nil` for an event appended here.
    package func origin(of position: UInt64) throws(LedgerError) -> UInt64? {
        try storage.read("reading the origin of position \(position)") { txn in
            try txn.get(storage.meta, key: LogSchema.originKey(position)).flatMap { bytes in
                bytes.count == 8 ? bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : nil
            }
        }
    }
}

extension LogSchema {
    /// The `meta` key of a replicated event's origin sequence: `origin/` and its position.
    static func originKey(_ position: UInt64) -> [UInt8] { Array("origin/".utf8) + key(position) }
}

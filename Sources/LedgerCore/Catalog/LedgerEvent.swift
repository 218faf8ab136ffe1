import Crypto

/// A typed event: what an app or service appends through the library, and what a reader gets
/// back (with `data` upcast to its type's current layout).
///
/// ```swift
/// var purchase = SubscriptionPurchased()
/// purchase.productId = "pro.monthly"
/// …
/// let event = LedgerEvent(subject: "user-42", occurredAt: now, source: .appstore, data: purchase.eventData)
/// try log.append([event.draft()])
/// ```
public struct LedgerEvent: Sendable, Hashable {
    /// The idempotency key; `nil` derives one from the event's canonical bytes.
    public var id: EventID?
    /// The account the fact is about.
    public var subject: String
    /// Business time.
    public var occurredAt: Timestamp
    /// Where it came from.
    public var source: EventSource
    /// Correlation, causation, actor, device…
    public var meta: [String: String]
    /// The typed data.
    public var data: EventData

    public init(id: EventID? = nil, subject: String, occurredAt: Timestamp, source: EventSource,
                meta: [String: String] = [:], data: EventData) {
        self.id = id
        self.subject = subject
        self.occurredAt = occurredAt
        self.source = source
        self.meta = meta
        self.data = data
    }

    /// The event type name.
    public var type: String { data.type }

    /// The draft the log appends: data checked by the same rules as JSON input, encoded in
    /// the type's current layout, and the id derived when none is given.
    /// - Throws: `LedgerError.invalidEvent` naming the first field that breaks a rule.
    public func draft() throws(LedgerError) -> EventDraft {
        let payload = data.payload
        let version = Swift.type(of: payload).schemaVersion
        guard let layout = EventCatalog.layout(of: type, version: version) else {
            throw LedgerError(.invalidEvent, "unknown event type \(type)", field: "/type", subject: subject)
        }
        // The fields' input rules first: a time outside years 0000–9999 would otherwise be
        // reported as the text its JSON form makes ("expected an RFC 3339 time, got 10000-…").
        var violations = layout.ruleViolations(payload)
        if violations.isEmpty, case .failure(let failure) = layout.decode(layout.json(payload)) { violations = failure.violations }
        if !violations.isEmpty { throw LedgerError.invalidData(violations, subject: subject) }
        var draft = EventDraft(id: id ?? EventID(high: 0, low: 0), subject: subject, type: type, schemaVersion: version,
                               occurredAt: occurredAt, source: source, meta: meta, payload: layout.binary(payload))
        if id == nil { draft.id = EventIdentity.derive(for: draft) }
        try draft.validate()
        return draft
    }
}

extension StoredEvent {
    /// The event's data, typed: its payload decoded and upcast to the type's current layout.
    ///
    /// ```swift
    /// if case .subscriptionPurchased(let purchase) = try event.data { print(purchase.expiresAt) }
    /// ```
    /// - Throws: `LedgerError.corruptRecord` when the payload does not decode as its type.
    public var data: EventData {
        get throws(LedgerError) { try RecordedEvent(self).event.data }
    }
}

/// A typed event read from the log: the stored event with its data decoded and upcast.
public struct RecordedEvent: Sendable, Hashable {
    /// Global position.
    public var position: UInt64
    /// Version within the subject's stream.
    public var version: UInt64
    /// When the ledger recorded it.
    public var recordedAt: Timestamp
    /// The schema version it was written in (its data is upcast to the current one).
    public var storedSchemaVersion: UInt16
    /// The event, with its stored id.
    public var event: LedgerEvent

    /// Decodes a stored event.
    /// - Throws: `LedgerError.corruptRecord` when its payload does not decode as its type.
    public init(_ stored: StoredEvent) throws(LedgerError) {
        guard let data = EventCatalog.decode(type: stored.type, version: stored.schemaVersion, payload: stored.payload) else {
            throw LedgerError(.corruptRecord, "the payload at position \(stored.position) does not decode as \(stored.type) version \(stored.schemaVersion); run `ledger verify`",
                              subject: stored.subject, position: stored.position)
        }
        self.init(stored, data: data)
    }

    /// A stored event with its data already decoded and upcast (what `EventDraft.validate()`
    /// returned for it).
    public init(_ stored: StoredEvent, data: EventData) {
        position = stored.position
        version = stored.version
        recordedAt = stored.recordedAt
        storedSchemaVersion = stored.schemaVersion
        event = LedgerEvent(id: stored.id, subject: stored.subject, occurredAt: stored.occurredAt, source: stored.source,
                            meta: stored.meta, data: data)
    }

    init(position: UInt64, version: UInt64, recordedAt: Timestamp, storedSchemaVersion: UInt16, event: LedgerEvent) {
        self.position = position
        self.version = version
        self.recordedAt = recordedAt
        self.storedSchemaVersion = storedSchemaVersion
        self.event = event
    }

    public var id: EventID { event.id ?? EventID(high: 0, low: 0) }
    public var subject: String { event.subject }
    public var type: String { event.type }
    public var occurredAt: Timestamp { event.occurredAt }
    public var data: EventData { event.data }
}

/// Ids derived from an event's content, for input that gives none.
public enum EventIdentity {
    /// A UUID (version 8, RFC 9562) made of the first 16 bytes of the SHA-256 of the draft's
    /// canonical bytes: its content as the log stores it (`EventRecord.content`) with the id
    /// zeroed. Data is encoded by its layout (times as UTC milliseconds, optional keys absent
    /// or `null` alike) and meta sorted, so the same fact written with different spacing, key
    /// order or time zone gets the same id, and re-appending a file is a no-op.
    public static func derive(for draft: EventDraft) -> EventID {
        var content = draft
        content.id = EventID(high: 0, low: 0)
        var bytes = Array(SHA256.hash(data: EventRecord.content(of: content)).prefix(16))
        bytes[6] = bytes[6] & 0x0F | 0x80   // version 8
        bytes[8] = bytes[8] & 0x3F | 0x80   // RFC 9562 variant
        return EventID(bytes: bytes) ?? EventID(high: 0, low: 0)
    }

    /// A UUID (version 8) of `name`, made as `derive` makes one of content: for ids that stand
    /// for something outside the event's bytes (an App Store notification and the type it
    /// yields), so that a retry gets the same id.
    public static func derive(named name: String) -> EventID {
        var bytes = Array(SHA256.hash(data: Array(name.utf8)).prefix(16))
        bytes[6] = bytes[6] & 0x0F | 0x80   // version 8
        bytes[8] = bytes[8] & 0x3F | 0x80   // RFC 9562 variant
        return EventID(bytes: bytes) ?? EventID(high: 0, low: 0)
    }
}

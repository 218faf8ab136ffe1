extension Envelope {
    /// The draft the log appends: the line's id, or one derived from its canonical content.
    public var draft: EventDraft {
        var draft = EventDraft(id: id ?? EventID(high: 0, low: 0), subject: subject, type: type, schemaVersion: schemaVersion,
                               occurredAt: occurredAt, source: source, meta: meta, payload: payload)
        if id == nil { draft.id = EventIdentity.derive(for: draft) }
        return draft
    }
}

/// The canonical JSONL form of stored events, as `ledger export` writes them.
@_spi(Storage) public enum EventLine {
    /// A stored event as one canonical line (no newline): sorted keys, UTC millisecond times,
    /// `schemaVersion` and `data` as stored (never upcast, so the line appends back to the same
    /// event), `meta` only when not empty, plus `position` and `recordedAt`. DEL and C1
    /// controls are `\u00XX` escapes (`JSON.Escaping.output`): the line is output, which a
    /// terminal may show; it reads back as the same event.
    /// - Throws: `LedgerError.corruptRecord` when the payload does not decode as its type.
    public static func export(_ stored: StoredEvent) throws(LedgerError) -> [UInt8] {
        guard var object = object(of: stored.draft) else {
            throw LedgerError(.corruptRecord, "the payload at position \(stored.position) does not decode as \(stored.type) version \(stored.schemaVersion); run `ledger verify`",
                              subject: stored.subject, position: stored.position)
        }
        object["position"] = .integer(Int64(clamping: stored.position))
        object["recordedAt"] = .string(stored.recordedAt.description)
        var out: [UInt8] = []
        JSON.object(object).write(into: &out, sortedKeys: true, escaping: .output)
        return out
    }

    /// A draft as one canonical line, as `export` writes its event but without `position` and
    /// `recordedAt` (the bytes a cluster's stream holds: canonical, `JSON.Escaping.canonical`);
    /// `EventDraft(jsonLine:)` reads it back.
    /// - Throws: `LedgerError.invalidEvent` when the payload does not decode as its type.
    public static func line(of draft: EventDraft) throws(LedgerError) -> [UInt8] {
        guard let object = object(of: draft) else {
            throw LedgerError(.invalidEvent, "the payload does not decode as \(draft.type) version \(draft.schemaVersion)", field: "/data", subject: draft.subject)
        }
        var out: [UInt8] = []
        JSON.object(object).write(into: &out, sortedKeys: true)
        return out
    }

    private static func object(of draft: EventDraft) -> JSONObject? {
        guard let layout = EventCatalog.layout(of: draft.type, version: draft.schemaVersion),
              let value = layout.decode(binary: draft.payload)
        else { return nil }
        var object: JSONObject = [
            "type": .string(draft.type), "subject": .string(draft.subject), "occurredAt": .string(draft.occurredAt.description),
            "source": .string(draft.source.rawValue), "schemaVersion": .integer(Int64(draft.schemaVersion)), "data": .object(layout.json(value)),
        ]
        if !draft.meta.isEmpty { object["meta"] = .object(JSONObject(draft.meta.map { ($0.key, .string($0.value)) })) }
        object["id"] = .string(draft.id.description)
        return object
    }
}

extension EventDraft {
    /// The event of one JSONL line (SPEC §2.1) as `ledger append` reads it: strict JSON, a known
    /// type and source, a time with a zone, the data its type's schema allows; an id derived
    /// from the content when the line has none.
    /// - Throws: `LedgerError.invalidEvent` naming the first problem's field; every problem is in
    ///   `violations`.
    public init(jsonLine: some StringProtocol) throws(LedgerError) {
        switch EnvelopeDecoder.decode(Array(jsonLine.utf8), file: "-", line: 1) {
        case .success(let envelope):
            self = envelope.draft
        case .failure(let problems):
            let all = problems.problems.map { LedgerError.Violation(field: $0.pointer, message: $0.message) }
            var error = LedgerError(.invalidEvent, all.first?.message ?? "not an event line", field: all.first?.field ?? "/")
            error.violations = all
            throw error
        }
    }
}

extension StoredEvent {
    /// The event as one canonical JSONL line, as `ledger export` writes it: sorted keys, UTC
    /// millisecond times, its position and recordedAt; `EventDraft(jsonLine:)` reads it back.
    public var jsonLine: String {
        get throws(LedgerError) { String(decoding: try EventLine.export(self), as: UTF8.self) }
    }
}

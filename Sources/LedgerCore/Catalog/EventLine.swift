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
    /// event), `meta` only when not empty, plus `position` and `recordedAt`.
    /// - Throws: `LedgerError.corruptRecord` when the payload does not decode as its type.
    public static func export(_ stored: StoredEvent) throws(LedgerError) -> [UInt8] {
        guard let layout = EventCatalog.layout(of: stored.type, version: stored.schemaVersion),
              let value = layout.decode(binary: stored.payload)
        else {
            throw LedgerError(.corruptRecord, "the payload at position \(stored.position) does not decode as \(stored.type) version \(stored.schemaVersion); run `ledger verify`",
                              subject: stored.subject, position: stored.position)
        }
        var object: JSONObject = [
            "type": .string(stored.type), "subject": .string(stored.subject), "occurredAt": .string(stored.occurredAt.description),
            "source": .string(stored.source.rawValue), "schemaVersion": .integer(Int64(stored.schemaVersion)), "data": .object(layout.json(value)),
        ]
        if !stored.meta.isEmpty { object["meta"] = .object(JSONObject(stored.meta.map { ($0.key, .string($0.value)) })) }
        object["id"] = .string(stored.id.description)
        object["position"] = .integer(Int64(clamping: stored.position))
        object["recordedAt"] = .string(stored.recordedAt.description)
        var out: [UInt8] = []
        JSON.object(object).write(into: &out, sortedKeys: true)
        return out
    }
}

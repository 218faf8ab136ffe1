extension Envelope {
    /// The draft the log appends: the line's id, or one derived from its canonical content.
    public var draft: EventDraft {
        EventDraft(id: id ?? EventIdentity.derive(type: type, subject: subject, occurredAt: occurredAt, source: source,
                                                  schemaVersion: schemaVersion, data: data, meta: meta),
                   subject: subject, type: type, schemaVersion: schemaVersion, occurredAt: occurredAt, source: source,
                   meta: meta, payload: payload)
    }
}

/// The canonical JSONL form of stored events, as `ledger export` writes them.
public enum EventLine {
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
        guard case .object(var object) = EventIdentity.canonicalJSON(
            type: stored.type, subject: stored.subject, occurredAt: stored.occurredAt, source: stored.source,
            schemaVersion: stored.schemaVersion, data: layout.json(value), meta: stored.meta)
        else { return [] }
        object["id"] = .string(stored.id.description)
        object["position"] = .integer(Int64(clamping: stored.position))
        object["recordedAt"] = .string(stored.recordedAt.description)
        var out: [UInt8] = []
        JSON.object(object).write(into: &out, sortedKeys: true)
        return out
    }
}

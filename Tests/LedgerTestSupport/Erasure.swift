@_spi(Storage) import LedgerCore
import LedgerModels

/// What a store shows of `events` appended in this order (SPEC §2.3): an `account.deleted`
/// destroys its subject's keys, so every personal field of that subject appended before it
/// reads as `"[Deleted User]"`; so does one appended after it that occurred by the subject's
/// latest deletion (a late fact of the erased account). Fields that occurred later (a
/// customer who returns) stay.
public func erasedInAppendOrder(_ events: [LedgerEvent]) throws -> [LedgerEvent] {
    var deletedBy: [String: Timestamp] = [:]
    var lateFact = Set<Int>()
    for (index, event) in events.enumerated() {
        if let at = deletedBy[event.subject], event.occurredAt <= at { lateFact.insert(index) }
        if event.type == AccountDeleted.type { deletedBy[event.subject] = max(deletedBy[event.subject] ?? event.occurredAt, event.occurredAt) }
    }
    var deletedLater = Set<String>()
    var out: [LedgerEvent] = []
    for (index, event) in events.enumerated().reversed() {
        if event.type == AccountDeleted.type { deletedLater.insert(event.subject) }
        guard deletedLater.contains(event.subject) || lateFact.contains(index) else {
            out.append(event)
            continue
        }
        let draft = try event.draft()
        guard PersonalData.holdsPersonalData(draft) else {
            out.append(event)
            continue
        }
        let erased = try PersonalData.map(draft) { _, _ in PersonalData.erased }
        guard let data = EventCatalog.decode(type: erased.type, version: erased.schemaVersion, payload: erased.payload) else {
            throw LedgerError(.invalidEvent, "an erased \(event.type) does not decode")
        }
        out.append(LedgerEvent(id: draft.id, subject: event.subject, occurredAt: event.occurredAt, source: event.source, meta: erased.meta, data: data))
    }
    return out.reversed()
}

/// A view's JSON without its personal fields (`ModelView.personalFields`): what stays the same
/// whatever order a subject's erasure and its personal facts were appended in.
public func withoutPersonalText(_ view: JSONObject, of model: String) -> JSONObject {
    guard let type = ReadModels.all.first(where: { $0.name == model }) else { return view }
    var view = view
    for path in type.personalFields.keys {
        let parts = path.split(separator: ".").map(String.init)
        guard parts.count == 2, case .object(var inner)? = view[parts[0]] else {
            if parts.count == 1 { view[parts[0]] = nil }
            continue
        }
        inner[parts[1]] = nil
        view[parts[0]] = .object(inner)
    }
    return view
}

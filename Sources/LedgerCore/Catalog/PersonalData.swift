/// Personal data (SPEC §2.3): which fields of an event are personal, and a way to rewrite each
/// of them — what the log runs to seal them under their subject's key on append, to open them
/// on read, and to show `"[Deleted User]"` once the key is destroyed.
///
/// The personal fields are the catalog's fields marked `personal` (`"x-personal": true` in
/// the schemas: a note's `text`, a deletion request's `reason`, an export's `location`) and
/// the meta keys `email` and `name` of any event.
public enum PersonalData {
    /// What a personal field of an erased subject reads as.
    public static let erased = "[Deleted User]"

    /// The meta keys that are personal on every event.
    public static let metaKeys: [String] = ["email", "name"]

    /// One personal field: where it is (a JSON pointer, such as `/data/text` or
    /// `/meta/email`), for messages and as the field's name in its ciphertext's associated data.
    public struct Location: Sendable, Hashable, CustomStringConvertible {
        public let pointer: String
        public var description: String { pointer }
    }

    /// Every personal field of the catalog, as `type: [pointer]` (the `ledger schemas` list).
    public static var catalogFields: [(type: String, pointers: [String])] {
        EventCatalog.typeNames.compactMap { type in
            let version = EventCatalog.currentVersions[type] ?? 1
            let names = dataFields(of: type, version: version)
            return names.isEmpty ? nil : (type, names.map { "/data/" + $0 })
        }
    }

    /// The personal data fields of a type's layout.
    public static func dataFields(of type: String, version: UInt16) -> [String] {
        personalFields[type]?[version] ?? []
    }

    private static let personalFields: [String: [UInt16: [String]]] = {
        var table: [String: [UInt16: [String]]] = [:]
        for type in EventCatalog.typeNames + EventCatalog.legacyTypes.map({ $0.type }) {
            for version in EventCatalog.versions(of: type) {
                guard let layout = EventCatalog.layout(of: type, version: version) else { continue }
                let names = layout.fields.filter(\.isPersonal).map(\.name)
                if !names.isEmpty { table[type, default: [:]][version] = names }
            }
        }
        return table
    }()

    /// Whether the event holds a personal field (set in its data or its meta): a check on the
    /// type and the meta keys alone, cheap enough for every event read.
    public static func holdsPersonalData(type: String, schemaVersion: UInt16, meta: [String: String]) -> Bool {
        // A meta holds a key or two: compared with the two personal ones, not hashed to look them up.
        if !meta.isEmpty, meta.keys.contains(where: metaKeys.contains) { return true }
        return personalFields[type]?[schemaVersion] != nil
    }

    /// `holdsPersonalData` of a draft.
    public static func holdsPersonalData(_ draft: EventDraft) -> Bool {
        holdsPersonalData(type: draft.type, schemaVersion: draft.schemaVersion, meta: draft.meta)
    }

    /// The draft with each personal value that is set replaced by `body(location, value)`,
    /// the rest byte for byte as it was. A draft with no personal field comes back as it is.
    /// - Throws: what `body` throws; `LedgerError.corruptRecord` when the payload of a type
    ///   with personal fields does not decode under its layout, or does not take the new values
    ///   (never the draft unchanged: its fields would stay in the clear).
    public static func map(_ draft: EventDraft, _ body: (Location, String) throws -> String) throws -> EventDraft {
        var draft = draft
        for key in metaKeys {
            if let value = draft.meta[key] { draft.meta[key] = try body(Location(pointer: "/meta/" + key), value) }
        }
        let names = dataFields(of: draft.type, version: draft.schemaVersion)
        guard !names.isEmpty else { return draft }
        guard let layout = EventCatalog.layout(of: draft.type, version: draft.schemaVersion), let value = layout.decode(binary: draft.payload) else {
            throw LedgerError(.corruptRecord, "the payload of a \(draft.type) version \(draft.schemaVersion) event does not decode, so its personal fields cannot be read or sealed",
                              subject: draft.subject)
        }
        var json = layout.json(value)
        var changed = false
        for name in names {
            guard case .string(let text)? = json[name] else { continue }
            json[name] = .string(try body(Location(pointer: "/data/" + name), text))
            changed = true
        }
        guard changed else { return draft }
        // Personal fields are free text: any string decodes, so the layout takes the new value.
        guard case .success(let rewritten) = layout.decode(json) else {
            throw LedgerError(.corruptRecord, "a \(draft.type) event does not take its personal fields rewritten", subject: draft.subject)
        }
        draft.payload = layout.binary(rewritten)
        return draft
    }

    /// Each personal value that is set, with where it is (none when the payload does not decode).
    public static func values(of draft: EventDraft) -> [(Location, String)] {
        var found: [(Location, String)] = []
        _ = try? map(draft) { (location: Location, value: String) -> String in
            found.append((location, value))
            return value
        }
        return found
    }
}

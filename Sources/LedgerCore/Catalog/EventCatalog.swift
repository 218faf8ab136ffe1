/// The event catalog: every event type of SPEC §2.3, each layout version it has been written
/// in, and the conversions between a type's JSON `data`, its typed payload and the binary
/// payload the log stores. Older versions are upcast on read, never rewritten.
public enum EventCatalog {
    /// Layouts of earlier schema versions, each upcast to the next.
    @_spi(Storage) public static let legacyTypes: [any LegacyPayloadLayout.Type] = [UsageRecordedV1.self]

    /// Every layout by type name and schema version.
    static let layouts: [String: [UInt16: Layout]] = {
        var table: [String: [UInt16: Layout]] = [:]
        for type in payloadTypes { table[type.type, default: [:]][type.schemaVersion] = Layout(type) }
        for type in legacyTypes { table[type.type, default: [:]][type.schemaVersion] = Layout(type) }
        return table
    }()

    /// Each type's current schema version.
    public static let currentVersions: [String: UInt16] = Dictionary(uniqueKeysWithValues: payloadTypes.map { ($0.type, $0.schemaVersion) })

    /// Every type name, in SPEC §2.3 order.
    public static let typeNames: [String] = payloadTypes.map { $0.type }

    /// A type name the catalog knows (legacy layouts included), with its layouts: what a
    /// record's type bytes resolve to without making a string or hashing one.
    @_spi(Storage) public struct KnownType: Sendable {
        /// Its place in `known`.
        public let index: Int
        public let name: String
        let utf8: [UInt8]
        /// Each schema version's payload decoder (`decode(_:payload:)` of its layout), so that
        /// reading a payload copies no `Layout`.
        let decoders: [(version: UInt16, decode: @Sendable (UnsafeRawBufferPointer) -> EventData?)]
    }

    /// Every type name the catalog knows, in byte order.
    @_spi(Storage) public static let known: [KnownType] = layouts.keys.sorted().enumerated().map { index, name in
        KnownType(index: index, name: name, utf8: Array(name.utf8),
                  decoders: (layouts[name] ?? [:]).sorted { $0.key < $1.key }.map { version, layout in
                      (version: version, decode: { payload in decode(layout, payload: payload) })
                  })
    }

    /// The known names, by length, in flat arrays of plain values: looking a record's type up
    /// retains and copies nothing (a `KnownType` copied out of `known` retained three arrays).
    private struct Names {
        /// Every known name's UTF-8, shortest first.
        var bytes: [UInt8] = []
        /// For each name in `bytes`, in order: where it begins, and its place in `known`.
        var starts: [Int] = []
        var indices: [Int] = []
        /// For each length, the first name that long (in `starts`); one more at the end.
        var firstOfLength: [Int] = []

        init(_ known: [KnownType]) {
            let longest = known.map(\.utf8.count).max() ?? 0
            for length in 0 ... longest {
                firstOfLength.append(starts.count)
                for type in known where type.utf8.count == length {
                    starts.append(bytes.count)
                    indices.append(type.index)
                    bytes += type.utf8
                }
            }
            firstOfLength.append(starts.count)
        }
    }

    private static let names = Names(known)

    /// The place in `known` of the type whose name is these UTF-8 bytes, `nil` for a name the
    /// catalog does not know: compared with the few names of its length, not with all fifty.
    static func knownIndex(_ utf8: UnsafeRawBufferPointer) -> Int? {
        let length = utf8.count
        guard length + 1 < names.firstOfLength.count else { return nil }
        return names.bytes.withUnsafeBytes { bytes in
            for name in names.firstOfLength[length] ..< names.firstOfLength[length + 1] {
                let start = names.starts[name]
                if UnsafeRawBufferPointer(rebasing: bytes[start ..< start + length]).begins(with: utf8) { return names.indices[name] }
            }
            return nil
        }
    }

    /// Decodes a stored binary payload of the known type at `index` of `known`, as
    /// `decode(type:version:payload:)`.
    static func decode(known index: Int, version: UInt16, payload: UnsafeRawBufferPointer) -> EventData? {
        let decoders = known[index].decoders
        for decoder in decoders where decoder.version == version { return decoder.decode(payload) }
        return nil
    }

    /// The layout of `type` at `version`, `nil` for an unknown pair.
    @_spi(Storage) public static func layout(of type: String, version: UInt16) -> Layout? { layouts[type]?[version] }

    /// The schema versions a type accepts on input, oldest first.
    public static func versions(of type: String) -> [UInt16] { (layouts[type] ?? [:]).keys.sorted() }

    /// Decodes a stored binary payload and upcasts it to the type's current layout.
    /// - Returns: `nil` when the type or version is unknown or the bytes do not decode.
    public static func decode(type: String, version: UInt16, payload: [UInt8]) -> EventData? {
        payload.withUnsafeBytes { decode(type: type, version: version, payload: $0) }
    }

    /// Decodes a binary payload where it lies (a stored record's bytes), as `decode(type:version:payload:)`.
    static func decode(type: String, version: UInt16, payload: UnsafeRawBufferPointer) -> EventData? {
        guard let layout = layout(of: type, version: version) else { return nil }
        return decode(layout, payload: payload)
    }

    private static func decode(_ layout: Layout, payload: UnsafeRawBufferPointer) -> EventData? {
        // The current layout's decoder makes the typed data directly, with no dynamic casts.
        if let decodeData = layout.decodeEventData { return decodeData(payload) }
        guard var value = layout.decodeBinary(payload) else { return nil }
        while let legacy = value as? any LegacyPayloadLayout { value = legacy.upcast() }
        return (value as? any EventPayload)?.eventData
    }

    /// The binary payload of typed data (current layout).
    public static func encode(_ data: EventData) -> [UInt8] {
        let payload = data.payload
        return layout(of: data.type, version: Swift.type(of: payload).schemaVersion)?.encodeBinary(payload) ?? []
    }

}

/// One layout with its type erased: what the catalog, the decoders and the schema generator use.
/// A class: every check of an event takes it from the catalog, and a reference is one retain
/// where the struct was ten (its closures).
@_spi(Storage) public final class Layout: Sendable {
    /// One field, described.
    public struct FieldInfo: Sendable, Hashable {
        public let name: String
        public let isRequired: Bool
        public let isPersonal: Bool
        public let expected: String
        public let schema: JSONObject
    }

    /// The event type.
    public let type: String
    /// The schema version.
    public let schemaVersion: UInt16
    /// The fields in binary order.
    public let fields: [FieldInfo]
    /// Cross-field rules as JSON Schema.
    public let conditionalSchema: JSON?
    /// Whether this is the type's current layout (not a legacy one).
    public let isCurrent: Bool

    let decodeJSONData: @Sendable (JSONObject) -> Result<any PayloadLayout, FieldViolations>
    let checkRules: @Sendable (any PayloadLayout) -> [FieldViolation]
    let encodeJSON: @Sendable (any PayloadLayout) -> JSONObject
    let encodeBinary: @Sendable (any PayloadLayout) -> [UInt8]
    let decodeBinary: @Sendable (UnsafeRawBufferPointer) -> (any PayloadLayout)?
    /// For a current layout: the payload decoded straight to `EventData`.
    let decodeEventData: (@Sendable (UnsafeRawBufferPointer) -> EventData?)?

    init<T: PayloadLayout>(_: T.Type) {
        let fields = T.fields
        type = T.type
        schemaVersion = T.schemaVersion
        isCurrent = !(T.self is any LegacyPayloadLayout.Type)
        conditionalSchema = T.conditionalSchema
        self.fields = fields.map {
            FieldInfo(name: $0.name, isRequired: $0.isRequired, isPersonal: $0.isPersonal, expected: $0.expected, schema: $0.valueSchema)
        }
        let names = fields.map(\.name)
        let known = Set(names)
        let keyList = names.isEmpty ? "no keys" : names.joined(separator: ", ")
        let typeName = T.type
        decodeJSONData = { (object: JSONObject) -> Result<any PayloadLayout, FieldViolations> in
            var value = T()
            var problems: [FieldViolation] = []
            for key in object.keys where !known.contains(key) {
                problems.append(FieldViolation(field: key, message: "unknown key; \(typeName) data has \(keyList)"))
            }
            for field in fields {
                guard let json = object[field.name] else {
                    if field.isRequired { problems.append(FieldViolation(field: field.name, message: "missing; expected \(field.expected)")) }
                    continue
                }
                if !field.decode(json, &value) {
                    let message = field.problem(json) ?? "expected \(field.expected), got \(EnvelopeDecoder.describe(json))"
                    problems.append(FieldViolation(field: field.name, message: message))
                } else if let rule = field.rule, let message = withUnsafePointer(to: value, { rule(UnsafeRawPointer($0)) }) {
                    problems.append(FieldViolation(field: field.name, message: message))
                }
            }
            if problems.isEmpty { problems = value.violations() }
            return problems.isEmpty ? .success(value) : .failure(FieldViolations(problems))
        }
        // The fields with a rule alone, and not the fields themselves: iterating them would
        // copy each (six closures and four strings) for every event appended.
        let rules = FieldRules(all: fields.compactMap { field in field.rule.map { (field.name, $0) } })
        checkRules = { erased in
            guard !rules.all.isEmpty, var value = erased as? T else { return [] }
            return withUnsafePointer(to: &value) { pointer in
                var violations: [FieldViolation] = []
                for (name, rule) in rules.all {
                    if let message = rule(UnsafeRawPointer(pointer)) { violations.append(FieldViolation(field: name, message: message)) }
                }
                return violations
            }
        }
        encodeJSON = { erased in
            guard let value = erased as? T else { return JSONObject() }
            return JSONObject(fields.compactMap { field in field.encode(value).map { (field.name, $0) } })
        }
        encodeBinary = { erased in
            guard let value = erased as? T else { return [] }
            var out: [UInt8] = []
            for field in fields { field.write(value, &out) }
            return out
        }
        // The readers alone: iterating the fields would copy each (six closures and four
        // strings, retained and released) for every field of every event read.
        let readers = FieldReaders<T>(all: fields.map(\.read))
        decodeBinary = { bytes in Self.read(bytes, readers) }
        if let current = T.self as? any EventPayload.Type {
            decodeEventData = Self.dataDecoder(current, readers: readers)
        } else {
            decodeEventData = nil
        }
    }

    /// For a current layout: binary payload → `EventData`, statically typed.
    private static func dataDecoder<E: EventPayload, T: PayloadLayout>(_: E.Type, readers: FieldReaders<T>) -> (@Sendable (UnsafeRawBufferPointer) -> EventData?)? {
        guard let readers = readers as? FieldReaders<E> else { return nil }
        return { bytes in
            // No `E?` here: this code is not specialized, and an optional of a generic type
            // costs a metadata lookup per call.
            var value = E()
            return read(bytes, readers, into: &value) ? (consume value).intoEventData() : nil
        }
    }

    /// A layout's fields that have an input rule: each one's name and rule.
    struct FieldRules: @unchecked Sendable {
        // @unchecked: as `Field`'s, the closures capture only key paths and codecs.
        let all: [(name: String, rule: (UnsafeRawPointer) -> String?)]
    }

    /// A layout's field readers, in binary order.
    struct FieldReaders<T>: @unchecked Sendable {
        // @unchecked: as `Field`'s, the closures capture only key paths and codecs.
        let all: [(inout PayloadReader, UnsafeMutableRawPointer) -> Bool]
    }

    /// A binary payload read field by field; `nil` unless it decodes exactly.
    private static func read<T: PayloadLayout>(_ bytes: UnsafeRawBufferPointer, _ readers: FieldReaders<T>) -> T? {
        var value = T()
        return read(bytes, readers, into: &value) ? value : nil
    }

    /// Reads every field into `value` (made by `init()`); whether the bytes decode exactly.
    private static func read<T: PayloadLayout>(_ bytes: UnsafeRawBufferPointer, _ readers: FieldReaders<T>, into value: inout T) -> Bool {
        var reader = PayloadReader(bytes)
        return withUnsafeMutablePointer(to: &value) { pointer in
            let root = UnsafeMutableRawPointer(pointer)
            for read in readers.all { guard read(&reader, root) else { return false } }
            return reader.isAtEnd
        }
    }

    /// Decodes and checks a JSON `data` object.
    /// - Returns: the value, or every violation (field keys relative to `data`).
    public func decode(_ data: JSONObject) -> Result<any PayloadLayout, FieldViolations> { decodeJSONData(data) }

    /// The input rules a typed value of this layout breaks (`ValueCodec.rule` of each field:
    /// a time outside years 0000–9999…), field keys relative to `data`; empty when it keeps them.
    public func ruleViolations(_ value: any PayloadLayout) -> [FieldViolation] { checkRules(value) }

    /// The JSON `data` object of a value of this layout (absent optionals omitted).
    public func json(_ value: any PayloadLayout) -> JSONObject { encodeJSON(value) }

    /// The binary payload of a value of this layout.
    public func binary(_ value: any PayloadLayout) -> [UInt8] { encodeBinary(value) }

    /// Decodes a binary payload of this layout, `nil` if the bytes do not decode exactly.
    public func decode(binary: [UInt8]) -> (any PayloadLayout)? { binary.withUnsafeBytes { decodeBinary($0) } }
}

extension EventCatalog {
    /// Checks that a draft's type and schema version are in the catalog and that its payload
    /// decodes exactly under that layout and keeps its cross-field rules. `EventDraft.validate()`
    /// ends with it, so an unknown type or a payload no reader could decode never reaches the log.
    /// - Returns: the data, decoded and upcast to the type's current layout, so that whoever
    ///   checked a draft need not decode it again (the projection engine folds it as is).
    /// - Throws: `LedgerError.invalidEvent` naming `/type`, `/schemaVersion` or `/data`.
    @discardableResult
    public static func check(_ draft: EventDraft) throws(LedgerError) -> EventData {
        guard let versions = layouts[draft.type] else {
            throw LedgerError(.invalidEvent, "unknown event type \"\(draft.type)\"; the ledger takes the \(typeNames.count) types of its catalog (Schemas/events)",
                              field: "/type", subject: draft.subject)
        }
        guard let layout = versions[draft.schemaVersion] else {
            let list = Self.versions(of: draft.type).map(String.init).joined(separator: ", ")
            throw LedgerError(.invalidEvent, "\(draft.type) has schema version(s) \(list), not \(draft.schemaVersion)",
                              field: "/schemaVersion", subject: draft.subject)
        }
        guard let data = draft.payload.withUnsafeBytes({ decode(layout, payload: $0) }) else {
            throw LedgerError(.invalidEvent, "the payload is not a \(draft.type) version \(draft.schemaVersion) payload; encode data with EventCatalog.encode or LedgerEvent.draft()",
                              field: "/data", subject: draft.subject)
        }
        // The fields' input rules and the rules across fields hold for binary payloads as they
        // do for JSON.
        let payload = data.payload
        let current = layout.isCurrent ? layout : versions[Swift.type(of: payload).schemaVersion]
        var violations = current?.ruleViolations(payload) ?? []
        if violations.isEmpty { violations = payload.violations() }
        if !violations.isEmpty { throw LedgerError.invalidData(violations, subject: draft.subject) }
        return data
    }
}

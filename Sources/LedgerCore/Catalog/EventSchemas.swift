/// The JSON Schemas (2020-12) of the event format, generated from the catalog so that they
/// say exactly what the decoder accepts. `Schemas/` holds them as files; a test checks that
/// the files equal what this generates, and `ledger schemas --output Schemas` rewrites them.
///
/// What JSON Schema cannot say, and only the ledger checks: sizes in UTF-8 bytes (a subject's
/// 256, meta's 4 KiB, the event's 64 KiB; `maxLength` counts characters), calendar validity
/// beyond the pattern (a 30 February), and that a whole number is written without a fraction
/// (JSON Schema takes `1.0` as an integer; the ledger does not).
package enum EventSchemas {
    /// Where the schemas say they live; `$ref`s between them are relative to it.
    package static let base = "https://entitlementledger.example/schemas/"
    static let draft = "https://json-schema.org/draft/2020-12/schema"
    static let uuidPattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

    /// Every schema file: its path under `Schemas/` and its content.
    package static func files() -> [(path: String, schema: JSON)] {
        var files: [(String, JSON)] = [("event.schema.json", envelope())]
        for type in EventCatalog.typeNames {
            for version in EventCatalog.versions(of: type) {
                if let layout = EventCatalog.layout(of: type, version: version) { files.append((dataPath(layout), data(layout))) }
            }
        }
        return files
    }

    static func dataPath(_ layout: Layout) -> String { "events/\(layout.type).v\(layout.schemaVersion).schema.json" }

    /// The schema of one layout's `data` object.
    package static func data(_ layout: Layout) -> JSON {
        var properties = JSONObject()
        for field in layout.fields {
            var schema = field.schema
            if field.isPersonal { schema["x-personal"] = true }
            properties[field.name] = field.isRequired ? .object(schema) : ["oneOf": [.object(schema), ["type": "null"]]]
        }
        var object: JSONObject = [
            "$schema": .string(draft),
            "$id": .string(base + dataPath(layout)),
            "title": .string("\(layout.type) data, schema version \(layout.schemaVersion)\(layout.isCurrent ? "" : " (read as the next version)")"),
            "type": "object",
            "additionalProperties": false,
            "required": .array(layout.fields.filter(\.isRequired).map { .string($0.name) }),
            "properties": .object(properties),
        ]
        if let conditional = layout.conditionalSchema { object["allOf"] = [conditional] }
        return .object(object)
    }

    /// The schema of one event line.
    package static func envelope() -> JSON {
        let time: JSON = ["type": "string", "pattern": .string(Patterns.time)]
        var dispatch: [JSON] = []
        for type in EventCatalog.typeNames {
            let versions = EventCatalog.versions(of: type)
            guard let current = EventCatalog.currentVersions[type],
                  let layout = EventCatalog.layout(of: type, version: current) else { continue }
            let schemaVersion: JSON = ["enum": .array(versions.map { .integer(Int64($0)) })]
            func use(_ layout: Layout) -> JSONObject {
                var use: JSONObject = ["properties": ["data": ["$ref": .string(dataPath(layout))]]]
                // `data` may be left out only when the layout has no required field.
                if layout.fields.contains(where: \.isRequired) { use["required"] = ["data"] }
                return use
            }
            var then: JSONObject
            if versions.count == 1 {
                then = use(layout)
                then["properties"] = ["schemaVersion": schemaVersion, "data": ["$ref": .string(dataPath(layout))]]
            } else {
                let byVersion: [JSON] = versions.compactMap { version in
                    guard let old = EventCatalog.layout(of: type, version: version) else { return nil }
                    // An omitted schemaVersion means the current one.
                    let condition: JSON = version == current
                        ? ["anyOf": [["not": ["required": ["schemaVersion"]]], ["properties": ["schemaVersion": ["const": .integer(Int64(version))]]]]]
                        : ["properties": ["schemaVersion": ["const": .integer(Int64(version))]], "required": ["schemaVersion"]]
                    return ["if": condition, "then": .object(use(old))]
                }
                then = ["properties": ["schemaVersion": schemaVersion], "allOf": .array(byVersion)]
            }
            dispatch.append(["if": ["properties": ["type": ["const": .string(type)]], "required": ["type"]], "then": .object(then)])
        }
        return [
            "$schema": .string(draft),
            "$id": .string(base + "event.schema.json"),
            "title": "EntitlementLedger event: one line of a JSONL file",
            "description": "SPEC §2.1. position and recordedAt appear only in exported lines.",
            "type": "object",
            "additionalProperties": false,
            "required": ["type", "subject", "occurredAt", "source"],
            "properties": [
                "id": ["type": "string", "pattern": .string(uuidPattern)],
                "type": ["enum": .array(EventCatalog.typeNames.map { .string($0) })],
                "subject": ["type": "string", "minLength": 1, "maxLength": .integer(Int64(EventLimits.maxSubjectBytes))],
                "occurredAt": time,
                "source": ["enum": .array(EventSource.allCases.map { .string($0.rawValue) })],
                "schemaVersion": ["type": "integer", "minimum": 1],
                "data": ["type": "object"],
                "meta": [
                    "type": "object",
                    "additionalProperties": ["type": "string"],
                    "propertyNames": ["minLength": 1],
                    "properties": ["email": ["type": "string", "x-personal": true], "name": ["type": "string", "x-personal": true]],
                ],
                "position": ["type": "integer", "minimum": 1],
                "recordedAt": time,
            ],
            "allOf": .array(dispatch),
        ]
    }
}


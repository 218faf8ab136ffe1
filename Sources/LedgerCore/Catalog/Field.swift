/// The data layout of one event type at one schema version: its type name, version and fields.
///
/// A layout is a struct whose stored properties all have defaults (so `init()` exists) and whose
/// `fields` list names each property once, with its JSON key and codec. The strict JSON
/// decoder, the binary payload codec and the JSON Schema are all derived from that list.
public protocol PayloadLayout: Sendable, Hashable {
    /// The event type, such as `subscription.purchased`.
    static var type: String { get }
    /// The schema version this layout describes.
    static var schemaVersion: UInt16 { get }
    /// The fields, in binary order. Never reorder the fields of a shipped version: add a new
    /// version with an upcaster instead. The catalog reads this once per layout, so a shared
    /// shape may compute it (see PayloadShapes.swift).
    @_spi(Storage) static var fields: [Field<Self>] { get }
    /// Every field at its default; only the decoders use it, before setting each field.
    init()
    /// Rules that span fields (checked once every field is valid on its own).
    func violations() -> [FieldViolation]
    /// The JSON Schema form of `violations()`, merged into the data schema.
    static var conditionalSchema: JSON? { get }
}

extension PayloadLayout {
    public static var schemaVersion: UInt16 { 1 }
    public func violations() -> [FieldViolation] { [] }
    public static var conditionalSchema: JSON? { nil }
}

/// The current layout of an event type: the payload an appender gives and a reader gets.
public protocol EventPayload: PayloadLayout {
    /// This payload as the `EventData` case of its type, taken rather than copied: the
    /// rebuild's decoder wraps every payload it reads, and a copy retains each string.
    consuming func intoEventData() -> EventData
}

extension EventPayload {
    /// This payload as the `EventData` case of its type.
    public var eventData: EventData { intoEventData() }
}

/// A layout of an older schema version, upcast on read to the next version.
public protocol LegacyPayloadLayout: PayloadLayout {
    /// The same fact in the next version's layout.
    func upcast() -> any PayloadLayout
}

/// A rule of a layout that a value breaks: the field (its key under `data`) and what is wrong.
public struct FieldViolation: Sendable, Hashable {
    public var field: String
    public var message: String
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
}

/// The violations of one `data` object, field keys relative to `data`.
public struct FieldViolations: Error, Sendable, Hashable {
    public var violations: [FieldViolation]
    public init(_ violations: [FieldViolation]) { self.violations = violations }
}

/// One field of a layout: its JSON key, whether it is required or personal, and how its value
/// moves between JSON, the binary payload and the typed property.
@_spi(Storage) public struct Field<Root: PayloadLayout>: @unchecked Sendable {
    // @unchecked: the closures capture only key paths and codecs, which are immutable values.

    /// The key under `data`.
    public let name: String
    /// Whether the key must be present (an optional key may also be `null`).
    public let isRequired: Bool
    /// Personal data (SPEC §2.3): marked `"x-personal": true` in the schema.
    public let isPersonal: Bool
    /// What a valid value is, for messages.
    public let expected: String
    /// The value's JSON Schema.
    public let valueSchema: JSONObject
    /// The codec's own message for a value it refuses, when it has one.
    let problem: @Sendable (JSON) -> String?
    /// The codec's input rule applied to the property of the `Root` the pointer points at
    /// (`ValueCodec.rule`): the message when the value breaks it, else `nil`. `nil` when the
    /// codec has no rule. Not generic over `Root`, as `read`.
    let rule: ((UnsafeRawPointer) -> String?)?
    /// Whether `read` writes at the property's offset (its key path names a stored property)
    /// rather than applying the key path.
    let readsInPlace: Bool

    let decode: (JSON, inout Root) -> Bool
    let encode: (Root) -> JSON?
    let write: (Root, inout [UInt8]) -> Void
    /// Reads the value into the `Root` the pointer points at. Not generic over `Root`: the
    /// catalog calls it from code that is not specialized, where a closure over a generic
    /// `inout Root` costs a function-type metadata lookup per call.
    let read: (inout PayloadReader, UnsafeMutableRawPointer) -> Bool

    /// A key that must be present.
    public static func required<V>(_ name: String, _ path: WritableKeyPath<Root, V>, _ codec: ValueCodec<V>,
                                   personal: Bool = false) -> Field {
        let property = StoredProperty(path)
        return Field(name: name, isRequired: true, isPersonal: personal, expected: codec.expected, valueSchema: codec.schema, problem: codec.problem,
              rule: codec.rule.map { rule in { root in rule(property.get(from: root)) } },
              readsInPlace: property.offset != nil,
              decode: { json, root in
                  guard let value = codec.fromJSON(json) else { return false }
                  root[keyPath: path] = value
                  return true
              },
              encode: { root in codec.toJSON(root[keyPath: path]) },
              write: { root, out in codec.write(root[keyPath: path], &out) },
              read: { reader, root in
                  guard let value = codec.read(&reader) else { return false }
                  property.set(value, in: root)
                  return true
              })
    }

    /// A key that may be absent or `null`; stored with a presence byte.
    public static func optional<V>(_ name: String, _ path: WritableKeyPath<Root, V?>, _ codec: ValueCodec<V>,
                                   personal: Bool = false) -> Field {
        let property = StoredProperty(path)
        return Field(name: name, isRequired: false, isPersonal: personal, expected: codec.expected, valueSchema: codec.schema, problem: codec.problem,
              rule: codec.rule.map { rule in { root in property.get(from: root).flatMap(rule) } },
              readsInPlace: property.offset != nil,
              decode: { json, root in
                  if case .null = json {
                      root[keyPath: path] = nil
                      return true
                  }
                  guard let value = codec.fromJSON(json) else { return false }
                  root[keyPath: path] = value
                  return true
              },
              encode: { root in root[keyPath: path].map(codec.toJSON) },
              write: { root, out in
                  if let value = root[keyPath: path] {
                      out.append(1)
                      codec.write(value, &out)
                  } else {
                      out.append(0)
                  }
              },
              read: { reader, root in
                  switch reader.byte() {
                  case 0:
                      property.set(nil, in: root)
                      return true
                  case 1:
                      guard let value = codec.read(&reader) else { return false }
                      property.set(value, in: root)
                      return true
                  default:
                      return false
                  }
              })
    }
}

/// A layout's property, written and read through its byte offset in the layout when the key
/// path names a stored property (every layout's fields do): applying a key path costs a runtime
/// call each time, and the binary decoder writes every field of every event a rebuild reads.
struct StoredProperty<Root, Value> {
    let path: WritableKeyPath<Root, Value>
    /// `nil` for a path that is not a plain stored property: it is then applied as a key path.
    let offset: Int?

    init(_ path: WritableKeyPath<Root, Value>) {
        self.path = path
        offset = MemoryLayout<Root>.offset(of: path)
    }

    /// Sets the property of the (initialized) `Root` at `root`.
    func set(_ value: Value, in root: UnsafeMutableRawPointer) {
        guard let offset else {
            root.assumingMemoryBound(to: Root.self).pointee[keyPath: path] = value
            return
        }
        (root + offset).assumingMemoryBound(to: Value.self).pointee = value
    }

    /// The property of the `Root` at `root`.
    func get(from root: UnsafeRawPointer) -> Value {
        guard let offset else { return root.assumingMemoryBound(to: Root.self).pointee[keyPath: path] }
        return (root + offset).assumingMemoryBound(to: Value.self).pointee
    }
}

@_spi(Storage) import LedgerCore

/// Encodes a view as SPEC §5's JSON: members in the order the view encodes them (a struct's
/// synthesized `Encodable` follows its declaration), every key present — an optional with no
/// value is `null`, never left out — and times as `YYYY-MM-DDTHH:MM:SS.sssZ`.
enum ViewEncoder {
    static func object(_ value: some Encodable) -> JSONObject {
        let root = Node()
        let encoder = NodeEncoder(node: root)
        // A view's fields are strings, numbers, booleans, times and other views: nothing here
        // throws; a value that did would be left out rather than crash on it.
        try? value.encode(to: encoder)
        if case .object(let object) = root.json { return object }
        return JSONObject()
    }
}

/// A JSON value being built: an object's members in order, an array's items, or a leaf.
private final class Node {
    enum Content {
        case unset
        case leaf(JSON)
        case object([(String, Node)])
        case array([Node])
    }

    var content = Content.unset

    var json: JSON {
        switch content {
        case .unset: return .null
        case .leaf(let value): return value
        case .object(let members): return .object(JSONObject(members.map { ($0.0, $0.1.json) }))
        case .array(let items): return .array(items.map(\.json))
        }
    }

    func member(_ key: String) -> Node {
        var members: [(String, Node)] = []
        if case .object(let existing) = content { members = existing }
        if let found = members.first(where: { $0.0 == key }) { return found.1 }
        let node = Node()
        members.append((key, node))
        content = .object(members)
        return node
    }

    func becomeObject() {
        if case .object = content { return }
        content = .object([])
    }

    func appendItem() -> Node {
        var items: [Node] = []
        if case .array(let existing) = content { items = existing }
        let node = Node()
        items.append(node)
        content = .array(items)
        return node
    }

    func becomeArray() {
        if case .array = content { return }
        content = .array([])
    }
}

private struct NodeEncoder: Encoder {
    let node: Node
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeObject()
        return KeyedEncodingContainer(Keyed<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return Unkeyed(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { Single(node: node, codingPath: codingPath) }
}

/// A leaf for the values JSON has, else the value's own encoding into `node`.
private func encodeValue(_ value: some Encodable, into node: Node, codingPath: [any CodingKey]) throws {
    switch value {
    case let time as Timestamp: node.content = .leaf(.string(time.description))
    case let text as String: node.content = .leaf(.string(text))
    case let flag as Bool: node.content = .leaf(.bool(flag))
    case let number as Int64: node.content = .leaf(.integer(number))
    case let number as Int: node.content = .leaf(.integer(Int64(number)))
    case let number as UInt64: node.content = .leaf(.integer(Int64(clamping: number)))
    case let number as Int32: node.content = .leaf(.integer(Int64(number)))
    case let number as UInt32: node.content = .leaf(.integer(Int64(number)))
    case let number as Double: node.content = .leaf(JSONNumber(number).map(JSON.number) ?? .null)
    case let json as JSON: node.content = .leaf(json)
    default: try value.encode(to: NodeEncoder(node: node, codingPath: codingPath))
    }
}

private struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: Node
    var codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { node.member(key.stringValue).content = .leaf(.null) }
    mutating func encode(_ value: some Encodable, forKey key: Key) throws {
        try encodeValue(value, into: node.member(key.stringValue), codingPath: codingPath + [key])
    }
    // Synthesized `Encodable` calls these for optionals: no value is `null`, not a missing key.
    // (The protocol has an overload per standard type; each defaults to leaving the key out.)
    private mutating func present(_ value: (some Encodable)?, _ key: Key) throws {
        guard let value else { return try encodeNil(forKey: key) }
        try encode(value, forKey: key)
    }
    mutating func encodeIfPresent(_ value: (some Encodable)?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try present(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try present(value, key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = node.member(key.stringValue)
        child.becomeObject()
        return KeyedEncodingContainer(Keyed<NestedKey>(node: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = node.member(key.stringValue)
        child.becomeArray()
        return Unkeyed(node: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { NodeEncoder(node: node, codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { NodeEncoder(node: node.member(key.stringValue), codingPath: codingPath + [key]) }
}

private struct Unkeyed: UnkeyedEncodingContainer {
    let node: Node
    var codingPath: [any CodingKey]
    var count: Int {
        if case .array(let items) = node.content { return items.count }
        return 0
    }

    mutating func encodeNil() throws { node.appendItem().content = .leaf(.null) }
    mutating func encode(_ value: some Encodable) throws { try encodeValue(value, into: node.appendItem(), codingPath: codingPath) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = node.appendItem()
        child.becomeObject()
        return KeyedEncodingContainer(Keyed<NestedKey>(node: child, codingPath: codingPath))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = node.appendItem()
        child.becomeArray()
        return Unkeyed(node: child, codingPath: codingPath)
    }

    mutating func superEncoder() -> any Encoder { NodeEncoder(node: node.appendItem(), codingPath: codingPath) }
}

private struct Single: SingleValueEncodingContainer {
    let node: Node
    var codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.content = .leaf(.null) }
    mutating func encode(_ value: some Encodable) throws { try encodeValue(value, into: node, codingPath: codingPath) }
}

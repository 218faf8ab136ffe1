/// The binary form of one event in the log (format version 1).
///
/// ```
/// u8       format version (1)
/// content — what the appender supplied; two appends of one id must match here byte for byte
///   [16]   id
///   u8     source code
///   varint schemaVersion
///   i64 LE occurredAt (ms)
///   varint+bytes type, varint+bytes subject
///   varint count, then varint+bytes key, varint+bytes value (keys in byte order)   — meta
///   varint+bytes payload
/// trailer — what the ledger stamped, fixed size
///   u64 LE subject version
///   i64 LE recordedAt (ms)
///   [32]   SHA-256(predecessor's hash ‖ every byte above)
/// ```
///
/// The position is the record's key, not part of it: the hash chain fixes the order.
@_spi(Storage) public enum EventRecord {
    /// The format version this code writes and reads.
    public static let formatVersion: UInt8 = 1
    /// Size of the SHA-256 hash at the end of a record.
    public static let hashSize = 32
    /// Size of what the ledger stamps before the hash: subject version and recordedAt.
    public static let stampSize = 8 + 8
    /// Size of the fixed trailer: the stamp and the hash.
    public static let trailerSize = stampSize + hashSize

    /// Encodes a draft as a record without its hash: format byte, content and the first part
    /// of the trailer. Append the 32-byte hash to finish it.
    public static func encode(_ draft: EventDraft, version: UInt64, recordedAt: Timestamp) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + draft.type.utf8.count + draft.subject.utf8.count + draft.payload.count + hashSize)
        out.append(formatVersion)
        appendContent(of: draft, to: &out)
        out.appendFixed(version)
        out.appendFixed(UInt64(bitPattern: recordedAt.milliseconds))
        return out
    }

    /// Overwrites the subject version and recordedAt of a record made by `encode` (before its
    /// hash is appended): the log encodes each event once, checks it, then stamps it.
    public static func stamp(_ record: inout [UInt8], version: UInt64, recordedAt: Timestamp) {
        let at = record.count - stampSize
        record.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: version.littleEndian, toByteOffset: at, as: UInt64.self)
            raw.storeBytes(of: UInt64(bitPattern: recordedAt.milliseconds).littleEndian, toByteOffset: at + 8, as: UInt64.self)
        }
    }

    /// The content bytes inside a record made by `encode` (no hash yet).
    public static func content(ofUnhashed record: [UInt8]) -> ArraySlice<UInt8> {
        record[1 ..< record.count - stampSize]
    }

    /// The recordedAt stamped in a whole stored record.
    public static func recordedAt(ofRecord record: UnsafeRawBufferPointer) -> Timestamp? {
        guard record.count >= 1 + trailerSize else { return nil }
        let bits = record.loadUnaligned(fromByteOffset: record.count - hashSize - 8, as: UInt64.self)
        return Timestamp(milliseconds: Int64(bitPattern: UInt64(littleEndian: bits)))
    }

    /// The content bytes of a draft: what the conflict check compares with a stored record.
    public static func content(of draft: EventDraft) -> [UInt8] {
        var out: [UInt8] = []
        appendContent(of: draft, to: &out)
        return out
    }

    /// The content bytes inside a whole stored record (format byte and trailer stripped).
    public static func content(ofRecord record: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard record.count >= 1 + trailerSize else { return nil }
        return UnsafeRawBufferPointer(rebasing: record[1 ..< record.count - trailerSize])
    }

    /// The id of a whole stored record (the content's first 16 bytes), read in place; `nil` if
    /// the record is too short to hold one.
    public static func id(ofRecord record: UnsafeRawBufferPointer) -> EventID? {
        guard record.count >= 1 + 16 + trailerSize else { return nil }
        return EventID(high: UInt64(bigEndian: record.loadUnaligned(fromByteOffset: 1, as: UInt64.self)),
                       low: UInt64(bigEndian: record.loadUnaligned(fromByteOffset: 9, as: UInt64.self)))
    }

    /// The hash stored at the end of a record.
    public static func hash(ofRecord record: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard record.count >= 1 + trailerSize else { return nil }
        return UnsafeRawBufferPointer(rebasing: record[(record.count - hashSize)...])
    }

    /// The bytes the hash covers: everything but the hash itself.
    public static func hashedBytes(ofRecord record: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard record.count >= 1 + trailerSize else { return nil }
        return UnsafeRawBufferPointer(rebasing: record[..<(record.count - hashSize)])
    }

    /// How many bytes `meta` takes encoded (the figure its 4 KiB limit applies to).
    public static func encodedMetaSize(_ meta: [String: String]) -> Int {
        var size = varintSize(UInt64(meta.count))
        for (key, value) in meta {
            let k = key.utf8.count, v = value.utf8.count
            size += varintSize(UInt64(k)) + k + varintSize(UInt64(v)) + v
        }
        return size
    }

    /// The event types a fold reads, found for a record from its type's bytes: a flag per type
    /// the catalog knows (no hashing per record), the names for any other.
    public struct TypeFilter: Sendable {
        let known: [Bool]
        let others: Set<String>

        public init(_ types: Set<String>) {
            known = EventCatalog.known.map { types.contains($0.name) }
            others = types.subtracting(EventCatalog.known.map(\.name))
        }
    }

    /// Decodes what a read model folds from a stored record — position, version, times,
    /// subject, type, id, source and the payload's data — when its type is in `types`;
    /// `nil`, read no further, for a record of another type. The meta and the hash are
    /// stepped over, not decoded: no read model reads them (the rebuild's and catch-up's path,
    /// once per event of the log).
    /// - Throws: `LedgerError.corruptRecord` (or `.unsupportedFormat`) naming `position`.
    /// `keep`, when given, is asked with the type's index in the catalog (`nil`: a type it
    /// does not know) and the subject: `false` reads no further, as for a type not in `types`.
    public static func decodeForFolding(_ record: UnsafeRawBufferPointer, position: UInt64, types: TypeFilter,
                                        keep: ((_ known: Int?, _ subject: String) -> Bool)? = nil) throws(LedgerError) -> RecordedEvent? {
        var reader = RecordReader(bytes: record, position: position)
        let header = try reader.header()
        let type = try reader.lengthPrefixed("type")
        let known = EventCatalog.knownIndex(type)
        if let known {
            guard types.known[known] else { return nil }
        } else {
            guard types.others.contains(try reader.text(type, "type")) else { return nil }
        }
        let subject = try reader.string("subject")
        if let keep, !keep(known, subject) { return nil }
        for _ in 0..<(try reader.metaCount()) {
            try reader.lengthPrefixed("meta key")
            try reader.lengthPrefixed("meta value")
        }
        let (payload, version, recordedAt) = try reader.payloadInPlaceAndStamp(contentEnd: header.contentEnd)
        let schema = header.schemaVersion
        let decoded = if let known {
            EventCatalog.decode(known: known, version: schema, payload: payload)
        } else {
            EventCatalog.decode(type: try reader.text(type, "type"), version: schema, payload: payload)
        }
        guard let data = decoded else {
            let name = (try? reader.text(type, "type")) ?? "its type"
            throw LedgerError(.corruptRecord, "the payload at position \(position) does not decode as \(name) version \(schema); run `ledger verify`",
                              subject: subject, position: position)
        }
        return RecordedEvent(position: position, version: version, recordedAt: Timestamp(milliseconds: recordedAt), storedSchemaVersion: schema,
                             event: LedgerEvent(id: header.id, subject: subject, occurredAt: header.occurredAt, source: header.source, meta: [:], data: data))
    }

    /// What the log's indexes keep of a stored record: its id, subject and subject version,
    /// read without decoding the rest (the index tail is rebuilt from the log this way).
    /// - Throws: `LedgerError.corruptRecord` (or `.unsupportedFormat`) naming `position`.
    public static func indexed(_ record: UnsafeRawBufferPointer, position: UInt64) throws(LedgerError) -> (id: EventID, subject: String, version: UInt64) {
        var reader = RecordReader(bytes: record, position: position)
        let header = try reader.header()
        try reader.lengthPrefixed("type")
        let subject = try reader.string("subject")
        let version = UInt64(littleEndian: record.loadUnaligned(fromByteOffset: header.contentEnd, as: UInt64.self))
        guard version > 0 else { throw reader.corrupt("subject version 0") }
        return (header.id, subject, version)
    }

    /// Decodes a whole stored record.
    /// - Throws: `LedgerError.corruptRecord` (or `.unsupportedFormat`) naming `position`.
    public static func decode(_ record: UnsafeRawBufferPointer, position: UInt64) throws(LedgerError) -> StoredEvent {
        var reader = RecordReader(bytes: record, position: position)
        let header = try reader.header()
        let type = try reader.string("type")
        let subject = try reader.string("subject")
        var meta: [String: String] = [:]
        for _ in 0..<(try reader.metaCount()) {
            let key = try reader.string("meta key")
            meta[key] = try reader.string("meta value")
        }
        let (payload, version, recordedAt) = try reader.payloadAndStamp(contentEnd: header.contentEnd)
        let hash = try reader.bytes(hashSize, "hash")

        let draft = EventDraft(id: header.id, subject: subject, type: type, schemaVersion: header.schemaVersion,
                               occurredAt: header.occurredAt, source: header.source, meta: meta, payload: payload)
        return StoredEvent(position: position, version: version, recordedAt: Timestamp(milliseconds: recordedAt),
                           hash: hash, draft: draft)
    }

    private static func appendContent(of draft: EventDraft, to out: inout [UInt8]) {
        out.append(contentsOf: draft.id.bytes)
        out.append(draft.source.code)
        out.appendVarint(UInt64(draft.schemaVersion))
        out.appendFixed(UInt64(bitPattern: draft.occurredAt.milliseconds))
        out.appendBytes(draft.type.utf8)
        out.appendBytes(draft.subject.utf8)
        out.appendVarint(UInt64(draft.meta.count))
        // Byte order of keys, not String order, so the encoding does not depend on Unicode tables.
        for key in draft.meta.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            out.appendBytes(key.utf8)
            out.appendBytes((draft.meta[key] ?? "").utf8)
        }
        out.appendBytes(draft.payload)
    }

    /// The size of an event encoded, the figure `EventLimits.maxEventBytes` applies to: the
    /// format byte and the content `encode` writes, without what the ledger stamps (version,
    /// recordedAt, hash). The same for every spelling of the event as a JSON line.
    public static func eventSize(type: String, subject: String, schemaVersion: UInt16, meta: [String: String], payloadBytes: Int) -> Int {
        func bytes(_ count: Int) -> Int { varintSize(UInt64(count)) + count }
        var size = 1 + EventID.byteCount + 1 + varintSize(UInt64(schemaVersion)) + 8 + bytes(type.utf8.count) + bytes(subject.utf8.count)
        size += varintSize(UInt64(meta.count))
        for (key, value) in meta { size += bytes(key.utf8.count) + bytes(value.utf8.count) }
        return size + bytes(payloadBytes)
    }

    /// `eventSize` of a draft.
    public static func eventSize(of draft: EventDraft) -> Int {
        eventSize(type: draft.type, subject: draft.subject, schemaVersion: draft.schemaVersion, meta: draft.meta, payloadBytes: draft.payload.count)
    }

    static func varintSize(_ value: UInt64) -> Int {
        var v = value, n = 1
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }
}

extension [UInt8] {
    /// Appends a little-endian 64-bit integer.
    mutating func appendFixed(_ value: UInt64) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// Appends an unsigned LEB128 integer (records, read-model states and the stream index
    /// all write their integers this way).
    @inlinable
    public mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    /// Appends a length-prefixed byte string.
    mutating func appendBytes(_ bytes: some Collection<UInt8>) {
        appendVarint(UInt64(bytes.count))
        append(contentsOf: bytes)
    }
}

/// A bounds-checked reader over a record; every failure is a `corruptRecord` error naming
/// the field and position.
struct RecordReader {
    let bytes: UnsafeRawBufferPointer
    let position: UInt64
    var offset = 0

    init(bytes: UnsafeRawBufferPointer, position: UInt64) {
        self.bytes = bytes
        self.position = position
    }

    func corrupt(_ what: String) -> LedgerError {
        LedgerError(.corruptRecord, "record at position \(position) is damaged: \(what); run `ledger verify` and restore from an export",
                    position: position)
    }

    mutating func byte(_ field: @autoclosure () -> String) throws(LedgerError) -> UInt8 {
        guard offset < bytes.count else { throw corrupt("truncated at \(field())") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bytes(_ count: Int, _ field: @autoclosure () -> String) throws(LedgerError) -> [UInt8] {
        guard count >= 0, count <= bytes.count - offset else { throw corrupt("truncated at \(field())") }
        defer { offset += count }
        return Array(bytes[offset ..< offset + count])
    }

    mutating func fixed(_ field: @autoclosure () -> String) throws(LedgerError) -> UInt64 {
        guard bytes.count - offset >= 8 else { throw corrupt("truncated at \(field())") }
        defer { offset += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    mutating func varint(_ field: @autoclosure () -> String) throws(LedgerError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count, shift < 64 else { throw corrupt("bad varint at \(field())") }
            let b = bytes[offset]
            offset += 1
            value |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return value }
            shift += 7
        }
    }

    /// What every record starts with, checked: its format, then the id, source, schema version
    /// and occurredAt; with where its content ends (the trailer's offset). Inlined: both
    /// decoders read it once per record, the folding one for every event of a rebuild.
    @inline(__always)
    mutating func header() throws(LedgerError) -> (contentEnd: Int, id: EventID, source: EventSource, schemaVersion: UInt16, occurredAt: Timestamp) {
        let format = try byte("format version")
        guard format == EventRecord.formatVersion else {
            if format > EventRecord.formatVersion {
                throw LedgerError(.unsupportedFormat, "record format \(format) is newer than this ledger reads (\(EventRecord.formatVersion)); upgrade the ledger",
                                  position: position)
            }
            throw corrupt("unknown record format \(format)")
        }
        guard bytes.count >= 1 + EventRecord.trailerSize else { throw corrupt("record is \(bytes.count) bytes, too short") }
        let high = try fixedBigEndian("id"), low = try fixedBigEndian("id")
        let sourceCode = try byte("source")
        guard let source = EventSource(code: sourceCode) else { throw corrupt("unknown source code \(sourceCode)") }
        let schema = try varint("schemaVersion")
        guard schema > 0, schema <= UInt64(UInt16.max) else { throw corrupt("schemaVersion \(schema) out of range") }
        let occurredAt = Int64(bitPattern: try fixed("occurredAt"))
        return (bytes.count - EventRecord.trailerSize, EventID(high: high, low: low), source, UInt16(schema), Timestamp(milliseconds: occurredAt))
    }

    /// How many meta entries follow, within the meta limit.
    mutating func metaCount() throws(LedgerError) -> UInt64 {
        let count = try varint("meta count")
        guard count <= UInt64(EventLimits.maxMetaBytes) else { throw corrupt("meta count \(count) out of range") }
        return count
    }

    /// The payload, the last part of the content, then the stamp that follows the content.
    mutating func payloadAndStamp(contentEnd: Int) throws(LedgerError) -> (payload: [UInt8], version: UInt64, recordedAt: Int64) {
        let (payload, version, recordedAt) = try payloadInPlaceAndStamp(contentEnd: contentEnd)
        return (Array(payload), version, recordedAt)
    }

    /// The payload where it lies in the record (the fold decodes it without a copy), the
    /// stream version and the recording time.
    mutating func payloadInPlaceAndStamp(contentEnd: Int) throws(LedgerError) -> (payload: UnsafeRawBufferPointer, version: UInt64, recordedAt: Int64) {
        let payload = try lengthPrefixed("payload")
        guard offset == contentEnd else { throw corrupt("content ends at byte \(offset), trailer expected at \(contentEnd)") }
        let version = try fixed("version")
        return (payload, version, Int64(bitPattern: try fixed("recordedAt")))
    }

    /// 8 bytes as a big-endian integer (an id's halves).
    mutating func fixedBigEndian(_ field: @autoclosure () -> String) throws(LedgerError) -> UInt64 {
        guard bytes.count - offset >= 8 else { throw corrupt("truncated at \(field())") }
        defer { offset += 8 }
        return UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// A length-prefixed byte string, in place (every string of a record, and the bytes the
    /// folding decoder steps over).
    @discardableResult
    mutating func lengthPrefixed(_ field: @autoclosure () -> String) throws(LedgerError) -> UnsafeRawBufferPointer {
        let length = try varint("\(field()) length")
        guard length <= UInt64(bytes.count - offset) else { throw corrupt("truncated at \(field())") }
        defer { offset += Int(length) }
        return UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
    }

    mutating func string(_ field: @autoclosure () -> String) throws(LedgerError) -> String {
        try text(try lengthPrefixed(field()), field())
    }

    /// `bytes` of this record as text.
    func text(_ bytes: UnsafeRawBufferPointer, _ field: @autoclosure () -> String) throws(LedgerError) -> String {
        guard let text = StrictUTF8.string(bytes) else { throw corrupt("\(field()) is not valid UTF-8") }
        return text
    }
}

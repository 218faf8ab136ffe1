@_spi(Storage) import LedgerCore
import LedgerModels

/// The entries one key files under one anchor, each as its distance from the anchor, sorted:
/// the value of an anchor's index entry. Each is its distance (8 bytes that sort as the
/// distances do), then its kind and its detail, each its length (LEB128, doubled) and UTF-8
/// bytes — or, for a kind the same as the entry before's, 1 alone — so that a range read
/// passes over the entries at other distances without decoding them. The same entries always
/// encode to the same bytes.
struct AnchoredEntries: Equatable {
    struct Item: Equatable {
        var offset: Int64
        var kind: String
        var detail: String

        func precedes(_ other: Item) -> Bool {
            if offset != other.offset { return offset < other.offset }
            if kind != other.kind { return kind.utf8.lexicographicallyPrecedes(other.kind.utf8) }
            return detail.utf8.lexicographicallyPrecedes(other.detail.utf8)
        }
    }

    var items: [Item]

    init(_ items: [Item]) { self.items = items.sorted { $0.precedes($1) } }

    /// Items already in order (`Item.precedes`).
    private init(sorted items: [Item]) { self.items = items }

    var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(items.reduce(0) { $0 + 12 + $1.kind.utf8.count + $1.detail.utf8.count })
        func write(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }
        var previous: String?
        for item in items {
            withUnsafeBytes(of: ModelSchema.indexTimeBits(Timestamp(milliseconds: item.offset))) { bytes += $0 }
            if item.kind == previous {
                write(1)
            } else {
                write(UInt64(item.kind.utf8.count) << 1)
                bytes += item.kind.utf8
            }
            previous = item.kind
            write(UInt64(item.detail.utf8.count) << 1)
            bytes += item.detail.utf8
        }
        return bytes
    }

    /// Calls `body` with the kind and detail of each entry in `bytes` at distance `offset`
    /// (`nil`: every entry, with its distance); throws on bytes that do not parse.
    static func forEach(in bytes: UnsafeRawBufferPointer, at offset: Int64?, _ body: (_ offset: Int64, _ kind: String, _ detail: String) throws -> Void) throws {
        var i = 0
        /// A text's bytes, or `nil` for "the same kind as the entry before's".
        func text() throws -> Range<Int>? {
            var header = 0, shift = 0
            while true {
                guard i < bytes.count, shift < 63 else { throw AnchoredEntries.damaged }
                let byte = bytes[i]
                i += 1
                header |= Int(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            if header & 1 == 1 { return nil }
            let length = header >> 1
            guard length <= bytes.count - i else { throw AnchoredEntries.damaged }
            defer { i += length }
            return i ..< i + length
        }
        var kind: Range<Int>?
        while i < bytes.count {
            guard bytes.count - i >= 8 else { throw damaged }
            let distance = ModelSchema.indexTime(bytes[i ..< i + 8]).milliseconds
            // In order of distance: past the one asked for, none is left.
            if let offset, distance > offset { return }
            i += 8
            if let own = try text() {
                kind = own
            } else if kind == nil {
                throw damaged
            }
            guard let kind, let detail = try text() else { throw damaged }
            guard offset == nil || offset == distance else { continue }
            try body(distance, String(decoding: UnsafeRawBufferPointer(rebasing: bytes[kind]), as: UTF8.self),
                     String(decoding: UnsafeRawBufferPointer(rebasing: bytes[detail]), as: UTF8.self))
        }
    }

    static let damaged = LedgerError(.corruptRecord, "an index entry's value is damaged; run `ledger rebuild`")

    /// `entries` grouped by their anchor, anchors in time order.
    static func grouped(_ entries: [IndexEntry]) -> [(anchor: Timestamp, entries: AnchoredEntries)] {
        // One sort by anchor, then by item; each anchor's run is then a group in order.
        var all = entries.map { (anchor: $0.anchor, item: Item(offset: $0.at.milliseconds &- $0.anchor.milliseconds, kind: $0.kind, detail: $0.detail)) }
        all.sort { $0.anchor != $1.anchor ? $0.anchor < $1.anchor : $0.item.precedes($1.item) }
        var groups: [(anchor: Timestamp, entries: AnchoredEntries)] = []
        var start = all.startIndex
        while start < all.endIndex {
            let anchor = all[start].anchor
            var end = start + 1
            while end < all.endIndex && all[end].anchor == anchor { end += 1 }
            groups.append((anchor, AnchoredEntries(sorted: all[start ..< end].map(\.item))))
            start = end
        }
        return groups
    }
}

extension ModelSchema {
    /// A distance as 8 bytes that sort as the distances do.
    static func offsetBytes(_ offset: Int64) -> [UInt8] { indexTime(Timestamp(milliseconds: offset)) }
}

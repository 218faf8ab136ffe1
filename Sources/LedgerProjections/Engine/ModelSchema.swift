import Crypto
@_spi(Storage) import LedgerCore

/// Where the folds live in the store, next to the log.
///
/// - `models`: everything of one key, neighbours under generation (u32 BE) ‖ key length (u16
///   BE) ‖ key (UTF-8), then a mark byte: each fold's encoded state of the key under its tag
///   (below `itemMark`); the items of the models that keep some (`ReadModel.Item`), under
///   `itemMark | tag` ‖ item (the item's UTF-8 bytes, or beyond 200 bytes 0xFF ‖ their SHA-256:
///   LMDB keys are at most 511 bytes); and an indexed model's anchors of the key (8 bytes each,
///   `modelIndex` below), under `anchorsMark | tag`. A status query reads a subject's states
///   with one seek, and an append writes what one event changes — states, an item, the anchor
///   list — on one page.
/// - `modelIndex`: the indexed models' time-ordered entries, filed by anchor
///   (`IndexEntry.anchor`): `e` ‖ generation ‖ tag ‖ anchor (u64 BE, sign bit flipped) ‖ key
///   length ‖ key → the key's entries under that anchor (`AnchoredEntries`: each its distance
///   from the anchor, kind and detail); and per model the distances in use, `o` ‖ generation ‖
///   tag.
/// - `generations`: `served` and `shadow` → a `Generation`; `next` → the next generation
///   number; `layout` → this layout's number.
enum ModelSchema {
    static let states = "models"
    static let index = "modelIndex"
    /// Where layouts 3 and 4 kept items: dropped when such a store is opened for writing.
    static let oldItems = "modelItems"
    static let generations = "generations"
    /// The layout this code writes (5: a key's items and anchors beside its states; 4: index
    /// entries filed by anchor; 3: models keep items apart; 2: one generation for every fold,
    /// the facts folded once; the first layout had a generation per model, each with its own
    /// copy of the facts).
    static let layout: UInt8 = 5
    /// The mark byte after a key in `models`: a state's tag is below `itemMark`; an item's
    /// mark is `itemMark | tag`, an anchor list's `anchorsMark | tag`.
    static let itemMark: UInt8 = 0x40
    static let anchorsMark: UInt8 = 0x80
    static let layoutKey = Array("layout".utf8)
    static let servedKey = Array("served".utf8)
    static let shadowKey = Array("shadow".utf8)
    static let nextKey = Array("next".utf8)

    static func prefix(_ generation: UInt32) -> [UInt8] { withUnsafeBytes(of: generation.bigEndian) { Array($0) } }

    /// Key length (u16 BE) ‖ key: how a key is written after a generation (and in the index).
    static func keyBytes(_ key: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.utf8.count + 3)
        appendKey(key, to: &bytes)
        return bytes
    }

    private static func appendKey(_ key: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: key.utf8.count >> 8))
        bytes.append(UInt8(truncatingIfNeeded: key.utf8.count))
        bytes.append(contentsOf: key.utf8)
    }

    /// The bytes `lead` (if any) ‖ generation, then what `rest` appends, in one array sized
    /// `extra` bytes beyond them (the keys of every put and get are made so, without the
    /// arrays of each part).
    private static func key(_ lead: UInt8?, _ generation: UInt32, extra: Int, _ rest: (inout [UInt8]) -> Void) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(5 + extra)
        if let lead { bytes.append(lead) }
        withUnsafeBytes(of: generation.bigEndian) { bytes.append(contentsOf: $0) }
        rest(&bytes)
        return bytes
    }

    /// Generation ‖ key length ‖ key: where a key's states begin.
    static func keyPrefix(_ generation: UInt32, _ key: String) -> [UInt8] {
        Self.key(nil, generation, extra: key.utf8.count + 2) { appendKey(key, to: &$0) }
    }

    static func stateKey(_ generation: UInt32, _ key: String, tag: UInt8) -> [UInt8] {
        Self.key(nil, generation, extra: key.utf8.count + 3) { bytes in
            appendKey(key, to: &bytes)
            bytes.append(tag)
        }
    }

    /// Where an indexed model keeps the anchors of `key`'s entries.
    static func anchorsKey(_ generation: UInt32, tag: UInt8, key: String) -> [UInt8] { stateKey(generation, key, tag: anchorsMark | tag) }

    /// The mark byte of a stored key of `models` (after generation ‖ key length ‖ key), `nil`
    /// when the key is too short for its length.
    static func mark(_ stored: UnsafeRawBufferPointer) -> UInt8? {
        guard stored.count >= 7 else { return nil }
        let length = Int(stored[4]) << 8 | Int(stored[5])
        return stored.count >= 6 + length + 1 ? stored[6 + length] : nil
    }

    /// Whether a stored key of `models` is a state's (not an item's or an anchor list's).
    static func isState(_ stored: UnsafeRawBufferPointer) -> Bool {
        guard let mark = mark(stored) else { return false }
        return mark < itemMark && stored.count == 6 + (Int(stored[4]) << 8 | Int(stored[5])) + 1
    }

    /// Whether a stored key of `models` is an anchor list's.
    static func isAnchorList(_ stored: UnsafeRawBufferPointer) -> Bool {
        guard let mark = mark(stored) else { return false }
        return mark & 0xC0 == anchorsMark && stored.count == 6 + (Int(stored[4]) << 8 | Int(stored[5])) + 1
    }

    /// Whether a stored key of `models` is an item's.
    static func isItem(_ stored: UnsafeRawBufferPointer) -> Bool { mark(stored).map { $0 & 0xC0 == itemMark } ?? false }

    /// A stored item key for people (`key · item`, a long item as its hash) and its fold's tag.
    static func itemLabel(_ stored: UnsafeRawBufferPointer) -> (label: String, tag: UInt8)? {
        guard isItem(stored), let key = itemOwner(stored) else { return nil }
        let length = Int(stored[4]) << 8 | Int(stored[5])
        let item = UnsafeRawBufferPointer(rebasing: stored[(6 + length + 1)...])
        let shown = item.first == 0xFF ? "sha256:" + item.dropFirst().map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() : String(decoding: item, as: UTF8.self)
        return ("\(key) · \(shown)", stored[6 + length] & ~itemMark)
    }

    /// The key (subject) a stored item key belongs to.
    static func itemOwner(_ stored: UnsafeRawBufferPointer) -> String? {
        guard stored.count >= 7 else { return nil }
        let length = Int(stored[4]) << 8 | Int(stored[5])
        guard stored.count >= 6 + length + 1 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: stored[6 ..< 6 + length]), as: UTF8.self)
    }

    static func itemKey(_ generation: UInt32, tag: UInt8, _ item: ItemKey) -> [UInt8] {
        let count = item.item.utf8.count
        return Self.key(nil, generation, extra: item.key.utf8.count + 3 + min(count, 201)) { bytes in
            appendKey(item.key, to: &bytes)
            bytes.append(itemMark | tag)
            if count <= 200 {
                bytes.append(contentsOf: item.item.utf8)
            } else {
                bytes.append(0xFF)
                bytes.append(contentsOf: SHA256.hash(data: Array(item.item.utf8)))
            }
        }
    }

    /// The key and tag of a stored state's key in `generation`, else `nil`.
    static func parse(_ stored: UnsafeRawBufferPointer, in generation: UInt32) -> (key: String, tag: UInt8)? {
        guard stored.count >= 7, ModelSchema.generation(of: stored) == generation else { return nil }
        let length = Int(stored[4]) << 8 | Int(stored[5])
        guard stored.count == 6 + length + 1, stored[6 + length] < itemMark else { return nil }
        return (String(decoding: UnsafeRawBufferPointer(rebasing: stored[6 ..< 6 + length]), as: UTF8.self), stored[6 + length])
    }

    static func generation(of key: UnsafeRawBufferPointer) -> UInt32? {
        guard key.count >= 4 else { return nil }
        return key.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// An index time as an unsigned big-endian number that sorts as the times do.
    static func indexTime(_ t: Timestamp) -> [UInt8] {
        withUnsafeBytes(of: indexTimeBits(t)) { Array($0) }
    }

    /// `indexTime`'s 8 bytes as an integer in memory order, to append without an array.
    static func indexTimeBits(_ t: Timestamp) -> UInt64 { (UInt64(bitPattern: t.milliseconds) ^ (1 << 63)).bigEndian }

    /// The time of an index time's 8 bytes (`bytes` holds at least 8; the first 8 are read).
    static func indexTime(_ bytes: UnsafeRawBufferPointer.SubSequence) -> Timestamp {
        let raw = UInt64(bigEndian: UnsafeRawBufferPointer(rebasing: bytes).loadUnaligned(as: UInt64.self))
        return Timestamp(milliseconds: Int64(bitPattern: raw ^ (1 << 63)))
    }

    static func entryPrefix(_ generation: UInt32, tag: UInt8) -> [UInt8] { Self.key(UInt8(ascii: "e"), generation, extra: 1) { $0.append(tag) } }

    /// Where the entries one key files under one anchor are kept.
    static func anchorKey(_ generation: UInt32, tag: UInt8, key: String, anchor: Timestamp) -> [UInt8] {
        Self.key(UInt8(ascii: "e"), generation, extra: 1 + 8 + key.utf8.count + 2) { bytes in
            bytes.append(tag)
            withUnsafeBytes(of: indexTimeBits(anchor)) { bytes.append(contentsOf: $0) }
            appendKey(key, to: &bytes)
        }
    }

    /// Where the distances a model's entries lie from their anchors are listed.
    static func offsetsKey(_ generation: UInt32, tag: UInt8) -> [UInt8] { Self.key(UInt8(ascii: "o"), generation, extra: 1) { $0.append(tag) } }
}


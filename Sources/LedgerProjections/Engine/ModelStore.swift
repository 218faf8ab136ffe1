import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore
import Synchronization

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

/// The engine's databases and the reads and writes every path shares.
struct ModelStore: Sendable {
    let env: Environment
    let log: LogAccess
    let states: Database
    let index: Database
    let generations: Database
    /// The served record last decoded, with its bytes: a query decodes it again only when the
    /// stored bytes differ.
    private let servedCache = ServedCache()

    /// Opens the engine's databases; a store of the first layout (a generation per model) is
    /// emptied, to be built again by catch-up, the first time it is opened for writing.
    init(env: Environment) throws {
        self.env = env
        log = try LogAccess(env)
        let readOnly = env.configuration.flags.contains(.readOnly)
        do {
            states = try env.openDatabase(ModelSchema.states, flags: readOnly ? [] : [.create])
            index = try env.openDatabase(ModelSchema.index, flags: readOnly ? [] : [.create])
            generations = try env.openDatabase(ModelSchema.generations, flags: readOnly ? [] : [.create])
        } catch let error as LMDBError where error.code == .notFound {
            throw LedgerError(.storage, "the store at \(env.path) has no read models of this layout yet; open it once for writing (any `ledger` command but `export`, or the library without `readOnly`) to build them")
        }
        let states = self.states, index = self.index, generations = self.generations
        func check(_ layout: [UInt8]?) throws -> Bool {
            if layout == [ModelSchema.layout] { return true }
            if let layout, layout.count == 1, layout[0] > ModelSchema.layout {
                throw LedgerError(.unsupportedFormat, "the read models at \(env.path) are of layout \(layout[0]), newer than this ledger's (\(ModelSchema.layout)); use a newer ledger")
            }
            return false
        }
        if try check(try env.read { txn in try txn.get(generations, key: ModelSchema.layoutKey).map { Array($0) } }) { return }
        guard !readOnly else {
            throw LedgerError(.unsupportedFormat, "the read models at \(env.path) are of an older layout; open the store once for writing to build them again")
        }
        try env.write { txn in
            // Checked again in the write: another process may have built them meanwhile.
            if try check(try txn.get(generations, key: ModelSchema.layoutKey).map { Array($0) }) { return }
            try txn.removeAll(states)
            try txn.removeAll(index)
            if let items = try txn.openDatabase(ModelSchema.oldItems, flags: []) { try txn.drop(items) }
            try txn.removeAll(generations)
            try txn.put(generations, key: ModelSchema.layoutKey, value: [ModelSchema.layout])
        }
    }

    // MARK: Generations

    func served(_ txn: borrowing Transaction) throws -> Generation? {
        guard let bytes = try txn.get(generations, key: ModelSchema.servedKey) else { return nil }
        if let cached = servedCache.value.withLock({ $0 }), bytes.hasSameBytes(as: cached.bytes) { return cached.generation }
        let generation = try generation(ModelSchema.servedKey, txn)
        if let generation { servedCache.value.withLock { $0 = (Array(bytes), generation) } }
        return generation
    }
    func shadow(_ txn: borrowing Transaction) throws -> Generation? { try generation(ModelSchema.shadowKey, txn) }

    private func generation(_ key: [UInt8], _ txn: borrowing Transaction) throws -> Generation? {
        guard let bytes = try txn.get(generations, key: key) else { return nil }
        do {
            return try Generation.decode(bytes)
        } catch {
            throw LedgerError(.corruptRecord, "the read models' generation record is damaged (\(error)); run `ledger rebuild`")
        }
    }

    func setServed(_ generation: Generation, _ txn: borrowing Transaction) throws {
        try txn.put(generations, key: ModelSchema.servedKey, value: generation.encoded)
    }

    func setShadow(_ generation: Generation?, _ txn: borrowing Transaction) throws {
        if let generation {
            try txn.put(generations, key: ModelSchema.shadowKey, value: generation.encoded)
        } else {
            _ = try txn.delete(generations, key: ModelSchema.shadowKey)
        }
    }

    /// Takes the next generation number.
    func allocate(_ txn: borrowing Transaction) throws -> UInt32 {
        let next = try txn.get(generations, key: ModelSchema.nextKey).flatMap { ModelSchema.generation(of: $0) } ?? 1
        try txn.put(generations, key: ModelSchema.nextKey, value: ModelSchema.prefix(next + 1))
        return next
    }

    // MARK: States

    func state(_ generation: UInt32, tag: UInt8, _ key: String, _ txn: borrowing Transaction) throws -> [UInt8]? {
        try txn.get(states, key: ModelSchema.stateKey(generation, key, tag: tag)).map { Array($0) }
    }

    func put(_ generation: UInt32, tag: UInt8, _ key: String, _ state: [UInt8], _ txn: borrowing Transaction) throws {
        try txn.put(states, key: ModelSchema.stateKey(generation, key, tag: tag), value: state)
    }

    func item(_ generation: UInt32, tag: UInt8, _ item: ItemKey, _ txn: borrowing Transaction) throws -> [UInt8]? {
        try txn.get(states, key: ModelSchema.itemKey(generation, tag: tag, item)).map { Array($0) }
    }

    func putItem(_ generation: UInt32, tag: UInt8, _ item: ItemKey, _ state: [UInt8], _ txn: borrowing Transaction) throws {
        try txn.put(states, key: ModelSchema.itemKey(generation, tag: tag, item), value: state)
    }

    /// Calls `body` with each stored item key (generation included) and state of `generation`,
    /// in order, and with each key of the generation that is neither a state's, an item's nor
    /// an anchor list's (damaged: `ModelSchema.itemLabel` gives it none).
    func forEachItem(in generation: UInt32, _ txn: borrowing Transaction, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        let prefix = ModelSchema.prefix(generation)
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.begins(with: prefix) {
                if !ModelSchema.isState(current.key) && !ModelSchema.isAnchorList(current.key) { try body(current.key, current.value) }
                entry = try cursor.next()
            }
        }
    }

    /// Every stored state of `key` in `generation`, by tag, valid until `txn` ends: its states
    /// are neighbours, so one seek finds them.
    func states(of key: String, in generation: UInt32, _ txn: borrowing Transaction) throws -> [UInt8: UnsafeRawBufferPointer] {
        let prefix = ModelSchema.keyPrefix(generation, key)
        var found: [UInt8: UnsafeRawBufferPointer] = [:]
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.count == prefix.count + 1, current.key.begins(with: prefix),
                  current.key[prefix.count] < ModelSchema.itemMark {
                found[current.key[prefix.count]] = current.value
                entry = try cursor.next()
            }
        }
        return found
    }

    /// Calls `body` with each key, tag and state of `generation`, in the order the store keeps them.
    func forEachState(in generation: UInt32, _ txn: borrowing Transaction,
                      _ body: (String, UInt8, UnsafeRawBufferPointer) throws -> Void) throws {
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: ModelSchema.prefix(generation))
            while let current = entry, ModelSchema.generation(of: current.key) == generation {
                if let (key, tag) = ModelSchema.parse(current.key, in: generation) { try body(key, tag, current.value) }
                entry = try cursor.next()
            }
        }
    }

    /// Every generation number that has states, items or index entries, in order.
    func storedGenerations(_ txn: borrowing Transaction) throws -> Set<UInt32> {
        var found: Set<UInt32> = []
        try txn.withCursor(states) { cursor in
            var entry = try cursor.first()
            while let current = entry, let generation = ModelSchema.generation(of: current.key) {
                found.insert(generation)
                guard generation < UInt32.max else { break }
                entry = try cursor.seek(atLeast: ModelSchema.prefix(generation + 1))
            }
        }
        for marker in [UInt8(ascii: "e"), UInt8(ascii: "o")] {
            try txn.withCursor(index) { cursor in
                var entry = try cursor.seek(atLeast: [marker])
                while let current = entry, current.key.first == marker, current.key.count >= 5,
                      let generation = ModelSchema.generation(of: UnsafeRawBufferPointer(rebasing: current.key[1...])) {
                    found.insert(generation)
                    guard generation < UInt32.max else { break }
                    entry = try cursor.seek(atLeast: [marker] + ModelSchema.prefix(generation + 1))
                }
            }
        }
        return found
    }

    /// Deletes at most `limit` states, items and index entries of `generation`; how many it deleted.
    func delete(_ generation: UInt32, limit: Int, _ txn: borrowing Transaction) throws -> Int {
        var deleted = 0
        for (database, prefix) in [(states, ModelSchema.prefix(generation)),
                                   (index, [UInt8(ascii: "e")] + ModelSchema.prefix(generation)),
                                   (index, [UInt8(ascii: "o")] + ModelSchema.prefix(generation))] {
            try txn.withCursor(database) { cursor in
                var entry = try cursor.seek(atLeast: prefix)
                while deleted < limit, let current = entry, current.key.begins(with: prefix) {
                    try cursor.deleteCurrent()
                    deleted += 1
                    // A cursor stays on the entry after the one it deleted (`mdb_cursor_del`).
                    entry = try cursor.current()
                }
            }
        }
        return deleted
    }

    // MARK: Index

    /// Replaces `key`'s entries in the index of the model tagged `tag` with `entries`. They
    /// are kept by anchor (`IndexEntry.anchor`): one stored entry per anchor of the key,
    /// holding each of its entries as a distance from it, so that a fact that moves an anchor
    /// (a renewal moving a predicted lapse) moves one stored entry however many entries follow
    /// from it. The distances in use are listed once per model (`offsetsKey`), for range reads.
    func setEntries(_ entries: [IndexEntry], of key: String, generation: UInt32, tag: UInt8, _ txn: borrowing Transaction) throws {
        let listKey = ModelSchema.anchorsKey(generation, tag: tag, key: key)
        let groups = AnchoredEntries.grouped(entries)
        var list: [UInt8] = []
        list.reserveCapacity(groups.count * 8)
        for group in groups { list += ModelSchema.indexTime(group.anchor) }
        let old = try txn.get(states, key: listKey).map { Self.anchors(in: $0) } ?? []
        for anchor in old where !groups.contains(where: { $0.anchor == anchor }) {
            _ = try txn.delete(index, key: ModelSchema.anchorKey(generation, tag: tag, key: key, anchor: anchor))
        }
        guard !groups.isEmpty else {
            if !old.isEmpty { _ = try txn.delete(states, key: listKey) }
            return
        }
        let offsetsKey = ModelSchema.offsetsKey(generation, tag: tag)
        for group in groups {
            let entryKey = ModelSchema.anchorKey(generation, tag: tag, key: key, anchor: group.anchor)
            let value = group.entries.encoded
            if old.contains(group.anchor), let stored = try txn.get(index, key: entryKey), stored.hasSameBytes(as: value) { continue }
            try txn.put(index, key: entryKey, value: value)
            // The distances in use rarely grow: looked up in the stored list, rewritten when one is new.
            let listed = try txn.get(index, key: offsetsKey)
            guard group.entries.items.contains(where: { item in !(listed.map { Self.lists($0, item.offset) } ?? false) }) else { continue }
            var known = Set(try offsets(generation: generation, tag: tag, txn))
            for item in group.entries.items { known.insert(item.offset) }
            try txn.put(index, key: offsetsKey, value: known.sorted().flatMap(ModelSchema.offsetBytes))
        }
        if old != groups.map(\.anchor) { try txn.put(states, key: listKey, value: list) }
    }

    /// The stored form of every key's entries for a generation that has none yet (a
    /// rebuild's): for `modelIndex`, each anchor's entry and the distances in use, as (database
    /// key, value) in key order, to put in batches (`putFresh`); and each key's list of anchors,
    /// as (key length ‖ key ‖ mark, value) in key order, to put among the states.
    static func freshEntries(_ entries: [(key: String, entries: [IndexEntry])], generation: UInt32, tag: UInt8)
        -> (records: [(key: [UInt8], value: [UInt8])], lists: [(stored: [UInt8], state: [UInt8])]) {
        var records: [(key: [UInt8], value: [UInt8])] = []
        var lists: [(stored: [UInt8], state: [UInt8])] = []
        var offsets: Set<Int64> = []
        for (key, keyEntries) in entries {
            let groups = AnchoredEntries.grouped(keyEntries)
            guard !groups.isEmpty else { continue }
            var list: [UInt8] = []
            for group in groups {
                records.append((ModelSchema.anchorKey(generation, tag: tag, key: key, anchor: group.anchor), group.entries.encoded))
                list += ModelSchema.indexTime(group.anchor)
                for item in group.entries.items { offsets.insert(item.offset) }
            }
            lists.append((ModelSchema.keyBytes(key) + [ModelSchema.anchorsMark | tag], list))
        }
        if !offsets.isEmpty { records.append((ModelSchema.offsetsKey(generation, tag: tag), offsets.sorted().flatMap(ModelSchema.offsetBytes))) }
        records.sort { $0.key.precedesInByteOrder($1.key) }
        lists.sort { $0.stored.precedesInByteOrder($1.stored) }
        return (records, lists)
    }

    /// Puts records `freshEntries` made.
    func putFresh(_ records: ArraySlice<(key: [UInt8], value: [UInt8])>, _ txn: borrowing Transaction) throws {
        for record in records { try txn.put(index, key: record.key, value: record.value) }
    }

    /// Whether a list of distances in use (`offsetsKey`'s value: in order, 8 bytes each) holds
    /// `offset`.
    static func lists(_ list: UnsafeRawBufferPointer, _ offset: Int64) -> Bool {
        var (low, high) = (0, list.count / 8)
        while low < high {
            let middle = (low + high) / 2
            let found = ModelSchema.indexTime(list[middle * 8 ..< middle * 8 + 8]).milliseconds
            if found == offset { return true }
            if found < offset { low = middle + 1 } else { high = middle }
        }
        return false
    }

    /// The anchors of a key's list, each 8 bytes (`ModelSchema.indexTime`).
    static func anchors(in list: UnsafeRawBufferPointer) -> [Timestamp] {
        stride(from: 0, to: list.count - list.count % 8, by: 8).map { ModelSchema.indexTime(list[$0 ..< $0 + 8]) }
    }

    /// The distances from their anchors at which the model tagged `tag` has filed entries, in
    /// order (0 among them once any entry is filed).
    func offsets(generation: UInt32, tag: UInt8, _ txn: borrowing Transaction) throws -> [Int64] {
        guard let bytes = try txn.get(index, key: ModelSchema.offsetsKey(generation, tag: tag)) else { return [] }
        return stride(from: 0, to: bytes.count - bytes.count % 8, by: 8).map { ModelSchema.indexTime(bytes[$0 ..< $0 + 8]).milliseconds }
    }

    /// The index entries of the model tagged `tag` with from ≤ at < to, in no order: for each
    /// distance in use, the anchors from `from` − it to `to` − it, and of each the entries at
    /// that distance.
    func entries(generation: UInt32, tag: UInt8, from: Timestamp, to: Timestamp, _ txn: borrowing Transaction,
                 _ body: (_ key: String, _ entry: IndexEntry, _ detail: JSON) throws -> Void) throws {
        for offset in try offsets(generation: generation, tag: tag, txn) {
            let low = from.milliseconds.subtractingClamped(offset), high = to.milliseconds.subtractingClamped(offset)
            guard low < high else { continue }
            try anchors(generation: generation, tag: tag, from: Timestamp(milliseconds: low), to: Timestamp(milliseconds: high), at: offset, txn) { key, anchor, _, kind, detail in
                let at = Timestamp(milliseconds: anchor.milliseconds &+ offset)
                guard from <= at && at < to else { return }
                guard let parsed = try? JSONParser.parse(detail) else {
                    throw LedgerError(.corruptRecord, "the index entry of \(key) at \(at) has a damaged detail; run `ledger rebuild`")
                }
                try body(key, IndexEntry(stored: kind, detail: detail, at: at, anchor: anchor), parsed)
            }
        }
    }

    /// Every index entry of the model tagged `tag`, in no order.
    func allEntries(generation: UInt32, tag: UInt8, _ txn: borrowing Transaction, _ body: (_ key: String, _ entry: IndexEntry) throws -> Void) throws {
        try anchors(generation: generation, tag: tag, from: Timestamp(milliseconds: .min), to: nil, at: nil, txn) { key, anchor, offset, kind, detail in
            try body(key, IndexEntry(stored: kind, detail: detail, at: Timestamp(milliseconds: anchor.milliseconds &+ offset), anchor: anchor))
        }
    }

    /// The entries at distance `offset` (`nil`: all) of the stored anchors of the model tagged
    /// `tag` with from ≤ anchor < to (`nil`: no end), in anchor order, each with its key,
    /// anchor, distance, kind and detail.
    private func anchors(generation: UInt32, tag: UInt8, from: Timestamp, to: Timestamp?, at offset: Int64?, _ txn: borrowing Transaction,
                         _ body: (_ key: String, _ anchor: Timestamp, _ offset: Int64, _ kind: String, _ detail: String) throws -> Void) throws {
        let prefix = ModelSchema.entryPrefix(generation, tag: tag)
        let end = to.map { prefix + ModelSchema.indexTime($0) }
        try txn.withCursor(index) { cursor in
            var entry = try cursor.seek(atLeast: prefix + ModelSchema.indexTime(from))
            while let current = entry, current.key.begins(with: prefix), end.map({ current.key.lexicographicallyPrecedes($0) }) ?? true {
                let rest = UnsafeRawBufferPointer(rebasing: current.key[prefix.count...])
                guard rest.count >= 10, rest.count == 10 + (Int(rest[8]) << 8 | Int(rest[9])) else {
                    throw LedgerError(.corruptRecord, "an index entry's key is damaged; run `ledger rebuild`")
                }
                let anchor = ModelSchema.indexTime(rest[0 ..< 8])
                var key: String?
                try AnchoredEntries.forEach(in: current.value, at: offset) { offset, kind, detail in
                    let owner = key ?? String(decoding: UnsafeRawBufferPointer(rebasing: rest[10...]), as: UTF8.self)
                    key = owner
                    try body(owner, anchor, offset, kind, detail)
                }
                entry = try cursor.next()
            }
        }
    }
}

extension IndexEntry {
    /// An entry as stored under `anchor` (its detail kept as written, not written again).
    init(stored kind: String, detail: String, at: Timestamp, anchor: Timestamp) {
        self.init(at: at, kind: kind, anchor: anchor)
        self.detail = detail
    }
}

extension Int64 {
    /// `self − other`, held at the bounds instead of overflowing.
    func subtractingClamped(_ other: Int64) -> Int64 {
        let (result, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return result }
        return other > 0 ? .min : .max
    }
}

/// The served generation record last decoded (`ModelStore.served`).
private final class ServedCache: Sendable {
    let value = Mutex<(bytes: [UInt8], generation: Generation)?>(nil)
}

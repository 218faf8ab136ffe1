@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore
import Synchronization

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

    /// The served generation as `txn` sees it under `overlay`'s writes.
    func served(_ txn: borrowing Transaction, _ overlay: Overlay) throws -> Generation? {
        if let served = overlay.served { return served }
        return try storedServed(txn)
    }

    /// The served generation as stored.
    func storedServed(_ txn: borrowing Transaction) throws -> Generation? {
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

    /// Records `generation` as served, in `overlay` (stored with its tail).
    func setServed(_ generation: Generation, _ overlay: Overlay) {
        overlay.served = generation
    }

    func setStoredServed(_ generation: Generation, _ txn: borrowing Transaction) throws {
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

    /// The value at `key` of `models` under the tail's writes. Like a stored value's, the
    /// pointer is good until the next write.
    func stored(_ key: [UInt8], _ txn: borrowing Transaction, _ overlay: Overlay) throws -> UnsafeRawBufferPointer? {
        if let written = overlay.state(key) { return written?.bytes }
        return try txn.get(states, key: key)
    }

    /// The value at `key` of `modelIndex` under the tail's writes.
    func storedEntry(_ key: [UInt8], _ txn: borrowing Transaction, _ overlay: Overlay) throws -> UnsafeRawBufferPointer? {
        if let written = overlay.entry(key) { return written?.bytes }
        return try txn.get(index, key: key)
    }

    func state(_ generation: UInt32, tag: UInt8, _ key: String, _ txn: borrowing Transaction, _ overlay: Overlay) throws -> [UInt8]? {
        try stored(ModelSchema.stateKey(generation, key, tag: tag), txn, overlay).map { Array($0) }
    }

    func put(_ generation: UInt32, tag: UInt8, _ key: String, _ state: [UInt8], _ overlay: Overlay) {
        overlay.put(state: ModelSchema.stateKey(generation, key, tag: tag), state)
    }

    func item(_ generation: UInt32, tag: UInt8, _ item: ItemKey, _ txn: borrowing Transaction, _ overlay: Overlay) throws -> [UInt8]? {
        try stored(ModelSchema.itemKey(generation, tag: tag, item), txn, overlay).map { Array($0) }
    }

    func putItem(_ generation: UInt32, tag: UInt8, _ item: ItemKey, _ state: [UInt8], _ overlay: Overlay) {
        overlay.put(state: ModelSchema.itemKey(generation, tag: tag, item), state)
    }

    /// Calls `body` with each key and value of `models` beginning with `prefix`, in key order:
    /// the stored ones under the tail's writes.
    func forEachStored(beginningWith prefix: [UInt8], _ txn: borrowing Transaction, _ overlay: Overlay,
                       _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        let written = overlay.isEmpty ? [] : overlay.stateKeys(beginningWith: prefix)
        var next = 0
        func writtenOne() throws {
            if let bytes = overlay.state(written[next]) ?? nil { try written[next].withUnsafeBytes { try body($0, bytes.bytes) } }
            next += 1
        }
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.begins(with: prefix) {
                while next < written.count, written[next].lexicographicallyPrecedes(current.key) { try writtenOne() }
                if next < written.count, written[next].elementsEqual(current.key) {
                    try writtenOne()
                } else {
                    try body(current.key, current.value)
                }
                entry = try cursor.next()
            }
        }
        while next < written.count { try writtenOne() }
    }

    /// Calls `body` with each stored item key (generation included) and state of `generation`,
    /// in order, and with each key of the generation that is neither a state's, an item's nor
    /// an anchor list's (damaged: `ModelSchema.itemLabel` gives it none).
    func forEachItem(in generation: UInt32, _ txn: borrowing Transaction, _ overlay: Overlay, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        try forEachStored(beginningWith: ModelSchema.prefix(generation), txn, overlay) { key, value in
            if !ModelSchema.isState(key) && !ModelSchema.isAnchorList(key) { try body(key, value) }
        }
    }

    /// Every stored state of `key` in `generation`, by tag, valid until `txn` ends: its states
    /// are neighbours, so one seek finds them.
    func states(of key: String, in generation: UInt32, _ txn: borrowing Transaction, _ overlay: Overlay) throws -> [UInt8: UnsafeRawBufferPointer] {
        let prefix = ModelSchema.keyPrefix(generation, key)
        // Room for every fold's state at once: grown as they come, the table is rehashed
        // three times.
        var found = [UInt8: UnsafeRawBufferPointer](minimumCapacity: 16)
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.count == prefix.count + 1, current.key.begins(with: prefix),
                  current.key[prefix.count] < ModelSchema.itemMark {
                found[current.key[prefix.count]] = current.value
                entry = try cursor.next()
            }
        }
        var written = overlay.isEmpty ? 0 : overlay.tags(of: prefix)
        while written != 0 {
            let tag = UInt8(written.trailingZeroBitCount)
            written &= written - 1
            if let bytes = overlay.state(prefix + [tag]) { found[tag] = bytes?.bytes }
        }
        return found
    }

    /// Calls `body` with each key, tag and state of `generation`, in the order the store keeps them.
    func forEachState(in generation: UInt32, _ txn: borrowing Transaction, _ overlay: Overlay,
                      _ body: (String, UInt8, UnsafeRawBufferPointer) throws -> Void) throws {
        try forEachStored(beginningWith: ModelSchema.prefix(generation), txn, overlay) { key, value in
            if let (key, tag) = ModelSchema.parse(key, in: generation) { try body(key, tag, value) }
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
                    // Sought again, not asked for the entry after the deleted one: with the
                    // last entry of the database gone, that fails (`EINVAL`).
                    entry = try cursor.seek(atLeast: prefix)
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
    func setEntries(_ entries: [IndexEntry], of key: String, generation: UInt32, tag: UInt8, _ txn: borrowing Transaction, _ overlay: Overlay) throws {
        let listKey = ModelSchema.anchorsKey(generation, tag: tag, key: key)
        let groups = AnchoredEntries.grouped(entries)
        var list: [UInt8] = []
        list.reserveCapacity(groups.count * 8)
        for group in groups { list += ModelSchema.indexTime(group.anchor) }
        let old = try stored(listKey, txn, overlay).map { Self.anchors(in: $0) } ?? []
        for anchor in old where !groups.contains(where: { $0.anchor == anchor }) {
            overlay.put(entry: ModelSchema.anchorKey(generation, tag: tag, key: key, anchor: anchor), nil)
        }
        guard !groups.isEmpty else {
            if !old.isEmpty { overlay.put(state: listKey, nil) }
            return
        }
        let offsetsKey = ModelSchema.offsetsKey(generation, tag: tag)
        for group in groups {
            let entryKey = ModelSchema.anchorKey(generation, tag: tag, key: key, anchor: group.anchor)
            let value = group.entries.encoded
            if old.contains(group.anchor), let stored = try storedEntry(entryKey, txn, overlay), stored.hasSameBytes(as: value) { continue }
            overlay.put(entry: entryKey, value)
            // The distances in use rarely grow: looked up in the stored list, rewritten when one is new.
            let listed = try storedEntry(offsetsKey, txn, overlay)
            guard group.entries.items.contains(where: { item in !(listed.map { Self.lists($0, item.offset) } ?? false) }) else { continue }
            var known = Set(try offsets(generation: generation, tag: tag, txn, overlay))
            for item in group.entries.items { known.insert(item.offset) }
            overlay.put(entry: offsetsKey, known.sorted().flatMap(ModelSchema.offsetBytes))
        }
        if old != groups.map(\.anchor) { overlay.put(state: listKey, list) }
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
    func offsets(generation: UInt32, tag: UInt8, _ txn: borrowing Transaction, _ overlay: Overlay) throws -> [Int64] {
        guard let bytes = try storedEntry(ModelSchema.offsetsKey(generation, tag: tag), txn, overlay) else { return [] }
        return stride(from: 0, to: bytes.count - bytes.count % 8, by: 8).map { ModelSchema.indexTime(bytes[$0 ..< $0 + 8]).milliseconds }
    }

    /// The index entries of the model tagged `tag` with from ≤ at < to, in no order: for each
    /// distance in use, the anchors from `from` − it to `to` − it, and of each the entries at
    /// that distance.
    func entries(generation: UInt32, tag: UInt8, from: Timestamp, to: Timestamp, _ txn: borrowing Transaction, _ overlay: Overlay,
                 _ body: (_ key: String, _ entry: IndexEntry, _ detail: JSON) throws -> Void) throws {
        // A window's entries share a few details (an e-mail's day, a tier): each is parsed once.
        // A hit counts only byte for byte: strings equal in Unicode's sense may spell an id
        // differently, and each entry keeps its own.
        var parsed: [String: (text: String, json: JSON)] = [:]
        for offset in try offsets(generation: generation, tag: tag, txn, overlay) {
            let low = from.milliseconds.subtractingClamped(offset), high = to.milliseconds.subtractingClamped(offset)
            guard low < high else { continue }
            try anchors(generation: generation, tag: tag, from: Timestamp(milliseconds: low), to: Timestamp(milliseconds: high), at: offset, txn, overlay) { key, anchor, _, kind, detail in
                let at = Timestamp(milliseconds: anchor.milliseconds &+ offset)
                guard from <= at && at < to else { return }
                let json: JSON
                if let known = parsed[detail], known.text.utf8.elementsEqual(detail.utf8) {
                    json = known.json
                } else {
                    guard let fresh = try? JSONParser.parse(detail) else {
                        throw LedgerError(.corruptRecord, "the index entry of \(key) at \(at) has a damaged detail; run `ledger rebuild`")
                    }
                    parsed[detail] = (detail, fresh)
                    json = fresh
                }
                try body(key, IndexEntry(stored: kind, detail: detail, at: at, anchor: anchor), json)
            }
        }
    }

    /// Every index entry of the model tagged `tag`, in no order.
    func allEntries(generation: UInt32, tag: UInt8, _ txn: borrowing Transaction, _ overlay: Overlay, _ body: (_ key: String, _ entry: IndexEntry) throws -> Void) throws {
        try anchors(generation: generation, tag: tag, from: Timestamp(milliseconds: .min), to: nil, at: nil, txn, overlay) { key, anchor, offset, kind, detail in
            try body(key, IndexEntry(stored: kind, detail: detail, at: Timestamp(milliseconds: anchor.milliseconds &+ offset), anchor: anchor))
        }
    }

    /// The entries at distance `offset` (`nil`: all) of the stored anchors of the model tagged
    /// `tag` with from ≤ anchor < to (`nil`: no end), in no order, each with its key,
    /// anchor, distance, kind and detail.
    private func anchors(generation: UInt32, tag: UInt8, from: Timestamp, to: Timestamp?, at offset: Int64?, _ txn: borrowing Transaction, _ overlay: Overlay,
                         _ body: (_ key: String, _ anchor: Timestamp, _ offset: Int64, _ kind: String, _ detail: String) throws -> Void) throws {
        let prefix = ModelSchema.entryPrefix(generation, tag: tag)
        let end = to.map { prefix + ModelSchema.indexTime($0) }
        func visit(_ stored: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
            let rest = UnsafeRawBufferPointer(rebasing: stored[prefix.count...])
            guard rest.count >= 10, rest.count == 10 + (Int(rest[8]) << 8 | Int(rest[9])) else {
                throw LedgerError(.corruptRecord, "an index entry's key is damaged; run `ledger rebuild`")
            }
            let anchor = ModelSchema.indexTime(rest[0 ..< 8])
            var key: String?
            try AnchoredEntries.forEach(in: value, at: offset) { offset, kind, detail in
                let owner = key ?? String(decoding: UnsafeRawBufferPointer(rebasing: rest[10...]), as: UTF8.self)
                key = owner
                try body(owner, anchor, offset, kind, detail)
            }
        }
        // The stored entries the tail has not written over, then the tail's.
        let tail = overlay
        try txn.withCursor(index) { cursor in
            var entry = try cursor.seek(atLeast: prefix + ModelSchema.indexTime(from))
            while let current = entry, current.key.begins(with: prefix), end.map({ current.key.lexicographicallyPrecedes($0) }) ?? true {
                if tail.isEmpty || tail.entry(Array(current.key)) == nil { try visit(current.key, current.value) }
                entry = try cursor.next()
            }
        }
        guard !tail.isEmpty else { return }
        for key in tail.entryKeys(beginningWith: prefix, from: from.milliseconds, to: to?.milliseconds) {
            guard let bytes = tail.entry(key) ?? nil else { continue }
            try key.withUnsafeBytes { stored in try visit(stored, bytes.bytes) }
        }
    }
}

extension IndexEntry {
    /// An entry as stored under `anchor` (its detail kept as written, not written again).
    init(stored kind: String, detail: String, at: Timestamp, anchor: Timestamp) {
        self.init(at: at, kind: kind, serializedDetail: detail, anchor: anchor)
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

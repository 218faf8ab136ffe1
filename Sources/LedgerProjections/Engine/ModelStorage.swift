import LMDB
import LedgerCore
import LedgerStore
import Synchronization

/// Where read models live in the store, next to the log.
///
/// - `models`: generation (u32 BE) ‖ key (UTF-8) [‖ tag] → the key's encoded state. A
///   generation is one complete build of one model, or of several models built together (at
///   `init`, or by one rebuild), each with a tag byte after the key. Its keys sort together, and
///   a new generation's number is above every other, so a rebuild writes its sorted states as
///   appends at the end. In a shared generation one subject's states of every model are
///   neighbours: a status query, and an append that loads several models' states for one
///   event, find them on the same page instead of on one page per model.
/// - `generations`: `served/<model>` and `shadow/<model>` → a `Generation`; `next` → the next
///   generation number (u32 BE); `dead/` ‖ generation ‖ tag → the tag, for a model that left a
///   shared generation whose states there the garbage collector has yet to delete.
///
/// Readers find a model's states through its served generation, so swapping the served
/// generation in one write transaction swaps the whole model at once.
public enum ModelSchema {
    /// The named database of every model's states.
    public static let states = "models"
    /// The named database of the served and shadow generations.
    public static let generations = "generations"
    static let nextKey = Array("next".utf8)

    /// `dead/` ‖ generation ‖ tag: a model's states left in a generation others still serve.
    static let deadPrefix = Array("dead/".utf8)
    static func deadKey(_ generation: UInt32, tag: UInt8) -> [UInt8] { deadPrefix + prefix(generation) + [tag] }

    static func servedKey(_ model: String) -> [UInt8] { Array("served/\(model)".utf8) }
    static func shadowKey(_ model: String) -> [UInt8] { Array("shadow/\(model)".utf8) }

    static func prefix(_ generation: UInt32) -> [UInt8] {
        withUnsafeBytes(of: generation.bigEndian) { Array($0) }
    }

    /// Where `generation` keeps the state of `key`.
    static func stateKey(_ generation: Generation, _ key: String) -> [UInt8] { stateKey(generation.id, key.utf8, tag: generation.tag) }

    static func stateKey(_ generation: Generation, _ key: [UInt8]) -> [UInt8] { stateKey(generation.id, key, tag: generation.tag) }

    /// Generation `id` ‖ `key` [‖ `tag`]; without the tag, also where a key's states in a
    /// shared generation begin.
    static func stateKey(_ id: UInt32, _ key: some Collection<UInt8>, tag: UInt8?) -> [UInt8] {
        withStateKey(id, key, tag: tag) { Array($0) }
    }

    /// `body` with `stateKey(id, key, tag:)` built on the stack: a status query's lookup
    /// allocates no key.
    static func withStateKey<R>(_ id: UInt32, _ key: some Collection<UInt8>, tag: UInt8?,
                                _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let count = key.count
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4 + count + (tag == nil ? 0 : 1)) { buffer in
            // The generation's number as `prefix(_:)` writes it.
            withUnsafeBytes(of: id.bigEndian) { UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[..<4])).copyMemory(from: $0) }
            let keyBytes = UnsafeMutableBufferPointer(rebasing: buffer[4 ..< 4 + count])
            if key.withContiguousStorageIfAvailable({ _ = keyBytes.initialize(fromContentsOf: $0) }) == nil {
                _ = keyBytes.initialize(fromContentsOf: key)
            }
            if let tag { buffer[4 + count] = tag }
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// The key (UTF-8) of a stored state's key when it belongs to `generation`, else `nil` (a
    /// key of another generation, or of another model sharing this one).
    static func key(ofStored stored: UnsafeRawBufferPointer, in generation: Generation) -> UnsafeRawBufferPointer? {
        key(ofStored: stored, generation: generation.id, tag: generation.tag)
    }

    /// The key of a stored state's key when it is in generation `id` under `tag` (`nil`: the
    /// generation is one model's own), else `nil`.
    static func key(ofStored stored: UnsafeRawBufferPointer, generation id: UInt32, tag: UInt8?) -> UnsafeRawBufferPointer? {
        guard ModelSchema.generation(ofKey: stored) == id else { return nil }
        guard let tag else { return UnsafeRawBufferPointer(rebasing: stored[4...]) }
        guard stored.count > 4, stored[stored.count - 1] == tag else { return nil }
        return UnsafeRawBufferPointer(rebasing: stored[4 ..< stored.count - 1])
    }

    static func generation(ofKey key: UnsafeRawBufferPointer) -> UInt32? {
        guard key.count >= 4 else { return nil }
        return key.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }
}

/// One build of one model: which generation of `models` holds it (and its tag there when
/// models built together share it), the last position applied (its checkpoint), and the code
/// version and policy that built it.
///
/// Positions are gap-free (the log assigns them in its single writer), so a checkpoint alone
/// says exactly which events a generation holds: every position up to it, none after. No gap
/// detection is needed.
public struct Generation: Sendable, Hashable {
    /// Its number in `models`.
    public var id: UInt32
    /// The last position applied.
    public var checkpoint: UInt64
    /// The projection's `codeVersion` that built it.
    public var codeVersion: UInt32
    /// The SHA-256 (hex) of the policy it was built under.
    public var policyHash: String
    /// In a generation several models share, the byte after each key that marks this model's
    /// states; `nil` when the generation is the model's alone.
    public var tag: UInt8?

    public init(id: UInt32, checkpoint: UInt64, codeVersion: UInt32, policyHash: String, tag: UInt8? = nil) {
        self.id = id
        self.checkpoint = checkpoint
        self.codeVersion = codeVersion
        self.policyHash = policyHash
        self.tag = tag
    }

    /// The fields in order, the tag last and only when there is one (so a record written
    /// before tags existed reads as a generation of its own).
    var encoded: [UInt8] {
        var writer = StateWriter()
        writer.write(UInt64(id))
        writer.write(checkpoint)
        writer.write(UInt64(codeVersion))
        writer.writePlain(policyHash)
        if let tag { writer.write(UInt64(tag)) }
        return writer.bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws(StateReader.Damaged) -> Generation {
        var reader = StateReader(bytes)
        let id = try reader.uint(), checkpoint = try reader.uint(), code = try reader.uint(), hash = try reader.plainString()
        let tag = reader.isAtEnd ? nil : try reader.uint()
        guard id <= UInt64(UInt32.max), code <= UInt64(UInt32.max), tag.map({ $0 <= 0xFF }) ?? true, reader.isAtEnd else {
            throw StateReader.Damaged(what: "bad generation record")
        }
        return Generation(id: UInt32(id), checkpoint: checkpoint, codeVersion: UInt32(code), policyHash: hash, tag: tag.map { UInt8($0) })
    }
}

/// Each model's `served/<model>` key, and the served generation last decoded with the bytes it
/// was decoded from: a query reads the record (in its own snapshot) and decodes it again only
/// when the bytes differ.
final class ServedGenerations: Sendable {
    struct Entry {
        var key: [UInt8]
        var generation: (bytes: [UInt8], generation: Generation)?
    }

    private let entries = Mutex<[String: Entry]>([:])

    func entry(_ model: String) -> Entry {
        entries.withLock { entries in
            if let entry = entries[model] { return entry }
            let entry = Entry(key: ModelSchema.servedKey(model), generation: nil)
            entries[model] = entry
            return entry
        }
    }

    func remember(_ model: String, bytes: [UInt8], _ generation: Generation) {
        entries.withLock { $0[model, default: Entry(key: ModelSchema.servedKey(model))].generation = (bytes, generation) }
    }
}

/// The engine's databases and the reads and writes on them that every path shares.
struct ModelStorage: Sendable {
    let env: Environment
    let states: Database
    let generations: Database
    let events: Database
    let meta: Database
    let servedCache = ServedGenerations()

    init(env: Environment) throws {
        self.env = env
        let readOnly = env.configuration.flags.contains(.readOnly)
        do {
            states = try env.openDatabase(ModelSchema.states, flags: readOnly ? [] : [.create])
            generations = try env.openDatabase(ModelSchema.generations, flags: readOnly ? [] : [.create])
        } catch let error as LMDBError where error.code == .notFound {
            throw LedgerError(.storage, "the store at \(env.path) has no read models yet; open it once for writing (any `ledger` command but `export`, or the library without `readOnly`) to build them")
        }
        events = try env.openDatabase(LogSchema.events, flags: [])
        meta = try env.openDatabase(LogSchema.meta, flags: [])
    }

    func damaged(_ model: String, _ what: StateReader.Damaged) -> LedgerError {
        LedgerError(.corruptRecord, "read model \(model) is damaged (\(what)); run `ledger rebuild \(model)`")
    }

    /// A state of `model` that does not decode: damage (`.corruptRecord`), or, when another code
    /// version built the served generation, an encoding this code does not read
    /// (`.unsupportedFormat`, which status and rebuild's comparison step over). The one place
    /// that tells the two apart.
    func unreadable(_ model: String, _ what: StateReader.Damaged, served: Generation?, codeVersion: UInt32) -> LedgerError {
        guard let served, served.codeVersion != codeVersion else { return damaged(model, what) }
        return LedgerError(.unsupportedFormat, "read model \(model) was built by code version \(served.codeVersion), whose states this ledger (code version \(codeVersion)) cannot read; run `ledger rebuild \(model)`")
    }

    func served(_ model: String, _ txn: borrowing Transaction) throws -> Generation? {
        let known = servedCache.entry(model)
        guard let bytes = try txn.get(generations, key: known.key) else { return nil }
        if let cached = known.generation, bytes.hasSameBytes(as: cached.bytes) { return cached.generation }
        let generation = try decode(bytes, of: model)
        servedCache.remember(model, bytes: Array(bytes), generation)
        return generation
    }

    func shadow(_ model: String, _ txn: borrowing Transaction) throws -> Generation? {
        try generation(ModelSchema.shadowKey(model), model, txn)
    }

    private func generation(_ key: [UInt8], _ model: String, _ txn: borrowing Transaction) throws -> Generation? {
        try txn.get(generations, key: key).map { try decode($0, of: model) }
    }

    private func decode(_ bytes: UnsafeRawBufferPointer, of model: String) throws(LedgerError) -> Generation {
        do { return try Generation.decode(bytes) } catch { throw damaged(model, error) }
    }

    func setServed(_ model: String, _ generation: Generation, _ txn: borrowing Transaction) throws {
        try txn.put(generations, key: ModelSchema.servedKey(model), value: generation.encoded)
    }

    func setShadow(_ model: String, _ generation: Generation?, _ txn: borrowing Transaction) throws {
        if let generation {
            try txn.put(generations, key: ModelSchema.shadowKey(model), value: generation.encoded)
        } else {
            _ = try txn.delete(generations, key: ModelSchema.shadowKey(model))
        }
    }

    /// Takes the next generation number.
    func allocateGeneration(_ txn: borrowing Transaction) throws -> UInt32 {
        let next = try txn.get(generations, key: ModelSchema.nextKey).flatMap { ModelSchema.generation(ofKey: $0) } ?? 1
        try txn.put(generations, key: ModelSchema.nextKey, value: ModelSchema.prefix(next + 1))
        return next
    }

    /// Places for `count` models built together: one generation number they share, each with
    /// its tag (its place among them), or a number of its own for a model built alone (and a
    /// new number for every 256 models, the tags a byte can tell apart).
    func allocateGenerations(_ count: Int, _ txn: borrowing Transaction) throws -> [(id: UInt32, tag: UInt8?)] {
        var places: [(id: UInt32, tag: UInt8?)] = []
        for start in stride(from: 0, to: count, by: 256) {
            let size = min(256, count - start), id = try allocateGeneration(txn)
            for place in 0 ..< size { places.append((id, size > 1 ? UInt8(place) : nil)) }
        }
        return places
    }

    /// The stored state of `key` in `generation`, copied.
    func state(_ generation: Generation, _ key: String, _ txn: borrowing Transaction) throws -> [UInt8]? {
        try txn.get(states, key: ModelSchema.stateKey(generation, key)).map { Array($0) }
    }

    /// The stored state of `key` in each of `generations` (`nil`: none stored, or no
    /// generation), valid until `txn` ends. The states of one key in a generation several
    /// models share are neighbours, so one cursor seek finds them all: each is the key with its
    /// model's tag, and every key between them begins with the key and a byte no higher than the
    /// highest tag (a longer key with a low byte), so the walk stops at the first that does not,
    /// or at the highest tag's own state, after which none of the key's can follow.
    /// The first key met can be the key itself: another key's state tagged 0 ("a" tagged 0 is
    /// "a\u{0}").
    ///
    /// Written into `found`, one slot per generation, each set first to `nil` (a status query
    /// passes a buffer on its stack).
    func states(of key: String, in generations: [Generation?], _ txn: borrowing Transaction,
                into found: UnsafeMutableBufferPointer<UnsafeRawBufferPointer?>) throws {
        precondition(found.count == generations.count, "one slot per generation")
        found.initialize(repeating: nil)
        for (index, generation) in generations.enumerated() {
            guard let generation else { continue }
            guard generation.tag != nil else {
                found[index] = try ModelSchema.withStateKey(generation.id, key.utf8, tag: nil) { stored in try txn.get(states, key: stored) }
                continue
            }
            // The first model of a shared generation reads the others' states too.
            if generations[..<index].contains(where: { $0?.id == generation.id }) { continue }
            let highest = generations.lazy.compactMap { $0?.id == generation.id ? $0?.tag : nil }.max() ?? 0
            try ModelSchema.withStateKey(generation.id, key.utf8, tag: nil) { prefix in try txn.withCursor(states) { cursor in
                var entry = try cursor.seek(atLeast: prefix)
                while let current = entry, current.key.begins(with: prefix),
                      current.key.count == prefix.count || current.key[prefix.count] <= highest {
                    if current.key.count == prefix.count + 1,
                       let model = generations.firstIndex(where: { $0?.id == generation.id && $0?.tag == current.key[prefix.count] }) {
                        found[model] = current.value
                        // Every key of ours sorts at or before the one with the highest tag.
                        if current.key[prefix.count] == highest { break }
                    }
                    entry = try cursor.next()
                }
            } }
        }
    }

    /// Calls `body` with each key (UTF-8) of `generation` and its state, in the order the store
    /// keeps them (key order; in a shared generation, the order of key and tag).
    func forEachState(in generation: Generation, _ txn: borrowing Transaction,
                      _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: ModelSchema.prefix(generation.id))
            while let current = entry, ModelSchema.generation(ofKey: current.key) == generation.id {
                if let key = ModelSchema.key(ofStored: current.key, in: generation) { try body(key, current.value) }
                entry = try cursor.next()
            }
        }
    }

    /// The last position of the log.
    func head(_ txn: borrowing Transaction) throws -> UInt64 {
        try txn.withCursor(events) { cursor in try cursor.last().flatMap { LogSchema.integer($0.key) } ?? 0 }
    }

    /// The events after `after` up to `through`, in position order: `body` gets each one whose
    /// type is in `types`, decoded as read models need it (`EventRecord.decodeForFolding`: the
    /// others are skipped on their type alone); `tick` gets the
    /// position every 65,536 events, for progress reports.
    func forEachEvent(after: UInt64, through: UInt64, types: Set<String>, _ txn: borrowing Transaction,
                      tick: (UInt64) -> Void = { _ in }, _ body: (consuming RecordedEvent) throws -> Void) throws {
        guard through > after else { return }
        let filter = EventRecord.TypeFilter(types)
        try txn.withCursor(events) { cursor in
            var entry = try cursor.seek(atLeast: LogSchema.key(after + 1))
            while let current = entry, let position = LogSchema.integer(current.key), position <= through {
                if let event = try EventRecord.decodeForFolding(current.value, position: position, types: filter) { try body(event) }
                if position & 0xFFFF == 0 { tick(position) }
                entry = try cursor.next()
            }
        }
    }

    /// Deletes every state of `generation`, at most `limit` of them; returns how many it deleted.
    func deleteStates(of generation: UInt32, limit: Int, _ txn: borrowing Transaction) throws -> Int {
        var deleted = 0
        try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: ModelSchema.prefix(generation))
            while let current = entry, ModelSchema.generation(ofKey: current.key) == generation, deleted < limit {
                try cursor.deleteCurrent()
                deleted += 1
                // A cursor stays on the entry after the one it deleted: the next step returns it
                // (LMDB's `mdb_cursor_del`), with no search from the root.
                entry = try cursor.next()
            }
        }
        return deleted
    }

    /// Deletes the states of the model tagged `tag` in the shared `generation`, at most
    /// `limit` of them; returns whether none is left.
    func deleteStates(of generation: UInt32, tag: UInt8, limit: Int, _ txn: borrowing Transaction) throws -> Bool {
        var deleted = 0
        return try txn.withCursor(states) { cursor in
            var entry = try cursor.seek(atLeast: ModelSchema.prefix(generation))
            while let current = entry, ModelSchema.generation(ofKey: current.key) == generation {
                guard ModelSchema.key(ofStored: current.key, generation: generation, tag: tag) != nil else {
                    entry = try cursor.next()
                    continue
                }
                guard deleted < limit else { return false }
                try cursor.deleteCurrent()
                deleted += 1
                entry = try cursor.next()
            }
            return true
        }
    }

    /// Records that the model tagged `tag` left the shared `generation`: its states there are
    /// garbage, though the generation stays live for the others.
    func markDead(_ generation: UInt32, tag: UInt8, _ txn: borrowing Transaction) throws {
        try txn.put(generations, key: ModelSchema.deadKey(generation, tag: tag), value: [tag])
    }

    func forgetDead(_ generation: UInt32, tag: UInt8, _ txn: borrowing Transaction) throws {
        _ = try txn.delete(generations, key: ModelSchema.deadKey(generation, tag: tag))
    }

    /// The (generation, tag) pairs `markDead` recorded and the garbage collector has not yet
    /// cleared, in order.
    func deadTags(_ txn: borrowing Transaction) throws -> [(UInt32, UInt8)] {
        var found: [(UInt32, UInt8)] = []
        try txn.withCursor(generations) { cursor in
            var entry = try cursor.seek(atLeast: ModelSchema.deadPrefix)
            while let current = entry, current.key.begins(with: ModelSchema.deadPrefix), current.key.count == ModelSchema.deadPrefix.count + 5 {
                let rest = UnsafeRawBufferPointer(rebasing: current.key[ModelSchema.deadPrefix.count...])
                if let generation = ModelSchema.generation(ofKey: rest) { found.append((generation, rest[4])) }
                entry = try cursor.next()
            }
        }
        return found
    }

    /// Every generation number that has states, in order.
    func storedGenerations(_ txn: borrowing Transaction) throws -> [UInt32] {
        var found: [UInt32] = []
        try txn.withCursor(states) { cursor in
            var entry = try cursor.first()
            while let current = entry, let generation = ModelSchema.generation(ofKey: current.key) {
                found.append(generation)
                guard generation < UInt32.max else { break }
                entry = try cursor.seek(atLeast: ModelSchema.prefix(generation + 1))
            }
        }
        return found
    }

    /// Every generation some model serves or builds.
    func liveGenerations(_ txn: borrowing Transaction) throws -> Set<UInt32> {
        var live: Set<UInt32> = []
        try txn.withCursor(generations) { cursor in
            var entry = try cursor.first()
            while let current = entry {
                if current.key.starts(with: "served/".utf8) || current.key.starts(with: "shadow/".utf8),
                   let generation = try? Generation.decode(current.value) {
                    live.insert(generation.id)
                }
                entry = try cursor.next()
            }
        }
        return live
    }
}

extension Array where Element == (key: [UInt8], state: [UInt8]) {
    /// The states with the keys `generation` stores them under, in the store's order. In a
    /// shared generation that order can differ from the keys' own: a tag after a key sorts
    /// before a longer key that begins with it only while the longer key's next byte is
    /// above the tag.
    func storedOrder(in generation: Generation) -> [(key: [UInt8], stored: [UInt8], state: [UInt8])] {
        let keyed = map { (key: $0.key, stored: ModelSchema.stateKey(generation, $0.key), state: $0.state) }
        return generation.tag == nil ? keyed : keyed.sorted { $0.stored.precedesInByteOrder($1.stored) }
    }
}

@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// A run of one subject's consecutive versions in the stream index (store layout 2): the
/// value under `LogSchema.streamKey(subject, version: first)` holds the positions of versions
/// `first`, `first + 1`, … as LEB128 integers, the first whole and each next one as its
/// difference from the one before (a subject's positions grow with its versions).
///
/// One key per run of up to `capacity` events instead of one per event: about 3 bytes per
/// event where a key per event took 60, and an append touches its subject's one entry.
struct StreamChunk: Sendable, Equatable {
    /// Versions per chunk: a subject's next event after a full chunk starts a new one, so an
    /// append rewrites at most a few hundred bytes.
    static let capacity = 128

    /// The version of the first position.
    var first: UInt64
    var positions: [UInt64]

    /// The chunk's packed value.
    var packed: [UInt8] {
        var bytes: [UInt8] = []
        var previous: UInt64 = 0
        for position in positions {
            bytes.appendVarint(position &- previous)
            previous = position
        }
        return bytes
    }

    /// Whether `key` is a chunk key of the subject whose `LogSchema.streamPrefix` is `prefix`.
    static func isKey(_ key: UnsafeRawBufferPointer, of prefix: [UInt8]) -> Bool {
        key.count == prefix.count + 8 && key.prefix(prefix.count).elementsEqual(prefix)
    }

    /// The first version a chunk key of that subject names; `nil` for another key, or version 0
    /// (which no chunk starts at).
    static func firstVersion(key: UnsafeRawBufferPointer, prefix: [UInt8]) -> UInt64? {
        guard isKey(key, of: prefix), let first = LogSchema.integer(UnsafeRawBufferPointer(rebasing: key[prefix.count...])), first > 0 else { return nil }
        return first
    }

    /// Calls `body` with each position of a packed value in order; `false` when the value is
    /// not a packed run (a truncated integer, or positions that do not grow).
    static func forEachPosition(_ packed: UnsafeRawBufferPointer, _ body: (UInt64) throws -> Void) rethrows -> Bool {
        var position: UInt64 = 0
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var count = 0
        for byte in packed {
            guard shift < 64 else { return false }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 != 0 {
                shift += 7
                continue
            }
            guard count == 0 ? value > 0 : value > 0 && position <= UInt64.max - value else { return false }
            position += value
            count += 1
            try body(position)
            (value, shift) = (0, 0)
        }
        return shift == 0 && count > 0
    }

    /// How many positions a packed value holds, and the last; `nil` when it is not a packed run.
    static func summary(_ packed: UnsafeRawBufferPointer) -> (count: Int, last: UInt64)? {
        var count = 0
        var last: UInt64 = 0
        guard forEachPosition(packed, { count += 1; last = $0 }) else { return nil }
        return (count, last)
    }

    /// A stored entry under `prefix` (a subject's `LogSchema.streamPrefix`); `nil` when the key
    /// is another subject's or the entry is not a chunk.
    init?(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, prefix: [UInt8]) {
        guard let first = Self.firstVersion(key: key, prefix: prefix) else { return nil }
        var positions: [UInt64] = []
        guard Self.forEachPosition(value, { positions.append($0) }) else { return nil }
        self.first = first
        self.positions = positions
    }

    /// A stored entry of any subject: the subject's prefix with the chunk, `nil` when it is not one.
    static func parse(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> (prefix: [UInt8], chunk: StreamChunk)? {
        guard key.count >= 2 + 8 else { return nil }
        let length = Int(key[0]) << 8 | Int(key[1])
        guard key.count == 2 + length + 8 else { return nil }
        let prefix = Array(key.prefix(2 + length))
        return StreamChunk(key: key, value: value, prefix: prefix).map { (prefix, $0) }
    }

    init(first: UInt64, positions: [UInt64]) {
        self.first = first
        self.positions = positions
    }
}

/// A stream index entry that is not what the log's writer wrote, found by the writer (a
/// version looked up, a chunk extended): it aborts the whole write transaction, where a
/// `LedgerError` would fail only one batch of a group, possibly after the batch had written.
/// Reads report the same damage as `damagedStream()`.
struct StreamIndexDamage: Error, CustomStringConvertible {
    var subject: String
    var description: String { "the stream index of \(subject) is damaged; run `ledger verify`" }
}

extension LogStorage {
    /// Puts `cursor` on the last chunk of `subject` (whose prefix is `prefix`) and returns it
    /// with its first version; `nil` when the subject has none. One seek.
    private func seekLastChunk(_ cursor: borrowing Cursor, _ subject: String, _ prefix: [UInt8]) throws -> (entry: Entry, first: UInt64)? {
        var beyond = prefix
        beyond.append(contentsOf: repeatElement(0xFF, count: 8))
        let entry = try cursor.seek(atLeast: beyond) != nil ? try cursor.previous() : try cursor.last()
        guard let entry, StreamChunk.isKey(entry.key, of: prefix) else { return nil }
        guard let first = StreamChunk.firstVersion(key: entry.key, prefix: prefix) else { throw StreamIndexDamage(subject: subject) }
        return (entry, first)
    }

    /// A stream index entry that does not decode, met by a read.
    static func damagedStream() -> LedgerError {
        LedgerError(.corruptRecord, "an entry of the stream index is damaged; run `ledger verify`")
    }

    /// A subject's last version (0 if it has no events): from a write transaction's `pending`
    /// entries or the index `tail` (none once the transaction has merged it) when they hold
    /// events of it, else the end of its last stored chunk, found with one seek.
    func version(of subject: String, _ txn: borrowing Transaction, tail: IndexTail?, pending: IndexTail? = nil) throws -> UInt64 {
        if let version = pending?.version(of: subject) ?? tail?.version(of: subject) { return version }
        return try storedVersion(of: subject, txn)
    }

    /// A subject's last version in the stored index.
    private func storedVersion(of subject: String, _ txn: borrowing Transaction) throws -> UInt64 {
        try txn.withCursor(streams) { cursor in
            guard let (entry, first) = try seekLastChunk(cursor, subject, LogSchema.streamPrefix(subject)) else { return 0 }
            guard let summary = StreamChunk.summary(entry.value) else { throw StreamIndexDamage(subject: subject) }
            return first + UInt64(summary.count) - 1
        }
    }

    /// Records `positions` as `subject`'s versions after `before` in the stored index, which
    /// must end at `before`: the last chunk filled (rewritten in place), then new chunks of up
    /// to `StreamChunk.capacity`.
    func appendToStream(_ subject: String, after before: UInt64, positions: [UInt64], _ txn: borrowing Transaction) throws {
        let prefix = LogSchema.streamPrefix(subject)
        try txn.withCursor(streams) { cursor in
            var rest = positions[...]
            var version = before + 1
            if let (entry, first) = try seekLastChunk(cursor, subject, prefix) {
                guard let summary = StreamChunk.summary(entry.value), first + UInt64(summary.count) - 1 == before,
                      let next = rest.first, next > summary.last
                else { throw StreamIndexDamage(subject: subject) }
                if summary.count < StreamChunk.capacity {
                    // Copied first: the entry's bytes live in the page the put rewrites.
                    let key = Array(entry.key)
                    var packed = Array(entry.value)
                    var last = summary.last
                    for position in rest.prefix(StreamChunk.capacity - summary.count) {
                        packed.appendVarint(position - last)
                        last = position
                        version += 1
                    }
                    rest = rest.dropFirst(StreamChunk.capacity - summary.count)
                    try key.withUnsafeBytes { k in try packed.withUnsafeBytes { v in try cursor.put(key: k, value: v, flags: .current) } }
                }
            } else if before != 0 {
                throw StreamIndexDamage(subject: subject)
            }
            while !rest.isEmpty {
                let run = Array(rest.prefix(StreamChunk.capacity))
                rest = rest.dropFirst(run.count)
                let key = prefix + LogSchema.key(version)
                let packed = StreamChunk(first: version, positions: run).packed
                try key.withUnsafeBytes { k in try packed.withUnsafeBytes { v in try cursor.put(key: k, value: v, flags: .noOverwrite) } }
                version += UInt64(run.count)
            }
        }
    }

    /// The positions of `subject`'s versions from `start` on, at most `limit` of them, in
    /// order: the stored index's, then the index `tail`'s.
    func streamPositions(of subject: String, from start: UInt64, limit: Int,
                         _ txn: borrowing Transaction, tail: IndexTail) throws -> [(version: UInt64, position: UInt64)] {
        let out = try storedPositions(of: subject, from: start, limit: limit, txn)
        return out + tail.positions(of: subject, from: start, limit: limit - out.count)
    }

    /// The positions of `subject`'s versions from `start` on in the stored index.
    private func storedPositions(of subject: String, from start: UInt64, limit: Int,
                                 _ txn: borrowing Transaction) throws -> [(version: UInt64, position: UInt64)] {
        let prefix = LogSchema.streamPrefix(subject)
        let startKey = LogSchema.streamKey(subject, version: max(start, 1))
        return try txn.withCursor(streams) { cursor in
            // The chunk holding `start` is the last one whose first version is at most `start`.
            var entry = try cursor.seek(atLeast: startKey)
            if entry.map({ !$0.key.elementsEqual(startKey) }) ?? true {
                let before = entry != nil ? try cursor.previous() : try cursor.last()
                let isSubjects = before.map { StreamChunk.isKey($0.key, of: prefix) } ?? false
                entry = isSubjects ? before : try cursor.seek(atLeast: startKey)
            }
            var out: [(version: UInt64, position: UInt64)] = []
            while let current = entry, out.count < limit, StreamChunk.isKey(current.key, of: prefix) {
                guard let chunk = StreamChunk(key: current.key, value: current.value, prefix: prefix) else { throw Self.damagedStream() }
                for (offset, position) in chunk.positions.enumerated() where chunk.first + UInt64(offset) >= start && out.count < limit {
                    out.append((chunk.first + UInt64(offset), position))
                }
                entry = try cursor.next()
            }
            return out
        }
    }

    /// Rewrites a layout-1 stream index (a key per event: prefix ‖ version → position) as
    /// chunks, in `txn`.
    static func packStreamIndex(_ streams: Database, _ txn: borrowing Transaction) throws {
        var chunks: [(key: [UInt8], value: [UInt8])] = []
        var current: (prefix: [UInt8], chunk: StreamChunk)?
        func flush() {
            guard let current else { return }
            chunks.append((current.prefix + LogSchema.key(current.chunk.first), current.chunk.packed))
        }
        try txn.withCursor(streams) { cursor in
            var entry = try cursor.first()
            while let e = entry {
                guard e.key.count >= 10, let version = LogSchema.integer(UnsafeRawBufferPointer(rebasing: e.key[(e.key.count - 8)...])),
                      let position = LogSchema.integer(e.value)
                else { throw LedgerError(.corruptRecord, "an entry of the layout-1 stream index is damaged; it cannot be upgraded") }
                let prefix = Array(e.key.prefix(e.key.count - 8))
                if var run = current, run.prefix == prefix, run.chunk.first + UInt64(run.chunk.positions.count) == version,
                   run.chunk.positions.count < StreamChunk.capacity, position > run.chunk.positions.last ?? 0 {
                    run.chunk.positions.append(position)
                    current = run
                } else {
                    flush()
                    current = (prefix, StreamChunk(first: version, positions: [position]))
                }
                entry = try cursor.next()
            }
        }
        flush()
        try txn.removeAll(streams)
        for chunk in chunks { try txn.put(streams, key: chunk.key, value: chunk.value, flags: .append) }
    }
}

extension EventLog {
    /// The subjects with events whose UTF-8 bytes start with `prefix`, in byte order, at most
    /// `limit` of them: read from the stream index (a seek per subject length, the index being
    /// ordered by length first) and its tail, never from the events.
    public func subjects(prefix: String = "", limit: Int = .max) throws(LedgerError) -> [String] {
        let wanted = Array(prefix.utf8)
        return try storage.readIndexed("listing the subjects") { txn, tail in
            var found: Set<[UInt8]> = []
            try txn.withCursor(storage.streams) { cursor in
                for length in max(wanted.count, 1) ... EventLimits.maxSubjectBytes {
                    let start = [UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)] + wanted
                    var entry = try cursor.seek(atLeast: start)
                    var kept = 0
                    while let current = entry, current.key.count >= 2 + length, current.key.begins(with: start) {
                        let subject = Array(current.key[2 ..< 2 + length])
                        if found.insert(subject).inserted { kept += 1 }
                        // Enough of this length: the first `limit` in byte order are among them.
                        if kept >= limit { break }
                        entry = try cursor.next()
                    }
                }
            }
            for subject in tail.streams.keys where subject.utf8.starts(with: wanted) { found.insert(Array(subject.utf8)) }
            return found.sorted { $0.lexicographicallyPrecedes($1) }.prefix(limit).map { String(decoding: $0, as: UTF8.self) }
        }
    }
}

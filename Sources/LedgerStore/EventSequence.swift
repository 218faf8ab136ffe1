@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

extension EventLog {
    /// Events from position `from` (default 1) up to `through` (default: the end, as far as it
    /// has been written when the reader gets there), in position order.
    ///
    /// ```swift
    /// for try await event in log.events(from: 1) { … }          // from async code
    /// try log.events(from: 1).forEach { event in … }           // blocking
    /// ```
    ///
    /// Personal fields come opened (or `"[Deleted User]"` once their key is destroyed); with
    /// `revealing: false`, as the log stores them, sealed (what a read model folds).
    public func events(from: UInt64 = 1, through: UInt64? = nil, chunkSize: Int = 512, revealing: Bool = true) -> EventSequence {
        EventSequence(storage: storage, scope: .forward(from: max(from, 1), through: through), chunkSize: chunkSize, revealing: revealing)
    }

    /// Events from position `from` (default: the last) down to `through` (default 1), newest first.
    public func eventsBackward(from: UInt64? = nil, through: UInt64 = 1, chunkSize: Int = 512, revealing: Bool = true) -> EventSequence {
        EventSequence(storage: storage, scope: .backward(from: from, through: max(through, 1)), chunkSize: chunkSize, revealing: revealing)
    }

    /// One subject's events in version order, from `fromVersion` (default 1); personal
    /// fields as `events(from:)` gives them.
    public func events(subject: String, fromVersion: UInt64 = 1, chunkSize: Int = 512, revealing: Bool = true) -> EventSequence {
        EventSequence(storage: storage, scope: .subject(subject, fromVersion: max(fromVersion, 1)), chunkSize: chunkSize, revealing: revealing)
    }
}

/// A stream of stored events that never loads the whole log.
///
/// Each chunk (`chunkSize` events) is read in its own short read transaction, so iterating
/// holds no transaction between elements — and none across an `await`. Positions never change
/// once written, so chunks read at different moments still form one consistent order.
public struct EventSequence: AsyncSequence, Sendable {
    public typealias Element = StoredEvent
    public typealias Failure = LedgerError

    enum Scope: Sendable {
        case forward(from: UInt64, through: UInt64?)
        case backward(from: UInt64?, through: UInt64)
        case subject(String, fromVersion: UInt64)
    }

    let storage: LogStorage
    let scope: Scope
    let chunkSize: Int
    /// Personal fields opened, or left sealed.
    let revealing: Bool

    /// A blocking iterator: `next()` reads the next chunk on the calling thread when needed.
    public struct Iterator {
        let storage: LogStorage
        let scope: Scope
        let chunkSize: Int
        let revealing: Bool
        var buffer: [StoredEvent] = []
        var index = 0
        var cursor: UInt64?      // next position (or version) to read; nil before the first chunk
        var finished = false

        /// The next event, or `nil` at the end.
        /// - Throws: `LedgerError` for a storage failure or a damaged record.
        public mutating func next() throws(LedgerError) -> StoredEvent? {
            if index == buffer.count {
                guard !finished else { return nil }
                buffer = try fetch()
                index = 0
                if buffer.isEmpty {
                    finished = true
                    return nil
                }
            }
            defer { index += 1 }
            return buffer[index]
        }

        private mutating func fetch() throws(LedgerError) -> [StoredEvent] {
            let limit = Swift.max(chunkSize, 1)
            switch scope {
            case .forward(let from, let through):
                let start = cursor ?? from
                if let through, start > through { return [] }
                let chunk = try storage.read("reading events from \(start)") { txn in
                    try txn.withCursor(storage.events) { c in
                        var out: [StoredEvent] = []
                        var entry = try c.seek(atLeast: LogSchema.key(start))
                        while let e = entry, out.count < limit {
                            guard let position = LogSchema.integer(e.key) else { throw badKey() }
                            if let through, position > through { break }
                            out.append(try decode(e.value, position, txn))
                            entry = try c.next()
                        }
                        return out
                    }
                }
                if let last = chunk.last { cursor = last.position + 1 }
                if chunk.count < limit { finished = true }
                return chunk

            case .backward(let from, let through):
                if let c = cursor, c < through { return [] }
                let chunk = try storage.read("reading events backwards") { txn in
                    try txn.withCursor(storage.events) { c in
                        var out: [StoredEvent] = []
                        var entry: Entry?
                        if let start = cursor ?? from {
                            // The greatest position ≤ start.
                            if let e = try c.seek(atLeast: LogSchema.key(start)) {
                                entry = LogSchema.integer(e.key) == start ? e : try c.previous()
                            } else {
                                entry = try c.last()
                            }
                        } else {
                            entry = try c.last()
                        }
                        while let e = entry, out.count < limit {
                            guard let position = LogSchema.integer(e.key) else { throw badKey() }
                            if position < through { break }
                            out.append(try decode(e.value, position, txn))
                            entry = try c.previous()
                        }
                        return out
                    }
                }
                if let last = chunk.last {
                    if last.position <= through { finished = true } else { cursor = last.position - 1 }
                }
                if chunk.count < limit { finished = true }
                return chunk

            case .subject(let subject, let fromVersion):
                let start = cursor ?? fromVersion
                let chunk = try storage.readIndexed("reading the events of \(subject)") { txn, tail in
                    try storage.streamPositions(of: subject, from: start, limit: limit, txn, tail: tail).map { entry in
                        guard let record = try txn.get(storage.events, key: LogSchema.key(entry.position)) else { throw badKey() }
                        return try decode(record, entry.position, txn)
                    }
                }
                if let last = chunk.last { cursor = last.version + 1 }
                if chunk.count < limit { finished = true }
                return chunk
            }
        }

        private func decode(_ record: UnsafeRawBufferPointer, _ position: UInt64, _ txn: borrowing Transaction) throws -> StoredEvent {
            let event = try EventRecord.decode(record, position: position)
            return revealing ? try storage.reveal(event, txn) : event
        }

        private func badKey() -> LedgerError {
            LedgerError(.corruptRecord, "an index entry of the log is damaged; run `ledger verify`")
        }
    }

    /// Async iteration: each step reads synchronously (a chunk at a time) and never holds a
    /// transaction across a suspension.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var inner: Iterator

        public mutating func next() async throws(LedgerError) -> StoredEvent? {
            try inner.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(LedgerError) -> StoredEvent? {
            try inner.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(inner: makeBlockingIterator())
    }

    /// An iterator that reads on the calling thread.
    public func makeBlockingIterator() -> Iterator {
        Iterator(storage: storage, scope: scope, chunkSize: chunkSize, revealing: revealing)
    }

    /// Calls `body` with each event, in order, on the calling thread.
    public func forEach(_ body: (StoredEvent) throws -> Void) throws {
        var iterator = makeBlockingIterator()
        while let event = try iterator.next() { try body(event) }
    }

    /// All the events as an array. Loads them all: for small ranges and tests.
    public func collect() throws(LedgerError) -> [StoredEvent] {
        var out: [StoredEvent] = []
        var iterator = makeBlockingIterator()
        while let event = try iterator.next() { out.append(event) }
        return out
    }
}

import Foundation
import GRDB
@_spi(Storage) import LedgerCore
import LedgerModels

/// The benchmark's peer: the same events kept the way a careful SQLite event store keeps them,
/// through GRDB — WAL, `synchronous=FULL`, one table with the position as primary key, a
/// unique index on the event id and one on (subject, version).
///
/// `append` does less than the ledger on purpose: no validation, no hash chain and no read
/// models. `appendWithModels` does what the ledger does inline (as Marten's inline projections
/// do): the same inserts, and in the same transaction each event folded into the subject's
/// facts and the read models' states, read from the states table and upserted back, per batch.
/// Its rebuild reads the events back in position order into the very reducers the ledger runs
/// and writes their states into a table.
struct SQLitePeer {
    let pool: DatabasePool

    init(path: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        pool = try DatabasePool(path: path, configuration: configuration)   // WAL
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS events (
                    position INTEGER PRIMARY KEY, id BLOB NOT NULL, subject TEXT NOT NULL, version INTEGER NOT NULL,
                    type TEXT NOT NULL, schemaVersion INTEGER NOT NULL, occurredAt INTEGER NOT NULL,
                    recordedAt INTEGER NOT NULL, source TEXT NOT NULL, meta TEXT NOT NULL, payload BLOB NOT NULL);
                CREATE UNIQUE INDEX IF NOT EXISTS events_id ON events(id);
                CREATE UNIQUE INDEX IF NOT EXISTS events_stream ON events(subject, version);
                CREATE TABLE IF NOT EXISTS states (model TEXT NOT NULL, key BLOB NOT NULL, state BLOB NOT NULL,
                    PRIMARY KEY (model, key)) WITHOUT ROWID;
                """)
        }
    }

    /// Appends one batch in one transaction: each event gets the next position and its
    /// subject's next version (read from the stream index once per subject per batch).
    func append(_ drafts: [EventDraft], recordedAt: Timestamp) throws {
        try pool.write { db in _ = try insert(drafts, recordedAt: recordedAt, db) }
    }

    /// Inserts one batch; returns each event as stored (position and version).
    @discardableResult
    private func insert(_ drafts: [EventDraft], recordedAt: Timestamp, _ db: Database) throws -> [StoredEvent] {
        do {
            var stored: [StoredEvent] = []
            stored.reserveCapacity(drafts.count)
            let last = try Int64.fetchOne(db, sql: "SELECT MAX(position) FROM events") ?? 0
            let versionOf = try db.cachedStatement(sql: "SELECT MAX(version) FROM events WHERE subject = ?")
            let insert = try db.cachedStatement(sql: "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            var versions: [String: Int64] = [:]
            for (offset, draft) in drafts.enumerated() {
                let previous = try versions[draft.subject] ?? (Int64.fetchOne(versionOf, arguments: [draft.subject]) ?? 0)
                versions[draft.subject] = previous + 1
                insert.setUncheckedArguments([
                    last + Int64(offset) + 1, Data(draft.id.bytes), draft.subject, previous + 1, draft.type,
                    Int64(draft.schemaVersion), draft.occurredAt.milliseconds, recordedAt.milliseconds, draft.source.rawValue,
                    Self.metaText(draft.meta), Data(draft.payload),
                ])
                try insert.execute()
                stored.append(StoredEvent(position: UInt64(last + Int64(offset) + 1), version: UInt64(previous + 1), recordedAt: recordedAt,
                                          hash: [], draft: draft))
            }
            return stored
        }
    }

    /// Appends one batch in one transaction with the read models inline: each event inserted
    /// as `append` does, then folded into the states of the models that read it (each state
    /// read from the states table the first time the batch needs it), and the touched states
    /// upserted before the commit.
    func appendWithModels(_ drafts: [EventDraft], recordedAt: Timestamp) throws {
        try pool.write { db in
            let stored = try insert(drafts, recordedAt: recordedAt, db)
            let load = try db.cachedStatement(sql: "SELECT state FROM states WHERE model = ? AND key = ?")
            let folds = PeerFold.all
            for event in stored {
                let recorded = try RecordedEvent(event)
                for fold in folds where fold.eventTypes.contains(recorded.type) {
                    try fold.apply(recorded) { key in
                        try Data.fetchOne(load, arguments: [fold.name, Data(key.utf8)]).map { [UInt8]($0) }
                    }
                }
            }
            let upsert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO states VALUES (?, ?, ?)")
            for fold in folds {
                try fold.forEachState { key, state in
                    upsert.setUncheckedArguments([fold.name, Data(key.utf8), Data(state)])
                    try upsert.execute()
                }
            }
        }
    }

    /// Rebuilds every read model: folds the events read back in position order, then replaces
    /// the states table in one transaction. Returns how many events it read. As the ledger's
    /// rebuild does, the facts and the models are folded on two cores, each group reading the
    /// events back on a connection of its own.
    func rebuild() throws -> Int {
        let folds = PeerFold.all
        let groups = Groups([Array(folds.prefix(1)), Array(folds.dropFirst())])
        let counts = Counts()
        DispatchQueue.concurrentPerform(iterations: groups.folds.count) { index in
            do {
                counts.set(index, try fold(groups.folds[index]))
            } catch {
                counts.fail(error)
            }
        }
        if let failure = counts.failure { throw failure }
        try pool.write { db in
            try db.execute(sql: "DELETE FROM states")
            let insert = try db.cachedStatement(sql: "INSERT INTO states VALUES (?, ?, ?)")
            for fold in folds {
                try fold.forEachState { key, state in
                    insert.setUncheckedArguments([fold.name, Data(key.utf8), Data(state)])
                    try insert.execute()
                }
            }
        }
        return counts.first
    }

    /// Folds every event `folds` read, in position order; returns how many rows it read.
    private func fold(_ folds: [PeerFold]) throws -> Int {
        let types = folds.reduce(into: Set<String>()) { $0.formUnion($1.eventTypes) }
        return try pool.read { db -> Int in
            var count = 0
            let rows = try Row.fetchCursor(db, sql: """
                SELECT position, id, subject, version, type, schemaVersion, occurredAt, recordedAt, source, meta, payload
                FROM events ORDER BY position
                """)
            while let row = try rows.next() {
                count += 1
                let type: String = row[4]
                guard types.contains(type) else { continue }
                let event = try RecordedEvent(try Self.event(row, type: type))
                for fold in folds where fold.eventTypes.contains(type) { try fold.apply(event) { _ in nil } }
            }
            return count
        }
    }

    /// One row as a stored event.
    private static func event(_ row: Row, type: String) throws -> StoredEvent {
        let position: Int64 = row[0]
        guard let id = try row.withUnsafeData(atIndex: 1, { $0.flatMap { EventID(bytes: $0) } }),
              let source = EventSource(rawValue: row[8]),
              let payload = try row.withUnsafeData(atIndex: 10, { $0.map { [UInt8]($0) } })
        else {
            throw BenchFailure("the SQLite peer's row at position \(position) is damaged; this is a bug in the benchmark")
        }
        let metaText: String = row[9]
        let draft = EventDraft(id: id, subject: row[2], type: type, schemaVersion: UInt16(truncatingIfNeeded: row[5] as Int64),
                               occurredAt: Timestamp(milliseconds: row[6]), source: source, meta: try meta(metaText), payload: payload)
        return StoredEvent(position: UInt64(position), version: UInt64(row[3] as Int64), recordedAt: Timestamp(milliseconds: row[7]),
                           hash: [], draft: draft)
    }

    /// Meta as a JSON object's text, as SQLite event stores usually keep it.
    private static func metaText(_ meta: [String: String]) -> String {
        JSON.object(JSONObject(meta.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) })).serialized()
    }

    private static func meta(_ text: String) throws -> [String: String] {
        guard case .object(let object) = try JSONParser.parse(text) else { return [:] }
        var meta: [String: String] = [:]
        for member in object.members {
            if case .string(let value) = member.value { meta[member.key] = value }
        }
        return meta
    }

    /// Bytes the database and its WAL take on disk.
    static func bytesOnDisk(_ path: String) -> Int {
        [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }
}

/// One fold's states as the SQLite peer folds them: the subject's facts or a read model's,
/// by the reducers the ledger runs, loaded when a batch first needs them and encoded to write.
class PeerFold {
    let name: String
    let eventTypes: Set<String>

    init(name: String, eventTypes: Set<String>) {
        self.name = name
        self.eventTypes = eventTypes
    }

    /// The facts and every read model, fresh.
    static var all: [PeerFold] { [FactsPeerFold()] + ReadModels.all.map { make($0) } }

    private static func make(_ model: any ReadModel.Type) -> PeerFold { typed(model) }
    private static func typed<M: ReadModel>(_ model: M.Type) -> PeerFold { TypedPeerFold<M>() }

    func apply(_ event: RecordedEvent, load: (String) throws -> [UInt8]?) throws {}
    func forEachState(_ body: (String, [UInt8]) throws -> Void) throws {}
}

private final class FactsPeerFold: PeerFold {
    private var states: [String: SubjectFacts] = [:]

    init() { super.init(name: "facts", eventTypes: SubjectFacts.reads) }

    override func apply(_ event: RecordedEvent, load: (String) throws -> [UInt8]?) throws {
        if states[event.subject] == nil {
            states[event.subject] = try load(event.subject).map { bytes in try bytes.withUnsafeBytes { try SubjectFacts.decode($0) } } ?? SubjectFacts()
        }
        states[event.subject, default: SubjectFacts()].apply(event, policy: .reference)
    }

    override func forEachState(_ body: (String, [UInt8]) throws -> Void) throws {
        for (key, state) in states { try body(key, state.encoded) }
    }
}

private final class TypedPeerFold<M: ReadModel>: PeerFold {
    private var states: [String: M.State] = [:]
    /// Items (`ReadModel.Item`) under the key ‖ 0x1F ‖ item, in the same table as the states.
    private var items: [String: M.Item] = [:]

    init() { super.init(name: M.name, eventTypes: M.reads) }

    override func apply(_ event: RecordedEvent, load: (String) throws -> [UInt8]?) throws {
        guard let key = M.key(for: event) else { return }
        if states[key] == nil {
            states[key] = try load(key).map { bytes in try bytes.withUnsafeBytes { try M.State.decode($0) } } ?? M.State()
        }
        guard let item = M.item(for: event).map({ key + "\u{1F}" + $0 }) else {
            // Under the reference policy, the benchmark store's, as the ledger folds.
            M.apply(event, to: &states[key, default: M.State()], policy: .reference)
            return
        }
        if items[item] == nil {
            items[item] = try load(item).map { bytes in try bytes.withUnsafeBytes { try M.Item.decode($0) } } ?? M.Item()
        }
        M.apply(event, to: &states[key, default: M.State()], item: &items[item, default: M.Item()])
    }

    override func forEachState(_ body: (String, [UInt8]) throws -> Void) throws {
        for (key, state) in states { try body(key, state.encoded) }
        for (key, item) in items { try body(key, item.encoded) }
    }
}

/// The folds each thread of the peer's rebuild folds, its own.
private final class Groups: @unchecked Sendable {
    // @unchecked: each group is touched by one thread alone until both are done.
    let folds: [[PeerFold]]
    init(_ folds: [[PeerFold]]) { self.folds = folds }
}

/// What the two folding threads of the peer's rebuild report.
private final class Counts: @unchecked Sendable {
    // @unchecked: guarded by the lock.
    private let lock = NSLock()
    private var counts: [Int: Int] = [:]
    private(set) var failure: (any Error)?

    func set(_ index: Int, _ count: Int) { lock.withLock { counts[index] = count } }
    func fail(_ error: any Error) { lock.withLock { failure = error } }
    var first: Int { lock.withLock { counts[0] ?? 0 } }
}

import Foundation
import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// The append-only event log of a store: every event once, under a gap-free global position,
/// indexed by id and by (subject, version), chained by SHA-256.
///
/// ```swift
/// let log = try EventLog(path: "customers.lmdb")
/// let result = try log.append([
///     EventDraft(subject: "user-42", type: "account.created",
///                occurredAt: .now(), source: .app, payload: payload),
/// ])
/// for try await event in log.events(subject: "user-42") { print(event.position, event.type) }
/// ```
///
/// Concurrency: any number of threads and tasks may append and read at once. Appends are
/// gathered by one leading thread at a time into shared write transactions (group commit,
/// <doc:Concurrency>); each caller returns once its own events are durable. Reads run in short
/// read transactions of their own and see every commit made before they start, from this
/// process or another one.
public final class EventLog: Sendable {
    /// How durable a commit is.
    public enum Durability: Sendable {
        /// Every commit is fsynced before the append returns (the default).
        case durable
        /// Commits are not fsynced: for bulk loads that can be redone. A crash of this process
        /// loses nothing, since committed data is in the OS page cache; a crash of the OS or a
        /// power cut can lose the latest commits and may leave the store unreadable. Call
        /// `sync()` when the load is done.
        case noSync
    }

    /// How to open a log.
    public struct Options: Sendable {
        /// fsync on every commit, or not (see `Durability`).
        public var durability: Durability = .durable
        /// The initial map size in bytes; it grows by itself when the store fills it.
        public var initialMapSize: Int = 64 << 20
        /// Most events one group commit gathers (a single larger batch still goes in whole).
        public var maxGroupEvents: Int = 16_384
        /// How many events' id and stream index entries are kept in memory before an append
        /// puts them into the stored indexes at once (see the README's "Performance"). The
        /// log closing puts them there too; after a crash they are read back from the log.
        public var indexTailLimit: Int = 100_000
        /// How many events' read-model writes a `Ledger` keeps in memory before an append puts
        /// them into the stored models at once (0: every append puts its own). Closing puts
        /// them there too; after a crash, opening the store folds those events again.
        public var modelTailLimit: Int = 20_000
        /// Open for reading only: no writer thread, no appends.
        public var readOnly = false
        /// The clock that stamps `recordedAt` (tests inject one).
        @_spi(Storage) public var clock: @Sendable () -> Timestamp = { Timestamp.now() }
        /// Makes the code run inside every append's write transaction (the projection engine),
        /// given the opened environment so that it can open its own databases.
        package var observer: (@Sendable (Environment) throws -> any CommitObserver)?

        public init() {}
    }

    /// The directory of the store.
    public let path: String
    let storage: LogStorage
    let writer: GroupCommitWriter?

    /// Opens the log in the directory `path`, creating the store if it does not exist
    /// (unless `options.readOnly`). Files are created readable by the owner only.
    /// - Throws: `LedgerError` (`.storage` with LMDB's code, `.unsupportedFormat`).
    public init(path: String, options: Options = Options()) throws(LedgerError) {
        self.path = path
        var config = Environment.Configuration()
        config.mapSize = options.initialMapSize
        if options.durability == .noSync { config.flags.insert(.noSync) }
        if options.readOnly { config.flags.insert(.readOnly) }
        do {
            let env = try Environment(path: path, configuration: config)
            storage = try LogStorage(env: env, clock: options.clock, indexTailLimit: max(options.indexTailLimit, 1), observer: options.observer)
        } catch {
            throw LedgerError.storage(error, doing: "opening the store at \(path)")
        }
        if options.readOnly {
            writer = nil
        } else {
            let storage = self.storage
            // Closing merges the index tail; should that fail, the next open reads it back from the log.
            writer = try GroupCommitWriter(maxGroupEvents: options.maxGroupEvents, commit: { group in storage.commit(group) },
                                           finish: { try? storage.mergeTailNow() })
        }
    }

    deinit {
        writer?.close()
    }

    /// Finishes queued appends, puts the index tail into the stored indexes, and stops the
    /// writer; later appends throw `.closed`. Reads keep working until the log is released.
    public func close() {
        writer?.close()
    }

    // MARK: Append

    /// Appends a batch atomically and returns once it is durable.
    ///
    /// - Every event is checked first (`EventDraft.validate()`); one bad event rejects the batch.
    /// - An event whose id is stored with the same content is a duplicate: nothing is written
    ///   for it and its outcome reports the existing position (at-least-once delivery is safe).
    /// - `expecting` maps subjects to the version their stream must be at (optimistic
    ///   concurrency). A subject whose events in this batch are all duplicates is not checked,
    ///   so retrying an append that succeeded succeeds again.
    ///
    /// Blocks the calling thread while the writer commits; from async code, the `async`
    /// overload suspends instead.
    /// - Throws: `LedgerError`: `.invalidEvent` (with `index` and `field`), `.idConflict`,
    ///   `.wrongExpectedVersion` (with expected and actual), `.storage`, `.closed`. Nothing of
    ///   the batch is written when it throws.
    @discardableResult
    public func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion] = [:]) throws(LedgerError) -> AppendResult {
        guard !drafts.isEmpty || !expecting.isEmpty else { return AppendResult(outcomes: []) }
        let data = try Self.validate(drafts)
        let writer = try requireWriter()
        let slot = BlockingSlot()
        return try writer.commit(PendingAppend(drafts: drafts, data: data, expectations: expecting, completion: .blocking(slot)), waitingOn: slot).get()
    }

    /// Appends a batch atomically, suspending (not blocking) until it is durable.
    /// See the blocking overload for the rules.
    @discardableResult
    public func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion] = [:]) async throws(LedgerError) -> AppendResult {
        guard !drafts.isEmpty || !expecting.isEmpty else { return AppendResult(outcomes: []) }
        let data = try Self.validate(drafts)
        let writer = try requireWriter()
        do {
            return try await withCheckedThrowingContinuation { continuation in
                do {
                    try writer.submit(PendingAppend(drafts: drafts, data: data, expectations: expecting, completion: .async(continuation)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError(.storage, "\(error)")
        }
    }

    /// Appends events of one subject, expecting its stream at `expectedVersion`.
    @discardableResult
    public func append(_ drafts: [EventDraft], to subject: String, expectedVersion: ExpectedVersion) throws(LedgerError) -> AppendResult {
        try append(drafts, expecting: [subject: expectedVersion])
    }

    /// How many append calls the writer has gathered into how many transactions since open.
    @_spi(Storage) public var commitCounters: CommitCounters { writer?.commitCounters ?? CommitCounters() }

    /// Flushes commits to disk: needed only for a `.noSync` log.
    public func sync() throws(LedgerError) {
        do { try storage.env.sync(force: true) } catch { throw LedgerError.storage(error, doing: "syncing") }
    }

    private func requireWriter() throws(LedgerError) -> GroupCommitWriter {
        guard let writer else { throw LedgerError(.readOnly, "the log was opened read-only; open it without `readOnly` to append") }
        return writer
    }

    /// Checks every draft; returns each one's typed data, which the commit hands to the
    /// observer so that the projection engine does not decode the payload again.
    private static func validate(_ drafts: [EventDraft]) throws(LedgerError) -> [EventData] {
        var data: [EventData] = []
        data.reserveCapacity(drafts.count)
        for (index, draft) in drafts.enumerated() {
            do {
                data.append(try draft.validate())
            } catch {
                var error = error
                error.index = index
                error.subject = error.subject ?? (draft.subject.isEmpty ? nil : draft.subject)
                throw error
            }
        }
        return data
    }

    // MARK: Read

    /// The last position written (0 for an empty log).
    public func lastPosition() throws(LedgerError) -> UInt64 {
        try storage.read("reading the head") { txn in try storage.head(txn).position }
    }

    /// A subject's current version: how many events its stream holds (0 if none).
    public func version(of subject: String) throws(LedgerError) -> UInt64 {
        try storage.readIndexed("reading the version of \(subject)") { txn, tail in try storage.version(of: subject, txn, tail: tail) }
    }

    /// The event at `position`, or `nil`; personal fields opened unless `revealing` is false
    /// (see `events(from:)`).
    public func event(at position: UInt64, revealing: Bool = true) throws(LedgerError) -> StoredEvent? {
        try storage.read("reading position \(position)") { txn in
            guard let record = try txn.get(storage.events, key: LogSchema.key(position)) else { return nil }
            let event = try EventRecord.decode(record, position: position)
            return revealing ? try storage.reveal(event, txn) : event
        }
    }

    /// The event with `id`, or `nil`; personal fields opened unless `revealing` is false.
    public func event(id: EventID, revealing: Bool = true) throws(LedgerError) -> StoredEvent? {
        try storage.readIndexed("reading event \(id)") { txn, tail in
            guard let (position, record) = try storage.stored(id, txn, tail: tail) else { return nil }
            let event = try EventRecord.decode(record, position: position)
            return revealing ? try storage.reveal(event, txn) : event
        }
    }

    /// Where `draft`'s id is stored, and whether with the same content, as an append's
    /// duplicate check decides it: a personal field whose key was destroyed counts as the
    /// draft's value (a fact erased since is still the same fact). `nil` when the id is not
    /// stored. A cluster's node checks an append against its store with it.
    package func stored(as draft: EventDraft) throws(LedgerError) -> (position: UInt64, same: Bool)? {
        try storage.readIndexed("reading event \(draft.id)") { txn, tail in
            guard let (position, record) = try storage.stored(draft.id, txn, tail: tail) else { return nil }
            return (position, try storage.holds(draft, content: EventRecord.content(of: draft)[...], record: record, at: position, txn) { _ in nil })
        }
    }

    /// A personal value as a read model keeps it — sealed, as the log gave it to the fold —
    /// opened: its plaintext, or `PersonalData.erased` once the subject's key is destroyed.
    /// A value that is not sealed (stored before sealing began) comes back as it is.
    /// - Throws: `LedgerError.corruptRecord` when its key is missing or its ciphertext was altered.
    public func reveal(_ value: String, of subject: String, field pointer: String) throws(LedgerError) -> String {
        guard let sealed = SealedField(value) else { return value }
        return try storage.read("opening \(pointer) of \(subject)") { txn in
            var keys = LogStorage.KeyCache()
            return try storage.open(sealed, of: subject, at: pointer, where: "of \(subject)", txn, keys: &keys) ?? PersonalData.erased
        }
    }

    /// How many keys `subject` has that still open its personal fields (none once it is erased
    /// and nothing personal about it has been recorded since).
    @_spi(Storage) public func liveKeys(of subject: String) throws(LedgerError) -> Int {
        try storage.read("reading the keys of \(subject)") { txn in
            let stored = try storage.keyStore.keys(of: subject, generation: try storage.keyGeneration(txn))
            return try stored.count { try storage.erasure(of: $0.id, txn) == nil }
        }
    }

    /// Checks that the store can forget `subject`'s keys: each one it has is in the key store's
    /// current generation, and the store's directory and that generation's can be written (a
    /// compaction writes the next generation beside it and removes it).
    /// - Throws: `LedgerError.storage` saying what stands in the way.
    @_spi(Storage) public func checkCanForget(_ subject: String) throws(LedgerError) {
        let generation = try storage.read("reading the key generation") { txn in try storage.keyGeneration(txn) }
        guard generation > 0 else { return }
        let directory = storage.keyStore.directory(generation)
        for path in [path, directory] where access(path, W_OK) != 0 {
            throw LedgerError(.storage, "\(path) cannot be written (\(String(cString: strerror(errno)))): the key store could not forget the keys of \(subject)")
        }
        do {
            _ = try storage.keyStore.keys(of: subject, generation: generation)
        } catch {
            throw LedgerError.storage(error, doing: "reading the keys of \(subject) in \(directory)")
        }
    }

    /// Counts and sizes.
    public func stats() throws(LedgerError) -> LogStats {
        let info = storage.env.info()
        return try storage.read("reading stats") { txn in
            LogStats(
                events: UInt64(try txn.count(storage.events)),
                subjects: try storage.subjectCount(txn),
                lastPosition: try storage.head(txn).position,
                usedBytes: info.usedBytes,
                mapSize: info.mapSize
            )
        }
    }

    /// The LMDB environment underneath, for modules that keep their own databases in the same
    /// store (the projection engine).
    @_spi(Storage) public var environment: Environment { storage.env }

    /// The observer made from `Options.observer`, if any.
    package var observer: (any CommitObserver)? { storage.observer }
}

/// Counts and sizes of a log.
public struct LogStats: Sendable, Hashable {
    /// Events stored.
    public let events: UInt64
    /// Subjects with at least one event.
    public let subjects: UInt64
    /// The last position (equals `events`, positions being gap-free).
    public let lastPosition: UInt64
    /// Bytes of the store file in use.
    public let usedBytes: Int
    /// The current map size.
    public let mapSize: Int
}

extension LedgerError {
    /// Wraps an error from the storage underneath: a `LedgerError` as it is, an LMDB error as
    /// `.storage` with its return code, saying what was being done.
    public static func storage(_ error: any Error, doing what: String) -> LedgerError {
        if let error = error as? LedgerError { return error }
        if let abort = error as? AbortTransaction { return abort.error }
        if let damage = error as? StreamIndexDamage { return LedgerError(.corruptRecord, "\(what): \(damage)") }
        if let full = error as? IDIndexFull { return LedgerError(.storage, "\(what): \(full)") }
        if let lmdb = error as? LMDBError {
            var wrapped = LedgerError(.storage, "\(what): \(lmdb)")
            wrapped.storageCode = lmdb.returnCode
            return wrapped
        }
        return LedgerError(.storage, "\(what): \(error)")
    }
}

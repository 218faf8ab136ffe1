import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// The environment and databases of a store, and the commit that the leading thread runs.
struct LogStorage: Sendable {
    let env: Environment
    let events: Database
    let ids: Database
    let streams: Database
    let meta: Database
    let clock: @Sendable () -> Timestamp
    /// Runs inside every append's write transaction (the projection engine), if any.
    let observer: (any CommitObserver)?
    /// The id and stream index entries of the events after the stored indexes' position.
    let tails: IndexTails
    /// The subjects' keys for their personal fields (`keys-N/` beside the log's files).
    let keyStore: KeyStore
    /// Keys destroyed, and those the key store may still hold (`LogSchema.erased`,
    /// `.shredding`); `nil` in a store of an older layout opened read-only.
    let erased: Database?
    let shredding: Database?
    /// Each erased subject's latest deletion (`LogSchema.erasedSubjects`).
    let erasedSubjects: Database?

    /// The chain's hash before position 1.
    static let genesisHash = [UInt8](repeating: 0, count: EventRecord.hashSize)

    /// A record's link in the hash chain: the SHA-256 of its predecessor's hash followed by
    /// every byte of the record before its own hash (`EventRecord.hashedBytes`).
    static func chainHash(after previous: [UInt8], _ hashed: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: previous)
        hasher.update(bufferPointer: hashed)
        // Copied as bytes: `Array(digest)` iterates the digest generically, which asks the
        // runtime for its iterator's optional type at every byte (1 % of an append).
        return hasher.finalize().withUnsafeBytes { Array($0) }
    }

    init(env: Environment, clock: @escaping @Sendable () -> Timestamp, indexTailLimit: Int,
         observer makeObserver: (@Sendable (Environment) throws -> any CommitObserver)?) throws {
        self.env = env
        self.clock = clock
        tails = IndexTails(limit: indexTailLimit)
        let readOnly = env.configuration.flags.contains(.readOnly)
        keyStore = KeyStore(root: env.path, writable: !readOnly)
        let flags: Database.Flags = readOnly ? [] : [.create]
        do {
            events = try env.openDatabase(LogSchema.events, flags: flags)
            streams = try env.openDatabase(LogSchema.streams, flags: flags)
            meta = try env.openDatabase(LogSchema.meta, flags: flags)
        } catch let error as LMDBError where error.code == .notFound {
            throw Self.notAStore(env)
        }
        let meta = self.meta, streams = self.streams, events = self.events
        let format: UInt8? = try env.read { txn in try txn.get(meta, key: LogSchema.formatKey).flatMap { $0.first } }
        if let format, format > LogSchema.storeFormat {
            throw LedgerError(.unsupportedFormat, "the store at \(env.path) has layout \(format); this ledger reads up to \(LogSchema.storeFormat): upgrade it")
        }
        if let format, format < LogSchema.readableFormat && readOnly {
            throw LedgerError(.unsupportedFormat, "the store at \(env.path) has layout \(format); open it once for writing (any `ledger` command but `export`, or the library without `readOnly`) to upgrade it to layout \(LogSchema.storeFormat)")
        }
        if format != LogSchema.storeFormat && !readOnly {
            try env.write { txn in
                // Read again under the write lock: another process may have upgraded it since.
                let format = try txn.get(meta, key: LogSchema.formatKey).flatMap { $0.first }
                guard format != LogSchema.storeFormat else { return }
                // Layout 1 kept a stream index key per event; layout 2 packs them (`StreamChunk`).
                if format == 1 { try Self.packStreamIndex(streams, txn) }
                // Layouts 1 and 2 kept an id index key per id; layout 3 packs them (`IDIndex`).
                // A new store gets its empty index here too. Layout 3 → 4 rewrites nothing.
                if format.map({ $0 < 3 }) ?? true { try Self.indexIDsByHash(events: events, txn) }
                // Layout 5 keeps the latest events' index entries in memory (`IndexTail`) and
                // records the position the stored indexes hold every event through; older
                // layouts' indexes hold every event.
                let head = try txn.withCursor(events) { cursor in try cursor.last().flatMap { LogSchema.integer($0.key) } } ?? 0
                if format.map({ $0 < 5 }) ?? true { try txn.put(meta, key: LogSchema.indexedKey, value: LogSchema.key(head)) }
                // Layout 6 seals personal fields from here on; what an older layout stored stays
                // as it was written (the hash chain covers it).
                try txn.put(meta, key: LogSchema.sealedFromKey, value: LogSchema.key(head + 1))
                try txn.put(meta, key: LogSchema.formatKey, value: [LogSchema.storeFormat])
            }
        }
        do {
            ids = try env.openDatabase(LogSchema.ids, flags: LogSchema.idsFlags)
        } catch let error as LMDBError where error.code == .notFound {
            throw Self.notAStore(env)
        }
        erased = try? env.openDatabase(LogSchema.erased, flags: flags)
        shredding = try? env.openDatabase(LogSchema.shredding, flags: flags)
        erasedSubjects = try? env.openDatabase(LogSchema.erasedSubjects, flags: flags)
        if !readOnly && (erased == nil || shredding == nil || erasedSubjects == nil) {
            throw LedgerError(.storage, "\(env.path): could not open the databases of destroyed keys")
        }
        // Last: the observer opens its databases beside the log's.
        observer = try makeObserver?(env)
        // An erasure whose key store compaction was cut short is finished before anything else.
        if !readOnly, try keysNeedCare() { try shred() }
    }

    private static func notAStore(_ env: Environment) -> LedgerError {
        LedgerError(.storage, "\(env.path) is not an EntitlementLedger store (its databases are missing); create one with `ledger init`")
    }

    /// Runs a read transaction, turning storage errors into `LedgerError`.
    func read<R>(_ what: @autoclosure () -> String, _ body: (borrowing Transaction) throws -> R) throws(LedgerError) -> R {
        do {
            return try env.read(body)
        } catch {
            throw LedgerError.storage(error, doing: what())
        }
    }

    struct Head {
        var position: UInt64
        var hash: [UInt8]
        var recordedAt: Timestamp
        /// Subjects with at least one event, counting those this transaction adds.
        var subjects: UInt64 = 0
        /// The index tail as a write transaction found it (see `IndexTails`); none once the
        /// transaction has merged it (and its own entries then) into the stored indexes, which
        /// then hold its entries and versions.
        var tail: IndexTail?
        /// The index entries of the events this transaction adds (see `IndexTail`) since it
        /// last merged them.
        var pending = IndexTail(base: 0)
        /// Personal data sealed and keys destroyed in this transaction, once it has some.
        var sealing: SealingSession?
    }

    /// The last record's position, hash and recordedAt, read in `txn` so that commits by other
    /// processes are seen.
    ///
    /// For a writer (`checkingChain`), the chain's last link is checked on the way (the record
    /// before is one cursor step off): an append never extends a chain whose end is broken.
    func head(_ txn: borrowing Transaction, checkingChain: Bool = false) throws -> Head {
        try txn.withCursor(events) { cursor in
            guard let last = try cursor.last() else {
                return Head(position: 0, hash: Self.genesisHash, recordedAt: Timestamp(milliseconds: 0))
            }
            guard let position = LogSchema.integer(last.key), let hash = EventRecord.hash(ofRecord: last.value),
                  let hashed = EventRecord.hashedBytes(ofRecord: last.value),
                  let recordedAt = EventRecord.recordedAt(ofRecord: last.value)
            else {
                throw LedgerError(.corruptRecord, "the last record of the log is damaged; run `ledger verify`")
            }
            guard checkingChain else { return Head(position: position, hash: Array(hash), recordedAt: recordedAt) }
            var before = Self.genesisHash
            if position > 1 {
                guard let previous = try cursor.previous(), LogSchema.integer(previous.key) == position - 1,
                      let previousHash = EventRecord.hash(ofRecord: previous.value) else {
                    throw LedgerError(.corruptRecord, "the log has no sound record before its last, \(position); run `ledger verify`")
                }
                before = Array(previousHash)
            }
            guard Self.chainHash(after: before, hashed).elementsEqual(hash) else {
                throw LedgerError(.corruptRecord, "the log's hash chain is broken at its last event, position \(position): "
                                  + "appending would extend a damaged chain; run `ledger verify`, and restore the store from an export or a backup")
            }
            return Head(position: position, hash: Array(hash), recordedAt: recordedAt)
        }
    }

    /// How many subjects have events.
    func subjectCount(_ txn: borrowing Transaction) throws -> UInt64 {
        try txn.get(meta, key: LogSchema.subjectCountKey).flatMap(LogSchema.integer) ?? 0
    }

    // MARK: Commit (the leading thread only: `GroupCommitWriter`)

    /// One write transaction of appends, as both append paths run it: brings the index tail
    /// up to the store and reads the head and the subject count, opens the observer's session,
    /// lets `body` write, then records the subject count, merges the index tail into the stored
    /// indexes if it has grown to its limit (`IndexTail`), and finishes the session before the
    /// commit. After it, adds the transaction's index entries to the tail and tells the observer.
    func writeAppends<R>(closing: Bool = false, _ body: (borrowing Transaction, inout Head, (any CommitSession)?) throws -> R) throws -> R {
        var written: (pending: IndexTail, merged: Bool)?
        var destroysKeys = false
        let (result, last) = try env.write { txn in
            // Usually current already: this process made the last commit.
            var tail = tails.snapshot
            let change = try catchUp(&tail, txn)
            if change != .none { tails.publish(tail, change) }
            var head = try head(txn, checkingChain: true)
            head.tail = tail
            head.subjects = try subjectCount(txn)
            head.pending = IndexTail(base: head.position)
            let subjectsBefore = head.subjects
            let session = try observer?.begin(txn, head: head.position)
            let result = try body(txn, &head, session)
            if head.subjects != subjectsBefore {
                try txn.put(meta, key: LogSchema.subjectCountKey, value: LogSchema.key(head.subjects))
            }
            try mergeIfFull(&head, closing: closing, txn)
            try head.sealing?.flush(txn)
            try session?.finish(txn, closing: closing)
            written = (head.pending, head.tail == nil)
            // This commit destroys keys, or an earlier one's compaction failed: the key
            // store is rewritten after it.
            destroysKeys = try head.sealing?.destroysKeys == true || shreddingPending(txn)
            return (result, head.position)
        }
        if let written { tails.absorb(written.pending, merged: written.merged) }
        observer?.committed(head: last)
        if destroysKeys {
            do {
                try shred()
            } catch {
                throw LedgerError(.storage, "the events were stored, but destroying the erased subjects' keys failed (\(LedgerError.storage(error, doing: "compacting the key store").message)); "
                                  + "it is finished when the store is next opened for writing, and appending the same events again reports them as duplicates")
            }
        }
        return result
    }

    /// The transaction's sealing session, made on first use.
    private func sealing(_ head: inout Head, _ txn: borrowing Transaction) throws -> SealingSession {
        if let sealing = head.sealing { return sealing }
        let sealing = try SealingSession(self, txn)
        head.sealing = sealing
        return sealing
    }

    /// A fresh event as the log stores it: its personal fields sealed (the draft and its
    /// typed data both), and an `account.deleted` recorded in the sealing session by `erase`.
    ///
    /// It runs among a batch's writes, where a `LedgerError` would fail the batch alone and keep
    /// what it wrote: a failure here aborts the whole transaction instead (`AbortTransaction`).
    func sealed(_ draft: EventDraft, _ data: EventData, _ txn: borrowing Transaction, _ head: inout Head) throws -> (EventDraft, EventData)? {
        guard PersonalData.holdsPersonalData(draft) else { return nil }
        do {
            let sealed = try sealing(&head, txn).seal(draft, txn)
            guard let data = EventCatalog.decode(type: sealed.type, version: sealed.schemaVersion, payload: sealed.payload) else {
                throw LedgerError(.storage, "a sealed \(draft.type) payload does not decode")
            }
            return (sealed, data)
        } catch let error as LedgerError {
            throw AbortTransaction(error: error)
        }
    }

    /// After an event is written: an `account.deleted` destroys its subject's keys.
    func afterWriting(_ draft: EventDraft, at position: UInt64, _ txn: borrowing Transaction, _ head: inout Head) throws {
        guard draft.type == AccountDeleted.type else { return }
        do {
            try sealing(&head, txn).erase(draft.subject, at: position, occurredAt: draft.occurredAt, txn)
        } catch let error as LedgerError {
            throw AbortTransaction(error: error)
        }
    }

    /// Writes the events `session` derived from the event just written (`CommitSession.derived`),
    /// each right after it, unless the log holds them already; returns each one written, by
    /// id, with its position and content. They are not the caller's: an append's outcomes and
    /// a stream's counts leave them out, though each takes a version in its subject's stream. A
    /// failure here aborts the whole transaction (`AbortTransaction`), since the batch has
    /// written already.
    func writeDerived(_ recordedAt: Timestamp, _ txn: borrowing Transaction, _ head: inout Head,
                              _ session: (any CommitSession)?) throws -> [EventID: (position: UInt64, content: [UInt8])] {
        var written: [EventID: (position: UInt64, content: [UInt8])] = [:]
        guard let session else { return written }
        for draft in session.derived() {
            do {
                let data = try draft.validate()
                var record = EventRecord.encode(draft, version: 0, recordedAt: recordedAt)
                let idHash = IDIndex.hash(draft.id)
                guard try lookUp(draft, hash: idHash, content: EventRecord.content(ofUnhashed: record), txn, &head) == .absent else { continue }
                var (stored, storedData) = (draft, data)
                if let (sealedDraft, sealedData) = try sealed(draft, data, txn, &head) {
                    (stored, storedData) = (sealedDraft, sealedData)
                    record = EventRecord.encode(stored, version: 0, recordedAt: recordedAt)
                }
                let content = Array(EventRecord.content(ofUnhashed: record))
                written[draft.id] = (try write(&record, idHash: idHash, draft: stored, data: storedData, recordedAt: recordedAt, txn, &head, session).position, content)
            } catch let error as LedgerError {
                throw AbortTransaction(error: error)
            }
            for (id, entry) in try writeDerived(recordedAt, txn, &head, session) { written[id] = entry }
        }
        return written
    }

    /// Merges the tail (unless this transaction already has) and the transaction's pending
    /// entries into the stored indexes once they hold `limit` events, or any when `closing`;
    /// the pending entries start over. Called after every event written, so that a streamed
    /// batch of any size keeps a bounded tail.
    private func mergeIfFull(_ head: inout Head, closing: Bool = false, _ txn: borrowing Transaction) throws {
        let held = (head.tail?.count ?? 0) + head.pending.count
        guard closing ? held > 0 : held >= tails.limit else { return }
        try mergeTail(head.tail, head.pending, through: head.position, txn)
        head.tail = nil
        head.pending = IndexTail(base: head.position)
    }

    /// Merges the index tail into the stored indexes in a write transaction of its own (when
    /// the log closes, so that the next process to open it starts with an empty tail).
    func mergeTailNow() throws {
        _ = try writeAppends(closing: true) { _, _, _ in () }
    }

    /// Writes a group of batches in one transaction. Each batch succeeds or fails on its own;
    /// a batch that fails wrote nothing. A storage failure fails the whole group.
    func commit(_ group: [PendingAppend]) -> [Result<AppendResult, LedgerError>] {
        do {
            return try writeAppends { txn, head, session in
                // recordedAt never goes backwards, even if the wall clock does.
                let recordedAt = max(clock(), head.recordedAt)
                var results: [Result<AppendResult, LedgerError>] = []
                results.reserveCapacity(group.count)
                for append in group {
                    do {
                        results.append(.success(try apply(append, txn, &head, recordedAt, session)))
                    } catch let error as LedgerError {
                        results.append(.failure(error))
                    }
                }
                return results
            }
        } catch {
            let failure = LedgerError.storage(error, doing: "committing an append")
            return group.map { _ in .failure(failure) }
        }
    }

    /// Checks one batch against the store (reads only), then writes it. Throws `LedgerError`
    /// only before its first write, so a rejected batch leaves nothing behind; LMDB errors
    /// during the writes propagate and abort the whole transaction.
    private func apply(_ append: PendingAppend, _ txn: borrowing Transaction, _ head: inout Head,
                       _ recordedAt: Timestamp, _ session: (any CommitSession)?) throws -> AppendResult {
        let drafts = append.drafts
        // Each event is encoded once; its version and recordedAt are stamped in when written.
        var records = drafts.map { EventRecord.encode($0, version: 0, recordedAt: recordedAt) }
        var idHashes = [UInt64](repeating: 0, count: drafts.count)
        var outcomes = [AppendOutcome?](repeating: nil, count: drafts.count)
        var firstIndex: [EventID: Int] = [:]
        var fresh: [Int] = []

        // 1. Duplicates and conflicts.
        for i in drafts.indices {
            let id = drafts[i].id
            if let j = firstIndex[id] {
                guard EventRecord.content(ofUnhashed: records[j]) == EventRecord.content(ofUnhashed: records[i]) else {
                    throw LedgerError(.idConflict, "event id \(id) appears twice in this batch (events \(j) and \(i)) with different content; give each fact its own id",
                                      index: i, field: "/id", subject: drafts[i].subject)
                }
                continue
            }
            firstIndex[id] = i
            idHashes[i] = IDIndex.hash(id)
            switch try lookUp(drafts[i], hash: idHashes[i], content: EventRecord.content(ofUnhashed: records[i]), txn, &head) {
            case .absent:
                fresh.append(i)
            case .same(let position):
                outcomes[i] = .duplicate(position: position)
            case .different(let position):
                throw LedgerError.idConflict(id, storedAt: position, index: i, subject: drafts[i].subject)
            }
        }

        // 2. Expected versions. A subject whose events here are all duplicates is a retry of
        //    an append that already succeeded: not checked.
        var versions: [String: UInt64] = [:]
        func current(_ subject: String) throws -> UInt64 {
            if let v = versions[subject] { return v }
            let v = try version(of: subject, txn, tail: head.tail, pending: head.pending)
            versions[subject] = v
            return v
        }
        let freshSubjects = Set(fresh.map { drafts[$0].subject })
        let batchSubjects = Set(drafts.map(\.subject))
        for (subject, expected) in append.expectations.sorted(by: { $0.key < $1.key }) {
            if batchSubjects.contains(subject) && !freshSubjects.contains(subject) { continue }
            let actual = try current(subject)
            guard expected.isSatisfied(by: actual) else {
                throw LedgerError.wrongExpectedVersion(subject: subject, expected: expected, actual: actual)
            }
        }

        // 3. Writes. An event the ledger derived earlier in this batch (`writeDerived`) may
        //    carry the id of a later one: the same fact is a duplicate, another one a conflict.
        var derived: [EventID: (position: UInt64, content: [UInt8])] = [:]
        for i in fresh {
            if let earlier = derived[drafts[i].id] {
                guard earlier.content == Array(EventRecord.content(ofUnhashed: records[i])) else {
                    throw AbortTransaction(error: LedgerError(.idConflict, "event id \(drafts[i].id) is that of the appstore.subject_bound the ledger wrote at position \(earlier.position) for an earlier event of this batch, with other content; leave bindings to the ledger",
                                                              index: i, field: "/id", subject: drafts[i].subject, position: earlier.position))
                }
                outcomes[i] = .duplicate(position: earlier.position)
                continue
            }
            var draft = drafts[i], data = append.data[i]
            if let (sealedDraft, sealedData) = try sealed(draft, data, txn, &head) {
                (draft, data) = (sealedDraft, sealedData)
                records[i] = EventRecord.encode(draft, version: 0, recordedAt: recordedAt)
            }
            let written = try write(&records[i], idHash: idHashes[i], draft: draft, data: data, recordedAt: recordedAt, txn, &head, session)
            try afterWriting(draft, at: written.position, txn, &head)
            for (id, entry) in try writeDerived(recordedAt, txn, &head, session) { derived[id] = entry }
            versions[draft.subject] = written.version
            outcomes[i] = .appended(position: written.position, version: written.version)
        }
        // Repeats of an id inside the batch report the position of its first occurrence.
        let resolved: [AppendOutcome] = drafts.indices.map { i in
            if let outcome = outcomes[i] { return outcome }
            let first = firstIndex[drafts[i].id] ?? i
            return .duplicate(position: outcomes[first]?.position ?? 0)
        }
        return AppendResult(outcomes: resolved)
    }

    /// Writes one checked event: stamps, chains and indexes it. LMDB errors propagate and
    /// abort the whole transaction.
    func write(_ record: inout [UInt8], idHash: UInt64, draft: EventDraft, data: EventData,
                       recordedAt: Timestamp, _ txn: borrowing Transaction, _ head: inout Head,
                       _ session: (any CommitSession)?) throws -> (position: UInt64, version: UInt64) {
        guard head.position < IDIndex.maxPosition else { throw IDIndexFull(position: head.position + 1) }
        head.position += 1
        let version = try self.version(of: draft.subject, txn, tail: head.tail, pending: head.pending) + 1
        if version == 1 { head.subjects += 1 }
        EventRecord.stamp(&record, version: version, recordedAt: recordedAt)
        let hash = record.withUnsafeBytes { Self.chainHash(after: head.hash, $0) }
        record.append(contentsOf: hash)
        let positionKey = LogSchema.key(head.position)
        try txn.put(events, key: positionKey, value: record, flags: .append)
        head.pending.add(id: draft.id, hash: idHash, subject: draft.subject, version: version, position: head.position)
        try mergeIfFull(&head, txn)
        head.hash = hash
        head.recordedAt = recordedAt
        try session?.written(StoredEvent(position: head.position, version: version, recordedAt: recordedAt, hash: hash, draft: draft), data: data, txn)
        return (head.position, version)
    }

    /// What the log holds under an event id.
    enum StoredID: Equatable {
        case absent
        case same(position: UInt64)
        case different(position: UInt64)
    }

    /// Looks up `draft`'s id (whose `IDIndex.hash` is `hash`) among the stored events and the
    /// transaction's pending ones, and compares the stored event with it (`holds`).
    func lookUp(_ draft: EventDraft, hash: UInt64, content: ArraySlice<UInt8>, _ txn: borrowing Transaction, _ head: inout Head) throws -> StoredID {
        guard let (position, record) = try stored(draft.id, hash: hash, txn, tail: head.tail, pending: head.pending) else { return .absent }
        let same = try holds(draft, content: content, record: record, at: position, txn) { txn in try sealing(&head, txn) }
        return same ? .same(position: position) : .different(position: position)
    }

    /// Whether the event stored at `position` as `record` is `draft` (whose content bytes are
    /// `content`), as an append's duplicate check decides it. Personal fields are compared
    /// opened: a field sealed again has other bytes, and an erased one matches whatever the
    /// draft says (it is not a change of content). `session` gives a write's sealing session,
    /// asked for only when the fields are opened.
    func holds(_ draft: EventDraft, content: ArraySlice<UInt8>, record: UnsafeRawBufferPointer, at position: UInt64, _ txn: borrowing Transaction,
               session: (borrowing Transaction) throws -> SealingSession?) throws -> Bool {
        guard let storedContent = EventRecord.content(ofRecord: record) else {
            throw LedgerError(.corruptRecord, "the record at position \(position), which the id index names for \(draft.id), is damaged; run `ledger verify`")
        }
        if storedContent.elementsEqual(content) { return true }
        guard PersonalData.holdsPersonalData(draft) else { return false }
        let stored = try EventRecord.decode(record, position: position)
        guard PersonalData.holdsPersonalData(stored.draft) else { return false }
        let opened = try reveal(stored, txn, session: try session(txn), matching: draft)
        return EventRecord.content(of: opened.draft).elementsEqual(content)
    }
}

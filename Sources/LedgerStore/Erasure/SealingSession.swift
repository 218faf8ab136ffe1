@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// What one write transaction does to personal data: seals each personal field under its
/// subject's key (making the key on the subject's first one), marks the keys an
/// `account.deleted` destroys, and, just before the log commits, puts the keys it made into the
/// key store, synced — so no ciphertext is ever stored whose key is not.
final class SealingSession {
    private let storage: LogStorage
    private let generation: UInt64
    /// Keys made in this transaction, not yet in the key store.
    private var made: [String: KeyStore.Key] = [:]
    /// Stored keys this transaction has sealed with, so that a subject's next field needs no read.
    private var stored: [String: KeyStore.Key] = [:]
    /// Whether this transaction marked stored keys for destruction.
    private(set) var destroysKeys = false

    init(_ storage: LogStorage, _ txn: borrowing Transaction) throws {
        self.storage = storage
        generation = try storage.keyGeneration(txn)
    }

    /// The key that seals `subject`'s new fields: one made here, else a stored one not
    /// destroyed, else a new one (a subject's first personal field, or a customer who returns).
    private func key(for subject: String, _ txn: borrowing Transaction) throws -> KeyStore.Key {
        if let key = made[subject] ?? stored[subject] { return key }
        for key in try storage.keyStore.keys(of: subject, generation: generation, required: true) where try storage.erasure(of: key.id, txn) == nil {
            stored[subject] = key
            return key
        }
        let key = KeyStore.Key.random()
        made[subject] = key
        return key
    }

    /// The key made for `subject` in this transaction, not yet in the key store: what `reveal`
    /// needs beside the key store to open a field this transaction sealed.
    func madeKey(of subject: String) -> KeyStore.Key? { made[subject] }

    /// The draft with its personal fields sealed. A fact that occurred by the subject's latest
    /// `account.deleted` but arrives after it (an App Store notification delivered late, a
    /// deletion request recorded late) belongs to the erased account: it is sealed under a key
    /// destroyed at once, never stored, so it reads as "[Deleted User]" from the start.
    func seal(_ draft: EventDraft, _ txn: borrowing Transaction) throws -> EventDraft {
        guard PersonalData.holdsPersonalData(draft) else { return draft }
        let key: KeyStore.Key
        if let deletion = try storage.deletion(of: draft.subject, txn), draft.occurredAt <= deletion.occurredAt, let erased = storage.erased {
            key = KeyStore.Key.random()
            try txn.put(erased, key: key.id, value: LogSchema.key(deletion.position) + Array(draft.subject.utf8))
        } else {
            key = try self.key(for: draft.subject, txn)
        }
        return try PersonalData.map(draft) { (location: PersonalData.Location, value: String) throws(LedgerError) -> String in
            try SealedField.seal(value, key: key, subject: draft.subject, pointer: location.pointer).text
        }
    }

    /// `account.deleted` of `subject` at `position`: every key of the subject, stored or made
    /// here, is recorded as destroyed; a stored one is queued for the key store's compaction,
    /// one made here is never stored at all. Later fields of the subject get a new key.
    func erase(_ subject: String, at position: UInt64, occurredAt: Timestamp, _ txn: borrowing Transaction) throws {
        guard let erased = storage.erased, let shredding = storage.shredding, let erasedSubjects = storage.erasedSubjects else { return }
        var value = LogSchema.key(position)
        value.append(contentsOf: subject.utf8)
        if try storage.deletion(of: subject, txn).map({ $0.occurredAt <= occurredAt }) ?? true {
            try txn.put(erasedSubjects, key: Array(subject.utf8), value: LogSchema.key(UInt64(bitPattern: occurredAt.milliseconds)) + LogSchema.key(position))
        }
        for key in try storage.keyStore.keys(of: subject, generation: generation, required: true) where try storage.erasure(of: key.id, txn) == nil {
            try txn.put(erased, key: key.id, value: value)
            try txn.put(shredding, key: key.id, value: Array(subject.utf8))
            destroysKeys = true
        }
        if let key = made.removeValue(forKey: subject) {
            try txn.put(erased, key: key.id, value: value)
        }
        stored[subject] = nil
    }

    /// Puts the keys made here into the key store (one synced commit) before the log commits;
    /// the first ever makes generation 1.
    func flush(_ txn: borrowing Transaction) throws {
        guard !made.isEmpty else { return }
        var target = generation
        if target == 0 {
            // Any keys-N directory now is a leftover of a first key whose log commit never happened.
            try storage.keyStore.removeStale(keeping: 0)
            target = 1
            try txn.put(storage.meta, key: LogSchema.keyGenerationKey, value: LogSchema.key(target))
        }
        try storage.keyStore.add(made.map { ($0.key, $0.value) }, generation: target, creating: generation == 0)
    }
}

/// A failure among a batch's writes that must abort the whole write transaction (a
/// `LedgerError` there fails only its batch, whose earlier writes would then be committed with
/// the group's other batches).
struct AbortTransaction: Error {
    let error: LedgerError
}

extension LogStorage {
    /// The key store's current generation (0: no subject has a key yet).
    func keyGeneration(_ txn: borrowing Transaction) throws -> UInt64 {
        try txn.get(meta, key: LogSchema.keyGenerationKey).flatMap(LogSchema.integer) ?? 0
    }

    /// The first position whose personal fields are sealed (`UInt64.max`: none are, a store of
    /// an older layout opened read-only).
    func sealedFrom(_ txn: borrowing Transaction) throws -> UInt64 {
        try txn.get(meta, key: LogSchema.sealedFromKey).flatMap(LogSchema.integer) ?? .max
    }

    /// The subject's latest `account.deleted` (by occurredAt), if it has one.
    func deletion(of subject: String, _ txn: borrowing Transaction) throws -> (occurredAt: Timestamp, position: UInt64)? {
        guard let erasedSubjects, let value = try txn.get(erasedSubjects, key: Array(subject.utf8)), value.count == 16,
              let at = LogSchema.integer(UnsafeRawBufferPointer(rebasing: value[0 ..< 8])),
              let position = LogSchema.integer(UnsafeRawBufferPointer(rebasing: value[8 ..< 16])) else { return nil }
        return (Timestamp(milliseconds: Int64(bitPattern: at)), position)
    }

    /// When the key `id` was destroyed: the position of its `account.deleted` and the subject.
    func erasure(of id: [UInt8], _ txn: borrowing Transaction) throws -> (position: UInt64, subject: String)? {
        guard let erased, let value = try txn.get(erased, key: id), value.count >= 8,
              let position = LogSchema.integer(UnsafeRawBufferPointer(rebasing: value[0 ..< 8])) else { return nil }
        return (position, String(decoding: value[8...], as: UTF8.self))
    }

    /// `event` with its personal fields opened — the plaintext, or `PersonalData.erased` for a
    /// field whose key was destroyed — read in `txn`, the transaction it was read in.
    /// `matching`: for the writer's duplicate check, an erased field takes that draft's value.
    /// - Throws: `LedgerError.corruptRecord` for a field that is not sealed, whose key is
    ///   missing, or whose ciphertext does not verify.
    func reveal(_ event: StoredEvent, _ txn: borrowing Transaction, session: SealingSession? = nil, matching incoming: EventDraft? = nil) throws(LedgerError) -> StoredEvent {
        guard PersonalData.holdsPersonalData(event.draft) else { return event }
        do {
            guard event.position >= (try sealedFrom(txn)) else { return event }
            let incomingValues = incoming.map { Dictionary(PersonalData.values(of: $0).map { ($0.0.pointer, $0.1) }, uniquingKeysWith: { a, _ in a }) }
            var keys = KeyCache()
            var revealed = event
            revealed.draft = try PersonalData.map(event.draft) { (location: PersonalData.Location, value: String) throws -> String in
                guard let sealed = SealedField(value) else {
                    throw LedgerError(.corruptRecord, "\(location) of the event at position \(event.position) is stored in the clear, not sealed; run `ledger verify`",
                                      subject: event.subject, position: event.position)
                }
                let opened = try open(sealed, of: event.subject, at: location.pointer, where: "of the event at position \(event.position)", txn, session: session, keys: &keys)
                return opened ?? incomingValues?[location.pointer] ?? PersonalData.erased
            }
            return revealed
        } catch {
            throw LedgerError.storage(error, doing: "opening the personal fields at position \(event.position)")
        }
    }

    /// A subject's keys, read from the key store once per event.
    struct KeyCache {
        var keys: [KeyStore.Key]?
    }

    /// The plaintext of a sealed field of `subject` at `pointer`; `nil` when its key was destroyed.
    /// - Throws: `LedgerError.corruptRecord` when its key is missing or its ciphertext does not verify.
    func open(_ sealed: SealedField, of subject: String, at pointer: String, where place: @autoclosure () -> String, _ txn: borrowing Transaction,
              session: SealingSession? = nil, keys: inout KeyCache) throws -> String? {
        if try erasure(of: sealed.keyID, txn) != nil { return nil }
        let generation = try keyGeneration(txn)
        if keys.keys == nil { keys.keys = try keyStore.keys(of: subject, generation: generation) + (session?.madeKey(of: subject).map { [$0] } ?? []) }
        var key = keys.keys?.first { $0.id == sealed.keyID }
        if key == nil {
            // Read from a snapshot older than a compaction that has since replaced its
            // generation: the latest one holds every key not destroyed.
            let now = try read("reading the key generation") { latest in (try keyGeneration(latest), try erasure(of: sealed.keyID, latest) != nil) }
            if now.1 { return nil }
            key = try keyStore.keys(of: subject, generation: now.0).first { $0.id == sealed.keyID }
        }
        guard let key else {
            throw LedgerError(.corruptRecord, "the key of \(pointer) \(place()) is missing from the key store (\(KeyStore.directoryName(generation))); run `ledger verify`",
                              subject: subject)
        }
        guard let plain = sealed.open(key: key, subject: subject, pointer: pointer) else {
            throw LedgerError(.corruptRecord, "\(pointer) \(place()) does not open under its subject's key: its ciphertext was altered (the AES-GCM tag does not verify); "
                              + "run `ledger verify`, and restore the store from an export or a backup", subject: subject)
        }
        return plain
    }

    /// Completes the destruction of the keys a committed `account.deleted` marked: writes the
    /// next key store generation without them (synced), switches `meta` to it in one commit,
    /// then removes the replaced directory. Run after such a commit and when a store opens
    /// for writing; each step under the writers' lock, so a crash at any point leaves either
    /// the old generation in force (and the work still queued) or the new one.
    func shred() throws {
        guard let shredding else { return }
        try env.write { txn in
            var dropped = Set<[UInt8]>()
            try txn.withCursor(shredding) { cursor in
                var entry = try cursor.first()
                while let e = entry {
                    dropped.insert(Array(e.key))
                    entry = try cursor.next()
                }
            }
            guard !dropped.isEmpty else { return }
            let current = try keyGeneration(txn)
            try keyStore.compact(from: current, to: current + 1, dropping: dropped)
            try txn.put(meta, key: LogSchema.keyGenerationKey, value: LogSchema.key(current + 1))
            try txn.removeAll(shredding)
        }
        // The switch on disk before the old generation goes (a `.noSync` log syncs it here).
        try env.sync(force: true)
        try removeReplacedKeys()
    }

    /// Removes key store directories of other generations than the current one (replaced,
    /// or left by a commit that never happened), under the writers' lock.
    func removeReplacedKeys() throws {
        try env.write { txn in try keyStore.removeStale(keeping: try keyGeneration(txn)) }
    }

    /// Whether keys destroyed by a committed `account.deleted` wait for the key store's rewrite.
    func shreddingPending(_ txn: borrowing Transaction) throws -> Bool {
        guard let shredding else { return false }
        return try txn.withCursor(shredding) { cursor in try cursor.first() != nil }
    }

    /// Whether `shred` or `removeReplacedKeys` has work: what opening a store for writing checks.
    func keysNeedCare() throws -> Bool {
        guard shredding != nil else { return false }
        return try env.read { txn in
            let generation = try keyGeneration(txn)
            return try shreddingPending(txn) || keyStore.generationsOnDisk().contains { $0 != generation }
        }
    }
}

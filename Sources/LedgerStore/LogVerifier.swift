import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// What `EventLog.verify()` found.
public struct VerifyReport: Sendable, Hashable {
    /// Events whose position, record, hash and index entries were checked.
    public let eventsChecked: UInt64
    /// The first problem found, `nil` when the log is sound.
    public let problem: VerifyProblem?

    /// The personal data found on the way (with no problem: every sealed field opens or is erased).
    public var personal: PersonalDataCheck

    /// Whether the log is sound.
    public var isValid: Bool { problem == nil }

    public init(eventsChecked: UInt64, problem: VerifyProblem?, personal: PersonalDataCheck = PersonalDataCheck()) {
        self.eventsChecked = eventsChecked
        self.problem = problem
        self.personal = personal
    }
}

/// What `verify` found of personal data: for an auditor, proof that erased subjects' keys are gone.
public struct PersonalDataCheck: Sendable, Hashable {
    /// Personal fields that opened under their subject's key (their AES-GCM tag verified).
    public var opened: UInt64 = 0
    /// Personal fields whose key was destroyed: they read as `"[Deleted User]"`.
    public var erased: UInt64 = 0
    /// Personal fields stored before the store sealed them (a store upgraded from layout 5):
    /// erasing their subject cannot reach them; restoring an export into a new store seals them.
    public var inTheClear: UInt64 = 0
    /// Subjects with a destroyed key, in byte order; every one of those keys was checked absent
    /// from the key store, whose only generation on disk is the current one.
    public var erasedSubjects: [String] = []
    /// How many keys were destroyed.
    public var keysDestroyed: UInt64 = 0

    public init() {}
}

/// The first thing wrong with a log.
public struct VerifyProblem: Sendable, Hashable, CustomStringConvertible {
    /// Which check failed.
    public enum Kind: String, Sendable, Hashable {
        /// A position is missing, or a key is not a position.
        case positionGap
        /// A record cannot be decoded.
        case badRecord
        /// A record's hash does not match its predecessor's hash and its bytes.
        case hashMismatch
        /// The id index lacks an event, points it elsewhere, or has extra entries.
        case idIndex
        /// The (subject, version) index lacks an event, points it elsewhere, or has extra entries.
        case streamIndex
        /// A subject's versions are not 1, 2, 3… in position order.
        case versionGap
        /// The stored subject count disagrees with the streams.
        case subjectCount
        /// A page of the file is not what the B-tree above it says: liblmdb would fault on it.
        case damagedPage
        /// A personal field is not sealed, its key is missing, or its ciphertext does not verify.
        case personalData
        /// A destroyed key is still in the key store, or a replaced generation is still on disk.
        case keyNotDestroyed
    }

    /// Which check failed.
    public let kind: Kind
    /// The first bad position, when the problem has one.
    public let position: UInt64?
    /// What is wrong.
    public let message: String

    public init(kind: Kind, position: UInt64?, message: String) {
        self.kind = kind
        self.position = position
        self.message = message
    }

    public var description: String {
        if let position { return "position \(position): \(kind.rawValue): \(message)" }
        return "\(kind.rawValue): \(message)"
    }
}

extension VerifyProblem {
    /// A damaged page, as a problem of the log.
    init(_ damage: PageDamage) {
        self.init(kind: .damagedPage, position: nil,
                  message: "\(damage); the store is damaged: stop writing to it, keep a copy, and restore it from an export or a backup")
    }
}

extension EventLog {
    /// Checks the pages of the store at `path` (see `Environment.checkPages`) before anything
    /// opens it through liblmdb: what `verify` and `export` run first. The store must not be
    /// open in this process.
    /// - Returns: the problem, `nil` when every page is sound.
    public static func checkPages(path: String) throws(LedgerError) -> VerifyProblem? {
        var config = Environment.Configuration()
        config.flags = [.readOnly]
        do {
            let env = try Environment(path: path, configuration: config)
            if let damage = try env.checkPages().damage { return VerifyProblem(damage) }
        } catch {
            throw LedgerError.storage(error, doing: "checking the pages of the store at \(path)")
        }
        // The key store's pages too: verify and export read every key they need through liblmdb.
        for generation in KeyStore(root: path, writable: false).generationsOnDisk() {
            let keys = path + "/" + KeyStore.directoryName(generation)
            guard FileManager.default.fileExists(atPath: keys + "/data.mdb") else { continue }
            do {
                let env = try Environment(path: keys, configuration: config)
                if let damage = try env.checkPages().damage {
                    return VerifyProblem(kind: .damagedPage, position: nil,
                                         message: "\(KeyStore.directoryName(generation))/\(damage); the key store is damaged: stop writing to the store, keep a copy, and restore it from a backup")
                }
            } catch {
                throw LedgerError.storage(error, doing: "checking the pages of the key store at \(keys)")
            }
        }
        return nil
    }

    /// Checks every page of the file (`Environment.checkPages`), then walks the log and checks
    /// positions (gap-free from 1), every record's encoding and hash chain, both indexes in both
    /// directions, subject versions and the subjects table.
    ///
    /// Reads in chunks of short transactions, so it can run beside appends; events appended
    /// while it runs are checked if it reaches them. Stops at the first problem.
    /// - Parameters:
    ///   - chunkSize: events read per read transaction.
    ///   - checkingPages: walk the pages first (the caller has just done so when `false`, with
    ///     `checkPages(path:)`).
    ///   - progress: called after each chunk with the events checked so far.
    /// - Throws: `LedgerError.storage` if the store cannot be read at all.
    public func verify(chunkSize: Int = 4096, checkingPages: Bool = true, progress: ((UInt64) -> Void)? = nil) throws(LedgerError) -> VerifyReport {
        // The pages first: the walks below go through liblmdb, which trusts them.
        do {
            if checkingPages, let damage = try storage.env.checkPages().damage { return VerifyReport(eventsChecked: 0, problem: VerifyProblem(damage)) }
            let generation = try storage.read("reading the key generation") { txn in try storage.keyGeneration(txn) }
            if checkingPages, let keys = try storage.keyStore.open(generation), let damage = try keys.env.checkPages().damage {
                return VerifyReport(eventsChecked: 0, problem: VerifyProblem(kind: .damagedPage, position: nil,
                                                                             message: "\(KeyStore.directoryName(generation))/\(damage); the key store is damaged: stop writing to the store, keep a copy, and restore it from a backup"))
            }
        } catch {
            throw LedgerError.storage(error, doing: "checking the store's pages")
        }
        var state = VerifyState()
        while true {
            let (count, problem) = try storage.readIndexed("verifying") { txn, tail in try state.checkChunk(storage, txn, tail: tail, limit: chunkSize) }
            if let problem { return VerifyReport(eventsChecked: state.checked, problem: problem) }
            progress?(state.checked)
            if count < chunkSize { break }
        }
        var problem = try storage.read("verifying the indexes") { txn in try state.checkTotals(storage, txn) }
        if problem == nil { problem = try storage.read("verifying the destroyed keys") { txn in try state.checkErasures(storage, txn) } }
        return VerifyReport(eventsChecked: state.checked, problem: problem, personal: state.personal)
    }
}

private struct VerifyState {
    var checked: UInt64 = 0
    var previousHash = LogStorage.genesisHash
    /// Subjects met (events with version 1): nothing is kept per subject, so a walk over any
    /// number of them takes the same memory.
    var subjects: UInt64 = 0
    var personal = PersonalDataCheck()
    var sealedFrom: UInt64?

    mutating func checkChunk(_ s: LogStorage, _ txn: borrowing Transaction, tail: IndexTail, limit: Int) throws -> (Int, VerifyProblem?) {
        let start = checked + 1
        return try txn.withCursor(s.events) { c in
            var count = 0
            var entry = try c.seek(atLeast: LogSchema.key(start))
            while let e = entry, count < limit {
                let expected = checked + 1
                guard let position = LogSchema.integer(e.key) else {
                    return (count, VerifyProblem(kind: .positionGap, position: expected, message: "a key of \(e.key.count) bytes is not a position"))
                }
                guard position == expected else {
                    return (count, VerifyProblem(kind: .positionGap, position: expected, message: "position \(expected) is missing; the next stored is \(position)"))
                }
                if let problem = try check(record: e.value, at: position, s, txn, tail: tail) { return (count, problem) }
                checked = position
                count += 1
                entry = try c.next()
            }
            return (count, nil)
        }
    }

    private mutating func check(record: UnsafeRawBufferPointer, at position: UInt64, _ s: LogStorage,
                                _ txn: borrowing Transaction, tail: IndexTail) throws -> VerifyProblem? {
        let event: StoredEvent
        do {
            event = try EventRecord.decode(record, position: position)
        } catch {
            return VerifyProblem(kind: .badRecord, position: position, message: error.message)
        }
        guard let hashed = EventRecord.hashedBytes(ofRecord: record) else {
            return VerifyProblem(kind: .badRecord, position: position, message: "record too short")
        }
        let hash = LogStorage.chainHash(after: previousHash, hashed)
        guard hash == event.hash else {
            return VerifyProblem(kind: .hashMismatch, position: position,
                                 message: "the stored hash does not match the record's bytes and its predecessor's hash: the record or an earlier one was altered")
        }
        previousHash = hash

        guard try s.idIndexHolds(event.id, at: position, txn, tail: tail) else {
            return VerifyProblem(kind: .idIndex, position: position, message: "event \(event.id) is missing from the id index")
        }

        // The version before this one is in the stream index at an earlier position (and the
        // walk checked that event there): by induction a subject's versions run 1, 2, 3… in
        // position order, with nothing kept per subject.
        guard event.version >= 1 else {
            return VerifyProblem(kind: .versionGap, position: position, message: "\(event.subject) has version 0 here; versions start at 1")
        }
        if event.version == 1 { subjects += 1 }
        let streamed: [(version: UInt64, position: UInt64)]
        do {
            streamed = try s.streamPositions(of: event.subject, from: max(event.version - 1, 1), limit: event.version == 1 ? 1 : 2, txn, tail: tail)
        } catch let error as LedgerError {
            return VerifyProblem(kind: .streamIndex, position: position, message: "the stream index of \(event.subject): \(error.message)")
        }
        if event.version > 1 {
            guard let before = streamed.first, before.version == event.version - 1, before.position < position else {
                return VerifyProblem(kind: .versionGap, position: position,
                                     message: "\(event.subject) has version \(event.version) here; no earlier event has version \(event.version - 1)")
            }
        }
        guard let entry = streamed.last, entry.version == event.version else {
            return VerifyProblem(kind: .streamIndex, position: position, message: "(\(event.subject), \(event.version)) is missing from the stream index")
        }
        guard entry.position == position else {
            return VerifyProblem(kind: .streamIndex, position: position,
                                 message: "the stream index points (\(event.subject), \(event.version)) at \(entry.position)")
        }
        return try checkPersonalData(event, s, txn)
    }

    /// Each personal field of `event` is sealed (from the position sealing began), and opens
    /// under its key or names a destroyed one.
    private mutating func checkPersonalData(_ event: StoredEvent, _ s: LogStorage, _ txn: borrowing Transaction) throws -> VerifyProblem? {
        guard PersonalData.holdsPersonalData(event.draft) else { return nil }
        if sealedFrom == nil { sealedFrom = try s.sealedFrom(txn) }
        let fields = PersonalData.values(of: event.draft)
        guard event.position >= sealedFrom ?? .max else {
            personal.inTheClear += UInt64(fields.count)
            return nil
        }
        do {
            let opened = try s.reveal(event, txn)
            for ((_, stored), (_, read)) in zip(fields, PersonalData.values(of: opened.draft)) {
                if read == PersonalData.erased, let sealed = SealedField(stored), try s.erasure(of: sealed.keyID, txn) != nil {
                    personal.erased += 1
                } else {
                    personal.opened += 1
                }
            }
        } catch {
            return VerifyProblem(kind: .personalData, position: event.position, message: LedgerError.storage(error, doing: "opening its personal fields").message)
        }
        return nil
    }

    /// Every destroyed key is absent from the key store, no compaction is pending, and the
    /// current generation is the only one on disk.
    mutating func checkErasures(_ s: LogStorage, _ txn: borrowing Transaction) throws -> VerifyProblem? {
        guard let erased = s.erased else { return nil }
        let generation = try s.keyGeneration(txn)
        var subjects = Set<String>()
        var problem: VerifyProblem?
        try txn.withCursor(erased) { cursor in
            var entry = try cursor.first()
            while let e = entry, problem == nil {
                let id = Array(e.key), subject = String(decoding: e.value.dropFirst(8), as: UTF8.self)
                subjects.insert(subject)
                personal.keysDestroyed += 1
                if try s.keyStore.keys(of: subject, generation: generation).contains(where: { $0.id == id }) {
                    let pending = try s.shredding.map { try txn.get($0, key: id) != nil } ?? false
                    problem = VerifyProblem(kind: .keyNotDestroyed, position: nil,
                                            message: "a destroyed key of \(subject) is still in the key store (\(KeyStore.directoryName(generation)))"
                                                + (pending ? "; its compaction was cut short: open the store for writing (any command that appends) to finish it" : ""))
                }
                entry = try cursor.next()
            }
        }
        personal.erasedSubjects = subjects.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        if let problem { return problem }
        if let stale = s.keyStore.generationsOnDisk().first(where: { $0 != generation }) {
            return VerifyProblem(kind: .keyNotDestroyed, position: nil,
                                 message: "\(KeyStore.directoryName(stale)) is still on disk beside the current \(KeyStore.directoryName(generation)); it may hold destroyed keys: open the store for writing (any command that appends) to remove it")
        }
        return nil
    }

    /// In one snapshot: each stored index holds exactly one entry per event through the
    /// position it is complete through (the later ones are in the index tail, which the walk
    /// checked), and the subjects table matches the streams. Entries beyond the checked head
    /// (appended since) are allowed.
    mutating func checkTotals(_ s: LogStorage, _ txn: borrowing Transaction) throws -> VerifyProblem? {
        let head = try s.head(txn).position
        let indexed = try s.indexedThrough(txn, head: head)
        let ids = UInt64(try txn.count(s.ids))
        if ids != indexed {
            return try findStrayID(s, txn, head: indexed)
                ?? VerifyProblem(kind: .idIndex, position: nil, message: "the id index has \(ids) entries for the \(indexed) events it should hold")
        }
        if let problem = try checkStreamTotal(s, txn, head: indexed, events: indexed) { return problem }
        // The subject count can be compared only when nothing was appended since the walk.
        guard head == checked else { return nil }
        let stored = try s.subjectCount(txn)
        if stored != subjects {
            return VerifyProblem(kind: .subjectCount, position: nil,
                                 message: "the store counts \(stored) subjects; the log holds \(subjects)")
        }
        return nil
    }

    /// The stream index's chunks hold one position per event; when they hold more, the one
    /// that points nowhere or at another event is named.
    private func checkStreamTotal(_ s: LogStorage, _ txn: borrowing Transaction, head: UInt64, events: UInt64) throws -> VerifyProblem? {
        var streamed: UInt64 = 0
        let damaged = try txn.withCursor(s.streams) { c in
            var entry = try c.first()
            while let e = entry {
                guard let (_, chunk) = StreamChunk.parse(key: e.key, value: e.value) else { return true }
                streamed += UInt64(chunk.positions.count)
                entry = try c.next()
            }
            return false
        }
        if damaged { return VerifyProblem(kind: .streamIndex, position: nil, message: "an entry of the stream index is not a run of positions") }
        guard streamed != events else { return nil }
        return try txn.withCursor(s.streams) { c in
            var entry = try c.first()
            while let e = entry, let (prefix, chunk) = StreamChunk.parse(key: e.key, value: e.value) {
                for (offset, position) in chunk.positions.enumerated() {
                    let event = try txn.get(s.events, key: LogSchema.key(position)).flatMap { try? EventRecord.decode($0, position: position) }
                    let pointsRight = position <= head && event.map { LogSchema.streamPrefix($0.subject) == prefix && $0.version == chunk.first + UInt64(offset) } == true
                    if !pointsRight {
                        return VerifyProblem(kind: .streamIndex, position: position, message: "an index entry points at position \(position), which does not hold that event")
                    }
                }
                entry = try c.next()
            }
            return nil
        } ?? VerifyProblem(kind: .streamIndex, position: nil, message: "the stream index holds \(streamed) positions for \(events) events")
    }

    /// Walks the id index for an entry that points nowhere or at an event with another id.
    private func findStrayID(_ s: LogStorage, _ txn: borrowing Transaction, head: UInt64) throws -> VerifyProblem? {
        try txn.withCursor(s.ids) { c in
            var entry = try c.first()
            while let e = entry {
                guard let position = IDIndex.position(ofEntry: e.value) else {
                    return VerifyProblem(kind: .idIndex, position: nil, message: "an id index entry holds \(e.value.count) bytes, not a hash and a position")
                }
                let id = try txn.get(s.events, key: LogSchema.key(position)).flatMap(EventRecord.id(ofRecord:))
                let pointsRight = position > 0 && position <= head && id.map { IDIndex.hash(ofEntry: e.value) == IDIndex.hash($0) } == true
                if !pointsRight {
                    return VerifyProblem(kind: .idIndex, position: position, message: "an id index entry points at position \(position), which does not hold that event")
                }
                entry = try c.next()
            }
            return nil
        }
    }
}

import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) @testable import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// Personal fields sealed under per-subject keys, and erased by destroying the key (SPEC §2.3).
@Suite struct PersonalDataTests {
    static let at = Timestamp(milliseconds: 1_780_000_000_000)

    static func note(_ subject: String, _ text: String, id: EventID = .random(), agent: String = "agent-7", meta: [String: String] = [:]) -> EventDraft {
        var note = SupportNoteAdded()
        note.text = text
        note.agent = agent
        return EventDraft(id: id, subject: subject, type: SupportNoteAdded.type, occurredAt: at, source: .support, meta: meta,
                          payload: EventCatalog.encode(note.eventData))
    }

    static func deleted(_ subject: String) -> EventDraft {
        EventDraft(subject: subject, type: AccountDeleted.type, occurredAt: at.adding(seconds: 60), source: .support,
                   payload: EventCatalog.encode(AccountDeleted().eventData))
    }

    static func purchase(_ subject: String) -> EventDraft {
        var p = SubscriptionPurchased()
        p.productId = "pro.monthly"
        p.transactionId = "t-\(subject)"
        p.originalTransactionId = "t-\(subject)"
        p.purchasedAt = at
        p.expiresAt = at.adding(seconds: 30 * 86_400)
        p.price = "9.99"
        p.currency = "EUR"
        return EventDraft(subject: subject, type: SubscriptionPurchased.type, occurredAt: at, source: .appstore, payload: EventCatalog.encode(p.eventData))
    }

    static func export(_ subject: String, _ location: String) -> EventDraft {
        var e = AccountExportCompleted()
        e.location = location
        return EventDraft(subject: subject, type: AccountExportCompleted.type, occurredAt: at, source: .system, payload: EventCatalog.encode(e.eventData))
    }

    static func request(_ subject: String, _ reason: String) -> EventDraft {
        var r = AccountDeletionRequested()
        r.reason = reason
        return EventDraft(subject: subject, type: AccountDeletionRequested.type, occurredAt: at, source: .app, payload: EventCatalog.encode(r.eventData))
    }

    /// The JSON `data` of an event as read.
    static func data(_ event: StoredEvent?) -> JSONObject {
        guard let event, let layout = EventCatalog.layout(of: event.type, version: event.schemaVersion),
              let value = layout.decode(binary: event.payload) else { return JSONObject() }
        return layout.json(value)
    }

    /// Whether any file under the store's directory, at any depth, holds `needle`.
    static func storeHolds(_ needle: [UInt8], in path: String) -> Bool {
        let files = FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? []
        for file in files {
            guard let bytes = FileManager.default.contents(atPath: path + "/" + file) else { continue }
            if bytes.range(of: Data(needle)) != nil { return true }
        }
        return false
    }

    static func keys(_ log: EventLog, _ subject: String) throws -> [KeyStore.Key] {
        let generation = try log.storage.read("") { txn in try log.storage.keyGeneration(txn) }
        return try log.storage.keyStore.keys(of: subject, generation: generation)
    }

    @Test func personalFieldsAreStoredSealedAndReadOpened() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            let note = Self.note("u-1", "Customer called about a double charge.", meta: ["email": "ann@example.com", "name": "Ann Example", "device": "d-1"])
            try log.append([note, Self.export("u-1", "s3://exports/u-1.zip"), Self.request("u-1", "I no longer use the app")])
            for plain in ["Customer called about a double charge.", "ann@example.com", "Ann Example", "s3://exports/u-1.zip", "I no longer use the app"] {
                #expect(!Self.storeHolds(Array(plain.utf8), in: path), "\(plain) is in a file of the store")
            }
            let read = try #require(try log.event(id: note.id))
            #expect(Self.data(read)["text"] == .string("Customer called about a double charge."))
            #expect(read.meta == ["email": "ann@example.com", "name": "Ann Example", "device": "d-1"])
            let stored = try #require(try log.event(id: note.id, revealing: false))
            guard case .string(let sealed)? = Self.data(stored)["text"] else { Issue.record("no text"); return }
            #expect(sealed.hasPrefix("sealed.1."))
            #expect(stored.meta["device"] == "d-1" && stored.meta["email"]?.hasPrefix("sealed.1.") == true)
            let all = try log.events(subject: "u-1").collect()
            #expect(Self.data(all[1])["location"] == .string("s3://exports/u-1.zip"))
            #expect(Self.data(all[2])["reason"] == .string("I no longer use the app"))
            // One key for the subject's every field.
            #expect(try Self.keys(log, "u-1").count == 1)
            let report = try log.verify()
            #expect(report.isValid)
            #expect(report.personal.opened == 5 && report.personal.erased == 0 && report.personal.erasedSubjects.isEmpty)
        }
    }

    @Test func eachFieldHasItsOwnNonce() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            let a = Self.note("u-1", "same words"), b = Self.note("u-1", "same words")
            try log.append([a, b])
            let first = Self.data(try log.event(id: a.id, revealing: false))["text"], second = Self.data(try log.event(id: b.id, revealing: false))["text"]
            #expect(first != nil && first != second)
        }
    }

    @Test func accountDeletedDestroysTheKeyBeforeTheAppendReturns() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            let note = Self.note("u-1", "Customer called about a double charge.", meta: ["email": "ann@example.com"])
            let purchase = Self.purchase("u-1")
            try log.append([note, purchase, Self.note("u-2", "another customer's note")])
            let key = try #require(try Self.keys(log, "u-1").first)
            #expect(Self.storeHolds(key.bytes, in: path))

            try log.append([Self.deleted("u-1")])

            #expect(!Self.storeHolds(key.bytes, in: path), "the destroyed key is still in a file of the store")
            #expect(!Self.storeHolds(Array("Customer called about a double charge.".utf8), in: path))
            #expect(!Self.storeHolds(Array("ann@example.com".utf8), in: path))
            #expect(try Self.keys(log, "u-1").isEmpty)
            let read = try #require(try log.event(id: note.id))
            #expect(Self.data(read)["text"] == .string("[Deleted User]"))
            #expect(read.meta["email"] == "[Deleted User]")
            // Financial facts stay for audit, and other subjects keep their data.
            #expect(try log.event(id: purchase.id)?.payload == purchase.payload)
            #expect(Self.data(try log.events(subject: "u-2").collect().first)["text"] == .string("another customer's note"))
            // The key store was written afresh: only the new generation is on disk.
            #expect(log.storage.keyStore.generationsOnDisk() == [2])
            let report = try log.verify()
            #expect(report.problem == nil)
            #expect(report.personal.erasedSubjects == ["u-1"])
            #expect(report.personal.keysDestroyed == 1 && report.personal.erased == 2 && report.personal.opened == 1)
        }
    }

    @Test func aCustomerWhoReturnsGetsANewKey() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            let before = Self.note("u-1", "first life")
            try log.append([before])
            let old = try #require(try Self.keys(log, "u-1").first)
            try log.append([Self.deleted("u-1")])
            var after = Self.note("u-1", "second life")
            after.occurredAt = Self.at.adding(seconds: 3600)
            try log.append([after])
            let new = try #require(try Self.keys(log, "u-1").first)
            #expect(new.id != old.id)
            #expect(Self.data(try log.event(id: before.id))["text"] == .string("[Deleted User]"))
            #expect(Self.data(try log.event(id: after.id))["text"] == .string("second life"))
            #expect(try log.liveKeys(of: "u-1") == 1 && log.verify().personal.keysDestroyed == 1)
        }
    }

    /// A fact that occurred before the account was deleted but arrives after the deletion
    /// belongs to the erased account: it reads "[Deleted User]" from the start, and makes no
    /// key. One that occurred after it is a customer who returns.
    @Test func aLateFactOfAnErasedAccountIsErasedAsItArrives() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            try log.append([Self.note("u-1", "first"), Self.deleted("u-1")])
            var late = Self.request("u-1", "recorded late: I no longer use the app")
            late.occurredAt = Self.at.adding(seconds: 30)        // before the deletion, a minute after `at`
            var atTheDeletion = Self.note("u-1", "at the very moment")
            atTheDeletion.occurredAt = Self.at.adding(seconds: 60)
            var returned = Self.note("u-1", "back again")
            returned.occurredAt = Self.at.adding(seconds: 61)
            try log.append([late, atTheDeletion])
            #expect(try Self.keys(log, "u-1").isEmpty)
            try log.append([returned])
            let texts = try log.events(subject: "u-1").collect().map { Self.data($0)["text"] ?? Self.data($0)["reason"] }
            #expect(texts == [.string("[Deleted User]"), nil, .string("[Deleted User]"), .string("[Deleted User]"), .string("back again")])
            #expect(!Self.storeHolds(Array("recorded late".utf8), in: path))
            #expect(try log.liveKeys(of: "u-1") == 1)
            #expect(try log.verify().problem == nil)
        }
    }

    @Test func aKeyMadeAndDestroyedInOneBatchIsNeverStored() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            let note = Self.note("u-1", "gone at once")
            var back = Self.note("u-1", "back again")
            back.occurredAt = Self.at.adding(seconds: 3600)
            try log.append([note, Self.deleted("u-1"), back])
            #expect(Self.data(try log.event(id: note.id))["text"] == .string("[Deleted User]"))
            #expect(Self.data(try log.events(subject: "u-1").collect().last)["text"] == .string("back again"))
            #expect(try Self.keys(log, "u-1").count == 1)
            #expect(log.storage.keyStore.generationsOnDisk() == [1])
            #expect(try log.verify().personal.erasedSubjects == ["u-1"])
        }
    }

    @Test func aRepeatedEventIsADuplicateWhetherItsFieldsAreOpenOrErased() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            defer { log.close() }
            let note = Self.note("u-1", "the words", meta: ["email": "ann@example.com"])
            try log.append([note])
            // Sealed again it would be other bytes; opened, it is the same event.
            #expect(try log.append([note]).duplicates == 1)
            var other = note
            other.payload = Self.note("u-1", "other words").payload
            #expect(throws: LedgerError.self) { try log.append([other]) }

            try log.append([Self.deleted("u-1")])
            // An export shows "[Deleted User]": appended again, it is the stored event.
            var erased = Self.note("u-1", "[Deleted User]", id: note.id, meta: ["email": "[Deleted User]"])
            erased.occurredAt = note.occurredAt
            #expect(try log.append([erased]).duplicates == 1)
            #expect(try log.append([note]).duplicates == 1)
            // What is not personal is still compared.
            var otherAgent = erased
            otherAgent.payload = Self.note("u-1", "[Deleted User]", agent: "agent-9").payload
            do throws(LedgerError) {
                try log.append([otherAgent])
                Issue.record("another agent was taken for a duplicate")
            } catch {
                #expect(error.code == .idConflict)
            }
        }
    }

    @Test func aTamperedCiphertextIsCaughtByVerifyAndByARead() throws {
        try withStorePath { path in
            let note = Self.note("u-1", "a note long enough to hold some ciphertext")
            var log: EventLog? = try EventLog(path: path)
            try log?.append([Self.purchase("u-1"), note])
            log?.close()
            log = nil

            // Flip one base64 digit of the ciphertext at position 2, keeping the stored hash.
            let env = try Environment(path: path)
            let events = try env.openDatabase(LogSchema.events, flags: [])
            func rewrite(rehash: Bool) throws {
                try env.write { txn in
                    guard let record = try txn.get(events, key: LogSchema.key(2)), let before = try txn.get(events, key: LogSchema.key(1)),
                          let previous = EventRecord.hash(ofRecord: before) else { throw LedgerError(.storage, "no record") }
                    var bytes = Array(record)
                    if !rehash {
                        let marker = Array("sealed.1.".utf8)
                        guard let start = (0...(bytes.count - marker.count)).first(where: { Array(bytes[$0 ..< $0 + marker.count]) == marker }) else {
                            throw LedgerError(.storage, "no sealed field")
                        }
                        let at = start + marker.count + 48
                        bytes[at] = bytes[at] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
                    }
                    let hashed = bytes.count - EventRecord.hashSize
                    let hash = bytes[..<hashed].withUnsafeBytes { LogStorage.chainHash(after: Array(previous), $0) }
                    if rehash { bytes.replaceSubrange(hashed..., with: hash) }
                    try txn.put(events, key: LogSchema.key(2), value: bytes)
                }
            }
            try rewrite(rehash: false)
            _ = consume env
            var report = try EventLog(path: path).verify()
            #expect(report.problem?.kind == .hashMismatch && report.problem?.position == 2)

            // Someone who also rewrote the chain is caught by the AES-GCM tag.
            let again = try Environment(path: path)
            let db = try again.openDatabase(LogSchema.events, flags: [])
            try again.write { txn in
                guard let record = try txn.get(db, key: LogSchema.key(2)), let before = try txn.get(db, key: LogSchema.key(1)),
                      let previous = EventRecord.hash(ofRecord: before) else { return }
                var bytes = Array(record)
                let hashed = bytes.count - EventRecord.hashSize
                let hash = bytes[..<hashed].withUnsafeBytes { LogStorage.chainHash(after: Array(previous), $0) }
                bytes.replaceSubrange(hashed..., with: hash)
                try txn.put(db, key: LogSchema.key(2), value: bytes)
            }
            _ = consume again
            var readOnly = EventLog.Options()
            readOnly.readOnly = true
            let reopened = try EventLog(path: path, options: readOnly)
            report = try reopened.verify()
            #expect(report.problem?.kind == .personalData && report.problem?.position == 2)
            #expect(report.problem?.message.contains("AES-GCM tag does not verify") == true)
            do throws(LedgerError) {
                _ = try reopened.event(id: note.id)
                Issue.record("an altered ciphertext was read")
            } catch {
                #expect(error.code == .corruptRecord)
                #expect(error.message.contains("/data/text of the event at position 2 does not open under its subject's key"))
            }
        }
    }

    @Test func openingTheStoreFinishesAnErasureACrashCutShort() throws {
        try withStorePath { path in
            var log: EventLog? = try EventLog(path: path)
            try log?.append([Self.note("u-1", "to be forgotten"), Self.note("u-2", "to be kept")])
            let key = try #require(try log.map { try Self.keys($0, "u-1") }?.first)
            log?.close()
            log = nil
            // The state a crash leaves between the commit of account.deleted and the key
            // store's compaction: the key marked destroyed and queued, still in keys-1.
            let env = try Environment(path: path)
            let erased = try env.openDatabase(LogSchema.erased, flags: [])
            let shredding = try env.openDatabase(LogSchema.shredding, flags: [])
            try env.write { txn in
                try txn.put(erased, key: key.id, value: LogSchema.key(3) + Array("u-1".utf8))
                try txn.put(shredding, key: key.id, value: Array("u-1".utf8))
            }
            _ = consume env
            #expect(Self.storeHolds(key.bytes, in: path))
            var readOnly = EventLog.Options()
            readOnly.readOnly = true
            let reader = try EventLog(path: path, options: readOnly)
            // Read, it is erased already; verify says the key is still there.
            #expect(Self.data(try reader.events(subject: "u-1").collect().first)["text"] == .string("[Deleted User]"))
            #expect(try reader.verify().problem?.kind == .keyNotDestroyed)
            _ = consume reader

            let writer = try EventLog(path: path)
            defer { writer.close() }
            #expect(!Self.storeHolds(key.bytes, in: path))
            #expect(writer.storage.keyStore.generationsOnDisk() == [2])
            #expect(Self.data(try writer.events(subject: "u-2").collect().first)["text"] == .string("to be kept"))
            #expect(try writer.verify().problem == nil)
        }
    }

    @Test func aLeftoverKeyStoreGenerationIsRemovedWhenTheStoreOpens() throws {
        try withStorePath { path in
            var log: EventLog? = try EventLog(path: path)
            try log?.append([Self.note("u-1", "kept")])
            log?.close()
            log = nil
            // A compaction cut short before its switch leaves the next generation half made.
            try FileManager.default.createDirectory(atPath: path + "/keys-2", withIntermediateDirectories: false)
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path + "/keys-2/data.mdb"))
            let reopened = try EventLog(path: path)
            defer { reopened.close() }
            #expect(reopened.storage.keyStore.generationsOnDisk() == [1])
            #expect(Self.data(try reopened.events(subject: "u-1").collect().first)["text"] == .string("kept"))
        }
    }
}

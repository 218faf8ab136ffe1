@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// Generated drafts with every field varied, including non-ASCII text and empty meta/payload.
let draftGenerator = zip(
    zip(Gen.uint64(), Gen.uint64(), Gen.character(in: "a"..."ʯ").string(of: 1...40), Gen.lowercaseLetter.string(of: 1...20)),
    zip(Gen.uint16(in: 1...UInt16.max), Gen.int64(in: -1_000_000_000_000 ... 4_000_000_000_000), Gen<EventSource>.case),
    zip(zip(Gen.lowercaseLetter.string(of: 1...8), Gen.character(in: " "..."ʯ").string(of: 0...12)).dictionary(ofAtMost: 0...4),
        Gen.uint8().array(of: 0...300))
).map { (identity: (UInt64, UInt64, String, String), stamp: (UInt16, Int64, EventSource), body: ([String: String], [UInt8])) in
    EventDraft(id: EventID(high: identity.0, low: identity.1), subject: identity.2, type: "t." + identity.3,
               schemaVersion: stamp.0, occurredAt: Timestamp(milliseconds: stamp.1), source: stamp.2,
               meta: body.0, payload: body.1)
}

@Suite struct EventRecordTests {
    @Test func encodingThenDecodingGivesBackEveryField() async {
        await checkProperty(count: 300, input: draftGenerator, Gen.uint64(in: 1...UInt64.max), Gen.int64(in: 0...4_000_000_000_000)) { draft, version, recorded in
            var record = EventRecord.encode(draft, version: version, recordedAt: Timestamp(milliseconds: recorded))
            let hash = (0..<32).map { UInt8($0) }
            record.append(contentsOf: hash)
            let stored = try record.withUnsafeBytes { try EventRecord.decode($0, position: 9) }
            #expect(stored == StoredEvent(position: 9, version: version, recordedAt: Timestamp(milliseconds: recorded), hash: hash, draft: draft))
        }
    }

    @Test func theContentPartOfARecordIsTheDraftsContent() async {
        await checkProperty(count: 100, input: draftGenerator) { draft in
            var record = EventRecord.encode(draft, version: 3, recordedAt: Timestamp(milliseconds: 5))
            record.append(contentsOf: [UInt8](repeating: 0, count: 32))
            let content = record.withUnsafeBytes { EventRecord.content(ofRecord: $0).map { Array($0) } }
            #expect(content == EventRecord.content(of: draft))
        }
    }

    @Test func theIdOfARecordIsReadInPlace() async {
        await checkProperty(count: 100, input: draftGenerator) { draft in
            var record = EventRecord.encode(draft, version: 3, recordedAt: Timestamp(milliseconds: 5))
            record.append(contentsOf: [UInt8](repeating: 0, count: 32))
            #expect(record.withUnsafeBytes(EventRecord.id(ofRecord:)) == draft.id)
            #expect(record.prefix(1 + 16 + EventRecord.trailerSize - 1).withUnsafeBytes(EventRecord.id(ofRecord:)) == nil)
        }
    }

    @Test func stampingARecordSetsItsVersionAndRecordedAtAndNothingElse() async {
        await checkProperty(count: 100, input: draftGenerator, Gen.uint64(in: 1...UInt64.max), Gen.int64(in: 0...4_000_000_000_000)) { draft, version, recorded in
            var record = EventRecord.encode(draft, version: 0, recordedAt: Timestamp(milliseconds: 0))
            EventRecord.stamp(&record, version: version, recordedAt: Timestamp(milliseconds: recorded))
            #expect(record == EventRecord.encode(draft, version: version, recordedAt: Timestamp(milliseconds: recorded)))
            #expect(Array(EventRecord.content(ofUnhashed: record)) == EventRecord.content(of: draft))
        }
    }

    /// A stored usage event with meta, as the log holds it (hash included).
    func usageRecord(schemaVersion: UInt16 = 2, meta: [String: String] = ["actor": "support:ana", "correlationId": "c-7"]) throws -> [UInt8] {
        let payload: [UInt8]
        if schemaVersion == 1 {
            let v1 = try #require(EventCatalog.layout(of: "usage.recorded", version: 1))
            payload = v1.binary(try v1.decode(["feature": "scan"]).get())
        } else {
            var usage = UsageRecorded()
            usage.feature = "scan"
            usage.count = 3
            payload = EventCatalog.encode(usage.eventData)
        }
        let draft = EventDraft(id: EventID(high: 0x0123_4567_89AB_CDEF, low: 42), subject: "customer-éé-1", type: UsageRecorded.type,
                               schemaVersion: schemaVersion, occurredAt: Timestamp(milliseconds: 1_772_357_400_000), source: .appstore,
                               meta: meta, payload: payload)
        var record = EventRecord.encode(draft, version: 7, recordedAt: Timestamp(milliseconds: 1_772_357_401_000))
        record.append(contentsOf: [UInt8](repeating: 0xAB, count: 32))
        return record
    }

    /// The folding decoder gives what the full decoder gives, but for the meta it steps over.
    @Test func decodingForFoldingGivesTheFullDecodeWithoutMeta() throws {
        for schemaVersion: UInt16 in [1, 2] {
            let record = try usageRecord(schemaVersion: schemaVersion)
            let full = try record.withUnsafeBytes { try RecordedEvent(EventRecord.decode($0, position: 11)) }
            var expected = full
            expected.event.meta = [:]
            let folded = try record.withUnsafeBytes { try EventRecord.decodeForFolding($0, position: 11, types: EventRecord.TypeFilter(["usage.recorded"])) }
            #expect(folded == expected)
            #expect(full.event.meta["actor"] == "support:ana")
        }
    }

    /// Types the catalog does not know (any text) are read as text: skipped when not asked
    /// for, a payload that does not decode when asked for.
    @Test func decodingForFoldingReadsAnyTypeName() async {
        await checkProperty(count: 100, input: draftGenerator) { draft in
            var record = EventRecord.encode(draft, version: 2, recordedAt: Timestamp(milliseconds: 5))
            record.append(contentsOf: [UInt8](repeating: 0, count: 32))
            let skipped = try record.withUnsafeBytes { try EventRecord.decodeForFolding($0, position: 3, types: EventRecord.TypeFilter(["usage.recorded"])) }
            #expect(skipped == nil)
            #expect {
                try record.withUnsafeBytes { try EventRecord.decodeForFolding($0, position: 3, types: EventRecord.TypeFilter([draft.type])) }
            } throws: { error in
                (error as? LedgerError)?.message.hasPrefix("the payload at position 3 does not decode as \(draft.type) version") == true
            }
        }
    }

    @Test func decodingForFoldingSkipsOtherTypes() throws {
        let record = try usageRecord()
        #expect(try record.withUnsafeBytes { try EventRecord.decodeForFolding($0, position: 11, types: EventRecord.TypeFilter(["session.started"])) } == nil)
    }

    @Test func decodingForFoldingReportsEveryTruncatedRecordDamagedNeverCrashes() throws {
        let record = try usageRecord()
        for length in 0..<record.count {
            let prefix = Array(record[..<length])
            #expect(throws: LedgerError.self) { try prefix.withUnsafeBytes { try EventRecord.decodeForFolding($0, position: 4, types: EventRecord.TypeFilter(["usage.recorded"])) } }
        }
    }

    @Test func everyTruncatedRecordIsReportedDamagedNeverCrashes() throws {
        let draft = EventDraft(id: EventID(high: 1, low: 2), subject: "user-42", type: "account.created",
                               occurredAt: Timestamp(milliseconds: 1), source: .app, meta: ["actor": "me"], payload: [1, 2, 3])
        var record = EventRecord.encode(draft, version: 1, recordedAt: Timestamp(milliseconds: 2))
        record.append(contentsOf: [UInt8](repeating: 0, count: 32))
        for length in 0..<record.count {
            let prefix = Array(record[..<length])
            #expect(throws: LedgerError.self) { try prefix.withUnsafeBytes { try EventRecord.decode($0, position: 4) } }
        }
    }

    @Test func aNewerRecordFormatSaysToUpgrade() throws {
        let draft = EventDraft(subject: "s", type: "t", occurredAt: Timestamp(milliseconds: 1), source: .app)
        var record = EventRecord.encode(draft, version: 1, recordedAt: Timestamp(milliseconds: 2))
        record.append(contentsOf: [UInt8](repeating: 0, count: 32))
        record[0] = 2
        do {
            _ = try record.withUnsafeBytes { (bytes) throws(LedgerError) in try EventRecord.decode(bytes, position: 4) }
            Issue.record("format 2 should not decode")
        } catch let error as LedgerError {
            #expect(error.code == .unsupportedFormat)
            #expect(error.position == 4)
        }
    }
}

@Suite struct EventDraftValidationTests {
    let base = EventDraft(subject: "user-42", type: "account.created", occurredAt: Timestamp(milliseconds: 0), source: .app,
                          payload: EventCatalog.encode(AccountCreated().eventData))

    func failure(_ draft: EventDraft) -> LedgerError? {
        do { try draft.validate(); return nil } catch { return error }
    }

    @Test func aWellFormedDraftPasses() {
        #expect(failure(base) == nil)
    }

    /// A typed event is held to the same years as JSON input: 0000–9999 in UTC, for
    /// occurredAt and for every time of its data.
    @Test func aTimeOutsideFourDigitYearsIsRejectedByPointer() throws {
        var draft = base
        draft.occurredAt = Timestamp(milliseconds: 253_402_300_800_000)
        #expect(failure(draft)?.field == "/occurredAt")
        #expect(failure(draft)?.message == #""10000-01-01T00:00:00.000Z" is outside years 0000–9999 once in UTC"#)
        draft.occurredAt = Timestamp(milliseconds: 253_402_300_799_999)
        #expect(failure(draft) == nil)

        var grant = SupportEntitlementGranted()
        (grant.until, grant.reason, grant.agent) = (Timestamp(milliseconds: -62_167_219_200_001), "goodwill", "ana")
        let granted = EventDraft(subject: "user-42", type: SupportEntitlementGranted.type, occurredAt: Timestamp(milliseconds: 0), source: .support,
                                 payload: EventCatalog.encode(grant.eventData))
        #expect(failure(granted)?.field == "/data/until")
        #expect(failure(granted)?.message == #""-0001-12-31T23:59:59.999Z" is outside years 0000–9999 once in UTC"#)
        // The library's typed path says the same.
        let typed = LedgerEvent(subject: "user-42", occurredAt: Timestamp(milliseconds: 0), source: .support, data: grant.eventData)
        #expect(throws: LedgerError.self) { try typed.draft() }
        do { _ = try typed.draft() } catch {
            #expect(error.field == "/data/until")
            #expect(error.message == #""-0001-12-31T23:59:59.999Z" is outside years 0000–9999 once in UTC"#)
        }
    }

    @Test func anEmptySubjectIsRejected() {
        var draft = base
        draft.subject = ""
        #expect(failure(draft)?.code == .invalidEvent)
        #expect(failure(draft)?.field == "/subject")
    }

    @Test func aSubjectOver256BytesIsRejectedAnd256Pass() {
        var draft = base
        draft.subject = String(repeating: "é", count: 128)       // 256 bytes
        #expect(failure(draft) == nil)
        draft.subject += "x"
        #expect(failure(draft)?.field == "/subject")
        #expect(failure(draft)?.message == "subject is 257 bytes, over the 256-byte limit")
    }

    /// `eventSize` is `encode`'s layout summed without encoding: the two agree, meta, long
    /// subjects and multi-byte lengths included.
    @Test(arguments: [0, 1, 127, 128, 300, 20_000])
    func eventSizeIsTheEncodedRecordWithoutItsStamp(_ n: Int) {
        var draft = base
        draft.subject = String(repeating: "s", count: min(n, 256) + 1)
        draft.meta = n == 0 ? [:] : ["correlationId": String(repeating: "c", count: n % 200), "é": "ü"]
        draft.schemaVersion = UInt16(clamping: n % 1_000 + 1)
        draft.payload = [UInt8](repeating: 7, count: n)
        #expect(EventRecord.eventSize(of: draft) == EventRecord.encode(draft, version: 1, recordedAt: Timestamp(milliseconds: 0)).count - EventRecord.stampSize)
    }

    /// The limit is on the whole event encoded (SPEC §2: "whole event ≤ 64 KiB encoded"),
    /// which no spelling of its JSON line changes.
    @Test func anEventOver64KiBEncodedIsRejected() {
        func note(_ length: Int) -> EventDraft {
            var note = SupportNoteAdded()
            note.text = String(repeating: "n", count: length)
            note.agent = "a"
            var draft = base
            draft.type = SupportNoteAdded.type
            draft.payload = EventCatalog.encode(note.eventData)
            return draft
        }
        var length = 65_536 - EventRecord.eventSize(of: note(0))
        while EventRecord.eventSize(of: note(length)) > 65_536 { length -= 1 }
        #expect(EventRecord.eventSize(of: note(length)) == 65_536)
        #expect(EventRecord.encode(note(length), version: 1, recordedAt: Timestamp(milliseconds: 0)).count == 65_536 + EventRecord.stampSize)
        #expect(failure(note(length)) == nil)
        #expect(failure(note(length + 1))?.field == "/")
        #expect(failure(note(length + 1))?.message == "event is 65537 bytes, over the 65536-byte limit")
    }

    @Test func anUnknownTypeOrAPayloadThatIsNotItsLayoutIsRejected() {
        var draft = base
        draft.type = "account.teleported"
        #expect(failure(draft)?.field == "/type")
        draft = base
        draft.payload = [7]
        #expect(failure(draft)?.field == "/data")
    }

    @Test func crossFieldRulesHoldForBinaryPayloadsToo() {
        var change = SubscriptionProductChanged()
        change.originalTransactionId = "o1"
        change.fromProductId = "a"
        change.toProductId = "b"
        change.effective = .immediate
        var draft = base
        draft.type = SubscriptionProductChanged.type
        draft.payload = EventCatalog.encode(change.eventData)
        #expect(failure(draft)?.field == "/data/transactionId")
    }

    @Test func metaOver4KiBIsRejected() {
        var draft = base
        draft.meta = ["note": String(repeating: "a", count: 4_000)]
        #expect(failure(draft) == nil)
        draft.meta["more"] = String(repeating: "b", count: 100)
        #expect(failure(draft)?.field == "/meta")
    }

    @Test func aBadTypeNameIsRejected() {
        var draft = base
        draft.type = "account created"
        #expect(failure(draft)?.field == "/type")
    }

    @Test func invalidUTF8InASubjectIsATypedError() {
        #expect(throws: LedgerError(.invalidEvent, "is not valid UTF-8", field: "/subject")) {
            _ = try EventDraft(subjectBytes: [0x75, 0xFF, 0x31], type: "t", occurredAt: Timestamp(milliseconds: 0), source: .app)
        }
    }
}

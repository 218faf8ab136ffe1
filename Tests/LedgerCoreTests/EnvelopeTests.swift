import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import Testing

@Suite struct EnvelopeDecoderTests {
    let valid = #"{"id":"0b6d2f4e-8a1c-4c3b-9f00-1234567890ab","type":"subscription.purchased","subject":"user-42","occurredAt":"2026-03-01T10:30:00+01:00","source":"appstore","schemaVersion":1,"data":{"productId":"pro.monthly","transactionId":"t1","originalTransactionId":"o1","purchasedAt":"2026-03-01T10:30:00+01:00","expiresAt":"2026-03-08T09:30:00Z","offer":"freeTrial","price":null},"meta":{"correlationId":"c-1"}}"#

    func decode(_ line: String, number: Int = 3) -> Result<Envelope, InputProblems> {
        EnvelopeDecoder.decode(Array(line.utf8), file: "events.jsonl", line: number)
    }

    /// The problems of a line, as the command line prints them.
    func problems(_ line: String) -> [String] {
        switch decode(line) {
        case .success: return []
        case .failure(let problems): return problems.problems.map(\.description)
        }
    }

    /// `valid` with one key replaced (or removed, for `nil`).
    func with(_ key: String, _ value: String?) -> String {
        guard case .object(var object)? = try? JSONParser.parse(valid) else { return "" }
        object[key] = value.flatMap { try? JSONParser.parse($0) }
        return JSON.object(object).serialized()
    }

    @Test func aValidLineGivesEveryField() throws {
        let envelope = try decode(valid).get()
        #expect(envelope == Envelope(
            id: EventID("0b6d2f4e-8a1c-4c3b-9f00-1234567890ab"), type: "subscription.purchased", subject: "user-42",
            occurredAt: Timestamp(milliseconds: 1_772_357_400_000), source: .appstore, schemaVersion: 1,
            payload: envelope.payload, meta: ["correlationId": "c-1"], position: nil, recordedAt: nil))
        // The payload decodes back to the same typed data.
        var expected = SubscriptionPurchased()
        expected.productId = "pro.monthly"
        expected.transactionId = "t1"
        expected.originalTransactionId = "o1"
        expected.purchasedAt = Timestamp(milliseconds: 1_772_357_400_000)
        expected.expiresAt = Timestamp(milliseconds: 1_772_962_200_000)
        expected.offer = .freeTrial
        #expect(EventCatalog.decode(type: envelope.type, version: 1, payload: envelope.payload) == .subscriptionPurchased(expected))
    }

    @Test func idSchemaVersionDataAndMetaMayBeOmitted() throws {
        let line = #"{"type":"account.signed_in","subject":"u","occurredAt":"2026-03-01T09:30:00Z","source":"app"}"#
        let envelope = try decode(line).get()
        #expect(envelope.id == nil)
        #expect(envelope.schemaVersion == 1)
        #expect(envelope.payload == [])
        #expect(envelope.meta == [:])
    }

    @Test func aLineThatIsNotJSONSaysSo() {
        #expect(problems(#"{"type": "#) == ["events.jsonl:3: /: not valid JSON: expected a value, found the end at byte 10"])
    }

    @Test func aLineThatIsNotAnObjectSaysSo() {
        #expect(problems("[1, 2]") == ["events.jsonl:3: /: expected a JSON object, got [1,2]"])
    }

    /// A line is read up to 8 × 64 KiB (memory stays bounded); the event's own limit is on it encoded.
    @Test func anOverlongLineSaysHowLong() {
        let result = EnvelopeDecoder.decode(Array(valid.utf8), length: 600_000, file: "big.jsonl", line: 1)
        #expect(result == .failure(InputProblems([InputProblem(file: "big.jsonl", line: 1, pointer: "/",
                                                                message: "line is 600000 bytes, over the 524288-byte limit of a line (an event is at most 65536 bytes encoded)")])))
    }

    @Test func anOversizedEventSaysHowBigEncoded() {
        let text = String(repeating: "n", count: 70_000)
        let line = #"{"type":"support.note_added","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"support","data":{"text":"\#(text)","agent":"a"}}"#
        let result = EnvelopeDecoder.decode(Array(line.utf8), file: "big.jsonl", line: 1)
        guard case .failure(let problems) = result else { Issue.record("accepted"); return }
        #expect(problems.problems.map(\.message) == ["event is 70057 bytes, over the 65536-byte limit"])
    }

    /// An event of exactly 64 KiB whose line is longer (here, escapes spell its text) is accepted:
    /// the export of such an event (position and recordedAt added) always appends back.
    @Test func anEventWithinTheLimitIsAcceptedHoweverLongItsLine() {
        let text = String(repeating: #"\u006e"#, count: 20_000)
        let line = #"{"type":"support.note_added","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"support","data":{"text":"\#(text)","agent":"a"}}"#
        #expect(line.utf8.count > 65_536)
        guard case .success = EnvelopeDecoder.decode(Array(line.utf8), file: "e.jsonl", line: 1) else { Issue.record("refused"); return }
    }

    @Test func anUnknownKeyIsNamed() {
        #expect(problems(with("colour", #""red""#)) == ["events.jsonl:3: /colour: unknown key; an event has id, type, subject, occurredAt, source, schemaVersion, data and meta"])
    }

    @Test func aMissingRequiredKeyIsNamed() {
        #expect(problems(with("subject", nil)) == ["events.jsonl:3: /subject: missing; every event names the account it is about"])
    }

    @Test func aWrongJSONTypeSaysWhatWasExpected() {
        #expect(problems(with("subject", "42")) == ["events.jsonl:3: /subject: expected a string, got 42"])
        #expect(problems(with("data", "[]")) == ["events.jsonl:3: /data: expected an object, got []"])
        #expect(problems(with("schemaVersion", "1.0")) == ["events.jsonl:3: /schemaVersion: expected a whole number from 1, got 1.0"])
    }

    @Test func aBadUUIDIsNamed() {
        #expect(problems(with("id", #""not-a-uuid""#)) == [#"events.jsonl:3: /id: expected a UUID such as 0b6d2f4e-8a1c-4c3b-9f00-1234567890ab, got "not-a-uuid""#])
    }

    @Test func aTimeMustBeRFC3339WithAZone() {
        #expect(problems(with("occurredAt", "42")) == ["events.jsonl:3: /occurredAt: expected an RFC 3339 time, got 42"])
        #expect(problems(with("occurredAt", #""2026-03-01T09:30:00""#)) == [#"events.jsonl:3: /occurredAt: expected an RFC 3339 time, got "2026-03-01T09:30:00" (add a zone: Z or ±HH:MM)"#])
    }

    /// A time outside years 0000–9999 once in UTC would be exported with five digits or a sign,
    /// which append refuses: it is refused on the way in, wherever it stands, by its pointer.
    @Test func aTimeOutsideFourDigitYearsOnceInUTCIsRefusedByPointer() {
        #expect(problems(with("occurredAt", #""9999-12-31T23:59:59-00:01""#)) == [
            #"events.jsonl:3: /occurredAt: "9999-12-31T23:59:59-00:01" is outside years 0000–9999 once in UTC (10000-01-01T00:00:59.000Z)"#,
        ])
        #expect(problems(with("recordedAt", #""0000-01-01T00:00:00+00:01""#)) == [
            #"events.jsonl:3: /recordedAt: "0000-01-01T00:00:00+00:01" is outside years 0000–9999 once in UTC (-0001-12-31T23:59:00.000Z)"#,
        ])
        #expect(problems(valid.replacingOccurrences(of: "2026-03-08T09:30:00Z", with: "9999-12-31T23:59:59-00:01")) == [
            #"events.jsonl:3: /data/expiresAt: "9999-12-31T23:59:59-00:01" is outside years 0000–9999 once in UTC (10000-01-01T00:00:59.000Z)"#,
        ])
        #expect(problems(with("occurredAt", #""9999-12-31T23:59:59+00:01""#)) == [])
    }

    /// A maintenance task due on 2026-02-31 was taken (the pattern allows day 31 in any month)
    /// and never fell due: a date-only field must be a calendar date.
    @Test func aLocalDateMustBeACalendarDate() {
        func scheduled(_ date: String) -> String {
            #"{"type":"maintenance.scheduled","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"system","data":{"taskId":"t","dueDate":"\#(date)"}}"#
        }
        #expect(problems(scheduled("2026-02-31")) == [#"events.jsonl:3: /data/dueDate: "2026-02-31" is not a calendar date: February 2026 has 28 days"#])
        #expect(problems(scheduled("2026-04-31")) == [#"events.jsonl:3: /data/dueDate: "2026-04-31" is not a calendar date: April 2026 has 30 days"#])
        #expect(problems(scheduled("2100-02-29")) == [#"events.jsonl:3: /data/dueDate: "2100-02-29" is not a calendar date: February 2100 has 28 days"#])
        #expect(problems(scheduled("2024-02-29")) == [])
        #expect(problems(scheduled("2026-12-31")) == [])
    }

    /// A full time's date part is held to the calendar too, and the message says why.
    @Test func aTimesDateMustBeACalendarDate() {
        #expect(problems(with("occurredAt", #""2026-02-30T09:00:00Z""#)) == [
            #"events.jsonl:3: /occurredAt: "2026-02-30T09:00:00Z" is not a calendar date: February 2026 has 28 days"#,
        ])
        #expect(problems(valid.replacingOccurrences(of: "2026-03-08T09:30:00Z", with: "2026-06-31T09:30:00Z")) == [
            #"events.jsonl:3: /data/expiresAt: "2026-06-31T09:30:00Z" is not a calendar date: June 2026 has 30 days"#,
        ])
    }

    @Test func anUnknownSourceListsTheKnownOnes() {
        #expect(problems(with("source", #""email""#)) == [#"events.jsonl:3: /source: expected one of appstore, app, support, system, import, got "email""#])
    }

    @Test func anUnknownTypeIsRejected() {
        #expect(problems(with("type", #""subscription.teleported""#)) == [#"events.jsonl:3: /type: unknown event type "subscription.teleported""#])
    }

    @Test func anEmptySubjectIsRejected() {
        #expect(problems(with("subject", #""""#)) == ["events.jsonl:3: /subject: must not be empty"])
    }

    /// A subject is one spelling of one name: "café" with a precomposed é (NFC) is accepted,
    /// the same name with e and a combining accent is refused, since Swift would call the two
    /// equal and the store would keep them apart.
    @Test func aSubjectMustBeInNormalizationFormC() {
        #expect(problems(with("subject", "\"caf\u{E9}\"")) == [])
        #expect(problems(with("subject", "\"cafe\u{301}\"")) == [
            "events.jsonl:3: /subject: is not in Unicode normalization form C; normalize it (NFC), so that one name has one spelling",
        ])
    }

    @Test func aSchemaVersionTheTypeNeverHadIsRejected() {
        #expect(problems(with("schemaVersion", "2")) == ["events.jsonl:3: /schemaVersion: subscription.purchased has schema version 1, got 2"])
    }

    @Test func usageRecordedAcceptsVersionsOneAndTwoAndDefaultsToTwo() throws {
        let v2 = #"{"type":"usage.recorded","subject":"u","occurredAt":"2026-03-01T09:30:00Z","source":"app","data":{"feature":"scan","count":3}}"#
        #expect(try decode(v2).get().schemaVersion == 2)
        let v1 = #"{"type":"usage.recorded","subject":"u","occurredAt":"2026-03-01T09:30:00Z","source":"app","schemaVersion":1,"data":{"feature":"scan"}}"#
        #expect(try decode(v1).get().schemaVersion == 1)
        // Each version has its own layout: version 1 has no count, version 2 requires one.
        #expect(problems(v1.replacingOccurrences(of: #""scan""#, with: #""scan","count":2"#)) == ["events.jsonl:3: /data/count: unknown key; usage.recorded data has feature"])
        #expect(problems(v2.replacingOccurrences(of: #","count":3"#, with: "")) == ["events.jsonl:3: /data/count: missing; expected a whole number from 1"])
        #expect(problems(v2.replacingOccurrences(of: #""count":3"#, with: #""count":1.0"#)) == ["events.jsonl:3: /data/count: expected a whole number from 1, got 1.0"])
    }

    @Test func metaMustHoldStrings() {
        #expect(problems(with("meta", #"{"actor": 7}"#)) == ["events.jsonl:3: /meta/actor: expected a string, got 7"])
    }

    @Test func everyProblemOfALineIsReported() {
        let line = #"{"type":"nope","subject":"","occurredAt":"yesterday","source":"app","extra":1}"#
        #expect(problems(line) == [
            "events.jsonl:3: /extra: unknown key; an event has id, type, subject, occurredAt, source, schemaVersion, data and meta",
            #"events.jsonl:3: /type: unknown event type "nope""#,
            "events.jsonl:3: /subject: must not be empty",
            #"events.jsonl:3: /occurredAt: expected an RFC 3339 time, got "yesterday""#,
        ])
    }

    @Test func badLinesThreeAndSevenAmongTenAreBothReported() {
        let lines = (1...10).map { n in n == 3 ? "not json" : n == 7 ? with("source", #""fax""#) : valid }
        let reported = lines.enumerated().flatMap { i, line -> [InputProblem] in
            if case .failure(let p) = EnvelopeDecoder.decode(Array(line.utf8), file: "batch.jsonl", line: i + 1) { return p.problems }
            return []
        }
        #expect(reported.map(\.line) == [3, 7])
        #expect(reported.map(\.pointer) == ["/", "/source"])
    }

    @Test func dataIsCheckedAgainstItsTypeWithEveryProblemNamed() {
        let line = #"{"type":"subscription.renewed","subject":"u","occurredAt":"2026-03-01T09:30:00Z","source":"appstore","data":{"productId":"","transactionId":7,"purchasedAt":"2026-03-01T09:30:00","expiresAt":42,"colour":"red"}}"#
        #expect(problems(line) == [
            "events.jsonl:3: /data/colour: unknown key; subscription.renewed data has productId, transactionId, originalTransactionId, purchasedAt, expiresAt, billingRecovery",
            "events.jsonl:3: /data/productId: expected a non-empty string, got \"\"",
            "events.jsonl:3: /data/transactionId: expected a non-empty string, got 7",
            "events.jsonl:3: /data/originalTransactionId: missing; expected a non-empty string",
            "events.jsonl:3: /data/purchasedAt: expected an RFC 3339 time, got \"2026-03-01T09:30:00\" (add a zone: Z or ±HH:MM)",
            "events.jsonl:3: /data/expiresAt: expected an RFC 3339 time, got 42",
        ])
    }

    @Test func anImmediateProductChangeNeedsTheNewTransaction() {
        let line = #"{"type":"subscription.product_changed","subject":"u","occurredAt":"2026-03-01T09:30:00Z","source":"appstore","data":{"originalTransactionId":"o1","fromProductId":"a","toProductId":"b","effective":"immediate","transactionId":"t2"}}"#
        #expect(problems(line) == [
            "events.jsonl:3: /data/purchasedAt: missing; an immediate product change carries the new transaction's purchasedAt",
            "events.jsonl:3: /data/expiresAt: missing; an immediate product change carries the new transaction's expiresAt",
        ])
    }

    @Test func anOmittedIdIsDerivedFromTheCanonicalContent() throws {
        let a = #"{"type":"account.created","subject":"u","occurredAt":"2026-03-01T10:30:00+01:00","source":"app","data":{"signedIn":true}}"#
        let b = #"{"data": {"signedIn": true}, "source": "app", "occurredAt": "2026-03-01T09:30:00.000Z", "subject": "u", "schemaVersion": 1, "type": "account.created"}"#
        let c = #"{"type":"account.created","subject":"u","occurredAt":"2026-03-01T09:30:00.001Z","source":"app","data":{"signedIn":true}}"#
        let idA = try decode(a).get().draft.id, idB = try decode(b).get().draft.id, idC = try decode(c).get().draft.id
        #expect(idA == idB)
        #expect(idA != idC)
        #expect(idA.description.dropFirst(14).first == "8")   // UUID version 8
    }

    @Test func exportedPositionAndRecordedAtAreRead() throws {
        let line = with("position", "31").dropLast() + #","recordedAt":"2026-03-02T00:00:00.000Z"}"#
        let envelope = try decode(String(line)).get()
        #expect(envelope.position == 31)
        #expect(envelope.recordedAt == Timestamp(rfc3339: "2026-03-02T00:00:00Z"))
    }

    @Test func everyTypeOfTheSpecIsKnownOnce() {
        #expect(EventCatalog.typeNames.count == 50)
        #expect(Set(EventCatalog.typeNames).count == EventCatalog.typeNames.count)
    }

    /// A typed task due on a day the calendar does not have is refused at /data/dueDate, as
    /// JSON input is.
    @Test func aTypedTaskDueOnADayThatDoesNotExistIsRefused() throws {
        var m = MaintenanceScheduled()
        (m.taskId, m.dueDate) = ("t", "2026-02-31")
        let draft = EventDraft(subject: "u", type: MaintenanceScheduled.type, occurredAt: Timestamp(milliseconds: 0), source: .system,
                               payload: EventCatalog.encode(m.eventData))
        do {
            _ = try EventCatalog.check(draft)
            Issue.record("2026-02-31 was accepted")
        } catch {
            #expect(error.field == "/data/dueDate")
            #expect(error.message == #""2026-02-31" is not a calendar date: February 2026 has 28 days"#)
        }
    }

    /// Every zone-bearing field of every layout (any field of the time-zone codec) refuses a
    /// name the zone list does not hold, by its pointer: none quietly counts days in UTC.
    @Test func everyTimeZoneFieldRefusesAnUnknownZone() throws {
        var checked = 0
        for type in EventCatalog.typeNames {
            for version in EventCatalog.versions(of: type) {
                let layout = try #require(EventCatalog.layout(of: type, version: version))
                for field in layout.fields where field.schema["pattern"] == .string(Patterns.timeZone) {
                    var generator = DataGenerator(state: 1)
                    var data = generator.data(for: layout)
                    data[field.name] = .string("Not/AZone")
                    guard case .failure(let failure) = layout.decode(data) else {
                        Issue.record("\(type).\(field.name) took Not/AZone")
                        continue
                    }
                    #expect(failure.violations == [FieldViolation(field: field.name, message: #"unknown time zone "Not/AZone"; expected an IANA name such as "Europe/Berlin""#)])
                    checked += 1
                }
            }
        }
        #expect(checked >= 1)
    }

    /// A typed session in a zone the database does not know is refused at /data/timeZone, as
    /// JSON input is; a known one passes.
    @Test func aTypedSessionInAnUnknownZoneIsRefused() throws {
        func draft(_ zone: String) throws -> EventDraft {
            var s = SessionStarted()
            (s.deviceId, s.timeZone) = ("d-1", zone)
            return try LedgerEvent(subject: "u", occurredAt: Timestamp(milliseconds: 0), source: .app, data: s.eventData).draft()
        }
        #expect(throws: Never.self) { try EventCatalog.check(try draft("America/Los_Angeles")) }
        do {
            _ = try EventCatalog.check(try draft("Nowhere/Unknown"))
            Issue.record("an unknown zone was accepted")
        } catch let error as LedgerError {
            #expect(error.field == "/data/timeZone")
            #expect(error.message == #"unknown time zone "Nowhere/Unknown"; expected an IANA name such as "Europe/Berlin""#)
        }
    }
}

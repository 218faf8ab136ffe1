@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// What every model declares agrees with what it does: the event types it `reads` are the
/// ones its `apply` acts on (the engine loads no state for the others), names are unique, and
/// its view is JSON in SPEC §5's style.
@Suite struct DeclarationTests {
    /// Events of every type the catalog has, with generated data: `count` of each.
    static func everyType(count: Int, seed: UInt64) -> [String: [LedgerEvent]] {
        var generator = DataGenerator(state: seed)
        var events: [String: [LedgerEvent]] = [:]
        for layout in everyLayout where layout.isCurrent {
            for i in 0 ..< count {
                var json = generator.data(for: layout)
                if case .failure = layout.decode(json) { json = generator.data(for: layout, allOptionals: true) }
                guard case .success(let typed) = layout.decode(json),
                      let data = EventCatalog.decode(type: layout.type, version: layout.schemaVersion, payload: layout.binary(typed)) else { continue }
                events[layout.type, default: []].append(LedgerEvent(subject: "u", occurredAt: ts("2026-03-01T00:00:00Z").adding(seconds: Int64(i)), source: .app, data: data))
            }
        }
        return events
    }

    /// A state folded from a random history, for events to land on.
    static func busyHistory() throws -> Folded {
        var history = RandomHistory(seed: 5)
        return try Folded(history.history(of: "u", count: 40))
    }

    @Test func everyModelReadsExactlyTheTypesItsApplyActsOn() throws {
        let events = Self.everyType(count: 25, seed: 9)
        #expect(events.count == EventCatalog.typeNames.count)
        let busy = try Self.busyHistory()
        for model in ReadModels.all { try check(model, events, busy) }
        // The plan's facts every view reads, likewise; the facts' activity reads every type
        // (any event may be the subject's first).
        func plan(_ history: Folded) -> SubjectFacts {
            var facts = history.facts()
            facts.activity = SubjectActivity()
            return facts
        }
        #expect(SubjectFacts.reads == Set(EventCatalog.typeNames))
        for (type, samples) in events {
            var acted = false
            for event in samples {
                var history = busy
                try history.append(event)
                let changed = plan(history) != plan(busy)
                if !SubjectFacts.planReads.contains(type) { #expect(!changed, "the plan's facts act on \(type), which they do not read") }
                acted = acted || changed
                #expect(try Folded([event]).facts().activity != SubjectActivity(), "the activity does not note \(type)")
            }
            if SubjectFacts.planReads.contains(type) { #expect(acted, "the plan's facts read \(type) but never act on it") }
        }
    }

    private func check<M: ReadModel>(_ model: M.Type, _ events: [String: [LedgerEvent]], _ busy: Folded) throws {
        for (type, samples) in events {
            var acted = false
            for event in samples {
                // Recorded when it occurred, and an hour before (an event from the future is a
                // clock-tampering signal for the access model, whatever its type).
                var early = try Folded([])
                try early.append(event, recordedAt: event.occurredAt.adding(seconds: -3600))
                let recorded = try #require(try Folded([event]).events.first), future = try #require(early.events.first)
                // Onto a busy state and onto an empty one (a model that notes the first event
                // of every type acts on each only there).
                for (start, recorded) in [(busy.state(model), recorded), (M.State(), recorded), (M.State(), future)] {
                    var state = start
                    var items: [[UInt8]: M.Item] = [:]
                    M.fold(recorded, into: &state, items: &items, policy: .reference)
                    let changed = state != start || items.values.contains { $0 != M.Item() }
                    if !M.reads.contains(type) { #expect(!changed, "\(M.name) acts on \(type), which it does not read") }
                    acted = acted || changed
                }
            }
            if M.reads.contains(type) { #expect(acted, "\(M.name) reads \(type) but never acts on it") }
        }
    }

    @Test func modelNamesAreUniqueAndNotTheFacts() {
        let names = ReadModels.all.map { $0.name }
        #expect(Set(names).count == names.count)
        #expect(!names.contains("facts"))
        #expect(names == ["entitlement", "retention", "badge", "access", "limits", "deletion", "due", "holders", "transactions"])
    }

    /// Every view encodes every key, `null` for no value, in declaration order.
    @Test func aViewsJSONWritesNullsInOrder() throws {
        let empty = try Folded([])
        let at = ts("2026-03-01T00:00:00Z")
        #expect((empty.view(EntitlementModel.self, at: at)?.json).map { JSON.object($0).serialized() } == #"{"planState":"guest","trialEligible":true,"expiresAt":null,"renewsAt":null,"autoRenew":null,"billingIssue":false,"purchasePending":false,"productId":null,"banners":[],"reason":{"rule":"noAccount","policyKey":null,"position":null}}"#)
        #expect((empty.view(RetentionModel.self, at: at)?.json).map { JSON.object($0).serialized() } == #"{"tier":"free","enteredAt":null,"nextTier":null,"nextTierAt":null,"capabilities":{"viewThumbnails":true,"downloadOriginals":false,"upload":false,"retrieveArchive":false,"earnCredits":false},"reactivation":{"available":false,"fee":null}}"#)
        #expect((empty.view(BadgeModel.self, at: at)?.json).map { JSON.object($0).serialized() } == #"{"count":0,"unreadInbox":0,"maintenanceDueToday":false,"billingIssue":false,"securityFlag":false}"#)
    }

    /// A view of every kind of value a model may hold: each is written, each optional without a
    /// value is `null` (no key is left out, whatever its type), in declaration order.
    @Test func everyKindOfValueIsWrittenAndEveryMissingOneIsNull() {
        struct Kinds: ModelView {
            var text: String? = nil, flag: Bool? = nil, ratio: Double? = nil, small: Int32? = nil, count: UInt32? = nil
            var whole: Int? = nil, big: Int64? = nil, huge: UInt64? = nil, at: Timestamp? = nil, list: [String]? = nil
        }
        #expect(JSON.object(Kinds().json).serialized() == #"{"text":null,"flag":null,"ratio":null,"small":null,"count":null,"whole":null,"big":null,"huge":null,"at":null,"list":null}"#)
        let full = Kinds(text: "a", flag: true, ratio: 0.5, small: -3, count: 4, whole: 5, big: 6, huge: 7, at: ts("2026-03-01T00:00:00Z"), list: ["b"])
        #expect(JSON.object(full.json).serialized() == #"{"text":"a","flag":true,"ratio":0.5,"small":-3,"count":4,"whole":5,"big":6,"huge":7,"at":"2026-03-01T00:00:00.000Z","list":["b"]}"#)
    }
}

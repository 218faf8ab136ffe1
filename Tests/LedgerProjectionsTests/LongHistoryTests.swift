@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerDemo
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// A customer's long history costs nothing extra: the badge keeps a count and each message as
/// an item of its own, its stored state answers the present, and a past time is answered by
/// replaying the subject's events — with the same views as the history read from the log.
@Suite struct LongHistoryTests {
    static let start = ts("2026-01-01T00:00:00Z")

    /// A busy inbox: messages delivered and read (some read before their delivery, some
    /// delivered twice, some delivered again after they were read), sessions that move
    /// between zones, and a subscription renewed monthly.
    static func history(_ subject: String, events count: Int, seed: UInt64) -> [LedgerEvent] {
        var random = SplitMix(seed: seed)
        var events = [Make.created(subject, at: start), Make.purchase(subject, at: start, txn: "\(subject)-t0", expires: days(30, after: start))]
        for month in 1 ..< 6 {
            events.append(Make.renewal(subject, at: days(Int64(30 * month), after: start), txn: "\(subject)-t\(month)", original: "\(subject)-t0",
                                       expires: days(Int64(30 * month + 30), after: start)))
        }
        let zones = ["Europe/Zurich", "America/Los_Angeles", "Asia/Tokyo"]
        while events.count < count {
            let at = start.adding(seconds: Int64(random.next() % (150 * 86_400)))
            let message = "m\(random.next() % UInt64(count / 3))"
            switch random.next() % 5 {
            case 0, 1: events.append(Make.delivered(subject, at: at, message: message))
            case 2, 3: events.append(Make.read(subject, at: at, message: message))
            default: events.append(Make.session(subject, at: at, zone: zones[Int(random.next() % 3)]))
            }
        }
        return events
    }

    /// SPEC §4's unread count, worked out here from the events themselves: messages delivered
    /// by `t`, by id, that no read by `t` names.
    static func unread(_ events: [LedgerEvent], at t: Timestamp) -> Int64 {
        var delivered: Set<String> = [], read: Set<String> = []
        for event in events where event.occurredAt <= t {
            switch event.data {
            case .inboxMessageDelivered(let m): delivered.insert(m.messageId)
            case .inboxMessageRead(let m): read.insert(m.messageId)
            default: break
            }
        }
        return Int64(delivered.subtracting(read).count)
    }

    @Test func aLongHistoryAnswersAsItsEventsDoAtEveryTime() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let history = Self.history("loyal", events: 3_000, seed: 11)
            // Appended out of business-time order, in batches.
            var random = SplitMix(seed: 5)
            var shuffled = history
            for i in shuffled.indices.reversed() where i > 0 { shuffled.swapAt(i, Int(random.next() % UInt64(i + 1))) }
            for first in stride(from: 0, to: shuffled.count, by: 250) { try ledger.append(Array(shuffled[first ..< min(first + 250, shuffled.count)])) }
            let recorded = try ledger.recordedEvents(of: "loyal")
            let latest = try #require(history.map(\.occurredAt).max())
            var times = stride(from: 0, to: history.count, by: 97).map { history[$0].occurredAt }
            times += [latest, latest.adding(seconds: 1), days(40, after: latest), Self.start.adding(seconds: -1)]
            for t in times {
                let status = try ledger.status(of: "loyal", at: t)
                let replayed = Replay.views(of: "loyal", from: recorded, at: t, models: ReadModels.all.filter { $0.shownInStatus }, policy: .reference)
                #expect(status.answers.map { $0.view?.json } == replayed.map { $0.view?.json }, "at \(t)")
                let badge = try #require(try ledger.view(BadgeModel.self, of: "loyal", at: t))
                #expect(badge.unreadInbox == Self.unread(history, at: t), "at \(t)")
            }
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// The badge's stored state is as large for 2,000 messages as for 10: each message is an
    /// item of its own.
    @Test func theBadgesStateDoesNotGrowWithTheInbox() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            for (subject, messages) in [("few", 10), ("many", 2_000)] {
                var events: [LedgerEvent] = []
                for i in 0 ..< messages {
                    events.append(Make.delivered(subject, at: Self.start.adding(seconds: Int64(2 * i)), message: "m\(i)"))
                    events.append(Make.read(subject, at: Self.start.adding(seconds: Int64(2 * i + 1)), message: "m\(i)"))
                }
                events.append(Make.delivered(subject, at: days(1, after: Self.start), message: "last"))
                try ledger.append(events)
            }
            let states = Dictionary(uniqueKeysWithValues: try ledger.servedStates(of: "badge").map { ($0.key, $0.state) })
            #expect(states["few"]?.count == states["many"]?.count)
            #expect(try ledger.view(BadgeModel.self, of: "many", at: days(2, after: Self.start))?.unreadInbox == 1)
            let items = try ledger.engine.read { txn, overlay in
                var count = 0
                try ledger.engine.store.forEachItem(in: try #require(try ledger.engine.store.served(txn, overlay)).number, txn, overlay) { _, _ in count += 1 }
                return count
            }
            #expect(items == 10 + 2_000 + 2)
        }
    }

    /// A message delivered again after it was read stays read, and a read that arrives before
    /// its delivery counts, in whatever order the events are appended.
    @Test func aMessageIsCountedByIdInEveryArrivalOrder() throws {
        let events = [Make.delivered("u", at: Self.start, message: "m"), Make.read("u", at: days(1, after: Self.start), message: "m"),
                      Make.delivered("u", at: days(2, after: Self.start), message: "m"), Make.delivered("u", at: days(3, after: Self.start), message: "n")]
        for order in permutations(Array(events.indices)) {
            try withStorePath { path in
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                for index in order { try ledger.append([events[index]]) }
                #expect(try ledger.view(BadgeModel.self, of: "u", at: days(4, after: Self.start))?.unreadInbox == 1, "\(order)")
                #expect(try ledger.view(BadgeModel.self, of: "u", at: days(1, after: Self.start))?.unreadInbox == 0, "\(order)")
                #expect(try ledger.view(BadgeModel.self, of: "u", at: Self.start)?.unreadInbox == 1, "\(order)")
                #expect(try ledger.verifyModels() == [], "\(order)")
            }
        }
    }

    /// Items are told apart by their bytes, as the store keys them: "é" and "e" + U+0301
    /// (equal as Swift strings) are two messages and two resources, in one batch or two.
    @Test func itemsAreToldApartByTheirBytes() throws {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        let events = [Make.delivered("u", at: Self.start, message: composed), Make.delivered("u", at: Self.start, message: decomposed),
                      Make.resource("u", at: Self.start, "tag", composed), Make.resource("u", at: Self.start, "tag", decomposed)]
        for batches in [[events], events.map { [$0] }] {
            try withStorePath { path in
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                for batch in batches { try ledger.append(batch) }
                let at = days(1, after: Self.start)
                #expect(try ledger.view(BadgeModel.self, of: "u", at: at)?.unreadInbox == 2)
                #expect(try ledger.view(LimitsModel.self, of: "u", at: at)?.kinds.first { $0.kind == "tag" }?.entry.count == 2)
                #expect(try ledger.verifyModels() == [])
            }
        }
    }

    /// `rebuild --policy` names who changes at a time before some subjects' latest facts as it
    /// does without those facts: their views at that time are replayed.
    @Test func aRebuildComparesAtATimeBeforeASubjectsLatestFacts() throws {
        let feb5 = ts("2026-02-05T00:00:00Z")
        var longerGrace = Policy.reference
        longerGrace.subscription.billingGraceDays = 10
        let base = [Make.created("grace", at: Self.start), Make.purchase("grace", at: Self.start, txn: "g1", expires: ts("2026-01-31T00:00:00Z")),
                    Make.renewalFailed("grace", at: ts("2026-01-31T00:00:00Z"), original: "g1"),
                    Make.delivered("grace", at: Self.start, message: "welcome")]
        func report(_ events: [LedgerEvent]) throws -> RebuildReport {
            try withStorePath { path in
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                try ledger.append(events)
                return try ledger.rebuild(policy: longerGrace, dryRun: true, at: feb5)
            }
        }
        let plain = try report(base)
        let later = try report(base + [Make.delivered("grace", at: ts("2026-03-01T00:00:00Z"), message: "later"),
                                       Make.session("grace", at: ts("2026-03-01T00:00:00Z"), zone: "Asia/Tokyo")])
        #expect(!plain.changes.isEmpty)
        #expect(later.changes == plain.changes)
    }

    private func permutations(_ items: [Int]) -> [[Int]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { i in
            permutations(Array(items[..<i] + items[(i + 1)...])).map { [items[i]] + $0 }
        }
    }
}

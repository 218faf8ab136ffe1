@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// Access rules of SPEC §4 (seed 002: one free session per device per local calendar day, a
/// pause of up to 300 s resumes), one rule per test with the exact view, at and on both sides
/// of each boundary.
@Suite struct AccessRuleTests {
    let mar1 = ts("2026-03-01T10:00:00Z")

    /// The view at `t` as SPEC §5's JSON, compact.
    func view(_ events: [LedgerEvent], at t: Timestamp, policy: Policy = .reference) throws -> String {
        let view = try #require(try Folded([Make.created("u", at: ts("2026-02-01T00:00:00Z"))] + events).view(AccessModel.self, at: t, policy: policy))
        return JSON.object(view.json).serialized()
    }

    /// One device's five fields.
    func device(_ id: String = "d1", active: Bool = false, today: Int, can: Bool, next: String? = nil) -> String {
        #"{"deviceId":"\#(id)","sessionActive":\#(active),"sessionsToday":\#(today),"canStartSession":\#(can),"nextAccessAt":\#(next.map { "\"\($0)\"" } ?? "null")}"#
    }

    /// The whole view: the current device's fields, every device, the signals.
    func expected(_ current: String, devices: [String]? = nil, short: Int = 0, bulk: Int = 0, cycles: Int = 0, tampering: Int = 0) -> String {
        let fields = current.dropFirst().dropLast()
        return #"{\#(fields),"devices":[\#((devices ?? [current]).joined(separator: ","))],"signals":{"shortSessions":\#(short),"bulkUsage":\#(bulk),"subscribeCancelCycles":\#(cycles),"clockTampering":\#(tampering)}}"#
    }

    func start(_ at: Timestamp, zone: String = "UTC", device: String = "d1") -> LedgerEvent { Make.session("u", at: at, zone: zone, device: device) }
    func end(_ at: Timestamp, device: String = "d1") -> LedgerEvent { Make.device("u", at: at, .ended, device: device) }
    func pause(_ at: Timestamp, device: String = "d1") -> LedgerEvent { Make.device("u", at: at, .backgrounded, device: device) }
    func ms(_ n: Int64, after t: Timestamp) -> Timestamp { Timestamp(milliseconds: t.milliseconds + n) }

    @Test func noSectionNoModel() throws {
        var policy = Policy.reference
        policy.access = nil
        #expect(try Folded([start(mar1)]).view(AccessModel.self, at: mar1, policy: policy) == nil)
    }

    /// No session event yet: no device, nothing counted, a session may start.
    @Test func noDeviceCanStartASession() throws {
        #expect(try view([], at: mar1)
            == #"{"deviceId":null,"sessionActive":false,"sessionsToday":0,"canStartSession":true,"nextAccessAt":null,"devices":[],"signals":{"shortSessions":0,"bulkUsage":0,"subscribeCancelCycles":0,"clockTampering":0}}"#)
    }

    /// 002: one free session per device per local day; the next at the device's local midnight.
    @Test func oneFreeSessionPerLocalDay() throws {
        let events = [start(mar1), end(mar1.adding(seconds: 1800))]
        #expect(try view(events, at: mar1) == expected(device(active: true, today: 1, can: true)))
        #expect(try view(events, at: mar1.adding(seconds: 1800)) == expected(device(today: 1, can: false, next: "2026-03-02T00:00:00.000Z")))
        #expect(try view(events, at: ts("2026-03-01T23:59:59.999Z")) == expected(device(today: 1, can: false, next: "2026-03-02T00:00:00.000Z")))
        #expect(try view(events, at: ts("2026-03-02T00:00:00Z")) == expected(device(today: 0, can: true)))
    }

    /// East of UTC the day turns earlier: 23:58 in Tokyo is 14:58Z, its midnight 15:00Z.
    @Test func localMidnightEastOfUTC() throws {
        let events = [start(ts("2026-03-01T14:58:00Z"), zone: "Asia/Tokyo"), end(ts("2026-03-01T14:59:30Z"))]
        #expect(try view(events, at: ts("2026-03-01T14:59:59.999Z")) == expected(device(today: 1, can: false, next: "2026-03-01T15:00:00.000Z")))
        #expect(try view(events, at: ts("2026-03-01T15:00:00Z")) == expected(device(today: 0, can: true)))
        // A session begun at 15:00Z belongs to the next local day.
        let next = events + [start(ts("2026-03-01T15:00:00Z"), zone: "Asia/Tokyo"), end(ts("2026-03-01T15:10:00Z"))]
        #expect(try view(next, at: ts("2026-03-01T15:10:00Z")) == expected(device(today: 1, can: false, next: "2026-03-02T15:00:00.000Z")))
    }

    /// West of UTC it turns later: 23:30 on 1 March in Los Angeles is 07:30Z on the 2nd.
    @Test func localMidnightWestOfUTC() throws {
        let events = [start(ts("2026-03-02T07:30:00Z"), zone: "America/Los_Angeles"), end(ts("2026-03-02T07:31:00Z"))]
        #expect(try view(events, at: ts("2026-03-02T07:59:59.999Z")) == expected(device(today: 1, can: false, next: "2026-03-02T08:00:00.000Z")))
        #expect(try view(events, at: ts("2026-03-02T08:00:00Z")) == expected(device(today: 0, can: true)))
    }

    /// A DST night: New York's 1 November 2026 has 25 hours (midnight EDT 04:00Z to midnight
    /// EST 05:00Z the next day), its 8 March 23.
    @Test func aDSTNightMovesLocalMidnight() throws {
        let fall = [start(ts("2026-11-01T04:30:00Z"), zone: "America/New_York"), end(ts("2026-11-01T04:31:00Z"))]
        #expect(try view(fall, at: ts("2026-11-02T04:59:59.999Z")) == expected(device(today: 1, can: false, next: "2026-11-02T05:00:00.000Z")))
        #expect(try view(fall, at: ts("2026-11-02T05:00:00Z")) == expected(device(today: 0, can: true)))
        let spring = [start(ts("2026-03-08T05:30:00Z"), zone: "America/New_York"), end(ts("2026-03-08T05:31:00Z"))]
        #expect(try view(spring, at: ts("2026-03-09T03:59:59.999Z")) == expected(device(today: 1, can: false, next: "2026-03-09T04:00:00.000Z")))
        #expect(try view(spring, at: ts("2026-03-09T04:00:00Z")) == expected(device(today: 0, can: true)))
    }

    /// A start less than 300 s after a pause continues the session; at 300 s it begins another.
    @Test func aStartWithin300SecondsOfAPauseContinuesTheSession() throws {
        let paused = [start(mar1), pause(mar1.adding(seconds: 300))]
        let p = mar1.adding(seconds: 300)
        #expect(try view(paused + [start(ms(299_999, after: p))], at: ms(299_999, after: p)) == expected(device(active: true, today: 1, can: true)))
        #expect(try view(paused + [start(p.adding(seconds: 300))], at: p.adding(seconds: 300)) == expected(device(active: true, today: 2, can: true)))
    }

    /// A crash pauses (002: not a session end); a foreground within 300 s resumes it, at 300 s
    /// begins another.
    @Test func aCrashPausesAndAForegroundWithin300SecondsResumes() throws {
        let p = mar1.adding(seconds: 600)
        let crashed = [start(mar1), Make.device("u", at: p, .crashed)]
        let resumed = crashed + [Make.device("u", at: ms(299_999, after: p), .foregrounded)]
        #expect(try view(resumed, at: ms(299_999, after: p)) == expected(device(active: true, today: 1, can: true)))
        let again = crashed + [Make.device("u", at: p.adding(seconds: 300), .foregrounded)]
        #expect(try view(again, at: p.adding(seconds: 300)) == expected(device(active: true, today: 2, can: true)))
    }

    /// A paused session still resumes, so the device may go on; once 300 s have passed it ended
    /// at the pause, and today's free session is used.
    @Test func aPausedSessionMayResumeUntil300Seconds() throws {
        let p = mar1.adding(seconds: 600)
        let events = [start(mar1), pause(p)]
        #expect(try view(events, at: ms(299_999, after: p)) == expected(device(today: 1, can: true)))
        #expect(try view(events, at: p.adding(seconds: 300)) == expected(device(today: 1, can: false, next: "2026-03-02T00:00:00.000Z")))
    }

    /// Events with no session to act on are ignored: a pause, a crash or an end with none; a
    /// foreground with none begins one.
    @Test func eventsWithNoSessionAreIgnoredButAForegroundBegins() throws {
        let stray = [pause(mar1), Make.device("u", at: mar1.adding(seconds: 1), .crashed), end(mar1.adding(seconds: 2))]
        #expect(try view(stray, at: mar1.adding(seconds: 2)) == expected(device(today: 0, can: true)))
        let foreground = stray + [Make.device("u", at: mar1.adding(seconds: 3), .foregrounded)]
        #expect(try view(foreground, at: mar1.adding(seconds: 3)) == expected(device(active: true, today: 1, can: true)))
    }

    /// A paid plan (a trial here) is unlimited; when it runs out the day's count applies.
    @Test func aPaidPlanIsUnlimited() throws {
        let trialEnds = mar1.adding(seconds: 7200)
        let events = [Make.purchase("u", at: mar1, txn: "t1", expires: trialEnds, trial: true),
                      start(mar1), end(mar1.adding(seconds: 600)), start(mar1.adding(seconds: 1200)), end(mar1.adding(seconds: 1800))]
        #expect(try view(events, at: ms(-1, after: trialEnds)) == expected(device(today: 2, can: true)))
        #expect(try view(events, at: trialEnds) == expected(device(today: 2, can: false, next: "2026-03-02T00:00:00.000Z")))
    }

    /// The current device is that of the latest session event, even one the rules ignore;
    /// `devices` lists every device by id.
    @Test func theCurrentDeviceIsThatOfTheLatestSessionEvent() throws {
        let events = [start(mar1, device: "d2"), end(mar1.adding(seconds: 60), device: "d2"), start(mar1.adding(seconds: 3600))]
        let d1 = device(active: true, today: 1, can: true), d2 = device("d2", today: 1, can: false, next: "2026-03-02T00:00:00.000Z")
        #expect(try view(events, at: mar1.adding(seconds: 3600)) == expected(d1, devices: [d1, d2]))
        let later = events + [pause(mar1.adding(seconds: 3700), device: "d2")]
        #expect(try view(later, at: mar1.adding(seconds: 3700)) == expected(d2, devices: [d1, d2]))
    }

    /// A session that ended less than 60 s after it began is short; by a pause not resumed, it
    /// ended at the pause.
    @Test func aShortSessionEndsBefore60Seconds() throws {
        let t = mar1.adding(seconds: 600)
        let short = [start(mar1), pause(ms(59_999, after: mar1)), end(t)]
        #expect(try view(short, at: t) == expected(device(today: 1, can: false, next: "2026-03-02T00:00:00.000Z"), short: 1))
        let long = [start(mar1), pause(mar1.adding(seconds: 60)), end(t)]
        #expect(try view(long, at: t) == expected(device(today: 1, can: false, next: "2026-03-02T00:00:00.000Z")))
    }

    /// More than 10 of one feature in a session is bulk usage; usage adds up per session, and
    /// goes to the session begun last when two devices are active.
    @Test func moreThan10OfAFeatureInASessionIsBulkUsage() throws {
        let ten = [start(mar1), Make.used("u", at: mar1.adding(seconds: 1), "export", count: 4), Make.used("u", at: mar1.adding(seconds: 2), "export", count: 6)]
        #expect(try view(ten, at: mar1.adding(seconds: 2)) == expected(device(active: true, today: 1, can: true)))
        let eleven = ten + [Make.used("u", at: mar1.adding(seconds: 3), "export", count: 1)]
        #expect(try view(eleven, at: mar1.adding(seconds: 3)) == expected(device(active: true, today: 1, can: true), bulk: 1))
        // A second device begun later takes the usage: neither session passes 10.
        let split = ten + [start(mar1.adding(seconds: 1), device: "d2"), Make.used("u", at: mar1.adding(seconds: 3), "export", count: 1)]
        let d1 = device(active: true, today: 1, can: true), d2 = device("d2", active: true, today: 1, can: true)
        #expect(try view(split, at: mar1.adding(seconds: 3)) == expected(d2, devices: [d1, d2]))
    }

    /// Two sessions begun at the same instant: usage goes to the one begun later in position.
    /// Six uses land on that session, six more on the other once it is alone: more than 10 in
    /// one session only when both sixes went to the same one.
    @Test func usageAtATieGoesToTheSessionBegunLaterInPosition() throws {
        func bulk(first: String, second: String) throws -> Int64 {
            let events = [start(mar1, device: first), start(mar1, device: second),
                          Make.used("u", at: mar1.adding(seconds: 1), "export", count: 6), end(mar1.adding(seconds: 2), device: "d2"),
                          Make.used("u", at: mar1.adding(seconds: 3), "export", count: 6)]
            return try #require(try Folded(events).view(AccessModel.self, at: mar1.adding(seconds: 3))).signals.bulkUsage
        }
        #expect(try bulk(first: "d1", second: "d2") == 0)   // the first six went to d2, which ended
        #expect(try bulk(first: "d2", second: "d1") == 1)   // both sixes went to d1
    }

    /// A purchase whose auto-renew is turned off before its own expiresAt is a cycle; at the
    /// expiry, or for another subscription, it is not.
    @Test func aCancellationBeforeTheExpiryIsASubscribeCancelCycle() throws {
        let expires = days(7, after: mar1)
        let bought = [start(mar1), Make.purchase("u", at: mar1, txn: "t1", expires: expires, trial: true)]
        let stillOn = device(active: true, today: 0, can: true)   // the session of 1 March goes on
        #expect(try view(bought + [Make.autoRenew("u", at: ms(-1, after: expires), original: "t1", enabled: false)], at: expires) == expected(stillOn, cycles: 1))
        #expect(try view(bought + [Make.autoRenew("u", at: expires, original: "t1", enabled: false)], at: expires) == expected(stillOn))
        #expect(try view(bought + [Make.autoRenew("u", at: mar1.adding(seconds: 60), original: "other", enabled: false)], at: expires) == expected(stillOn))
    }

    /// An event that occurred more than maxClockSkewSeconds after it was recorded is a
    /// tampering signal; exactly 300 s is not.
    @Test func anEventFromTheFutureIsClockTampering() throws {
        func tampered(by skew: Int64) throws -> String {
            var folded = try Folded([Make.created("u", at: ts("2026-02-01T00:00:00Z"))])
            try folded.append(start(mar1), recordedAt: ms(-skew, after: mar1))
            return JSON.object(try #require(folded.view(AccessModel.self, at: mar1)).json).serialized()
        }
        #expect(try tampered(by: 300_000) == expected(device(active: true, today: 1, can: true)))
        #expect(try tampered(by: 300_001) == expected(device(active: true, today: 1, can: true), tampering: 1))
    }

    /// The audit cites the rule: the session's end used the day's free session.
    @Test func theAuditSaysTheDailyLimitBlocksTheNextSession() throws {
        let report = try Folded([start(mar1), end(mar1.adding(seconds: 1800))]).audit(at: mar1.adding(seconds: 1800))
        let ended = try #require(report.entries.last)
        #expect(ended.changes.filter { $0.model == "access" } == [
            AuditChange(model: "access", field: "sessionActive", from: true, to: false, rule: "sessions"),
            AuditChange(model: "access", field: "canStartSession", from: true, to: false, rule: "access.freeSessionsPerDay"),
            AuditChange(model: "access", field: "nextAccessAt", from: nil, to: "2026-03-02T00:00:00.000Z", rule: "access.freeSessionsPerDay"),
        ])
    }

    /// The card says what the customer can do, in words.
    @Test func theCardSaysWhatTheCustomerCanDo() throws {
        let card = try #require(try Folded([start(mar1)]).view(AccessModel.self, at: mar1)).card
        #expect(card.headline == [.text("on d1: in a session")])
        let free = try #require(try Folded([Make.created("u", at: mar1)]).view(AccessModel.self, at: mar1)).card
        #expect(free.headline == [.text("can start a session: no device yet")])
        let used = try #require(try Folded([start(mar1), end(mar1.adding(seconds: 60))]).view(AccessModel.self, at: mar1.adding(seconds: 60))).card
        #expect(used.headline == [.text("on d1: 1 of 1 free session today: no more until the next local day"), .text(" — next free session at "),
                                  .value(.string("2026-03-02T00:00:00.000Z"))])
    }

    /// A daily user's thousand sessions leave a state the size of ten's: the devices' open
    /// sessions and their last local days, the signals' counts, and the last two days' facts.
    @Test func aLongSessionHistoryKeepsASmallState() throws {
        func history(days n: Int64) throws -> Folded {
            try Folded((0 ..< n).flatMap { d in
                let at = days(d, after: mar1)
                return [start(at, zone: "Europe/Berlin"), pause(at.adding(seconds: 30)), end(at.adding(seconds: 900))]
            })
        }
        let ten = try history(days: 10), thousand = try history(days: 1000)
        #expect(thousand.state(AccessModel.self).encoded.count <= ten.state(AccessModel.self).encoded.count + 16)   // (larger counts take bytes)
        #expect(thousand.state(AccessModel.self).recent.count == ten.state(AccessModel.self).recent.count)
        let last = days(999, after: mar1).adding(seconds: 900)
        #expect(try #require(thousand.view(AccessModel.self, at: last)).signals.shortSessions == 1000)
        #expect(try #require(ten.view(AccessModel.self, at: days(9, after: mar1).adding(seconds: 900))).signals.shortSessions == 10)
    }

    /// A session event that arrives after later ones takes its place among them while it is
    /// within the reorder window of the latest fact (48 h): the view is the one of the events in
    /// order, from the state.
    @Test func aLateSessionEventWithinTheWindowTakesItsPlace() throws {
        let events = [start(mar1), pause(mar1.adding(seconds: 100)), start(mar1.adding(seconds: 200)), end(mar1.adding(seconds: 600))]
        let late = [events[0], events[2], events[3], events[1]]
        let t = mar1.adding(seconds: 600)
        let arrived = try Folded(late)
        #expect(!arrived.state(AccessModel.self).disordered)
        #expect(AccessModel.answersFrom(arrived.state(AccessModel.self), facts: arrived.facts()) == t)
        #expect(try view(late, at: t) == view(events, at: t))
        #expect(try view(late, at: t) == expected(device(today: 1, can: false, next: "2026-03-02T00:00:00.000Z")))
    }

    /// One older than a settled fact (the window passed since) cannot be placed: the state
    /// answers for no time, and the view is replayed from the events in business-time order —
    /// the same as when they came in order.
    @Test func aSessionEventLaterThanTheWindowIsAnsweredFromTheEvents() throws {
        let events = [start(mar1), pause(mar1.adding(seconds: 100)), start(mar1.adding(seconds: 200)), end(mar1.adding(seconds: 600)),
                      start(days(3, after: mar1)), end(days(3, after: mar1).adding(seconds: 600))]
        let late = [events[0], events[2], events[3], events[4], events[5], events[1]]
        let t = days(3, after: mar1).adding(seconds: 600)
        let arrived = try Folded(late)
        #expect(arrived.state(AccessModel.self).disordered)
        #expect(AccessModel.answersFrom(arrived.state(AccessModel.self), facts: arrived.facts()) == Timestamp(milliseconds: .max))
        #expect(try view(late, at: t) == view(events, at: t))
        #expect(try view(late, at: t) == expected(device(today: 1, can: false, next: "2026-03-05T00:00:00.000Z")))
    }

    /// The subscribe-cancel signal counts a purchase when its subscription's auto-renew is
    /// turned off after it (in time, then position) and before it expires: read in one pass
    /// (`cancelledPeriods`), it counts what asking each purchase about each cancellation counts,
    /// for every list of up to four purchases and four cancellations of two subscriptions at
    /// times 0–3 (ties included), each expiring at 1–4.
    @Test func cancelledPeriodsCountWhatEveryPairCounts() {
        var rng = DataGenerator(state: 7)
        var counted = Set<Int>()
        for _ in 0 ..< 4_000 {
            var position: UInt64 = 0
            func at() -> (Timestamp, UInt64) {
                position += 1
                return (Timestamp(milliseconds: Int64(rng.next() % 4)), position)
            }
            var purchases: [Dated<AccessModel.Purchase>] = []
            var cancellations: [Dated<String>] = []
            for _ in 0 ..< rng.next() % 5 {
                let (t, p) = at()
                purchases.insertDated(Dated(at: t, position: p, value: AccessModel.Purchase(
                    originalTransactionId: rng.next() % 2 == 0 ? "a" : "b", expiresAt: Timestamp(milliseconds: Int64(1 + rng.next() % 4)))))
            }
            for _ in 0 ..< rng.next() % 5 {
                let (t, p) = at()
                cancellations.insertDated(Dated(at: t, position: p, value: rng.next() % 2 == 0 ? "a" : "b"))
            }
            let everyPair = purchases.count { purchase in
                cancellations.contains { c in
                    c.value == purchase.value.originalTransactionId && (c.at, c.position) > (purchase.at, purchase.position) && c.at < purchase.value.expiresAt
                }
            }
            #expect(AccessRules.cancelledPeriods(purchases[...], cancellations[...]) == everyPair, "\(purchases) \(cancellations)")
            counted.insert(everyPair)
        }
        #expect(counted.isSuperset(of: [0, 1, 2, 3]))
    }

    /// A folded state counts the subscribe-cancel cycles as it folds (`SubscribeCancelCycles`,
    /// found by halving at each view): the same count as the one-pass walk over the lists known
    /// at the view's time, for random purchases and cancellations of two subscriptions folded in
    /// any order (ties included, late ones among them), and for the state read back from its
    /// encoding.
    @Test func foldedCyclesCountWhatTheWalkCounts() throws {
        var rng = DataGenerator(state: 11)
        let base = ts("2026-03-01T00:00:00Z")
        func at(_ hours: UInt64) -> Timestamp { base.adding(hours: Int64(hours)) }
        var counted = Set<Int64>()
        for _ in 0 ..< 300 {
            var events: [LedgerEvent] = []
            for _ in 0 ..< rng.next() % 7 {
                let original = rng.next() % 2 == 0 ? "a" : "b"
                if rng.next() % 2 == 0 {
                    let t = at(rng.next() % 6)
                    events.append(Make.purchase("u", at: t, txn: "t\(events.count)", original: original, expires: t.adding(hours: Int64(1 + rng.next() % 3))))
                } else {
                    events.append(Make.autoRenew("u", at: at(rng.next() % 6), original: original, enabled: false))
                }
            }
            let folded = try Folded(events)
            let state = folded.state(AccessModel.self)
            let decoded = try state.encoded.withUnsafeBytes { bytes in try AccessModel.State.decode(bytes) }
            for hour in 0 ..< 8 as Range<UInt64> {
                let t = at(hour)
                let walked = Int64(AccessRules.cancelledPeriods(state.purchases.known(at: t), state.cancellations.known(at: t)))
                let facts = folded.facts()
                #expect(AccessModel.view(of: state, facts: facts, at: t, policy: .reference)?.signals.subscribeCancelCycles == walked, "\(events) at \(t)")
                #expect(AccessModel.view(of: decoded, facts: facts, at: t, policy: .reference)?.signals.subscribeCancelCycles == walked, "decoded: \(events) at \(t)")
                counted.insert(walked)
            }
        }
        #expect(counted.isSuperset(of: [0, 1, 2]))
    }
}

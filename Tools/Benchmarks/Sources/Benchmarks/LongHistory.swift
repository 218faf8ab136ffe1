import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections

/// The long-history cases: one store holding a loyal customer's history of 100,000 events (a
/// subscription renewed monthly for five years, and each day sessions and inbox messages
/// delivered and read), one of 10,000 spread the same way, and a customer with 10 events;
/// each long figure is set against the same figure for the short one, measured in the same
/// run.
struct LongHistory {
    /// The long subject's events: 100,000, fewer on a tiny run (the benchmark's own tests).
    let longEvents: Int
    var mediumEvents: Int { longEvents / 10 }
    static let shortEvents = 10
    /// One-event transactions per subject in `append.longHistory`.
    static let appends = 200
    /// Status queries per subject in `status.longHistory`.
    static let queries = 2_000

    let path: String
    let progress: Progress

    struct Figures {
        /// Mean µs of a one-event transaction to the long subject, and to the short one.
        var appendLongUs: Double
        var appendShortUs: Double
        /// Status p50 (µs, in process) of the long subject, and of the short one.
        var statusLongUs: Double
        var statusShortUs: Double
        /// Seconds of the audit of the long subject, and of the 10,000-event one.
        var auditLongSeconds: Double
        var auditMediumSeconds: Double
    }

    func run() throws -> Figures {
        let ledger = try Ledger(path: path)
        defer { ledger.close() }
        let end = Bench.present.adding(seconds: -86_400)
        var all = Self.history("long", events: longEvents, end: end)
        all += Self.history("medium", events: mediumEvents, end: end)
        all += Self.history("short", events: Self.shortEvents, end: end)
        all.sort { $0.occurredAt < $1.occurredAt }
        progress.update("long history", done: 0, total: all.count)
        for start in stride(from: 0, to: all.count, by: Bench.batch) {
            try ledger.append(Array(all[start ..< min(start + Bench.batch, all.count)]))
            progress.update("long history", done: start, total: all.count)
        }

        let clock = ContinuousClock()
        func appends(to subject: String) throws -> Double {
            let start = clock.now
            for i in 0 ..< Self.appends {
                try ledger.append([Self.message(subject, "late-\(i)", read: false, at: end.adding(seconds: Int64(i)))])
            }
            return (clock.now - start).seconds * 1e6 / Double(Self.appends)
        }
        progress.update("long history appends", done: 0, total: 2 * Self.appends)
        // Alternated, so that drift in the machine's speed falls on both alike.
        var longUs: [Double] = [], shortUs: [Double] = []
        for _ in 0 ..< 3 {
            longUs.append(try appends(to: "long"))
            shortUs.append(try appends(to: "short"))
        }

        func statusP50(_ subject: String) throws -> Double {
            var micros: [Double] = []
            for i in 0 ..< Self.queries + 100 {
                let start = clock.now
                let status = try ledger.status(of: subject, at: Bench.present)
                let elapsed = clock.now - start
                guard status.answers.contains(where: { $0.view != nil }) else { throw BenchFailure("status of \(subject) came back empty; this is a bug") }
                if i >= 100 { micros.append(elapsed.seconds * 1e6) }
            }
            micros.sort()
            return micros[micros.count / 2]
        }
        progress.update("long history status", done: 0, total: 2 * Self.queries, unit: "queries")
        let statusLong = try statusP50("long"), statusShort = try statusP50("short")

        func audit(_ subject: String, expecting events: Int) throws -> Double {
            progress.update("audit of \(subject)", done: 0, total: events)
            let start = clock.now
            let report = try ledger.audit(of: subject, at: Bench.present)
            let seconds = (clock.now - start).seconds
            guard report.entries.filter({ $0.position != nil }).count >= events else {
                throw BenchFailure("the audit of \(subject) has fewer entries than its \(events) events; this is a bug")
            }
            return seconds
        }
        let auditMedium = try audit("medium", expecting: mediumEvents)
        let auditLong = try audit("long", expecting: longEvents)
        return Figures(appendLongUs: longUs.sorted()[1], appendShortUs: shortUs.sorted()[1], statusLongUs: statusLong, statusShortUs: statusShort,
                       auditLongSeconds: auditLong, auditMediumSeconds: auditMedium)
    }

    /// `count` events of `subject` ending at `end`: an account, a monthly subscription renewed
    /// for five years, and each day a session with an inbox message delivered and read.
    static func history(_ subject: String, events count: Int, end: Timestamp) -> [LedgerEvent] {
        let span: Int64 = 5 * 365 * 86_400
        let start = end.adding(seconds: -span)
        var events = [LedgerEvent(subject: subject, occurredAt: start, source: .app, data: {
            var c = AccountCreated()
            c.signedIn = true
            return c.eventData
        }())]
        var purchase = SubscriptionPurchased()
        purchase.productId = "pro.monthly"
        purchase.transactionId = "\(subject)-t0"
        purchase.originalTransactionId = purchase.transactionId
        purchase.purchasedAt = start
        purchase.expiresAt = start.adding(seconds: 30 * 86_400)
        events.append(LedgerEvent(subject: subject, occurredAt: start, source: .appstore, data: purchase.eventData))
        var month: Int64 = 1
        while events.count < count, month < 61, count > 1_000 {
            var renewal = SubscriptionRenewed()
            renewal.productId = purchase.productId
            renewal.transactionId = "\(subject)-t\(month)"
            renewal.originalTransactionId = purchase.transactionId
            renewal.purchasedAt = start.adding(seconds: month * 30 * 86_400)
            renewal.expiresAt = renewal.purchasedAt.adding(seconds: 30 * 86_400)
            events.append(LedgerEvent(subject: subject, occurredAt: renewal.purchasedAt, source: .appstore, data: renewal.eventData))
            month += 1
        }
        let rest = count - events.count
        let step = max(span * 1_000 / Int64(max(rest, 1)), 1)   // ms: the rest spread over the five years
        for i in 0 ..< rest {
            let at = Timestamp(milliseconds: start.milliseconds + 1_000 + Int64(i) * step)
            switch i % 4 {
            case 0:
                var s = SessionStarted()
                s.deviceId = "phone"
                s.timeZone = "Europe/Zurich"
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .app, data: s.eventData))
            case 1: events.append(message(subject, "m\(i / 4)", read: false, at: at))
            case 2: events.append(message(subject, "m\(i / 4)", read: true, at: at))
            default:
                var e = SessionEnded()
                e.deviceId = "phone"
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .app, data: e.eventData))
            }
        }
        return events
    }

    static func message(_ subject: String, _ id: String, read: Bool, at: Timestamp) -> LedgerEvent {
        if read {
            var r = InboxMessageRead()
            r.messageId = id
            return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: r.eventData)
        }
        var d = InboxMessageDelivered()
        d.messageId = id
        return LedgerEvent(subject: subject, occurredAt: at, source: .app, data: d.eventData)
    }
}

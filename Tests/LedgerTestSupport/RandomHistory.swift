@_spi(Storage) import LedgerCore
import LedgerModels

/// Random but plausible subscription histories for property tests: purchases (some trials),
/// renewals, failures with and without the store's grace date, recoveries, expiries,
/// cancellations and un-cancels, refunds and reversals, extensions, upgrades, support grants,
/// device snapshots, sign-ins and outs, deletions, recovery passes, family cancellations,
/// sessions in several zones, inbox messages, maintenance tasks, security flags, resources
/// created and deleted (ids reused), deletion requests, cancellations and steps, exports, and
/// some events no model reads.
///
/// Every event of a subject gets its own minute, so no two facts of one subject share a
/// millisecond (where positions would break the tie, SPEC §2.1's order-independence holds).
public struct RandomHistory {
    public var random: DataGenerator
    public let start = ts("2026-01-01T00:00:00Z")

    public init(seed: UInt64) { random = DataGenerator(state: seed) }

    public mutating func events(subjects: Int, perSubject: ClosedRange<Int>) -> [LedgerEvent] {
        var all: [LedgerEvent] = []
        for s in 0..<subjects { all += history(of: "s\(s)", count: random.int(perSubject)) }
        return all
    }

    public mutating func history(of subject: String, count: Int) -> [LedgerEvent] {
        var events: [LedgerEvent] = []
        var minute: Int64 = Int64(random.int(0...60))
        var transactions: [String] = []
        var original = "\(subject)-o0"
        func time() -> Timestamp {
            minute += Int64(random.int(1...(3 * 24 * 60)))
            return start.adding(seconds: minute * 60)
        }
        for i in 0..<count {
            let at = time()
            let period = Int64(random.bool() ? 7 : 30)
            switch random.int(0...23) {
            case 0, 1:
                if random.int(0...3) == 0 { original = "\(subject)-o\(i)" }
                let id = "\(subject)-t\(i)"
                transactions.append(id)
                events.append(Make.purchase(subject, at: at, txn: id, original: original, expires: days(period, after: at), trial: random.int(0...2) == 0))
            case 2, 3:
                let id = "\(subject)-t\(i)"
                transactions.append(id)
                events.append(Make.renewal(subject, at: at, txn: id, original: original, expires: days(period, after: at)))
            case 4:
                events.append(Make.renewalFailed(subject, at: at, original: original,
                                                 graceExpiresAt: random.bool() ? days(Int64(random.int(1...16)), after: at) : nil))
            case 5:
                events.append(Make.expired(subject, at: at, original: original))
            case 6:
                events.append(Make.autoRenew(subject, at: at, original: original, enabled: random.bool()))
            case 7:
                guard let id = transactions.randomElement(using: &random) else { fallthrough }
                events.append(Make.refund(subject, at: at, txn: id, original: original))
            case 8:
                guard let id = transactions.randomElement(using: &random) else { fallthrough }
                var r = SubscriptionRefundReversed()
                r.transactionId = id
                r.originalTransactionId = original
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: r.eventData))
            case 9:
                guard let id = transactions.randomElement(using: &random) else { fallthrough }
                var e = SubscriptionRenewalExtended()
                e.transactionId = id
                e.originalTransactionId = original
                e.expiresAt = days(Int64(random.int(10...60)), after: at)
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: e.eventData))
            case 10:
                var c = SubscriptionProductChanged()
                c.originalTransactionId = original
                c.fromProductId = "pro.monthly"
                c.toProductId = "pro.yearly"
                if random.bool() {
                    c.effective = .immediate
                    let id = "\(subject)-t\(i)"
                    transactions.append(id)
                    c.transactionId = id
                    c.purchasedAt = at
                    c.expiresAt = days(365, after: at)
                }
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: c.eventData))
            case 11:
                events.append(Make.grant(subject, at: at, until: days(Int64(random.int(1...20)), after: at)))
            case 12:
                var v = EntitlementVerified()
                v.plan = [VerifiedPlan.free, .trial, .pro][random.int(0...2)]
                v.expiresAt = random.bool() ? days(Int64(random.int(1...30)), after: at) : nil
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .app, data: v.eventData))
            case 13:
                var f = EntitlementVerificationFailed()
                f.reason = .network
                events.append(LedgerEvent(subject: subject, occurredAt: at, source: .app, data: f.eventData))
            case 14:
                events.append(random.bool() ? Make.created(subject, at: at, signedIn: random.bool())
                    : LedgerEvent(subject: subject, occurredAt: at, source: .app, data: random.bool() ? AccountSignedIn().eventData : AccountSignedOut().eventData))
            case 16:
                events.append(random.bool() ? Make.recoveryPass(subject, at: at, txn: "\(subject)-p\(i)") : Make.organizerCancelled(subject, at: at))
            case 17:
                // A session on one of two devices, and what followed it within minutes: pauses
                // either side of resumeWithinSeconds, crashes, ends, usage.
                let device = ["d1", "d2"][random.int(0...1)]
                var t = at
                events.append(Make.session(subject, at: t, zone: ["Europe/Berlin", "America/Los_Angeles", "Asia/Tokyo", "UTC", "Pacific/Kiritimati"][random.int(0...4)], device: device))
                for _ in 0 ..< random.int(0...3) {
                    t = t.adding(seconds: Int64(random.int(1...400)))
                    switch random.int(0...4) {
                    case 0: events.append(Make.device(subject, at: t, .backgrounded, device: device))
                    case 1: events.append(Make.device(subject, at: t, .foregrounded, device: device))
                    case 2: events.append(Make.device(subject, at: t, .crashed, device: device))
                    case 3: events.append(Make.device(subject, at: t, .ended, device: device))
                    default: events.append(Make.used(subject, at: t, "export", count: Int64(random.int(1...8))))
                    }
                }
                // The burst's minutes are its own: the next event comes after them.
                minute = max(minute, (t.milliseconds - start.milliseconds) / 60_000 + 1)
            case 18:
                let message = "m\(random.int(0...3))"
                events.append(random.bool() ? Make.delivered(subject, at: at, message: message) : Make.read(subject, at: at, message: message))
            case 19:
                let task = "task\(random.int(0...2))"
                let (y, m, d) = CivilDate.fromDays(at.milliseconds / 86_400_000 + Int64(random.int(0...3)))
                let due = "\(y)-\(m < 10 ? "0" : "")\(m)-\(d < 10 ? "0" : "")\(d)"
                events.append(random.int(0...2) == 0 ? Make.completed(subject, at: at, task: task) : Make.scheduled(subject, at: at, task: task, due: due))
            case 20:
                events.append(Make.flag(subject, at: at, ["newDevice", "passwordLeak"][random.int(0...1)], raised: random.bool()))
            case 22:
                let kind = ["tag", "person"][random.int(0...1)]
                events.append(Make.resource(subject, at: at, kind, "\(kind)\(random.int(0...3))", deleted: random.int(0...2) == 0))
            case 23:
                switch random.int(0...6) {
                case 0, 1: events.append(Make.deletionRequested(subject, at: at))
                case 2: events.append(Make.deletionCancelled(subject, at: at))
                case 3: events.append(Make.step(subject, at: at, ["photos", "profile"][random.int(0...1)], failed: random.bool()))
                case 4: events.append(Make.exportRequested(subject, at: at))
                case 5: events.append(Make.exportCompleted(subject, at: at, location: "s3://exports/\(subject)-\(i).zip"))
                default: events.append(Make.step(subject, at: at, "auth"))
                }
            default:
                if random.int(0...9) == 0 {
                    events.append(LedgerEvent(subject: subject, occurredAt: at, source: .system, data: AccountDeleted().eventData))
                } else {
                    events.append(Make.usage(subject, at: at))
                }
            }
        }
        return events
    }

    /// A permutation of `events`.
    public mutating func shuffled<T>(_ events: [T]) -> [T] {
        var events = events
        events.shuffle(using: &random)
        return events
    }
}

extension DataGenerator: RandomNumberGenerator {}

extension DataGenerator {
    public mutating func bool() -> Bool { next() & 1 == 0 }
}

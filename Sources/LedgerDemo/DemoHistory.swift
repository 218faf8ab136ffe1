@_spi(Storage) import LedgerCore
import LedgerModels


/// The demo's customers: deterministic, realistic histories over the 18 months before `now`.
///
/// A history is planned first as a list of small `Step`s (times and a `Fact`, no strings), which
/// is cheap enough to plan again whenever its events are needed; `draft(_:)` turns one step into
/// the event the ledger stores. The same seed, subject and `now` always give the same steps.
@_spi(Storage) public enum DemoHistory {
    static let second: Int64 = 1000
    static let minute: Int64 = 60_000
    static let hour: Int64 = 3_600_000
    static let day: Int64 = 86_400_000
    /// How far back the demo's histories begin.
    public static let span: Int64 = 540 * day

    static let zones = ["Europe/Berlin", "America/Los_Angeles", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Europe/London", "UTC"]
    /// Per zone, the local days (since 1970-01-01) of 2024 to 2028 that are not 24 hours long:
    /// the nights the clocks change.
    static let clockChanges: [[Int64]] = zones.map { name in
        let zone = LocalTime.zone(name)
        return (CivilDate.days(year: 2024, month: 1, day: 1) ..< CivilDate.days(year: 2029, month: 1, day: 1)).filter { day in
            LocalTime.start(ofDay: day + 1, in: zone).milliseconds - LocalTime.start(ofDay: day, in: zone).milliseconds != DemoHistory.day
        }
    }
    static let deletionSteps = ["photos", "profile", "backups"]
    static let flags = ["newDeviceSignIn", "passwordReused"]
    static let resourceKinds = ["person", "tag"]
    static let features = ["faceSearch", "export", "share"]

    enum Product: UInt8 {
        case monthly, yearly
        var id: String { self == .monthly ? "pro.monthly" : "pro.yearly" }
        var length: Int64 { self == .monthly ? 30 * DemoHistory.day : 365 * DemoHistory.day }
    }

    /// One fact of a history; transaction numbers are per subject.
    enum Fact {
        case created(signedIn: Bool)
        case signedIn, signedOut
        case sessionStarted(device: UInt8), sessionEnded(device: UInt8, crashed: Bool)
        case sessionBackgrounded(device: UInt8), sessionForegrounded(device: UInt8)
        case usage(feature: UInt8, count: UInt8)
        case resourceCreated(kind: UInt8, id: UInt8), resourceDeleted(kind: UInt8, id: UInt8)
        case purchaseStarted(Product), purchasePending(Product), purchaseFailed(Product)
        case purchased(Product, tx: UInt16, expires: Int64, trial: Bool, winBack: Bool)
        case renewed(Product, tx: UInt16, original: UInt16, expires: Int64, recovery: Bool)
        case renewalFailed(original: UInt16, graceEnd: Int64)
        case graceExpired(original: UInt16)
        case autoRenew(original: UInt16, on: Bool)
        case expired(original: UInt16, reason: ExpirationReason)
        case refunded(tx: UInt16, original: UInt16)
        case refundReversed(tx: UInt16, original: UInt16)
        case upgraded(tx: UInt16, original: UInt16, expires: Int64)
        case granted(until: Int64)
        case verified(expires: Int64)
        case verificationFailed
        case recoveryPass(tx: UInt16)
        case organizerCancelled
        case delivered(message: UInt8), read(message: UInt8)
        case maintenanceScheduled(task: UInt8, dueDay: Int64), maintenanceCompleted(task: UInt8)
        case flagRaised(UInt8), flagCleared(UInt8)
        case billingNotifications(on: Bool)
        case note
        case exportRequested, exportCompleted
        case deletionRequested, deletionStep(UInt8), deletionStepFailed(UInt8), deletionCancelled, deleted
    }

    struct Step {
        var occurredAt: Int64
        var recordedAt: Int64
        var source: EventSource
        var fact: Fact
    }

    /// What makes a history worth showing (the demo audits one of each kind).
    struct Traits: OptionSet {
        let rawValue: UInt16
        static let lateRefund = Traits(rawValue: 1 << 0)
        static let refundReversed = Traits(rawValue: 1 << 1)
        static let billingLapse = Traits(rawValue: 1 << 2)
        static let billingRecovered = Traits(rawValue: 1 << 3)
        static let recoveryPass = Traits(rawValue: 1 << 4)
        static let deviceOnly = Traits(rawValue: 1 << 5)
        static let offline = Traits(rawValue: 1 << 6)
        static let upgrade = Traits(rawValue: 1 << 7)
        static let converted = Traits(rawValue: 1 << 8)
        static let deleted = Traits(rawValue: 1 << 9)
        static let family = Traits(rawValue: 1 << 10)
    }

    struct Plan {
        var steps: [Step]
        var traits: Traits
        var zone: UInt8
    }

    public static func subject(_ index: Int) -> String { "customer-\(index)" }

    /// One customer's history, in the order it was planned (not time order).
    static func plan(subject index: Int, seed: UInt64, now: Int64) -> Plan {
        var planner = Planner(index: index, seed: seed, now: now)
        planner.run()
        return Plan(steps: planner.steps, traits: planner.traits, zone: planner.zone)
    }

    /// The planner: one pass of dice over a customer's life.
    struct Planner {
        let now: Int64
        var rng: SplitMix
        /// A second stream for what the demo added later (nightly sessions, collections near
        /// the free limits, retried deletions): the histories drawn before stay as they were.
        var more: SplitMix
        var steps: [Step] = []
        var traits: Traits = []
        let zone: UInt8
        let start: Int64
        var tx: UInt16 = 0
        /// App events after this are not sent (the account is gone).
        var appEnd: Int64 = .max

        init(index: Int, seed: UInt64, now: Int64) {
            self.now = now
            rng = SplitMix(seed: seed ^ (UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
            more = SplitMix(seed: ~seed ^ (UInt64(index) &* 0xC2B2_AE3D_27D4_EB4F))
            zone = UInt8(rng.below(UInt64(DemoHistory.zones.count)))
            start = now - Int64(rng.below(UInt64(span / minute))) * minute
        }

        mutating func chance(_ percent: UInt64) -> Bool { rng.below(1000) < percent * 10 }

        /// Runs `body` drawing from the second stream.
        mutating func later<T>(_ body: (inout Planner) -> T) -> T {
            swap(&rng, &more)
            defer { swap(&rng, &more) }
            return body(&self)
        }
        mutating func permille(_ value: UInt64) -> Bool { rng.below(1000) < value }
        mutating func between(_ low: Int64, _ high: Int64) -> Int64 { high <= low ? low : low + Int64(rng.below(UInt64(high - low))) }

        /// Adds a step unless it lies in the future (or, for the app, after the account is gone).
        /// `clockAhead`: the device's clock runs that far ahead, so the event says it occurred
        /// after the ledger recorded it.
        mutating func add(_ at: Int64, _ source: EventSource, _ fact: Fact, recordedLate: Int64? = nil, clockAhead: Int64 = 0) {
            guard at <= now, source != .app || at <= appEnd else { return }
            var recorded: Int64
            switch source {
            case .app:
                // Apps queue events while offline: a few arrive hours later.
                recorded = at + (permille(30) ? between(hour, 30 * hour) : between(200, 3 * second))
            case .appstore:
                recorded = at + between(second, 60 * second)
            default:
                recorded = at + between(100, second)
            }
            if let recordedLate { recorded = at + recordedLate }
            steps.append(Step(occurredAt: at, recordedAt: max(at, min(recorded, now)) - clockAhead, source: source, fact: fact))
        }

        mutating func run() {
            let signedIn = chance(85)
            add(start, .app, .created(signedIn: signedIn))
            if !signedIn && chance(60) { add(start + between(minute, 2 * day), .app, .signedIn) }
            background()
            later { planner in
                planner.nightly()
                planner.collection()
            }
            let roll = rng.below(100)
            switch roll {
            case 0..<20: attempts()
            case 20..<23: deviceOnly()
            case 23..<25: family()
            default: subscriber()
            }
            ending()
            later { $0.grandfathered() }
        }

        /// Sessions, usage, inbox, maintenance, flags, preferences: what every app sends.
        mutating func background() {
            let devices = UInt8(1 + rng.below(2))
            for _ in 0..<(1 + rng.below(3)) {
                let at = between(start + minute, now)
                let device = UInt8(rng.below(UInt64(devices)))
                add(at, .app, .sessionStarted(device: device))
                if chance(30) { add(at + between(5 * second, 20 * minute), .app, .usage(feature: UInt8(rng.below(3)), count: UInt8(1 + rng.below(14)))) }
                add(at + between(30 * second, 40 * minute), .app, .sessionEnded(device: device, crashed: chance(5)))
            }
            for id in 0..<UInt8(rng.below(3)) {
                let kind = UInt8(rng.below(2))
                let at = between(start + minute, now)
                add(at, .app, .resourceCreated(kind: kind, id: id))
                if chance(15) { add(between(at, now), .app, .resourceDeleted(kind: kind, id: id)) }
            }
            for message in 0..<UInt8(rng.below(3)) {
                let at = between(start, now)
                add(at, .system, .delivered(message: message))
                if chance(60) { add(at + between(minute, 10 * day), .app, .read(message: message)) }
            }
            if chance(10) {
                let at = between(start, now)
                // Half the tasks fall due on the demo's own day, in the customer's zone.
                let due = chance(50) ? localDay(now) : localDay(at) + between(1, 14)
                add(at, .system, .maintenanceScheduled(task: 0, dueDay: due))
                if chance(30) { add(between(at, now), .app, .maintenanceCompleted(task: 0)) }
            }
            if chance(4) {
                let flag = UInt8(rng.below(2))
                let at = between(start, now)
                add(at, .system, .flagRaised(flag))
                if chance(50) { add(at + between(hour, 20 * day), .support, .flagCleared(flag)) }
            }
            if chance(5) { add(between(start, now), .app, .billingNotifications(on: false)) }
            if chance(2) { add(between(start, now), .support, .note) }
        }

        /// A daily user on a device of its own: sessions around local midnight, some paused and
        /// resumed within resumeWithinSeconds or not, one on a night the clocks change.
        mutating func nightly() {
            guard chance(25) else { return }
            let device: UInt8 = 2
            let zone = LocalTime.zone(DemoHistory.zones[Int(self.zone)])
            var nights: [(day: Int64, from: Int64, to: Int64)] = (0 ..< between(2, 6)).map { _ in (localDay(between(start + day, now)), -25 * minute, 25 * minute) }
            if chance(40), let night = DemoHistory.clockChanges[Int(self.zone)].first(where: { localDay(start) < $0 && $0 < localDay(now) }) {
                nights.append((night, 90 * minute, 4 * hour))   // 01:30 to 05:30 local: over the change
            }
            // One in fifty has its clock set an hour ahead, to stretch the free day.
            let ahead = chance(2) ? hour : 0
            for night in nights {
                var at = LocalTime.start(ofDay: night.day, in: zone).milliseconds + between(night.from, night.to)
                add(at, .app, .sessionStarted(device: device), clockAhead: ahead)
                if chance(50) {
                    let pause = at + between(minute, 10 * minute)
                    add(pause, .app, .sessionBackgrounded(device: device))
                    at = pause + (chance(60) ? between(10 * second, 290 * second) : between(310 * second, 20 * minute))
                    add(at, .app, .sessionForegrounded(device: device))
                }
                if chance(15) { add(at + between(5 * second, minute), .app, .usage(feature: UInt8(rng.below(3)), count: UInt8(11 + rng.below(4)))) }
                let end = at + between(20 * second, 30 * minute)
                add(end, .app, .sessionEnded(device: device, crashed: chance(5)))
                if chance(30) {
                    let again = end + between(10 * minute, 3 * hour)
                    add(again, .app, .sessionStarted(device: device))
                    add(again + between(30 * second, 20 * minute), .app, .sessionEnded(device: device, crashed: false))
                }
            }
        }

        /// A collector near the free tier's limits: 18 to 26 people, or 3 to 6 tags.
        mutating func collection() {
            guard chance(8) else { return }
            let kind = UInt8(rng.below(2))
            let count = kind == 0 ? between(18, 27) : between(3, 7)
            for id in 0 ..< UInt8(count) { add(between(start + minute, now), .app, .resourceCreated(kind: kind, id: 10 + id)) }
        }

        /// A collector from before the free limits took effect (the reference policy's
        /// `limits.effectiveAt`): over a limit on that day, so inside the existing users' grace,
        /// and blocked from adding more once it ends.
        mutating func grandfathered() {
            guard let effective = Policy.reference.limits?.effectiveAt.milliseconds, start < effective - day, chance(10) else { return }
            let kind = UInt8(rng.below(2))
            let count = kind == 0 ? between(26, 36) : between(6, 10)
            for id in 0 ..< UInt8(count) { add(between(start + minute, effective), .app, .resourceCreated(kind: kind, id: 40 + id)) }
        }

        /// Never subscribes; some try, one in twenty still waits for Ask to Buy.
        mutating func attempts() {
            guard chance(30) else { return }
            let product: Product = chance(70) ? .monthly : .yearly
            let at = between(start + hour, now)
            add(at, .app, .purchaseStarted(product))
            if chance(20) {
                add(at + between(10 * second, 5 * minute), .app, .purchasePending(product))
            } else {
                add(at + between(10 * second, 5 * minute), .app, .purchaseFailed(product))
                // Support makes up for a purchase that kept failing.
                if chance(25) {
                    let granted = at + between(hour, 3 * day)
                    add(granted, .support, .granted(until: granted + 30 * day))
                }
            }
        }

        /// Bought on another platform: the ledger sees only the device's verifications. At the
        /// end the device checked in within the day, or then failed to (offline), or went quiet.
        mutating func deviceOnly() {
            traits.insert(.deviceOnly)
            var at = between(start + hour, start + 3 * day)
            while at <= now - 2 * day {
                add(at, .app, .verified(expires: at + 30 * day))
                at += between(5 * day, 30 * day)
            }
            guard rng.below(3) < 2 else { return }
            let last = max(start + minute, now - between(hour, 20 * hour))
            add(last, .app, .verified(expires: last + 30 * day))
            if chance(50) {
                traits.insert(.offline)
                add(between(last + minute, now), .app, .verificationFailed)
            }
        }

        /// A family member: the organizer's plan covers them until the organizer cancels.
        mutating func family() {
            traits.insert(.family)
            let at = between(start + hour, start + 30 * day)
            tx += 1
            let original = tx
            var end = at + Product.monthly.length
            add(at, .appstore, .purchased(.monthly, tx: original, expires: end, trial: false, winBack: false))
            let cancels = chance(70)
            while end < now {
                if cancels && chance(25) {
                    add(end - between(day, 20 * day), .appstore, .organizerCancelled)
                    add(end, .appstore, .expired(original: original, reason: .voluntary))
                    return
                }
                tx += 1
                add(end, .appstore, .renewed(.monthly, tx: tx, original: original, expires: end + Product.monthly.length, recovery: false))
                end += Product.monthly.length
            }
        }

        /// Trials that convert or lapse, renewals, cancellations, failures, refunds, upgrades,
        /// win-backs and, after a lapse, support grants and recovery passes.
        mutating func subscriber() {
            var at = between(start + minute, start + 20 * day)
            var product: Product = chance(75) ? .monthly : .yearly
            var trial = chance(80)
            var winBack = false
            var lapses = 0
            while at <= now && lapses < 2 {
                if chance(5) {
                    add(at - between(10 * second, minute), .app, .purchaseStarted(product))
                    add(at - between(0, 10 * second), .app, .purchaseFailed(product))
                    at += between(minute, 2 * day)
                }
                add(at - between(5 * second, 40 * second), .app, .purchaseStarted(product))
                tx += 1
                let original = tx
                var current = tx
                var end = at + (trial ? 7 * day : product.length)
                add(at, .appstore, .purchased(product, tx: original, expires: end, trial: trial, winBack: winBack))
                let lapse = periods(original: original, current: &current, product: &product, trial: trial, from: at, end: &end)
                guard let lapse, lapse <= now else { return }
                lapses += 1
                afterLapse(lapse)
                // One in six comes back after a while, without a trial.
                guard chance(16) else { return }
                at = lapse + between(20 * day, 200 * day)
                trial = false
                winBack = true
            }
        }

        /// The periods of one subscription from its purchase; returns when access ended, or
        /// `nil` while it still runs.
        mutating func periods(original: UInt16, current: inout UInt16, product: inout Product, trial: Bool,
                              from purchase: Int64, end: inout Int64) -> Int64? {
            var inTrial = trial
            var periodStart = purchase
            if chance(30) { add(purchase + hour, .app, .verified(expires: end)) }
            while end <= now {
                if inTrial {
                    inTrial = false
                    if chance(40) {
                        add(between(periodStart + hour, end - hour), .appstore, .autoRenew(original: original, on: false))
                        add(end, .appstore, .expired(original: original, reason: .voluntary))
                        return end
                    }
                    traits.insert(.converted)
                } else {
                    let roll = rng.below(1000)
                    switch roll {
                    case 0..<45:
                        // A failed renewal: recovered within the retry window, or lapsed.
                        let graceEnd = end + 3 * day
                        add(end, .appstore, .renewalFailed(original: original, graceEnd: graceEnd))
                        if chance(50) {
                            traits.insert(.billingRecovered)
                            let recovered = end + between(hour, 20 * day)
                            current = tx + 1
                            tx += 1
                            let next = recovered + product.length
                            add(recovered, .appstore, .renewed(product, tx: current, original: original, expires: next, recovery: true))
                            periodStart = recovered
                            end = next
                            continue
                        }
                        traits.insert(.billingLapse)
                        add(graceEnd, .appstore, .graceExpired(original: original))
                        add(end + 60 * day, .appstore, .expired(original: original, reason: .billingRetry))
                        return graceEnd
                    case 45..<135:
                        add(between(periodStart + hour, end - hour), .appstore, .autoRenew(original: original, on: false))
                        add(end, .appstore, .expired(original: original, reason: .voluntary))
                        return end
                    case 135..<145:
                        // A refund of the running period; some arrive a week late, some are reversed.
                        let refundedAt = periodStart + between(day, 10 * day)
                        guard refundedAt < end else { break }
                        let late = chance(50) ? between(2 * day, 9 * day) : nil
                        if late != nil { traits.insert(.lateRefund) }
                        add(refundedAt, .appstore, .refunded(tx: current, original: original), recordedLate: late)
                        if chance(30) {
                            // Reversed after the refund reached the ledger.
                            traits.insert(.refundReversed)
                            add(refundedAt + (late ?? 0) + between(day, 14 * day), .appstore, .refundReversed(tx: current, original: original))
                        } else {
                            return refundedAt
                        }
                    case 145..<170 where product == .monthly:
                        // An upgrade to yearly, effective at once.
                        let upgradedAt = between(periodStart + hour, end - hour)
                        traits.insert(.upgrade)
                        tx += 1
                        current = tx
                        product = .yearly
                        periodStart = upgradedAt
                        end = upgradedAt + product.length
                        add(upgradedAt, .appstore, .upgraded(tx: current, original: original, expires: end))
                        continue
                    default:
                        break
                    }
                }
                tx += 1
                current = tx
                let next = end + product.length
                add(end, .appstore, .renewed(product, tx: current, original: original, expires: next, recovery: false))
                if chance(20) { add(end + between(minute, 3 * day), .app, .verified(expires: next)) }
                periodStart = end
                end = next
            }
            // Still covered now: some have already turned auto-renew off.
            if chance(10) { add(between(periodStart + hour, now), .appstore, .autoRenew(original: original, on: false)) }
            return nil
        }

        /// After access ended: support sometimes grants time; some buy a recovery pass.
        mutating func afterLapse(_ lapse: Int64) {
            if chance(8) {
                let at = lapse + between(hour, 5 * day)
                add(at, .support, .granted(until: at + 30 * day))
            }
            if now - lapse > 31 * day && chance(10) {
                traits.insert(.recoveryPass)
                tx += 1
                add(between(lapse + 31 * day, now), .appstore, .recoveryPass(tx: tx))
            }
        }

        /// Sign-outs, data exports and deletion requests, late in the history.
        mutating func ending() {
            if chance(4) { add(between(start + day, now), .app, .signedOut) }
            if chance(1) {
                let at = between(start + day, now)
                add(at, .app, .exportRequested)
                add(at + between(minute, day), .system, .exportCompleted)
            }
            guard chance(4) else { return }
            let requested = between(start + day, now)
            add(requested, .app, .deletionRequested)
            let outcome = rng.below(100)
            if outcome < 10 {
                add(requested + between(minute, day), .app, .deletionCancelled)
                return
            }
            var at = requested
            for step in 0..<UInt8(deletionSteps.count) {
                at += between(minute, 12 * hour)
                if outcome < 25 && step == 1 {
                    add(at, .system, .deletionStepFailed(step))
                    // Half are retried (a later completion of the step clears the failure).
                    guard later({ $0.chance(50) }) else { return }
                    at += later { $0.between(hour, 2 * day) }
                }
                add(at, .system, .deletionStep(step))
            }
            at += between(minute, hour)
            if at <= now { traits.insert(.deleted) }
            add(at, .system, .deleted)
            appEnd = at
            steps.removeAll { $0.source == .app && $0.occurredAt > at }
        }

        func localDay(_ t: Int64) -> Int64 {
            LocalTime.day(at: Timestamp(milliseconds: t), in: LocalTime.zone(DemoHistory.zones[Int(zone)]))
        }
    }

    /// The event one step stands for. `number` is the step's index in its plan (part of the id).
    static func event(_ step: Step, subject index: Int, number: Int, seed: UInt64, zone: UInt8) -> LedgerEvent {
        let otx = { (n: UInt16) in "\(1_000_000 + index)-\(n)" }
        let data: EventData
        switch step.fact {
        case .created(let signedIn):
            var p = AccountCreated()
            p.signedIn = signedIn
            data = p.eventData
        case .signedIn: data = AccountSignedIn().eventData
        case .signedOut: data = AccountSignedOut().eventData
        case .sessionStarted(let device):
            var p = SessionStarted()
            p.deviceId = "d\(index)-\(device)"
            p.timeZone = zones[Int(zone)]
            data = p.eventData
        case .sessionBackgrounded(let device):
            var p = SessionBackgrounded()
            p.deviceId = "d\(index)-\(device)"
            data = p.eventData
        case .sessionForegrounded(let device):
            var p = SessionForegrounded()
            p.deviceId = "d\(index)-\(device)"
            data = p.eventData
        case .sessionEnded(let device, let crashed):
            var p = SessionEnded()
            p.deviceId = "d\(index)-\(device)"
            p.reason = crashed ? .crash : .user
            data = p.eventData
        case .usage(let feature, let count):
            var p = UsageRecorded()
            p.feature = features[Int(feature)]
            p.count = Int64(count)
            data = p.eventData
        case .resourceCreated(let kind, let id):
            var p = ResourceCreated()
            p.kind = resourceKinds[Int(kind)]
            p.resourceId = "r\(id)"
            data = p.eventData
        case .resourceDeleted(let kind, let id):
            var p = ResourceDeleted()
            p.kind = resourceKinds[Int(kind)]
            p.resourceId = "r\(id)"
            data = p.eventData
        case .purchaseStarted(let product):
            var p = PurchaseStarted()
            p.productId = product.id
            data = p.eventData
        case .purchasePending(let product):
            var p = PurchasePending()
            p.productId = product.id
            p.reason = "askToBuy"
            data = p.eventData
        case .purchaseFailed(let product):
            var p = PurchaseFailed()
            p.productId = product.id
            p.reason = "paymentDeclined"
            data = p.eventData
        case .purchased(let product, let tx, let expires, let trial, let winBack):
            var p = SubscriptionPurchased()
            p.productId = product.id
            p.transactionId = otx(tx)
            p.originalTransactionId = otx(tx)
            p.purchasedAt = Timestamp(milliseconds: step.occurredAt)
            p.expiresAt = Timestamp(milliseconds: expires)
            p.offer = trial ? .freeTrial : winBack ? .winBack : nil
            p.environment = .production
            data = p.eventData
        case .renewed(let product, let tx, let original, let expires, let recovery):
            var p = SubscriptionRenewed()
            p.productId = product.id
            p.transactionId = otx(tx)
            p.originalTransactionId = otx(original)
            p.purchasedAt = Timestamp(milliseconds: step.occurredAt)
            p.expiresAt = Timestamp(milliseconds: expires)
            p.billingRecovery = recovery ? true : nil
            data = p.eventData
        case .renewalFailed(let original, let graceEnd):
            var p = SubscriptionRenewalFailed()
            p.originalTransactionId = otx(original)
            p.gracePeriodExpiresAt = Timestamp(milliseconds: graceEnd)
            data = p.eventData
        case .graceExpired(let original):
            var p = SubscriptionGraceExpired()
            p.originalTransactionId = otx(original)
            data = p.eventData
        case .autoRenew(let original, let on):
            var p = SubscriptionAutoRenewChanged()
            p.originalTransactionId = otx(original)
            p.enabled = on
            data = p.eventData
        case .expired(let original, let reason):
            var p = SubscriptionExpired()
            p.originalTransactionId = otx(original)
            p.reason = reason
            data = p.eventData
        case .refunded(let tx, let original):
            var p = SubscriptionRefunded()
            p.transactionId = otx(tx)
            p.originalTransactionId = otx(original)
            data = p.eventData
        case .refundReversed(let tx, let original):
            var p = SubscriptionRefundReversed()
            p.transactionId = otx(tx)
            p.originalTransactionId = otx(original)
            data = p.eventData
        case .upgraded(let tx, let original, let expires):
            var p = SubscriptionProductChanged()
            p.originalTransactionId = otx(original)
            p.fromProductId = Product.monthly.id
            p.toProductId = Product.yearly.id
            p.effective = .immediate
            p.transactionId = otx(tx)
            p.purchasedAt = Timestamp(milliseconds: step.occurredAt)
            p.expiresAt = Timestamp(milliseconds: expires)
            data = p.eventData
        case .granted(let until):
            var p = SupportEntitlementGranted()
            p.until = Timestamp(milliseconds: until)
            p.reason = "goodwill after a lapse"
            p.agent = "agent-7"
            data = p.eventData
        case .verified(let expires):
            var p = EntitlementVerified()
            p.plan = .pro
            p.expiresAt = Timestamp(milliseconds: expires)
            data = p.eventData
        case .verificationFailed:
            var p = EntitlementVerificationFailed()
            p.reason = .network
            data = p.eventData
        case .recoveryPass(let tx):
            var p = OneOffPurchased()
            p.productId = "recovery.pass"
            p.transactionId = otx(tx)
            p.kind = .recoveryPass
            data = p.eventData
        case .organizerCancelled:
            var p = FamilyOrganizerCancelled()
            p.organizer = "family-\(index / 10)"
            data = p.eventData
        case .delivered(let message):
            var p = InboxMessageDelivered()
            p.messageId = "m\(index)-\(message)"
            data = p.eventData
        case .read(let message):
            var p = InboxMessageRead()
            p.messageId = "m\(index)-\(message)"
            data = p.eventData
        case .maintenanceScheduled(let task, let dueDay):
            var p = MaintenanceScheduled()
            p.taskId = "t\(index)-\(task)"
            let date = CivilDate.fromDays(dueDay)
            p.dueDate = String(format: "%04d-%02d-%02d", date.year, date.month, date.day)
            data = p.eventData
        case .maintenanceCompleted(let task):
            var p = MaintenanceCompleted()
            p.taskId = "t\(index)-\(task)"
            data = p.eventData
        case .flagRaised(let flag):
            var p = SecurityFlagRaised()
            p.flag = flags[Int(flag)]
            data = p.eventData
        case .flagCleared(let flag):
            var p = SecurityFlagCleared()
            p.flag = flags[Int(flag)]
            data = p.eventData
        case .billingNotifications(let on):
            var p = NotificationPreferencesChanged()
            p.category = "billing"
            p.enabled = on
            data = p.eventData
        case .note:
            var p = SupportNoteAdded()
            p.text = "Customer asked about their invoice."
            p.agent = "agent-7"
            data = p.eventData
        case .exportRequested: data = AccountExportRequested().eventData
        case .exportCompleted: data = AccountExportCompleted().eventData
        case .deletionRequested:
            var p = AccountDeletionRequested()
            p.reason = "no longer needed"
            data = p.eventData
        case .deletionStep(let step):
            var p = AccountDeletionStepCompleted()
            p.step = deletionSteps[Int(step)]
            data = p.eventData
        case .deletionStepFailed(let step):
            var p = AccountDeletionStepFailed()
            p.step = deletionSteps[Int(step)]
            p.error = "storageTimeout"
            data = p.eventData
        case .deletionCancelled: data = AccountDeletionCancelled().eventData
        case .deleted: data = AccountDeleted().eventData
        }
        return LedgerEvent(id: EventID(high: seed, low: UInt64(index) << 16 | UInt64(number)), subject: subject(index),
                           occurredAt: Timestamp(milliseconds: step.occurredAt), source: step.source, meta: ["generator": "demo"], data: data)
    }
}

/// A small, fast, seedable generator (SplitMix64), so the demo is the same on every machine.
@_spi(Storage) public struct SplitMix: Sendable {
    var state: UInt64
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func below(_ bound: UInt64) -> UInt64 { bound == 0 ? 0 : next() % bound }
}

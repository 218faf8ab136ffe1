import ArgumentParser
import Dispatch
import Foundation
import LedgerCore
import LedgerProjections
import LedgerStore
import Synchronization

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Build an example store and show the log at work.",
        discussion: """
            Generates subscription histories (sign-up, trial, renewals, billing failures, refunds)
            for --subjects customers over the 18 months before --now, appends them from eight
            threads at once (group commit), then reads one customer back, verifies the log and
            prints the store's figures. The same --seed and --now always give the same events, so
            running it again appends nothing: every event is a duplicate.

            This is the log's example; the full demo, with read models and audits, comes with them.

            Example:
              ledger demo --store demo.lmdb --subjects 2000 --seed 7
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "How many customers to generate.")
    var subjects = 1_000

    @Option(help: "The generator's seed.")
    var seed: UInt64 = 42

    @Option(help: "The demo's present moment (RFC 3339; default: now).")
    var now: String?

    func validate() throws {
        guard subjects > 0 else { throw ValidationError("--subjects must be at least 1") }
        if let now, Timestamp(rfc3339: now) == nil {
            throw ValidationError("--now: expected an RFC 3339 time with a zone, got \(now)")
        }
    }

    func run() throws {
        let present = now.flatMap { Timestamp(rfc3339: $0) } ?? Timestamp.now()
        let ledger = try global.openLedger(create: true)
        defer { ledger.close() }
        let log = ledger.log
        let histories = (0..<subjects).map { DemoHistory.events(subject: $0, seed: seed, now: present) }
        let total = histories.reduce(0) { $0 + $1.count }

        let appended = Mutex(0)
        let duplicates = Mutex(0)
        let failure = Mutex<LedgerError?>(nil)
        let next = Mutex(0)
        let clock = ContinuousClock()
        let started = clock.now
        let group = DispatchGroup()
        for _ in 0..<8 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                while true {
                    let i = next.withLock { n in defer { n += 1 }; return n }
                    guard i < histories.count else { return }
                    do {
                        let result = try log.append(histories[i], to: "customer-\(i)", expectedVersion: .any)
                        appended.withLock { $0 += result.appended }
                        duplicates.withLock { $0 += result.duplicates }
                    } catch {
                        failure.withLock { $0 = (error as? LedgerError) ?? LedgerError(.storage, "\(error)") }
                        return
                    }
                }
            }
        }
        group.wait()
        let elapsed = clock.now - started
        if let error = failure.withLock({ $0 }) { throw CommandFailure.failure(error.description) }

        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let counters = log.commitCounters
        let report = try log.verify()
        let stats = try log.stats()
        // Show the customer with the longest history among the first hundred.
        let shown = (0..<min(subjects, 100)).max { histories[$0].count < histories[$1].count } ?? 0
        let sample = try log.events(subject: "customer-\(shown)").collect()

        if global.json {
            print(JSON.object([
                ("store", .string(log.path)),
                ("generated", .int(total)),
                ("appended", .int(appended.withLock { $0 })),
                ("duplicates", .int(duplicates.withLock { $0 })),
                ("transactions", .int(counters.transactions)),
                ("batches", .int(counters.batches)),
                ("seconds", .double(seconds)),
                ("verified", .bool(report.isValid)),
                ("events", .uint(stats.events)),
                ("subjects", .uint(stats.subjects)),
            ]).text)
            return
        }
        print("Store \(log.path): \(subjects) customers, \(total) events generated (seed \(seed), now \(present)).")
        print(String(format: "Appended %d, %d already there, in %.2f s from 8 threads: %d batches in %d transactions (group commit).",
                     appended.withLock { $0 }, duplicates.withLock { $0 }, seconds, counters.batches, counters.transactions))
        print("")
        print("customer-\(shown), as the log holds it:")
        print("  pos      ver  occurredAt                 type")
        for event in sample {
            print("  " + pad(String(event.position), 8) + " " + pad(String(event.version), 4) + " " + event.occurredAt.description + "   " + event.type)
        }
        print("")
        print(report.isValid ? "verify: OK, \(report.eventsChecked) events, hash chain intact" : "verify: FAILED: \(report.problem.map(String.init(describing:)) ?? "")")
        print("stats: \(stats.events) events, \(stats.subjects) subjects, \(formatBytes(stats.usedBytes)) used")
        if !report.isValid { throw ExitCode(1) }
    }

    private func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }
}

/// Deterministic subscription histories for the demo.
enum DemoHistory {
    static let day: Int64 = 86_400_000

    /// One customer's events: the same subject, seed and now always give the same events.
    static func events(subject index: Int, seed: UInt64, now: Timestamp) -> [EventDraft] {
        var rng = SplitMix(seed: seed ^ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
        let subject = "customer-\(index)"
        let start = now.milliseconds - Int64(rng.next(below: 540)) * day - Int64(rng.next(below: 86_400)) * 1000
        var events: [EventDraft] = []
        func add(at ms: Int64, source: EventSource, _ data: EventData) {
            guard ms <= now.milliseconds else { return }     // nothing from the future
            let event = LedgerEvent(id: EventID(high: seed, low: UInt64(index) << 16 | UInt64(events.count)), subject: subject,
                                    occurredAt: Timestamp(milliseconds: ms), source: source, meta: ["generator": "demo"], data: data)
            // The demo's own events are valid by construction; a draft that is not is a bug here.
            guard let draft = try? event.draft() else { preconditionFailure("demo event \(event.type) is invalid") }
            events.append(draft)
        }
        var created = AccountCreated()
        created.signedIn = true
        add(at: start, source: .app, created.eventData)
        var session = SessionStarted()
        session.deviceId = "d-\(index)"
        session.timeZone = "Europe/Berlin"
        add(at: start + 60_000, source: .app, session.eventData)
        let original = "otx-\(index)"
        guard rng.next(below: 10) < 7 else { return events }       // 30 % never subscribe

        let trialEnd = start + 7 * day
        var purchase = SubscriptionPurchased()
        purchase.productId = "pro.monthly"
        purchase.transactionId = original
        purchase.originalTransactionId = original
        purchase.purchasedAt = Timestamp(milliseconds: start + 120_000)
        purchase.expiresAt = Timestamp(milliseconds: trialEnd)
        purchase.offer = .freeTrial
        add(at: start + 120_000, source: .appstore, purchase.eventData)
        var periodEnd = trialEnd
        var period = 0
        while periodEnd < now.milliseconds {
            let roll = rng.next(below: 100)
            if roll < 8 {
                var failure = SubscriptionRenewalFailed()
                failure.originalTransactionId = original
                add(at: periodEnd, source: .appstore, failure.eventData)
                break
            }
            if roll < 20 {
                var cancel = SubscriptionAutoRenewChanged()
                cancel.originalTransactionId = original
                cancel.enabled = false
                add(at: periodEnd - 3 * day, source: .appstore, cancel.eventData)
                var expiry = SubscriptionExpired()
                expiry.originalTransactionId = original
                expiry.reason = .voluntary
                add(at: periodEnd, source: .appstore, expiry.eventData)
                break
            }
            period += 1
            let next = periodEnd + 30 * day
            var renewal = SubscriptionRenewed()
            renewal.productId = "pro.monthly"
            renewal.transactionId = "\(original)-\(period)"
            renewal.originalTransactionId = original
            renewal.purchasedAt = Timestamp(milliseconds: periodEnd)
            renewal.expiresAt = Timestamp(milliseconds: next)
            add(at: periodEnd, source: .appstore, renewal.eventData)
            if roll == 99 {
                var refund = SubscriptionRefunded()
                refund.transactionId = "\(original)-\(period)"
                refund.originalTransactionId = original
                add(at: periodEnd + 2 * day, source: .appstore, refund.eventData)
                break
            }
            periodEnd = next
        }
        return events
    }
}

/// A small, fast, seedable generator (SplitMix64), so the demo is the same on every machine.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next(below bound: UInt64) -> UInt64 { next() % bound }
}

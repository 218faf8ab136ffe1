import LedgerProjections   // Ledger, the events and timestamps, the policy, the read models and their views

let ledger = try Ledger(path: "customers.lmdb")   // created if missing (mode 0600), reference policy
defer { ledger.close() }

// A typed event: one payload struct per event type, checked by the same rules as JSON input.
var trial = SubscriptionPurchased()
trial.productId = "pro.monthly"
trial.transactionId = "2000000100"
trial.originalTransactionId = "2000000100"
trial.purchasedAt = Timestamp(milliseconds: 1_772_357_400_000)   // 2026-03-01T09:30:00Z
trial.expiresAt = Timestamp(milliseconds: 1_772_962_200_000)     // a week later
trial.offer = .freeTrial
let purchase = LedgerEvent(subject: "user-42", occurredAt: trial.purchasedAt, source: .appstore,
                           meta: ["correlationId": "n-123"], data: trial.eventData)

// Append: atomic, durable when it returns, the read models updated in the same transaction.
try ledger.append([purchase])     // .outcomes == [.appended(position: 1, version: 1)]; `await` it in async code
try ledger.append([purchase])     // .outcomes == [.duplicate(position: 1)]: the id derives from the content
// Optimistic concurrency: only if user-42's stream is still at version 1.
// try ledger.append([next], expecting: ["user-42": .exact(1)])

// Read your writes, at any moment.
let march2 = Timestamp(milliseconds: 1_772_409_600_000)          // 2026-03-02T00:00:00Z
let entitlement = try ledger.view(EntitlementModel.self, of: "user-42", at: march2)
// entitlement?.planState == .trial; entitlement?.reason: rule storeCoverage, position 1
let status = try ledger.status(of: "user-42", at: march2)   // every model's view: `ledger status`
let audit = try ledger.audit(of: "user-42", at: march2)     // the timeline: `ledger audit`

// The log itself.
for try await event in ledger.events(of: "user-42") {
    if case .subscriptionPurchased(let p) = try RecordedEvent(event).data { print(event.position, p.expiresAt) }
}

// A rule change: who would change, before anything is swapped in.
var longerGrace = Policy.reference
longerGrace.subscription.billingGraceDays = 10
let report = try ledger.rebuild(policy: longerGrace, dryRun: true)   // report.changes, field by field

// Check everything: hash chain, positions, indexes, and every model against a fresh fold.
let verified = try ledger.verify().isValid

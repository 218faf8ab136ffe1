// Runs the DocC articles' examples (the other files of this folder, each an article's block as
// it stands there) against a store in the working directory, and prints what a test checks.
import LedgerProjections

let purchase = SubscriptionPurchased(productId: "pro.monthly", transactionId: "2000000100", originalTransactionId: "2000000100",
                                     purchasedAt: Timestamp(milliseconds: 1_772_357_400_000),    // 2026-03-01T09:30:00Z
                                     expiresAt: Timestamp(milliseconds: 1_772_962_200_000),      // a week later
                                     offer: .freeTrial)

// LedgerProjections.md: the overview.
let report = try overview(path: "overview.lmdb", purchase: purchase)
print("rebuild:", report.events, "events,", report.changes.count, "changes")

// AddingAModel.md: the same store opened with the model (built from the log on opening), and
// its view after two sessions on two devices.
let ledger = try Ledger(path: "overview.lmdb", models: ReadModels.all + [DevicesModel.self])
var session = SessionStarted()
session.deviceId = "iphone"
session.timeZone = "Europe/Berlin"
var later = session
later.deviceId = "ipad"
try ledger.append([
    LedgerEvent(subject: "user-42", occurredAt: purchase.purchasedAt, source: .app, data: session.eventData),
    LedgerEvent(subject: "user-42", occurredAt: purchase.expiresAt, source: .app, data: later.eventData),
])
let devices = try ledger.view(DevicesModel.self, of: "user-42", at: purchase.expiresAt)
print("devices:", devices?.count ?? -1, devices?.latest ?? "none")

// LedgerProjections.md: a conflict is an answer.
var renewal = SubscriptionRenewed()
renewal.transactionId = "2000000101"
renewal.originalTransactionId = "2000000100"
renewal.productId = "pro.monthly"
renewal.purchasedAt = purchase.expiresAt
renewal.expiresAt = Timestamp(milliseconds: 1_775_640_600_000)
let renewed = LedgerEvent(subject: "user-42", occurredAt: renewal.purchasedAt, source: .appstore, data: renewal.eventData)
print("stale version appended:", try await appendUnlessMoved(ledger, renewed, expecting: 1))
print("current version appended:", try await appendUnlessMoved(ledger, renewed, expecting: try ledger.version(of: "user-42")))
print("new subject appended:", try await appendInBackground(ledger, LedgerEvent(subject: "user-43", occurredAt: renewal.purchasedAt, source: .appstore, data: renewal.eventData)).value)
ledger.close()

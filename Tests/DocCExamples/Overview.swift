import LedgerProjections

/// A purchase, the views it leads to, and who a policy change would move.
func overview(path: String, purchase: SubscriptionPurchased) throws -> RebuildReport {
    let ledger = try Ledger(path: path)
    defer { ledger.close() }
    try ledger.append([LedgerEvent(subject: "user-42", occurredAt: purchase.purchasedAt, source: .appstore, data: purchase.eventData)])
    let status = try ledger.status(of: "user-42", at: purchase.purchasedAt)     // every model's view
    let entitlement = try ledger.view(EntitlementModel.self, of: "user-42", at: purchase.purchasedAt)
    print(status.answers.count, entitlement?.planState ?? .guest)
    var newPolicy = Policy.reference
    newPolicy.subscription.trialDays = 14
    return try ledger.rebuild(policy: newPolicy, dryRun: true)                  // who would change
}

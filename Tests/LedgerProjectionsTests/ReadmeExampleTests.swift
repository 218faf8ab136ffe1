import LedgerCore
import LedgerModels
import LedgerProjections
import LedgerTestSupport
import Testing

/// The README's read-model example, run as written (the subscription loop bounded).
@Suite struct ReadmeExampleTests {
    @Test func theReadmeReadModelExampleRuns() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var trial = SubscriptionPurchased()
            trial.productId = "pro.monthly"
            trial.transactionId = "2000000100"
            trial.originalTransactionId = "2000000100"
            trial.purchasedAt = try #require(Timestamp(rfc3339: "2026-03-01T09:30:00Z"))
            trial.expiresAt = try #require(Timestamp(rfc3339: "2026-03-08T09:30:00Z"))
            trial.offer = .freeTrial
            try await ledger.append([LedgerEvent(subject: "user-42", occurredAt: trial.purchasedAt, source: .appstore, data: trial.eventData)])
            let march2 = try #require(Timestamp(rfc3339: "2026-03-02T00:00:00Z"))
            let entitlement = try #require(try ledger.view(EntitlementModel.self, of: "user-42", at: march2))
            #expect(entitlement.planState == .trial)
            #expect(entitlement.reason == .init(rule: "storeCoverage", policyKey: nil, position: 1))

            for await head in ledger.positions() {
                #expect(head == 1)
                break
            }
            var newPolicy = Policy.reference
            newPolicy.subscription.billingGraceDays = 10
            let report = try ledger.rebuild(policy: newPolicy, dryRun: true)
            #expect(report.changes.isEmpty)
            #expect(report.policyTo == newPolicy.hash)
        }
    }
}

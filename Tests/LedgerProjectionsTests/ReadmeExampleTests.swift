import LedgerProjections
@_spi(Storage) import LedgerTestSupport
import Testing

/// The README's "library in five minutes", with what its comments say checked, under its one import
/// (Tests/ReadmeExample is the example itself, built and run as written).
@Suite struct ReadmeExampleTests {
    @Test func theReadmeLibraryExampleRuns() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }

            var trial = SubscriptionPurchased()
            trial.productId = "pro.monthly"
            trial.transactionId = "2000000100"
            trial.originalTransactionId = "2000000100"
            trial.purchasedAt = Timestamp(milliseconds: 1_772_357_400_000)   // 2026-03-01T09:30:00Z
            trial.expiresAt = Timestamp(milliseconds: 1_772_962_200_000)     // a week later
            trial.offer = .freeTrial
            #expect(trial.purchasedAt == Timestamp(rfc3339: "2026-03-01T09:30:00Z"))
            #expect(trial.expiresAt == Timestamp(rfc3339: "2026-03-08T09:30:00Z"))
            let purchase = LedgerEvent(subject: "user-42", occurredAt: trial.purchasedAt, source: .appstore,
                                       meta: ["correlationId": "n-123"], data: trial.eventData)

            #expect(try await ledger.append([purchase]).outcomes == [.appended(position: 1, version: 1)])
            #expect(try await ledger.append([purchase]).outcomes == [.duplicate(position: 1)])
            var cancel = SubscriptionAutoRenewChanged()
            cancel.originalTransactionId = "2000000100"
            let next = LedgerEvent(subject: "user-42", occurredAt: trial.purchasedAt.adding(seconds: 3600), source: .app, data: cancel.eventData)
            await #expect(throws: LedgerError.self) { try await ledger.append([next], expecting: ["user-42": .exact(0)]) }

            let march2 = Timestamp(milliseconds: 1_772_409_600_000)          // 2026-03-02T00:00:00Z
            #expect(march2 == Timestamp(rfc3339: "2026-03-02T00:00:00Z"))
            let entitlement = try ledger.view(EntitlementModel.self, of: "user-42", at: march2)
            #expect(entitlement?.planState == .trial)
            #expect(entitlement?.reason == .init(rule: "storeCoverage", policyKey: nil, position: 1))
            let status = try ledger.status(of: "user-42", at: march2)
            #expect(status.answers.map(\.model) == ["entitlement", "retention", "badge", "access", "limits", "deletion"])
            let audit = try ledger.audit(of: "user-42", at: march2)
            #expect(audit.entries.count == 1)

            var expiries: [(UInt64, Timestamp)] = []
            for try await event in ledger.events(of: "user-42") {
                if case .subscriptionPurchased(let p) = try RecordedEvent(event).data { expiries.append((event.position, p.expiresAt)) }
            }
            #expect(expiries.map(\.0) == [1])
            #expect(expiries.map(\.1) == [trial.expiresAt])

            var longerGrace = Policy.reference
            longerGrace.subscription.billingGraceDays = 10
            let report = try ledger.rebuild(policy: longerGrace, dryRun: true)
            #expect(report.changes.isEmpty)
            #expect(report.policyTo == longerGrace.hash)

            let verified = try ledger.verify().isValid
            #expect(verified)
        }
    }
}

import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// The log used on its own, as an app that keeps no read models would: append, duplicates,
/// expected versions, reads, a JSONL file and verify.
@Suite struct LogTourTests {
    @Test func theLogOnItsOwnAppendsReadsAndVerifies() async throws {
        try await withStorePath { path in
            let log = try EventLog(path: path)

            var trial = SubscriptionPurchased()
            trial.productId = "pro.monthly"
            trial.transactionId = "2000000100"
            trial.originalTransactionId = "2000000100"
            trial.purchasedAt = try #require(Timestamp(rfc3339: "2026-03-01T09:30:00Z"))
            trial.expiresAt = try #require(Timestamp(rfc3339: "2026-03-08T09:30:00Z"))
            trial.offer = .freeTrial
            let purchase = try LedgerEvent(subject: "user-42", occurredAt: trial.purchasedAt, source: .appstore,
                                           meta: ["correlationId": "n-123"], data: trial.eventData).draft()

            let result = try await log.append([purchase])
            #expect(result.outcomes == [.appended(position: 1, version: 1)])
            let again = try await log.append([purchase])
            #expect(again.outcomes == [.duplicate(position: 1)])

            var cancel = SubscriptionAutoRenewChanged()
            cancel.originalTransactionId = "2000000100"
            let next = try LedgerEvent(subject: "user-42", occurredAt: trial.purchasedAt.adding(seconds: 3600), source: .appstore,
                                       data: cancel.eventData).draft()
            try await log.append([next], expecting: ["user-42": .exact(1)])

            var expiries: [Timestamp] = []
            for try await event in log.events(subject: "user-42") {
                if case .subscriptionPurchased(let p) = try RecordedEvent(event).data { expiries.append(p.expiresAt) }
            }
            #expect(expiries == [trial.expiresAt])
            var count = 0
            try log.events(from: 1, through: 100).forEach { _ in count += 1 }
            #expect(count == 2)
            var backward = log.eventsBackward().makeBlockingIterator()
            #expect(try backward.next()?.id == next.id)
            #expect(try log.event(id: purchase.id)?.position == 1)

            let file = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString).jsonl")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data((#"{"type":"account.signed_in","subject":"user-42","occurredAt":"2026-03-01T09:00:00Z","source":"app"}"# + "\n").utf8).write(to: file)
            let summary = try JSONLImport.append([file.path], to: log)
            #expect(summary.appended == 1 && summary.firstPosition == 3)

            #expect(try log.verify().problem == nil)
        }
    }
}

import LedgerCore
import LedgerStore
import Testing

/// The README's library example, run as written (with the payload and the next event filled in).
@Suite struct ReadmeExampleTests {
    @Test func theReadmeLibraryExampleRuns() async throws {
        try await withStorePath { path in
            let encodedData = Array(#"{"productId":"pro.monthly"}"#.utf8)
            let log = try EventLog(path: path)
            let purchase = EventDraft(
                subject: "user-42", type: "subscription.purchased",
                occurredAt: try #require(Timestamp(rfc3339: "2026-03-01T09:30:00Z")),
                source: .appstore, meta: ["correlationId": "n-123"], payload: encodedData)
            let result = try await log.append([purchase])
            #expect(result.outcomes == [.appended(position: 1, version: 1)])
            let again = try await log.append([purchase])
            #expect(again.outcomes == [.duplicate(position: 1)])

            let next = EventDraft(subject: "user-42", type: "subscription.renewed",
                                  occurredAt: try #require(Timestamp(rfc3339: "2026-04-01T09:30:00Z")), source: .appstore)
            try await log.append([next], expecting: ["user-42": .exact(1)])

            var seen: [String] = []
            for try await event in log.events(subject: "user-42") { seen.append(event.type) }
            #expect(seen == ["subscription.purchased", "subscription.renewed"])
            var count = 0
            try log.events(from: 1, through: 100).forEach { _ in count += 1 }
            #expect(count == 2)
            var backward = log.eventsBackward().makeBlockingIterator()
            #expect(try backward.next()?.id == next.id)
            #expect(try log.event(id: purchase.id)?.position == 1)
            #expect(try log.verify().problem == nil)
        }
    }
}

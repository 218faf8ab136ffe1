import ArgumentParser
import Foundation
import LMDB
import LedgerCore
import LedgerStore

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure append throughput against raw LMDB, in one run on this machine.",
        discussion: """
            Every figure is events per second, measured side by side in one run in a temporary
            directory, with durable (fsynced) commits and ~200-byte events. Compare the ratios:
            absolute numbers drift on shared machines.

              append.raw           raw LMDB: 8-byte keys → encoded events, MDB_APPEND, 1,000 per transaction
              append.ledger        EventLog.append, 1,000-event batches (log, both indexes, hash chain)
              append.singleCommit  one event per append, one appender: one transaction per event
              append.groupCommit   64 threads appending one event at a time, gathered by group commit

            Example:
              ledger bench --quick
            """
    )

    @Flag(help: "A smaller run (a few seconds).")
    var quick = false

    @Flag(help: "Print the results as JSON.")
    var json = false

    @Option(name: .customLong("case"), help: "Run only this case (for profiling), e.g. append.ledger.")
    var only: String?

    private func wanted(_ name: String) -> Bool { only == nil || only == name }

    func run() throws {
        let batched = quick ? 20_000 : 200_000
        let singles = quick ? 300 : 1_000
        let perThread = quick ? 20 : 60
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        let events = (0..<batched).map { Self.event($0) }
        let raw = !wanted("append.raw") ? 0 : try measureRaw(events, path: root.appendingPathComponent("raw").path)
        let ledger = !wanted("append.ledger") ? 0 : try measure(events.count) {
            let log = try EventLog(path: root.appendingPathComponent("ledger").path)
            for start in stride(from: 0, to: events.count, by: 1_000) {
                try log.append(Array(events[start ..< min(start + 1_000, events.count)]))
            }
        }
        let single = !wanted("append.singleCommit") ? 0 : try measure(singles) {
            let log = try EventLog(path: root.appendingPathComponent("single").path)
            for i in 0..<singles { try log.append([Self.event(i)]) }
        }
        var transactions = 0
        let grouped = !wanted("append.groupCommit") ? 0 : try measure(64 * perThread) {
            let log = try EventLog(path: root.appendingPathComponent("group").path)
            let group = DispatchGroup()
            for thread in 0..<64 {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    for i in 0..<perThread { _ = try? log.append([Self.event(thread * 10_000 + i)]) }
                }
            }
            group.wait()
            transactions = log.commitCounters.transactions
            guard try log.lastPosition() == UInt64(64 * perThread) else {
                throw CommandFailure.failure("group commit lost events; this is a bug")
            }
        }

        let results: [(String, Double)] = [
            ("append.raw", raw), ("append.ledger", ledger), ("append.singleCommit", single), ("append.groupCommit", grouped),
        ].filter { wanted($0.0) }
        if json {
            print(JSON.object([
                ("machine", .object([("cores", .int(ProcessInfo.processInfo.activeProcessorCount)), ("quick", .bool(quick))])),
                ("results", .object(results.map { ($0.0, .double(($0.1 * 10).rounded() / 10)) })),
            ]).text)
            return
        }
        for (name, eps) in results {
            print(name.padding(toLength: 22, withPad: " ", startingAt: 0) + String(format: "%12.0f events/s", eps))
        }
        guard only == nil else { return }
        print(String(format: "\nledger batched append = %.2f × raw LMDB", ledger / raw))
        print(String(format: "group commit (64 appenders) = %.1f × one event per transaction (%d events in %d transactions)",
                     grouped / single, 64 * perThread, transactions))
    }

    /// A ~150-byte event (the envelope's fields plus a renewal's payload), like a typical notification.
    static func event(_ n: Int) -> EventDraft {
        var renewal = SubscriptionRenewed()
        renewal.productId = "pro.monthly"
        renewal.transactionId = "t-\(n)"
        renewal.originalTransactionId = "o-\(n % 10_000)"
        renewal.purchasedAt = Timestamp(milliseconds: 1_772_357_400_000 + Int64(n) * 1000)
        renewal.expiresAt = Timestamp(milliseconds: 1_775_037_600_000)
        return EventDraft(id: EventID(high: 0xBE4C, low: UInt64(n)), subject: "user-\(n % 10_000)", type: SubscriptionRenewed.type,
                          occurredAt: renewal.purchasedAt, source: .appstore, payload: EventCatalog.encode(renewal.eventData))
    }

    private func measure(_ count: Int, _ body: () throws -> Void) throws -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        try body()
        let elapsed = clock.now - start
        return Double(count) / max(elapsed.seconds, 1e-9)
    }

    /// The raw LMDB limit: the same records the ledger would write, under 8-byte big-endian
    /// keys with MDB_APPEND, 1,000 per durable transaction; no indexes, no hashing.
    private func measureRaw(_ events: [EventDraft], path: String) throws -> Double {
        let records = events.enumerated().map { i, e in
            EventRecord.encode(e, version: 1, recordedAt: Timestamp(milliseconds: 0)) + [UInt8](repeating: UInt8(i & 0xFF), count: 32)
        }
        return try measure(records.count) {
            let env = try Environment(path: path)
            let db = try env.openDatabase("events")
            for start in stride(from: 0, to: records.count, by: 1_000) {
                try env.write { txn in
                    for i in start ..< min(start + 1_000, records.count) {
                        try txn.put(db, key: LogSchema.key(UInt64(i + 1)), value: records[i], flags: .append)
                    }
                }
            }
        }
    }
}

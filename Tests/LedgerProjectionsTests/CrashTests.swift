import LedgerCore
import LedgerProjections
import LedgerStore
import LedgerTestSupport
import Testing

/// A rebuild killed with SIGKILL in a real child process.
@Suite(.serialized) struct CrashTests {
    /// Killed after its shadow generation is written but before the swap, a rebuild leaves the
    /// old generation serving, byte for byte, and a store that verifies; running the rebuild
    /// again discards the abandoned shadow and completes.
    @Test func aRebuildKilledMidWayLeavesTheOldGenerationServing() throws {
        try withStorePath { path in
            let start = ts("2026-01-01T00:00:00Z")
            var served: Generation?
            var states: [(key: String, state: [UInt8])] = []
            do {
                let ledger = try Ledger(path: path)
                for chunk in 0..<10 {
                    try ledger.append((0..<100).map { i in
                        let at = days(Int64(i % 30), after: start)
                        return Make.purchase("u\(chunk)-\(i)", at: at, txn: "t\(i)", expires: days(30, after: at))
                    })
                }
                served = try ledger.engine.statuses().first?.served
                states = try ledger.engine.servedStates(of: "entitlement")
                ledger.close()
            }
            let child = try Child(["rebuild", path])
            #expect(child.waitFor(lineStartingWith: "phase writing") != nil)
            let lines = child.kill()
            #expect(!lines.contains { $0.hasPrefix("done") }, "the child finished before the kill: \(lines)")

            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let status = try #require(try ledger.engine.statuses().first)
            #expect(status.served == served)
            #expect(status.shadow != nil, "the killed rebuild's shadow is left, unserved")
            let after = try ledger.engine.servedStates(of: "entitlement")
            #expect(after.map(\.key) == states.map(\.key))
            #expect(after.map(\.state) == states.map(\.state))
            #expect(try ledger.log.verify().isValid)
            #expect(try ledger.engine.verify() == [])

            try ledger.engine.rebuild(compare: false)
            let rebuilt = try #require(try ledger.engine.statuses().first)
            #expect(rebuilt.shadow == nil)
            #expect(rebuilt.served?.id != served?.id)
            #expect(rebuilt.served?.checkpoint == 1000)
            // Every shipped model reads purchases: one state per subject per model.
            #expect(try ledger.engine.storedStateCount() == 1000 * ReadModels.all.count, "the old and abandoned generations are deleted")
            #expect(try ledger.engine.verify() == [])
        }
    }
}

@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
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
            var states: [[(key: String, state: [UInt8])]] = []
            let folds = ["facts"] + ReadModels.all.map { $0.name }
            do {
                let ledger = try Ledger(path: path)
                for chunk in 0..<10 {
                    try ledger.append((0..<100).map { i in
                        let at = days(Int64(i % 30), after: start)
                        return Make.purchase("u\(chunk)-\(i)", at: at, txn: "t\(i)", expires: days(30, after: at))
                    })
                }
                served = try ledger.engine.read { txn, overlay in try ledger.engine.store.served(txn, overlay) }
                states = try folds.map { try ledger.servedStates(of: $0) }
                ledger.close()
            }
            let child = try Child(["rebuild", path])
            #expect(child.waitFor(lineStartingWith: "phase writing") != nil)
            let lines = child.kill()
            #expect(!lines.contains { $0.hasPrefix("done") }, "the child finished before the kill: \(lines)")

            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let store = ledger.engine.store
            #expect(try store.env.read { txn in try store.storedServed(txn) } == served)
            #expect(try store.env.read { txn in try store.shadow(txn) } != nil, "the killed rebuild's new generation is left, unserved")
            #expect(try ledger.stats().models.allSatisfy { $0.rebuilding && !$0.stale })
            let after = try folds.map { try ledger.servedStates(of: $0) }
            #expect(after.map { $0.map(\.key) } == states.map { $0.map(\.key) })
            #expect(after.map { $0.map(\.state) } == states.map { $0.map(\.state) })
            #expect(try ledger.log.verify().isValid)
            #expect(try ledger.verifyModels() == [])

            try ledger.rebuild()
            #expect(try store.env.read { txn in try store.shadow(txn) } == nil)
            let rebuilt = try #require(try store.env.read { txn in try store.storedServed(txn) })
            #expect(rebuilt.id != served?.id)
            #expect(rebuilt.folds.allSatisfy { $0.checkpoint == 1000 })
            // Purchases are facts and the access model's: two states per subject, and beside
            // them the anchors of its due list; each of the 100 store subscriptions (t0 … t99)
            // has its holders, and each transaction (the same ids) its own; the old and
            // abandoned generations are deleted.
            #expect(try store.env.read { txn in try txn.count(store.states) } == 1000 * 3 + 100 + 100)
            #expect(try ledger.verifyModels() == [])
        }
    }
}

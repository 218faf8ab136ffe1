import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// The projection engine over real LMDB stores in temporary directories.
@Suite struct EngineTests {
    let jan1 = ts("2026-01-01T00:00:00Z")

    /// Read-your-writes: when append returns, the entitlement view reflects it, and the
    /// model's checkpoint is the log's head (same transaction).
    @Test func anAppendUpdatesTheModelInItsOwnTransaction() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append([Make.purchase("u1", at: jan1, txn: "t1", expires: days(30, after: jan1))])
            let view = try #require(try ledger.view(EntitlementModel.self, of: "u1", at: days(1, after: jan1)))
            #expect(view.planState == .pro)
            #expect(view.reason == .init(rule: "storeCoverage", policyKey: nil, position: 1))
            let status = try #require(try ledger.stats().models.first)
            #expect(status.name == "entitlement")
            #expect(status.checkpoint == 1)
            #expect(status.stale == false)
        }
    }

    /// The facade reads the log and checks the store without reaching into either: events by
    /// position and by subject, counts, and a verify that covers the log and the models.
    @Test func theLedgerReadsItsLogAndVerifiesTheWholeStore() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append([
                Make.created("u1", at: jan1),
                Make.purchase("u2", at: jan1, txn: "t1", expires: days(30, after: jan1)),
                Make.session("u1", at: days(1, after: jan1), zone: "UTC"),
            ])
            #expect(try ledger.events().collect().map(\.subject) == ["u1", "u2", "u1"])
            #expect(try ledger.events(of: "u1").collect().map(\.position) == [1, 3])
            let stats = try ledger.stats()
            #expect(stats.log.events == 3)
            #expect(stats.log.subjects == 2)
            #expect(stats.policy == .reference)
            #expect(stats.models.map(\.name) == ledger.modelNames)
            var phases: [VerifyProgress.Phase] = []
            let result = try ledger.verify { step in if phases.last != step.phase { phases.append(step.phase) } }
            #expect(result.isValid)
            #expect(result.log.eventsChecked == 3)
            #expect(phases == [.log, .models])
        }
    }

    /// A bad typed event is named by its index in the batch and its field, and nothing of the
    /// batch is written: the first event, or the second.
    @Test(arguments: [0, 1])
    func aBadTypedEventIsNamedByItsIndexAndField(_ bad: Int) throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var batch = [Make.created("u1", at: jan1), Make.created("u2", at: jan1)]
            batch[bad].subject = ""
            let error = #expect(throws: LedgerError.self) { try ledger.append(batch) }
            #expect(error?.code == .invalidEvent)
            #expect(error?.index == bad)
            #expect(error?.field == "/subject")
            #expect(try ledger.stats().log.events == 0)
        }
    }

    /// Two spellings of one name (NFC and decomposed) would be one key to Swift and two to the
    /// store: the decomposed one is refused, so every model keeps each customer apart.
    @Test func aSubjectNotInNFCIsRefusedBeforeItReachesAModel() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let error = #expect(throws: LedgerError.self) {
                try ledger.append([Make.created("caf\u{E9}", at: jan1), Make.created("cafe\u{301}", at: jan1)])
            }
            #expect(error?.index == 1)
            #expect(error?.field == "/subject")
            try ledger.append([Make.created("caf\u{E9}", at: jan1)])
            #expect(try ledger.events(of: "caf\u{E9}").collect().count == 1)
        }
    }

    /// A store written without the engine (a process that only appends) is caught up from the
    /// model's checkpoint when a Ledger opens it, in batches.
    @Test func aModelBehindTheLogCatchesUpFromItsCheckpoint() throws {
        try withStorePath { path in
            do {
                let ledger = try Ledger(path: path)
                try ledger.append([Make.created("u1", at: jan1)])
                ledger.close()
            }
            do {
                let log = try EventLog(path: path)
                try log.append((0..<300).map { i in try Make.purchase("s\(i)", at: jan1, txn: "t\(i)", expires: days(30, after: jan1)).draft() })
                log.close()
            }
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect(try ledger.stats().models.first?.checkpoint == 301)
            #expect(try ledger.view(EntitlementModel.self, of: "s299", at: days(2, after: jan1))?.planState == .pro)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A rebuild gives back exactly the states incremental appends built, byte for byte, and
    /// swaps in a new generation while deleting the old one's states.
    @Test func aRebuildEqualsTheIncrementalModelAndDropsTheOldGeneration() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            for i in 0..<50 {
                let start = days(Int64(i), after: jan1)
                try ledger.append([Make.purchase("u\(i % 7)", at: start, txn: "t\(i)", expires: days(30, after: start))])
            }
            let before = try (["facts"] + ReadModels.all.map { $0.name }).map { try ledger.servedStates(of: $0) }
            let generation = try ledger.engine.read { txn, overlay in try ledger.engine.store.served(txn, overlay)?.id }
            let report = try ledger.rebuild()
            #expect(report.changes == [])
            #expect(report.events == 50)
            let after = try (["facts"] + ReadModels.all.map { $0.name }).map { try ledger.servedStates(of: $0) }
            #expect(after.map { $0.map(\.key) } == before.map { $0.map(\.key) })
            #expect(after.map { $0.map(\.state) } == before.map { $0.map(\.state) })
            #expect(try ledger.engine.read { txn, overlay in try ledger.engine.store.served(txn, overlay)?.id } != generation)
            // Purchases are facts and the access model's (subscribe-cancel cycles): two states
            // per subject, and beside them the anchors of its due list; each store subscription
            // (50) has its holders and each transaction (50) its own; and the old generation's
            // are gone.
            #expect(try ledger.engine.store.env.read { txn in try txn.count(ledger.engine.store.states) } == 7 * 3 + 50 + 50)
        }
    }

    /// Appends made while a rebuild runs are in the generation it swaps in.
    @Test func appendsDuringARebuildAreInTheSwappedGeneration() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append((0..<20).map { i in Make.created("u\(i)", at: jan1) })
            var appendedDuring = false
            let report = try ledger.engine.rebuild(events: { try ledger.recordedEvents(of: $0) }) { progress in
                guard progress.phase == .writing, !appendedDuring else { return }
                appendedDuring = true
                // From another thread's point of view: the writer commits it while the rebuild waits.
                _ = try? ledger.append([Make.purchase("late", at: jan1, txn: "t-late", expires: days(30, after: jan1))])
            }
            #expect(appendedDuring)
            #expect(report.caughtUp == 1)
            #expect(try ledger.view(EntitlementModel.self, of: "late", at: days(1, after: jan1))?.planState == .pro)
            #expect(try ledger.stats().models.first?.checkpoint == 21)
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// Subscribers hear of each new head as soon as its commit is durable.
    @Test func subscribersSeeNewPositionsWithoutPolling() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var heads = try ledger.positions().makeAsyncIterator()
            #expect(await heads.next() == 0)
            let append = Task { try await ledger.append([Make.created("u1", at: jan1), Make.created("u2", at: jan1)]) }
            #expect(await heads.next() == 2)
            _ = try await append.value
            try await ledger.waitForPosition(2)
        }
    }

    /// A model asked for by a name that does not exist is refused with the names that do.
    @Test func rebuildingAnUnknownModelNamesTheKnownOnes() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect { try ledger.rebuild(["entitlements"]) } throws: { error in
                (error as? LedgerError)?.message.contains("the models are entitlement") == true
            }
        }
    }
}

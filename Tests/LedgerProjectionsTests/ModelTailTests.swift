import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) @testable import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// The models' writes of the latest appends, kept in memory until the tail is full
/// (`ModelTail`): stored at its limit and at close, read through by every query, folded again
/// after a crash, and the same views at any limit.
@Suite(.serialized) struct ModelTailTests {
    let start = ts("2026-01-01T00:00:00Z")

    private func open(_ path: String, limit: Int, readOnly: Bool = false) throws -> Ledger {
        var options = EventLog.Options()
        options.modelTailLimit = limit
        options.readOnly = readOnly
        return try Ledger(path: path, options: options)
    }

    /// The position every stored fold holds (the models as stored, without any tail).
    private func stored(_ ledger: Ledger) throws -> UInt64 {
        try ledger.engine.store.env.read { txn in try ledger.engine.store.storedServed(txn)?.folds.map(\.checkpoint).min() ?? 0 }
    }

    private func purchase(_ i: Int) -> LedgerEvent {
        Make.purchase("u\(i)", at: start, txn: "t\(i)", expires: days(30, after: start))
    }

    /// Mixed events over 30 subjects: purchases, renewals, sessions, messages read and unread.
    private func batches() -> [[LedgerEvent]] {
        (0 ..< 40).map { b in
            (0 ..< 12).map { i in
                let n = b * 12 + i, subject = "c\(n % 30)", at = days(Int64(n % 90), after: start)
                switch n % 5 {
                case 0: return Make.purchase(subject, at: at, txn: "p\(n)", original: "o-\(subject)", expires: days(30, after: at))
                case 1: return Make.renewal(subject, at: at, txn: "r\(n)", original: "o-\(subject)", expires: days(30, after: at))
                case 2: return Make.session(subject, at: at, zone: "Europe/Berlin")
                case 3: return Make.delivered(subject, at: at, message: "m\(n % 17)")
                default: return Make.read(subject, at: at, message: "m\(n % 17)")
                }
            }
        }
    }

    /// One event short of the limit the stored models hold none of the appends; at it, all of
    /// them; one past it, all but that one. Every query reads through the tail meanwhile.
    @Test func theTailIsStoredWhenItHoldsItsLimit() throws {
        try withStorePath { path in
            let ledger = try open(path, limit: 10)
            defer { ledger.close() }
            for i in 0 ..< 9 { try ledger.append([purchase(i)]) }
            #expect(try stored(ledger) == 0)
            #expect(try ledger.stats().models.allSatisfy { !$0.stale && $0.checkpoint == 9 })
            #expect(try ledger.view(EntitlementModel.self, of: "u8", at: days(1, after: start))?.planState == .pro)
            try ledger.append([purchase(9)])
            #expect(try stored(ledger) == 10)
            #expect(ledger.engine.tails.snapshot.isEmpty)
            try ledger.append([purchase(10)])
            #expect(try stored(ledger) == 10)
            #expect(ledger.engine.tails.snapshot.head - ledger.engine.tails.snapshot.base == 1)
            #expect(try ledger.view(EntitlementModel.self, of: "u10", at: days(1, after: start))?.planState == .pro)
        }
    }

    /// Closing stores what the tail holds: a reader that opens the store next finds it stored.
    @Test func closingStoresTheTail() throws {
        try withStorePath { path in
            do {
                let ledger = try open(path, limit: 1000)
                try ledger.append((0 ..< 3).map(purchase))
                #expect(try stored(ledger) == 0)
                ledger.close()
            }
            let reader = try open(path, limit: 1000, readOnly: true)
            defer { reader.close() }
            #expect(try stored(reader) == 3)
            #expect(try reader.view(EntitlementModel.self, of: "u2", at: days(1, after: start))?.planState == .pro)
        }
    }

    /// The same appends give the same states, items, index and due list byte for byte whether
    /// every append stores its writes (0), the tail is stored every few events, or never
    /// before close — and each equals a fresh fold of the log.
    @Test func everyLimitGivesTheSameModels() throws {
        let folds = ["facts"] + ReadModels.all.map { $0.name }
        var results: [[[(key: String, state: [UInt8])]]] = []
        var dueLists: [[DueItem]] = []
        for limit in [0, 1, 7, 100_000] {
            try withStorePath { path in
                let ledger = try open(path, limit: limit)
                defer { ledger.close() }
                for batch in batches() { try ledger.append(batch) }
                #expect(try ledger.verifyModels() == [], "limit \(limit)")
                results.append(try folds.map { try ledger.servedStates(of: $0) })
                dueLists.append(try ledger.due(from: start, to: days(200, after: start)))
            }
        }
        #expect(!dueLists[0].isEmpty)
        for (limit, states) in zip([1, 7, 100_000], results.dropFirst()) {
            #expect(states.map { $0.map(\.key) } == results[0].map { $0.map(\.key) }, "limit \(limit)")
            #expect(states.map { $0.map(\.state) } == results[0].map { $0.map(\.state) }, "limit \(limit)")
        }
        #expect(dueLists.allSatisfy { $0 == dueLists[0] })
    }

    /// A reader whose copy of the tail is behind the log (a commit came between, or another
    /// process appended) folds the events between into its copy: it reads what the writer's
    /// tail holds.
    @Test func aReaderBehindTheLogFoldsTheEventsBetween() throws {
        try withStorePath { path in
            let ledger = try open(path, limit: 1000)
            defer { ledger.close() }
            let all = batches()
            for batch in all.prefix(20) { try ledger.append(batch) }
            let behind = ledger.engine.tails.snapshot
            let middle = try ledger.log.lastPosition()
            for batch in all.dropFirst(20) { try ledger.append(batch) }
            let head = try ledger.log.lastPosition()
            let engine = ledger.engine
            func states(_ tail: ModelTail?) throws -> [[UInt8: [UInt8]]] {
                try engine.store.env.read { txn in
                    let overlay = try engine.overlay(tail ?? engine.tails.snapshot, txn, reading: true)
                    #expect(overlay.head == head)
                    // Read through the copy it was given, brought forward: not started over.
                    #expect(!overlay.startedOver && overlay.tail.head == (tail ?? engine.tails.snapshot).head)
                    let generation = try #require(try engine.store.served(txn, overlay)).number
                    return try (0 ..< 30).map { try engine.store.states(of: "c\($0)", in: generation, txn, overlay).mapValues { Array($0) } }
                }
            }
            #expect(behind.head == middle && middle < head)
            #expect(try states(behind) == states(nil))
        }
    }

    /// A writer SIGKILLed with writes in its tail loses none: the store's models are stored
    /// through an earlier position, a reader folds the rest from the log, and the next writer
    /// folds them again when it opens. Before each kill this process appends and reads while
    /// the child appends, each with a tail of its own.
    @Test func aKilledWriterLosesNoModelWrite() throws {
        try withStorePath { path in
            try open(path, limit: 0).close()
            for run in 0 ..< 4 {
                // The child never stores its tail but when it opens (catch-up).
                let child = try Child(["ledger-loop", path, "1000000"])
                #expect(child.waitFor(lineStartingWith: "acked") != nil, "run \(run): the child never acknowledged a batch")
                do {
                    let ledger = try open(path, limit: 300)
                    defer { ledger.close() }
                    for batch in batches().prefix(run + 1) { try ledger.append(batch) }
                    #expect(try ledger.verifyModels() == [], "run \(run): beside the child")
                }
                // Closing stored everything through the log's end then.
                let closedAt = try stored(try open(path, limit: 300, readOnly: true))
                // Killed once it has appended after this process stored everything at close.
                let after = child.waitFor { $0.hasPrefix("acked ") && UInt64($0.dropFirst(6)) ?? 0 > closedAt }
                #expect(after != nil, "run \(run): the child stopped")
                _ = child.kill()
                do {
                    let reader = try open(path, limit: 500, readOnly: true)
                    defer { reader.close() }
                    let (held, logged) = (try stored(reader), try reader.log.lastPosition())
                    #expect(held < logged, "run \(run): the kill left writes in the child's tail (stored \(held), log \(logged), closed at \(closedAt))")
                    #expect(try reader.verifyModels() == [], "run \(run): read-only")
                    #expect(try reader.stats().models.allSatisfy { !$0.stale }, "run \(run): read-only")
                }
                let ledger = try open(path, limit: 300)
                defer { ledger.close() }
                #expect(try stored(ledger) == ledger.log.lastPosition(), "run \(run): opening folds what the killed tail held")
                #expect(try ledger.verifyModels() == [], "run \(run)")
            }
        }
    }

    /// Another process appends more events than an append catches up inline and keeps them in
    /// its tail while this one appends (its folds left behind meanwhile), then stores them at
    /// close: this process's tail, behind what is now stored, starts over — never folding those
    /// events twice, never storing its older checkpoints over the newer ones.
    @Test func aTailBehindAnotherProcesssStoreStartsOver() throws {
        try withStorePath { path in
            do {
                let ledger = try open(path, limit: 1_000_000)
                defer { ledger.close() }
                let all = batches()
                try ledger.append(all[0])
                let child = try Child(["ledger-hold", path, "12000"])
                #expect(child.waitFor(lineStartingWith: "appended") != nil)
                try ledger.append(all[1])   // 12,000 events behind: its folds wait
                child.send("close")
                #expect(child.waitFor(lineStartingWith: "closed") != nil)
                try ledger.append(all[2])
                #expect(try ledger.stats().models.allSatisfy { !$0.stale })
                #expect(try ledger.verifyModels() == [])
            }
            let reopened = try open(path, limit: 1_000_000)
            defer { reopened.close() }
            #expect(try reopened.verifyModels() == [])
        }
    }

    /// With every served state still in the tail, an abandoned rebuild's generation is all
    /// `models` holds: deleting it empties the database, and the next rebuild swaps in.
    @Test func anAbandonedRebuildIsDeletedWhenItIsAllTheStoreHolds() throws {
        try withStorePath { path in
            let ledger = try open(path, limit: 1000)
            defer { ledger.close() }
            try ledger.append([purchase(1)])
            var policy = Policy.reference
            policy.name = "other"
            try ledger.prepareRebuild(policy: policy, at: start).abandon()
            let prepared = try ledger.prepareRebuild(policy: policy, at: start)
            try ledger.append([purchase(2)])
            _ = try prepared.swap()
            #expect(try ledger.policy().hash == policy.hash)
            #expect(try ledger.verifyModels() == [])
            #expect(try ledger.view(EntitlementModel.self, of: "u2", at: days(1, after: start))?.planState == .pro)
        }
    }
}

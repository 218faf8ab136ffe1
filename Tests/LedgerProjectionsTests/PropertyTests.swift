@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// The engine's invariants over random histories, on real stores.
@Suite struct PropertyTests {
    /// Incremental projection (each event appended on its own, the model updated in that
    /// append's transaction) equals a rebuild from scratch, byte for byte, state by state.
    @Test func incrementalProjectionEqualsARebuildByteForByte() async {
        await onRandomHistories(subjects: 4, perSubject: 1...14) { seed, history, events, ledger in
            for event in history.shuffled(events) { try ledger.append([event]) }
            let names = ["facts"] + ReadModels.all.map { $0.name }
            let incremental = try names.map { name in try ledger.servedStates(of: name) }
            try ledger.rebuild()
            let rebuilt = try names.map { name in try ledger.servedStates(of: name) }
            for (index, name) in names.enumerated() {
                #expect(rebuilt[index].map(\.key) == incremental[index].map(\.key), "\(name), seed \(seed)")
                #expect(rebuilt[index].map(\.state) == incremental[index].map(\.state), "\(name), seed \(seed)")
            }
            #expect(try ledger.verifyModels() == [])
        }
    }

    /// A status query reads a subject's states of every model with one seek: every view it
    /// gives is the one each model gives read on its own, and the one its events give folded
    /// in memory.
    @Test func aStatusQueryGivesEachModelsOwnView() async {
        await onRandomHistories(subjects: 3, perSubject: 1...14) { seed, _, events, ledger in
            try ledger.append(events)
            // Erased subjects' personal fields included: the store shows what their order of
            // appending gives (SPEC §2.3), exactly.
            let folded = try Folded(try erasedInAppendOrder(events))
            var times = events.flatMap { [$0.occurredAt, $0.occurredAt.adding(seconds: 3 * 86_400)] }
            times.append(ts("2027-06-01T00:00:00Z"))
            for subject in ["s0", "s1", "s2"] {
                for t in times {
                    let status = try ledger.status(of: subject, at: t).answers
                    let own: [(String, JSONObject?)] = [
                        (EntitlementModel.name, try ledger.view(EntitlementModel.self, of: subject, at: t)?.json),
                        (RetentionModel.name, try ledger.view(RetentionModel.self, of: subject, at: t)?.json),
                        (BadgeModel.name, try ledger.view(BadgeModel.self, of: subject, at: t)?.json),
                        (AccessModel.name, try ledger.view(AccessModel.self, of: subject, at: t)?.json),
                        (LimitsModel.name, try ledger.view(LimitsModel.self, of: subject, at: t)?.json),
                        (DeletionModel.name, try ledger.view(DeletionModel.self, of: subject, at: t)?.json),
                    ]
                    let inMemory: [JSONObject?] = [
                        folded.view(EntitlementModel.self, of: subject, at: t)?.json, folded.view(RetentionModel.self, of: subject, at: t)?.json,
                        folded.view(BadgeModel.self, of: subject, at: t)?.json, folded.view(AccessModel.self, of: subject, at: t)?.json,
                        folded.view(LimitsModel.self, of: subject, at: t)?.json,
                        folded.view(DeletionModel.self, of: subject, at: t)?.json,
                    ]
                    #expect(status.map(\.model) == own.map(\.0), "seed \(seed)")
                    for ((answer, (_, alone)), memory) in zip(zip(status, own), inMemory) {
                        #expect(answer.view?.json == alone, "seed \(seed), \(subject) at \(t), \(answer.model)")
                        #expect(alone == memory, "seed \(seed), \(subject) at \(t), \(answer.model)")
                    }
                }
            }
        }
    }

    /// SPEC §2.1: the same events appended in any order give the same status — every model's
    /// view — at any time (apart from the positions that `reason` cites, and the personal text
    /// an erasure destroyed: that depends on what was appended before the `account.deleted`).
    @Test func anyAppendOrderGivesTheSameViews() async {
        await checkProperty(count: 12, input: Gen.uint64()) { seed in
            var history = RandomHistory(seed: seed)
            let events = try history.events(subjects: 3, perSubject: 1...12).map { event throws(LedgerError) in
                var event = event
                event.id = try event.draft().id   // the same ids in both stores
                return event
            }
            let orders = [events, history.shuffled(events)]
            var times = events.flatMap { [$0.occurredAt, $0.occurredAt.adding(seconds: -1), $0.occurredAt.adding(seconds: 3 * 86_400)] }
            times.append(ts("2027-06-01T00:00:00Z"))
            var views: [[String]] = []
            for order in orders {
                try withStorePath { path in
                    let ledger = try Ledger(path: path)
                    defer { ledger.close() }
                    for chunk in stride(from: 0, to: order.count, by: 5) {
                        try ledger.append(Array(order[chunk..<min(chunk + 5, order.count)]))
                    }
                    var seen: [String] = []
                    for subject in ["s0", "s1", "s2"] {
                        for t in times {
                            for answer in try ledger.status(of: subject, at: t).answers {
                                guard var view = answer.view?.json else { continue }
                                let model = answer.model
                                view = withoutPersonalText(view, of: model)
                                if case .object(var reason) = view["reason"] {
                                    reason["position"] = nil
                                    view["reason"] = .object(reason)
                                }
                                seen.append("\(subject) \(t) \(model): \(JSON.object(view).serialized())")
                            }
                        }
                    }
                    views.append(seen)
                }
            }
            let difference = zip(views[0], views[1]).first { $0 != $1 }
            #expect(views[0].count == views[1].count && difference == nil, "seed \(seed): \(difference.map { "\($0.0)\n  vs \($0.1)" } ?? "")")
        }
    }

    /// Runs `body` on 12 random histories, each with a fresh store to append to: the seed (for
    /// messages), the history (to shuffle with), its events and the open ledger.
    private func onRandomHistories(subjects: Int, perSubject: ClosedRange<Int>, sourceLocation: SourceLocation = #_sourceLocation,
                                   _ body: (UInt64, inout RandomHistory, [LedgerEvent], Ledger) throws -> Void) async {
        await checkProperty(count: 12, input: Gen.uint64(), perform: { seed in
            var history = RandomHistory(seed: seed)
            let events = history.events(subjects: subjects, perSubject: perSubject)
            try withStorePath { path in
                let ledger = try Ledger(path: path)
                defer { ledger.close() }
                try body(seed, &history, events, ledger)
            }
        }, sourceLocation: sourceLocation)
    }
}

import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Synchronization
import Testing

/// `Ledger.erase` (SPEC §5 `ledger erase`, seed 003) and what a reader sees of an erased
/// customer: every financial fact and why each plan changed, "[Deleted User]" for the rest.
@Suite struct ErasureTests {
    let mar1 = ts("2026-03-01T09:30:00Z")
    let apr1 = ts("2026-04-01T09:30:00Z")
    let now = ts("2026-05-01T00:00:00Z")

    func note(_ subject: String, _ text: String, at: Timestamp, email: String? = nil) -> LedgerEvent {
        var n = SupportNoteAdded()
        n.text = text
        n.agent = "agent-7"
        return LedgerEvent(subject: subject, occurredAt: at, source: .support, meta: email.map { ["email": $0] } ?? [:], data: n.eventData)
    }

    func history(_ subject: String = "u") -> [LedgerEvent] {
        [Make.purchase(subject, at: mar1, txn: "t1", expires: apr1),
         note(subject, "Customer called about a double charge.", at: mar1.adding(seconds: 60), email: "ann@example.com"),
         Make.exportCompleted(subject, at: mar1.adding(seconds: 120), location: "s3://exports/\(subject).zip")]
    }

    func noteText(_ event: StoredEvent) -> String? {
        guard case .supportNoteAdded(let n)? = try? RecordedEvent(event).event.data else { return nil }
        return n.text
    }

    @Test func eraseRunsTheStepsThenDestroysTheKey() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(history())
            #expect(try ledger.view(DeletionModel.self, of: "u", at: now)?.export.location == "s3://exports/u.zip")

            let report = try ledger.erase("u", at: now)

            #expect(report.requestedAt == 4 && report.deletedAt == 7 && report.isErased && !report.alreadyErased)
            #expect(report.steps == [.init(name: "profile", outcome: .completed), .init(name: "auth", outcome: .completed)])
            #expect(try ledger.events(of: "u").collect().map(\.type) == [
                SubscriptionPurchased.type, SupportNoteAdded.type, AccountExportCompleted.type, AccountDeletionRequested.type,
                AccountDeletionStepCompleted.type, AccountDeletionStepCompleted.type, AccountDeleted.type,
            ])
            let deletion = try #require(try ledger.view(DeletionModel.self, of: "u", at: now))
            #expect(deletion.state == .completed && deletion.completedSteps == ["auth", "profile"])
            #expect(deletion.export == .init(state: .completed, location: "[Deleted User]"))
            // Erased after the fact, the location reads so at every time.
            #expect(try ledger.status(of: "u", at: mar1.adding(seconds: 180)).json.serialized().contains("\"location\":\"[Deleted User]\""))
            #expect(try ledger.log.liveKeys(of: "u") == 0 && ledger.log.verify().personal.keysDestroyed == 1)

            let audit = try ledger.audit(of: "u", at: now)
            #expect(audit.entries.map(\.summary).prefix(3) == [
                "purchased pro.monthly, transaction t1, until 2026-04-01T09:30:00.000Z",
                "support note by agent-7: \"[Deleted User]\"",
                "data export ready at [Deleted User]",
            ])
            #expect(audit.entries[0].changes.contains { $0.model == "entitlement" && $0.field == "planState" && $0.to == "pro" && $0.rule == "storeCoverage" })

            // Run again, it finds nothing to do.
            let again = try ledger.erase("u", at: now)
            #expect(again.alreadyErased && again.steps.isEmpty && again.deletedAt == nil && again.requestedAt == nil)
            #expect(try ledger.log.version(of: "u") == 7)
            #expect(try ledger.verify().isValid)
        }
    }

    /// A failed step does not stop the others, is recorded with its error, and holds the key;
    /// the next erase runs only that step, then destroys the key.
    @Test func aFailedStepIsRecordedAndOnlyItIsRetried() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(history())
            let runs = Mutex<[String]>([])
            let likesDown = Mutex(true)
            let steps = [
                ErasureStep("photos") { _ in runs.withLock { $0.append("photos") } },
                ErasureStep("likes") { _ in
                    runs.withLock { $0.append("likes") }
                    if likesDown.withLock({ $0 }) { throw LedgerError(.storage, "likes service timed out") }
                },
            ]
            let first = try ledger.erase("u", steps: steps, at: now)
            #expect(first.steps.map(\.outcome) == [.completed, .failed, .completed, .completed])
            #expect(first.steps[1].error == "likes service timed out")
            #expect(first.deletedAt == nil && !first.isErased)
            let deletion = try #require(try ledger.view(DeletionModel.self, of: "u", at: now))
            #expect(deletion.state == .failed && deletion.failedSteps == ["likes"] && deletion.completedSteps == ["auth", "photos", "profile"])
            #expect(try ledger.log.liveKeys(of: "u") == 1)
            #expect(try ledger.view(DeletionModel.self, of: "u", at: now)?.export.location == "s3://exports/u.zip")

            likesDown.withLock { $0 = false }
            let second = try ledger.erase("u", steps: steps, at: now.adding(seconds: 60))
            #expect(second.requestedAt == nil)
            #expect(second.steps.map(\.outcome) == [.done, .completed, .done, .done])
            #expect(second.deletedAt != nil)
            #expect(runs.withLock { $0 } == ["photos", "likes", "likes"])
            #expect(try ledger.view(DeletionModel.self, of: "u", at: now.adding(seconds: 60))?.state == .completed)
            #expect(try ledger.log.liveKeys(of: "u") == 0)
        }
    }

    /// A step the app runs (photos, backups) that last failed holds the deletion: erase cannot
    /// run it, says so, and deletes once the app has completed it.
    @Test func aFailedStepOfTheAppHoldsTheDeletion() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(history() + [Make.deletionRequested("u", at: apr1), Make.step("u", at: apr1, "backups", failed: true)])
            let first = try ledger.erase("u", at: now)
            #expect(first.steps.map(\.name) == ["profile", "auth", "backups"])
            #expect(first.steps.map(\.outcome) == [.completed, .completed, .failed])
            #expect(first.steps[2].error == "failed where it runs (not a step this erase runs): run it there, then erase again")
            #expect(first.deletedAt == nil && first.requestedAt == nil)
            try ledger.append([Make.step("u", at: now.adding(seconds: 30), "backups")])
            let second = try ledger.erase("u", at: now.adding(seconds: 60))
            #expect(second.steps.map(\.outcome) == [.done, .done])
            #expect(second.deletedAt != nil)
        }
    }

    /// Something else appending to the subject while it is erased (another erase, the app)
    /// stops this erase, which says to run it again, instead of interleaving with it.
    @Test func anEraseStopsWhenTheSubjectChangesUnderIt() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(history())
            let meddling = ErasureStep("photos") { subject in
                try ledger.append([Make.usage(subject, at: ts("2026-04-15T00:00:00Z"))])
            }
            do throws(LedgerError) {
                _ = try ledger.erase("u", steps: [meddling], at: now)
                Issue.record("the erase went on over another append")
            } catch {
                #expect(error.code == .wrongExpectedVersion)
                #expect(error.message == "u changed while it was being erased (another erase, or the app, appended to it); run erase again")
            }
            #expect(try ledger.log.liveKeys(of: "u") == 1)
            let again = try ledger.erase("u", steps: [ErasureStep("photos") { _ in }], at: now.adding(seconds: 60))
            #expect(again.deletedAt != nil)
        }
    }

    @Test func aCustomerWhoReturnsIsErasedAgain() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append(history())
            _ = try ledger.erase("u", at: now)
            try ledger.append([note("u", "back with a new account", at: now.adding(seconds: 3600))])
            #expect(try ledger.events(of: "u").collect().compactMap(noteText) == ["[Deleted User]", "back with a new account"])
            let report = try ledger.erase("u", at: now.adding(seconds: 120))
            #expect(!report.alreadyErased && report.deletedAt != nil)
            #expect(try ledger.log.liveKeys(of: "u") == 0 && ledger.log.verify().personal.keysDestroyed == 2)
        }
    }

    /// For random histories with random erasures and personal facts: an export (events read,
    /// erased fields as "[Deleted User]") appended into a fresh store gives the same views,
    /// personal text included; appended again to the first store, every event is a duplicate.
    @Test func anExportWithErasuresRoundTrips() async {
        await checkProperty(count: 10, input: Gen.uint64()) { seed in
            var history = RandomHistory(seed: seed)
            var events = history.events(subjects: 3, perSubject: 2...14)
            for (index, event) in events.enumerated().reversed() where history.random.int(0...3) == 0 {
                events.insert(note(event.subject, "note \(index) of \(event.subject)", at: event.occurredAt.adding(seconds: 1), email: "\(event.subject)@example.com"), at: index + 1)
            }
            // An erasure in s0's history and maybe the others', appended among the rest: what
            // came before it is erased, what came after stays (a customer who returns).
            events.insert(note("s0", "s0's first note", at: ts("2025-12-31T00:00:00Z")), at: 0)
            for subject in ["s0", "s1", "s2"] where subject == "s0" || history.random.bool() {
                let place = history.random.int(1...events.count)
                let at = events[min(place, events.count - 1)].occurredAt.adding(seconds: 7)
                events.insert(Make.deleted(subject, at: at), at: place)
            }
            #expect(try erasedInAppendOrder(events) != events, "seed \(seed): nothing erased")
            let times = [ts("2026-02-01T00:00:00Z"), ts("2026-06-01T00:00:00Z"), ts("2027-06-01T00:00:00Z")]
            try withStorePath { first in
                try withStorePath { second in
                    let a = try Ledger(path: first)
                    defer { a.close() }
                    for chunk in stride(from: 0, to: events.count, by: 4) { try a.append(Array(events[chunk ..< min(chunk + 4, events.count)])) }
                    let exported = try a.events().collect().map(\.draft)
                    let b = try Ledger(path: second)
                    defer { b.close() }
                    try b.log.append(exported)
                    let expected = try Folded(try erasedInAppendOrder(events))
                    for subject in ["s0", "s1", "s2"] {
                        #expect(try a.events(of: subject).collect().map(\.draft) == b.events(of: subject).collect().map(\.draft), "seed \(seed)")
                        for t in times {
                            let views = try a.status(of: subject, at: t).json
                            #expect(views == (try b.status(of: subject, at: t).json), "seed \(seed), \(subject) at \(t)")
                            #expect(try a.view(DeletionModel.self, of: subject, at: t)?.json == expected.view(DeletionModel.self, of: subject, at: t)?.json, "seed \(seed)")
                        }
                    }
                    #expect(try a.log.append(exported).duplicates == exported.count, "seed \(seed)")
                    #expect(try b.log.append(exported).duplicates == exported.count, "seed \(seed)")
                    #expect(try a.verify().isValid && b.verify().isValid, "seed \(seed)")
                }
            }
        }
    }
}


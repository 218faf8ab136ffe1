import Foundation
import Synchronization
import LedgerProjections
@_spi(Storage) import LedgerTestSupport
import Testing

/// The library as an app uses it: `Ledger` alone, through the one import, never its log or
/// engine.
@Suite struct LedgerAPITests {
    let jan1 = ts("2026-01-01T00:00:00Z")

    /// Drafts append as typed events do; the stream's version, the head, events by position
    /// and by id, and their typed data all come from the `Ledger`.
    @Test func drafsAppendAndEveryReadIsOnTheLedger() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let typed = Make.purchase("u1", at: jan1, txn: "t1", expires: days(30, after: jan1))
            let draft = try Make.created("u1", at: jan1).draft()
            #expect(try ledger.append([typed]).outcomes == [.appended(position: 1, version: 1)])
            #expect(try ledger.append([draft], expecting: ["u1": .exact(1)]).outcomes == [.appended(position: 2, version: 2)])
            #expect(try ledger.append([draft]).outcomes == [.duplicate(position: 2)])
            #expect(try ledger.version(of: "u1") == 2)
            #expect(try ledger.version(of: "nobody") == 0)
            #expect(try ledger.lastPosition() == 2)
            let first = try #require(try ledger.event(at: 1))
            guard case .subscriptionPurchased(let purchase) = try first.data else {
                Issue.record("position 1 is \(first.type), not a purchase")
                return
            }
            #expect(purchase.transactionId == "t1")
            #expect(try ledger.event(id: draft.id)?.position == 2)
            #expect(try ledger.event(at: 3) == nil)
            // An empty batch is typed events', and appends nothing.
            #expect(try ledger.append([]).outcomes == [])
        }
    }

    /// An event goes out as a JSONL line and comes back the same draft; a bad line names every
    /// problem.
    @Test func eventsRoundTripThroughJSONLines() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append([Make.purchase("u1", at: jan1, txn: "t1", expires: days(30, after: jan1))])
            let stored = try #require(try ledger.event(at: 1))
            let line = try stored.jsonLine
            #expect(!line.contains("\n"))
            #expect(try EventDraft(jsonLine: line) == stored.draft)
            do throws(LedgerError) {
                _ = try EventDraft(jsonLine: #"{"type":"subscription.purchased","subject":"","occurredAt":"2026-03-01T09:30:00","source":"app","data":{}}"#)
                Issue.record("a bad line was read")
            } catch {
                #expect(error.code == .invalidEvent)
                #expect(error.violations.count > 1)
                #expect(error.violations.map(\.field).contains("/occurredAt"))
            }
        }
    }

    /// `knownAt` answers with what the ledger had recorded by then: a refund recorded later
    /// does not show in the status "as we knew it" before it arrived.
    @Test func statusAndViewAsKnownAtLeaveOutLaterRecordedEvents() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append([Make.purchase("u1", at: jan1, txn: "t1", expires: days(30, after: jan1))])
            try ledger.append([Make.refund("u1", at: days(2, after: jan1), txn: "t1", original: "t1")])
            let at = days(5, after: jan1)
            // Refunded, with no account: a guest.
            #expect(try ledger.view(EntitlementModel.self, of: "u1", at: at)?.planState == .guest)
            #expect(try ledger.view(EntitlementModel.self, of: "u1", at: at, knownAt: .position(2))?.planState == .guest)
            #expect(try ledger.view(EntitlementModel.self, of: "u1", at: at, knownAt: .position(1))?.planState == .pro)
            #expect(try ledger.view(EntitlementModel.self, of: "u1", at: at, knownAt: .position(0))?.planState == .guest)

            let then = try ledger.status(of: "u1", at: at, knownAt: .position(1))
            let now = try ledger.status(of: "u1", at: at)
            #expect(then.answers.map(\.model) == now.answers.map(\.model))
            #expect((then.answers.first { $0.model == EntitlementModel.name }?.view as? EntitlementView)?.planState == .pro)
            #expect((now.answers.first { $0.model == EntitlementModel.name }?.view as? EntitlementView)?.planState == .guest)
            // Everything recorded by then: the same answers as without `knownAt`.
            let all = try ledger.status(of: "u1", at: at, knownAt: .position(2))
            #expect(all.json.serialized() == now.json.serialized())
        }
    }

    /// A head already reached answers at once; a later one when an append reaches it.
    @Test func waitingForAPositionSaysItWasReached() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try await ledger.append([Make.created("u1", at: jan1)])
            #expect(try await ledger.waitForPosition(1) == .reached(head: 1))
            let waiter = Task { try await ledger.waitForPosition(3) }
            try await ledger.append([Make.created("u2", at: jan1)])
            try await ledger.append([Make.created("u3", at: jan1), Make.created("u4", at: jan1)])
            #expect(try await waiter.value == .reached(head: 4))
        }
    }

    @Test func waitingForAPositionSaysItWasCancelled() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            let waiter = Task { try await ledger.waitForPosition(10) }
            try await Task.sleep(for: .milliseconds(50))
            waiter.cancel()
            #expect(try await waiter.value == .cancelled)
        }
    }

    @Test func waitingForAPositionSaysTheLedgerClosed() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            let waiter = Task { try await ledger.waitForPosition(10) }
            try await Task.sleep(for: .milliseconds(50))
            ledger.close()
            #expect(try await waiter.value == .closed)
        }
    }

    /// A wait begun after the ledger closed ends at once, as does a subscription.
    @Test func waitingAfterCloseSaysClosed() async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            ledger.close()
            #expect(try await ledger.waitForPosition(10) == .closed)
            var heads = try ledger.positions().makeAsyncIterator()
            #expect(await heads.next() == nil)
        }
    }

    /// A store opened with `.noSync` is flushed through the ledger itself (what reaches the disk
    /// only a power cut would tell: this checks the call runs and keeps what was appended).
    @Test func aNoSyncLedgerIsFlushedBySync() throws {
        try withStorePath { path in
            var options = EventLog.Options()
            options.durability = .noSync
            let ledger = try Ledger(path: path, options: options)
            defer { ledger.close() }
            try ledger.append([Make.created("u1", at: jan1)])
            try ledger.sync()
            #expect(try ledger.lastPosition() == 1)
        }
    }

    /// After `close()`, the same process opens the path again, reads what it wrote and appends.
    @Test func closingFreesThePathForANewLedger() throws {
        try withStorePath { path in
            for round in 1 ... 3 {
                let ledger = try Ledger(path: path)
                #expect(try ledger.lastPosition() == UInt64(round - 1))
                try ledger.append([Make.created("u\(round)", at: jan1)])
                ledger.close()
            }
            let reopened = try Ledger(path: path)
            defer { reopened.close() }
            #expect(try reopened.verify().isValid)
            #expect(try reopened.version(of: "u3") == 1)
        }
    }

    /// Each failure has a code of its own, for code that acts on it.
    @Test func anUnknownModelHasItsOwnCode() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            #expect { try ledger.rebuild(["entitlements"]) } throws: { error in
                (error as? LedgerError)?.code == .unknownModel
            }
        }
    }

    @Test func aReadOnlyStoreHasItsOwnCode() throws {
        try withStorePath { path in
            try Ledger(path: path).close()
            var options = EventLog.Options()
            options.readOnly = true
            let ledger = try Ledger(path: path, options: options)
            defer { ledger.close() }
            #expect { try ledger.append([Make.created("u1", at: jan1)]) } throws: { error in
                (error as? LedgerError)?.code == .readOnly
            }
            #expect { try ledger.rebuild() } throws: { error in
                (error as? LedgerError)?.code == .readOnly
            }
            #expect { try ledger.catchUp() } throws: { error in
                (error as? LedgerError)?.code == .readOnly
            }
            // Refused before any step runs: the step would delete the app's data unrecorded.
            let ran = Mutex(false)
            #expect { try ledger.erase("u1", steps: [ErasureStep("files") { _ in ran.withLock { $0 = true } }]) } throws: { error in
                (error as? LedgerError)?.code == .readOnly
            }
            #expect(ran.withLock { $0 } == false)
        }
    }

    @Test func aSecondRebuildWhileOneRunsHasItsOwnCode() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try ledger.append([Make.created("u1", at: jan1)])
            var second: LedgerError?
            try ledger.rebuild { _ in
                guard second == nil else { return }
                do throws(LedgerError) { try ledger.rebuild(dryRun: true) } catch { second = error }
            }
            #expect(second?.code == .rebuildRunning)
        }
    }

    /// A payload that breaks several rules reports them all, and the batch index of its event.
    @Test func everyViolationOfAPayloadIsReportedWithTheEventsIndex() throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            var bad = SubscriptionPurchased()
            bad.purchasedAt = jan1
            bad.expiresAt = days(30, after: jan1)
            let events = [Make.created("u1", at: jan1), LedgerEvent(subject: "u1", occurredAt: jan1, source: .appstore, data: bad.eventData)]
            do throws(LedgerError) {
                try ledger.append(events)
                Issue.record("a purchase without product or transaction ids was appended")
            } catch {
                #expect(error.code == .invalidEvent)
                #expect(error.index == 1)
                #expect(error.violations.map(\.field) == ["/data/productId", "/data/transactionId", "/data/originalTransactionId"])
                #expect(error.field == "/data/productId")
            }
            #expect(try ledger.lastPosition() == 0)
        }
    }
}

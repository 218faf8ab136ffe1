import Foundation
import LedgerAppStore
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// Signed notifications into a real store: subjects, bindings, retries and batches.
@Suite(.enabled(if: Samples.present, Comment(rawValue: Samples.absent)))
struct IngestTests {
    static let day: Int64 = 86_400_000
    static let start: Int64 = 1_772_357_400_000                      // 2026-03-01T09:30:00Z

    /// A store in a fresh directory, removed afterwards.
    func withLedger<R>(_ body: (Ledger) async throws -> R) async throws -> R {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ingest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let ledger = try Ledger(path: dir.appendingPathComponent("store.lmdb").path)
        defer { ledger.close() }
        return try await body(ledger)
    }

    let verifier: SignedDataVerifier

    init() throws {
        verifier = try SignedDataVerifier(try Samples.configuration())
    }

    /// A POST body of a notification about subscription `original`, signed `day` days after
    /// the start, its transaction's coverage from then for 30 days.
    static func body(_ type: String, _ subtype: String? = nil, day: Int64, uuid: Int, original: String = "2000000100",
                     token: String? = nil, product: String = "pro.monthly") throws -> [UInt8] {
        let signed = start + day * Self.day
        var transaction: JSONObject = ["transactionId": .string("\(original)-\(day)"), "originalTransactionId": .string(original),
                                       "bundleId": "com.example", "productId": .string(product), "environment": "Sandbox",
                                       "purchaseDate": .integer(signed), "expiresDate": .integer(signed + 30 * Self.day), "signedDate": .integer(signed)]
        if let token { transaction["appAccountToken"] = .string(token) }
        let payload = Samples.notification(type, subtype: subtype, uuid: String(format: "00000000-0000-4000-8000-%012d", uuid), signedDate: signed,
                                           data: [("signedTransactionInfo", .string(try Samples.mint(.object(transaction))))])
        return Samples.body(try Samples.mint(payload))
    }

    /// The configuration recorded in the store reads back the same.
    @Test func theStoreKeepsItsAppStoreConfiguration() async throws {
        try await withLedger { ledger in
            #expect(try ledger.appStoreConfiguration() == nil)
            let configuration = try Samples.configuration(environment: .production, appAppleId: 1234)
            try ledger.setAppStoreConfiguration(configuration)
            #expect(try ledger.appStoreConfiguration() == configuration)
            #expect(try ledger.verify().isValid)
        }
    }

    @Test func theAppAccountTokenIsTheSubject() async throws {
        try await withLedger { ledger in
            let token = "7E3FB20B-4CDB-47CC-936D-99D65F608138"
            let result = try await ledger.ingestAppStore(try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 1, token: token), verifier: verifier)
            #expect(result.outcomes == [.appended(position: 1, version: 1), .appended(position: 2, version: 2)])
            let subject = token.lowercased()
            let at = Timestamp(milliseconds: Self.start + Self.day)
            #expect(try ledger.view(EntitlementModel.self, of: subject, at: at)?.planState == .pro)
            #expect(try ledger.view(HoldersModel.self, of: "2000000100")?.subjects == [subject])
        }
    }

    /// A notification delivered again is all duplicates.
    @Test func aRetryIsADuplicate() async throws {
        try await withLedger { ledger in
            let body = try Self.body("DID_RENEW", day: 30, uuid: 2, token: "7e3fb20b-4cdb-47cc-936d-99d65f608138")
            try await ledger.ingestAppStore(body, verifier: verifier)
            let again = try await ledger.ingestAppStore(body, verifier: verifier)
            #expect(again.outcomes == [.duplicate(position: 1), .duplicate(position: 2)])
        }
    }

    /// The purchase the app saw, as it reports it for `subject`: the SUBSCRIBED of `body(day: 0)`.
    static func appReport(_ subject: String, original: String = "2000000100") -> LedgerEvent {
        let seen = SubscriptionPurchased(productId: "pro.monthly", transactionId: "\(original)-0", originalTransactionId: original,
                                         purchasedAt: Timestamp(milliseconds: start), expiresAt: Timestamp(milliseconds: start + 30 * day))
        return LedgerEvent(subject: subject, occurredAt: seen.purchasedAt, source: .app, data: seen.eventData)
    }

    /// Without a token, notifications wait under `appstore:<id>`; the app's report of the
    /// purchase is followed, in its own transaction, by a binding, and the next notification
    /// goes to the app's subject.
    @Test func theAppsReportOfAWaitingPurchaseBindsIt() async throws {
        try await withLedger { ledger in
            try await ledger.ingestAppStore(try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 3), verifier: verifier)
            #expect(try ledger.version(of: "appstore:2000000100") == 2)
            let report = try await ledger.append([Self.appReport("user-42")])
            #expect(report.outcomes == [.appended(position: 3, version: 1)])
            let events = try ledger.events(of: "user-42").collect()
            #expect(events.map(\.type) == [SubscriptionPurchased.type, AppStoreSubjectBound.type])
            #expect(events.map(\.position) == [3, 4])
            #expect(events.last?.source == .system)
            #expect(try events.last?.data == .appStoreSubjectBound(AppStoreSubjectBound(originalTransactionId: "2000000100", from: "appstore:2000000100")))
            let holders = try #require(try ledger.view(HoldersModel.self, of: "2000000100"))
            #expect(holders.subjects == ["appstore:2000000100", "user-42"])
            #expect(holders.latest == "user-42")
            #expect(holders.bound == ["appstore:2000000100"])
            #expect(holders.boundTo == ["appstore:2000000100": "user-42"])
            // The app's report again, and the next notification, bind nothing more.
            #expect(try await ledger.append([Self.appReport("user-42")]).outcomes == [.duplicate(position: 3)])
            try await ledger.ingestAppStore(try Self.body("DID_RENEW", day: 30, uuid: 4), verifier: verifier)
            #expect(try ledger.events(of: "user-42").collect().map(\.type)
                    == [SubscriptionPurchased.type, AppStoreSubjectBound.type, AppStoreNotification.type, SubscriptionRenewed.type])
        }
    }

    /// A notification with a token, after others waited, binds them to the token's subject.
    @Test func aTokenAfterWaitingNotificationsBindsThem() async throws {
        try await withLedger { ledger in
            let token = "eeeeeeee-0000-4000-8000-000000000005"
            try await ledger.ingestAppStore([try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 30),
                                             try Self.body("DID_RENEW", day: 30, uuid: 31, token: token)], verifier: verifier)
            #expect(try ledger.events(of: token).collect().map(\.type)
                    == [AppStoreNotification.type, SubscriptionRenewed.type, AppStoreSubjectBound.type])
            #expect(try ledger.view(EntitlementModel.self, of: token, at: Timestamp(milliseconds: Self.start + Self.day))?.planState == .pro)
        }
    }

    /// What waited counts for the bound subject: its plan, its audit, what falls due; the
    /// holding subject is no customer of its own any more. Before the binding was recorded,
    /// the subject's views were its own alone.
    @Test func waitingEventsCountForTheBoundSubject() async throws {
        try await withLedger { ledger in
            // Renewed through day 60, then a billing failure on day 60 with grace to day 66.
            try await ledger.ingestAppStore([try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 40),
                                             try Self.body("DID_RENEW", day: 30, uuid: 41)], verifier: verifier)
            let before = try ledger.lastPosition()
            try await ledger.append([Self.appReport("user-43")])
            let day45 = Timestamp(milliseconds: Self.start + 45 * Self.day)
            #expect(try ledger.view(EntitlementModel.self, of: "user-43", at: day45)?.planState == .pro)
            #expect(try ledger.status(of: "user-43", at: day45, knownAt: .position(before + 1)).json.serialized().contains(#""planState":"guest""#))
            #expect(try ledger.status(of: "user-43", at: day45).json.serialized().contains(#""planState":"pro""#))
            let renewal = try #require(try ledger.events(of: "appstore:2000000100").collect().first { $0.type == SubscriptionRenewed.type })
            #expect(try ledger.audit(of: "user-43", at: day45).entries.contains { $0.position == renewal.position })
            var listed: [String: PlanState] = [:]
            try ledger.forEachView(of: EntitlementModel.self, at: day45) { subject, view in listed[subject] = view.planState }
            #expect(listed == ["user-43": .pro])
            // A notification that reached the holding subject after the binding (a delivery
            // prepared before it) counts too.
            let failure = SubscriptionRenewalFailed(originalTransactionId: "2000000100",
                                                    gracePeriodExpiresAt: Timestamp(milliseconds: Self.start + 66 * Self.day))
            try await ledger.append([LedgerEvent(subject: "appstore:2000000100", occurredAt: Timestamp(milliseconds: Self.start + 60 * Self.day),
                                                 source: .appstore, data: failure.eventData)])
            let day61 = Timestamp(milliseconds: Self.start + 61 * Self.day)
            let graced = try ledger.view(EntitlementModel.self, of: "user-43", at: day61)
            #expect(graced?.planState == .pro)
            #expect(graced?.billingIssue == true)
            #expect(graced?.reason.rule == "billingGrace")
            let due = try ledger.due(from: Timestamp(milliseconds: Self.start + 59 * Self.day), to: Timestamp(milliseconds: Self.start + 70 * Self.day))
            #expect(due.map { "\($0.subject) \($0.kind)" } == ["user-43 paymentFailed"])
            // Stored states are each key's own: a fold from scratch agrees, and a rebuild
            // changes no view.
            #expect(try ledger.verifyModels().isEmpty)
            #expect(try ledger.rebuild(dryRun: true, at: day61).changes.isEmpty)
        }
    }

    /// An App Store event that reaches the holding subject after the app named the subscription
    /// binds it too, into the app's subject's stream.
    @Test func aHoldingSubjectsFirstEventAfterTheAppsReportBindsIt() async throws {
        try await withLedger { ledger in
            try await ledger.append([Self.appReport("user-44")])
            let renewal = SubscriptionRenewed(productId: "pro.monthly", transactionId: "2000000100-30", originalTransactionId: "2000000100",
                                              purchasedAt: Timestamp(milliseconds: Self.start + 30 * Self.day),
                                              expiresAt: Timestamp(milliseconds: Self.start + 60 * Self.day))
            try await ledger.append([LedgerEvent(subject: "appstore:2000000100", occurredAt: renewal.purchasedAt, source: .appstore, data: renewal.eventData)])
            let events = try ledger.events(of: "user-44").collect()
            #expect(events.map(\.type) == [SubscriptionPurchased.type, AppStoreSubjectBound.type])
            #expect(events.last?.position == 3)
            #expect(events.last?.occurredAt == renewal.purchasedAt)
            #expect(try ledger.view(EntitlementModel.self, of: "user-44", at: Timestamp(milliseconds: Self.start + 45 * Self.day))?.planState == .pro)
        }
    }

    /// A restore writes the export's binding where it was and derives none; a plain append
    /// of the export derives the same binding, and the export's is then a duplicate.
    @Test func anExportWithABindingRestoresAsItWas() async throws {
        try await withLedger { ledger in
            try await ledger.ingestAppStore(try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 60), verifier: verifier)
            try await ledger.append([Self.appReport("user-45")])
            let exported = try ledger.events().collect().map { event throws(LedgerError) in try event.jsonLine }
            #expect(exported.count == 4)
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("restore-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let file = dir.appendingPathComponent("export.jsonl").path
            try Data(exported.map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: file))
            for restoring in [true, false] {
                let copy = try Ledger(path: dir.appendingPathComponent("copy-\(restoring).lmdb").path)
                defer { copy.close() }
                let summary = try JSONLImport.append([file], to: copy.log, restoring: restoring)
                #expect(summary.appended + summary.duplicates == 4)
                let copied = try copy.events().collect()
                #expect(copied.count == 4)
                if restoring {
                    #expect(try copied.map { event throws(LedgerError) in try event.jsonLine } == exported)
                } else {
                    #expect(copied.map(\.id) == (try ledger.events().collect().map(\.id)))
                    #expect(summary.duplicates == 1)
                }
                #expect(try copy.view(EntitlementModel.self, of: "user-45", at: Timestamp(milliseconds: Self.start + Self.day))?.planState == .pro)
            }
        }
    }

    /// A batch that carries, after the app's report, the binding the ledger derives from it:
    /// the same fact is a duplicate; the same id with other content is refused, nothing kept.
    @Test func aBindingInTheBatchAfterTheReportIsTheDerivedOne() async throws {
        try await withLedger { ledger in
            try await ledger.ingestAppStore(try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 70), verifier: verifier)
            let report = Self.appReport("user-9")
            let id = EventIdentity.derive(named: "appstore.subject_bound/appstore:2000000100/user-9")
            let binding = AppStoreSubjectBound(originalTransactionId: "2000000100", from: "appstore:2000000100")
            let other = LedgerEvent(id: id, subject: "user-9", occurredAt: report.occurredAt.adding(seconds: 1), source: .system, data: binding.eventData)
            let refused = await #expect(throws: LedgerError.self) { try await ledger.append([report, other]) }
            #expect(refused?.code == .idConflict)
            #expect(try ledger.lastPosition() == 2)
            #expect(try ledger.verify().isValid)
            let same = LedgerEvent(id: id, subject: "user-9", occurredAt: report.occurredAt, source: .system, data: binding.eventData)
            let result = try await ledger.append([report, same])
            #expect(result.outcomes == [.appended(position: 3, version: 1), .duplicate(position: 4)])
            #expect(try ledger.verify().isValid)
        }
    }

    /// A binding names the holding subject of its subscription, or is refused.
    @Test func aBindingOfAnotherSubjectIsRefused() async throws {
        try await withLedger { ledger async throws in
            let binding = AppStoreSubjectBound(originalTransactionId: "2000000100", from: "user-1")
            let refused = await #expect(throws: LedgerError.self) {
                try await ledger.append([LedgerEvent(subject: "user-2", occurredAt: Timestamp(milliseconds: Self.start), source: .support, data: binding.eventData)])
            }
            #expect(refused?.code == .invalidEvent)
            #expect(refused?.field == "/data/from")
            #expect(refused?.message == "must be the holding subject appstore:2000000100 of originalTransactionId 2000000100")
            #expect(try ledger.lastPosition() == 0)
        }
    }

    /// A notification delivered again after its subscription found a holder still goes where
    /// it went: a duplicate, not a conflict. Also twice in one batch around another.
    @Test func aRetryGoesWhereTheFirstDeliveryWent() async throws {
        try await withLedger { ledger in
            let waiting = try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 20)
            try await ledger.ingestAppStore(waiting, verifier: verifier)
            let seen = SubscriptionPurchased(productId: "pro.monthly", transactionId: "2000000100-0", originalTransactionId: "2000000100",
                                             purchasedAt: Timestamp(milliseconds: Self.start), expiresAt: Timestamp(milliseconds: Self.start + 30 * Self.day))
            try await ledger.append([LedgerEvent(subject: "user-42", occurredAt: seen.purchasedAt, source: .app, data: seen.eventData)])
            let again = try await ledger.ingestAppStore(waiting, verifier: verifier)
            #expect(again.outcomes == [.duplicate(position: 1), .duplicate(position: 2)])
            let token = try Self.body("DID_RENEW", day: 30, uuid: 21, token: "cccccccc-0000-4000-8000-000000000003")
            let mixed = try await ledger.ingestAppStore([waiting, token, waiting], verifier: verifier)
            #expect(mixed.outcomes.filter { if case .duplicate = $0 { true } else { false } }.count == 4)
        }
    }

    /// An upgrade names the product the subscription had, from an earlier body of the batch.
    @Test func anUpgradeNamesTheProductItLeaves() async throws {
        try await withLedger { ledger in
            let token = "dddddddd-0000-4000-8000-000000000004"
            try await ledger.ingestAppStore([try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 22, token: token, product: "pro.monthly"),
                                             try Self.body("DID_CHANGE_RENEWAL_PREF", "UPGRADE", day: 10, uuid: 23, token: token, product: "pro.yearly")],
                                            verifier: verifier)
            let changes = try ledger.events(of: token).collect().compactMap { event -> SubscriptionProductChanged? in
                if case .subscriptionProductChanged(let change) = try? event.data { change } else { nil }
            }
            #expect(changes.map(\.fromProductId) == ["pro.monthly"])
            #expect(changes.map(\.toProductId) == ["pro.yearly"])
        }
    }

    /// A notification whose mapping fails names its index; nothing is appended.
    @Test func aNotificationThatCannotBeMappedRejectsTheBatch() async throws {
        try await withLedger { ledger in
            let bare = Samples.body(try Samples.mint(Samples.notification("DID_RENEW", signedDate: Self.start)))
            let batch = [try Self.body("DID_RENEW", day: 30, uuid: 24, token: "eeeeeeee-0000-4000-8000-000000000005"), bare]
            do throws(LedgerError) {
                try await ledger.ingestAppStore(batch, verifier: verifier)
                Issue.record("a renewal without its transaction was ingested")
            } catch {
                #expect(error.index == 1)
                #expect(error.message.hasPrefix("malformed JWS"))
            }
            #expect(try ledger.lastPosition() == 0)
        }
    }

    /// An earlier line of the same batch counts: the token of the first names the second's subject.
    @Test func anEarlierLineOfTheBatchNamesTheSubject() async throws {
        try await withLedger { ledger in
            try await ledger.ingestAppStore([try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 6, token: "aaaaaaaa-0000-4000-8000-000000000001"),
                                             try Self.body("DID_RENEW", day: 30, uuid: 7)], verifier: verifier)
            #expect(try ledger.version(of: "aaaaaaaa-0000-4000-8000-000000000001") == 4)
            #expect(try ledger.version(of: "appstore:2000000100") == 0)
        }
    }

    /// A notification about no transaction is kept under the app's bundle.
    @Test func aTestNotificationIsKeptUnderTheBundle() async throws {
        try await withLedger { ledger in
            try await ledger.ingestAppStore(Samples.body(try Samples.text("mock_signed_data/testNotification")), verifier: verifier)
            #expect(try ledger.events(of: "appstore:com.example").collect().map(\.type) == [AppStoreNotification.type])
        }
    }

    /// One forged body rejects its whole batch, naming its index and the part at fault.
    @Test func aForgedBodyRejectsTheBatch() async throws {
        try await withLedger { ledger in
            var forged = try Self.body("DID_RENEW", day: 30, uuid: 9, token: "aaaaaaaa-0000-4000-8000-000000000001")
            forged[forged.count - 10] = forged[forged.count - 10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let batch = [try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 8), forged]
            do throws(LedgerError) {
                try await ledger.ingestAppStore(batch, verifier: verifier)
                Issue.record("a forged body was ingested")
            } catch {
                #expect(error.code == .invalidEvent)
                #expect(error.index == 1)
                #expect(error.field == "/signedPayload")
            }
            #expect(try ledger.lastPosition() == 0)
        }
    }

    /// A lifecycle delivered in any order, with retries, gives the views in-order delivery gives.
    @Test func anyDeliveryOrderGivesTheSameViews() async throws {
        let token = "bbbbbbbb-0000-4000-8000-000000000002"
        let lifecycle = [
            try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 10, token: token),
            try Self.body("DID_RENEW", day: 30, uuid: 11, token: token),
            try Self.body("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", day: 40, uuid: 12, token: token),
            try Self.body("EXPIRED", "VOLUNTARY", day: 60, uuid: 13, token: token),
        ]
        let times = [1, 35, 45, 61, 90].map { Timestamp(milliseconds: Self.start + Int64($0) * Self.day) }
        func views(_ deliveries: [[[UInt8]]]) async throws -> [String] {
            try await withLedger { ledger in
                for batch in deliveries { try await ledger.ingestAppStore(batch, verifier: verifier) }
                // The positions a reason cites are where the events landed, which arrival decides.
                return try times.map { time in
                    try ledger.status(of: token, at: time).json.serialized()
                        .replacingOccurrences(of: #""position":[0-9]+"#, with: #""position":_"#, options: .regularExpression)
                }
            }
        }
        let inOrder = try await views(lifecycle.map { [$0] })
        #expect(inOrder[0].contains(#""planState":"pro""#))
        #expect(inOrder[4].contains(#""planState":"guest""#))
        // Any order, in batches of any size, each notification delivered once to three times.
        await checkProperty(count: 12, input: Gen.uint64()) { seed in
            var random = DataGenerator(state: seed)
            var deliveries: [[UInt8]] = []
            for body in lifecycle { deliveries += Array(repeating: body, count: Int(random.next() % 3) + 1) }
            for i in deliveries.indices.reversed() { deliveries.swapAt(i, Int(random.next() % UInt64(i + 1))) }
            var batches: [[[UInt8]]] = []
            for body in deliveries {
                if batches.isEmpty || random.next() % 2 == 0 { batches.append([body]) } else { batches[batches.count - 1].append(body) }
            }
            do {
                #expect(try await views(batches) == inOrder, "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }

    /// The same lifecycle without tokens, the app reporting the purchase at any point of the
    /// deliveries: the app's subject's views are those of the app reporting first, when every
    /// notification goes straight to it.
    @Test func theAppsReportAtAnyPointGivesTheSameViews() async throws {
        let lifecycle = [
            try Self.body("SUBSCRIBED", "INITIAL_BUY", day: 0, uuid: 50),
            try Self.body("DID_RENEW", day: 30, uuid: 51),
            try Self.body("DID_FAIL_TO_RENEW", day: 60, uuid: 52),
            try Self.body("EXPIRED", "BILLING_RETRY", day: 70, uuid: 53),
        ]
        let times = [1, 35, 61, 71, 90].map { Timestamp(milliseconds: Self.start + Int64($0) * Self.day) }
        /// Each step a batch of bodies, or the app's report (`nil`).
        func views(_ steps: [[[UInt8]]?]) async throws -> [String] {
            try await withLedger { ledger in
                for step in steps {
                    if let batch = step { try await ledger.ingestAppStore(batch, verifier: verifier) } else { try await ledger.append([Self.appReport("user-7")]) }
                }
                let whole = try ledger.due(from: times[0], to: times[4])
                #expect(whole.allSatisfy { $0.subject == "user-7" })
                // The same items asked for a day at a time: the index holds them, whatever the window.
                var daily: [DueItem] = []
                let (first, last): (Int64, Int64) = (times[0].milliseconds, times[4].milliseconds)
                var day = first
                while day < last {
                    daily += try ledger.due(from: Timestamp(milliseconds: day), to: Timestamp(milliseconds: Swift.min(day + Self.day, last)))
                    day += Self.day
                }
                #expect(daily.map { "\($0.subject) \($0.at) \($0.kind)" } == whole.map { "\($0.subject) \($0.at) \($0.kind)" })
                #expect(try ledger.verifyModels() == [])
                return try times.map { time in
                    try ledger.status(of: "user-7", at: time).json.serialized()
                        .replacingOccurrences(of: #""position":[0-9]+"#, with: #""position":_"#, options: .regularExpression)
                } + [whole.map { "\($0.at) \($0.kind)" }.joined(separator: ", ")]
            }
        }
        let appFirst = try await views([nil] + lifecycle.map { [$0] })
        #expect(appFirst[5].contains("paymentFailed"))
        #expect(appFirst[1].contains(#""planState":"pro""#))
        #expect(appFirst[3].contains(#""planState":"guest""#))
        await checkProperty(count: 8, input: Gen.uint64()) { seed in
            var random = DataGenerator(state: seed)
            var deliveries = lifecycle
            for i in deliveries.indices.reversed() { deliveries.swapAt(i, Int(random.next() % UInt64(i + 1))) }
            var steps: [[[UInt8]]?] = deliveries.map { [$0] }
            steps.insert(nil, at: Int(random.next() % UInt64(steps.count + 1)))
            do {
                #expect(try await views(steps) == appFirst, "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }
}

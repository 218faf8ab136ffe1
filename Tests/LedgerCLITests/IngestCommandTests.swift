import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerTestSupport
import Testing

/// `ledger ingest appstore` with Apple's own signed samples (`../shared/appstore-samples`, or
/// `$LEDGER_APPSTORE_SAMPLES`); the library's tests mint notifications of every type.
enum AppStoreSamples {
    static let samples: URL = {
        if let path = ProcessInfo.processInfo.environment["LEDGER_APPSTORE_SAMPLES"], !path.isEmpty { return URL(fileURLWithPath: path) }
        return ReadmeTests.root.deletingLastPathComponent().appendingPathComponent("shared/appstore-samples")
    }()
    static let present = FileManager.default.fileExists(atPath: samples.appendingPathComponent("certs/testCA.der").path)
    static let absent = "Apple's App Store samples are not at \(samples.path) (set LEDGER_APPSTORE_SAMPLES to their folder)"
}

@Suite(.enabled(if: AppStoreSamples.present, Comment(rawValue: AppStoreSamples.absent)))
struct IngestCommandTests {
    static let samples = AppStoreSamples.samples

    /// A POST body of a sample JWS.
    static func body(_ sample: String) throws -> String {
        let jws = try String(contentsOf: samples.appendingPathComponent("mock_signed_data/\(sample)"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return #"{"signedPayload":"\#(jws)"}"#
    }

    func ingest(_ dir: String, _ files: [String], environment: String = "Sandbox", json: Bool = false) throws -> Run {
        try Run(["ingest", "appstore", "--store", dir + "/s.lmdb", "--root", Self.samples.appendingPathComponent("certs/testCA.der").path,
                 "--bundle-id", "com.example", "--environment", environment] + (json ? ["--json"] : []) + files)
    }

    @Test func aSignedNotificationIsIngestedOnceAndKeptUnderTheBundle() throws {
        try withDirectory { dir in
            try (Self.body("testNotification") + "\n").write(toFile: dir + "/n.jsonl", atomically: true, encoding: .utf8)
            let first = try ingest(dir, [dir + "/n.jsonl"])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout == "Ingested 1 event at position 1.\n")
            let again = try ingest(dir, [dir + "/n.jsonl"], json: true)
            #expect(again.stdout == #"{"appended":0,"duplicates":1,"firstPosition":null,"lastPosition":null}"# + "\n")
            let audit = try Run(["audit", "appstore:com.example", "--store", dir + "/s.lmdb"])
            #expect(audit.stdout.contains("appstore.notification [appstore]"))
            #expect(audit.stdout.contains("notificationType TEST"))
        }
    }

    /// A file with a line that fails is rejected whole, every failure named, nothing appended.
    @Test func aFailingLineRejectsEveryFileAndNamesTheReason() throws {
        try withDirectory { dir in
            try (Self.body("testNotification") + "\n\n" + Self.body("wrongBundleId") + "\n").write(toFile: dir + "/mixed.jsonl", atomically: true, encoding: .utf8)
            try (Self.body("missingX5CHeaderClaim") + "\n").write(toFile: dir + "/bare.jsonl", atomically: true, encoding: .utf8)
            let run = try ingest(dir, [dir + "/mixed.jsonl", dir + "/bare.jsonl"])
            #expect(run.status == 2)
            #expect(run.stdout == "")
            #expect(run.stderr == """
                \(dir)/mixed.jsonl:3: /signedPayload: wrong bundle in data: bundleId is "com.example.wrong", not "com.example"
                \(dir)/bare.jsonl:1: /signedPayload: bad x5c: the JWS header needs an x5c of exactly three certificates (leaf, intermediate, root)

                """)
            #expect(!FileManager.default.fileExists(atPath: dir + "/s.lmdb"))
        }
    }

    @Test func theWrongEnvironmentIsRefusedWithJSONErrors() throws {
        try withDirectory { dir in
            try (Self.body("testNotification") + "\n").write(toFile: dir + "/n.jsonl", atomically: true, encoding: .utf8)
            let run = try ingest(dir, [dir + "/n.jsonl"], environment: "Production", json: true)
            #expect(run.status == 2)
            let errors = try #require(try run.json()["errors"] as? [[String: Any]])
            #expect(errors.count == 1)
            #expect(errors.first?["pointer"] as? String == "/signedPayload")
            #expect((errors.first?["message"] as? String)?.hasPrefix("wrong environment") == true)
        }
    }

    /// Apple's Get Notification History response: each entry's signedPayload, verified.
    @Test func aHistoryResponseIsVerifiedEntryByEntry() throws {
        try withDirectory { dir in
            let history = Self.samples.appendingPathComponent("models/getNotificationHistoryResponse.json").path
            let run = try Run(["ingest", "appstore", "--store", dir + "/s.lmdb", "--root", Self.samples.appendingPathComponent("certs/testCA.der").path,
                               "--bundle-id", "com.example", "--environment", "Sandbox", "--history", history])
            // Apple's sample holds placeholders, not signed data: each is refused by its entry.
            #expect(run.status == 2)
            #expect(run.stderr.contains("\(history):1: /signedPayload: malformed JWS"))
            #expect(run.stderr.contains("\(history):2: /signedPayload: malformed JWS"))
        }
    }

    /// Settings recorded by `init` serve an ingest with no flags; without either, it says so.
    @Test func settingsRecordedByInitServeAnIngestWithoutFlags() throws {
        try withDirectory { dir in
            try (Self.body("testNotification") + "\n").write(toFile: dir + "/n.jsonl", atomically: true, encoding: .utf8)
            let bare = try Run(["ingest", "appstore", "--store", dir + "/s.lmdb", dir + "/n.jsonl"])
            #expect(bare.status == 2)
            #expect(bare.stderr.contains("ledger init --appstore-root"))
            let initialised = try Run(["init", "--store", dir + "/s.lmdb", "--appstore-root", Self.samples.appendingPathComponent("certs/testCA.der").path,
                                       "--appstore-bundle-id", "com.example", "--appstore-environment", "Sandbox"])
            #expect(initialised.status == 0, "\(initialised.stderr)")
            let run = try Run(["ingest", "appstore", "--store", dir + "/s.lmdb", dir + "/n.jsonl"])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout == "Ingested 1 event at position 1.\n")
            #expect(try Run(["verify", "--store", dir + "/s.lmdb"]).status == 0)
        }
    }

    @Test func withoutARootTheCommandSaysWhatToGive() throws {
        try withDirectory { dir in
            let run = try Run(["ingest", "appstore", "--store", dir + "/s.lmdb", "--bundle-id", "com.example", "--environment", "Sandbox", "-"], stdin: "")
            #expect(run.status == 2)
            #expect(run.stderr.contains("--root"))
        }
    }
}

/// The README's App Store walk-through, with the example notifications in Schemas/ (signed by
/// an example chain whose root is beside them: no Apple sample needed).
@Suite struct IngestExampleTests {
    @Test func theReadmesIngestAndAuditShowAppleBesideTheLedger() throws {
        try withDirectory { dir in
            let examples = ReadmeTests.root.appendingPathComponent("Schemas/examples/appstore").path
            let ingest = try Run(["ingest", "appstore", "--store", dir + "/shop.lmdb", "--root", examples + "/root.pem",
                                  "--bundle-id", "com.example.ledger", "--environment", "Sandbox", examples + "/notifications.jsonl"])
            #expect(ingest.status == 0, "\(ingest.stderr)")
            #expect(ingest.stdout == "Ingested 8 events at positions 1…8.\n")
            let audit = try Run(["audit", "4b3f0a5e-8a0c-4e5b-9d0f-2c7e1a9b6d42", "--store", dir + "/shop.lmdb", "--at", "2026-05-01T00:00:00Z"])
            #expect(audit.status == 0)
            let lines = audit.stdout.split(separator: "\n").map(String.init)
            let readme = try String(contentsOf: ReadmeTests.root.appendingPathComponent("README.md"), encoding: .utf8)
            for shown in ["2026-03-08T08:30:00.000Z  #3     appstore.notification [appstore]",
                          "    notificationType DID_RENEW, notificationUUID 7d0c3b0e-5f1a-4c2b-8e6d-000000000002, signedDate 2026-03-08T08:30:00.000Z",
                          "2026-03-08T08:30:00.000Z  #4     subscription.renewed [appstore]",
                          "    renewed pro.monthly, transaction 2000000101, until 2026-04-08T08:30:00.000Z",
                          "    entitlement.planState  trial → pro   (storeCoverage)"] {
                #expect(lines.contains(shown), "the audit has no line \(shown)")
                #expect(readme.contains(shown + "\n"), "README.md's walk-through lacks \(shown)")
            }
        }
    }
}

/// `ledger ingest appstore` with notifications signed in the test (`AppStoreSigner`).
@Suite struct IngestSignedTests {
    static let start: Int64 = 1_772_357_400_000   // 2026-03-01T09:30:00Z

    func transaction(_ signer: AppStoreSigner, token: String? = nil) throws -> JSON {
        var info: JSONObject = ["transactionId": "2000000100", "originalTransactionId": "2000000100", "bundleId": "com.example.ledger",
                                "productId": "pro.monthly", "environment": "Sandbox", "purchaseDate": .integer(Self.start),
                                "expiresDate": .integer(Self.start + 30 * 86_400_000), "signedDate": .integer(Self.start)]
        if let token { info["appAccountToken"] = .string(token) }
        return .string(try signer.sign(.object(info)))
    }

    func run(_ dir: String, _ signer: AppStoreSigner, _ files: [String]) throws -> Run {
        try signer.rootPEM.write(toFile: dir + "/root.pem", atomically: true, encoding: .utf8)
        return try Run(["ingest", "appstore", "--store", dir + "/s.lmdb", "--root", dir + "/root.pem", "--bundle-id", "com.example.ledger",
                        "--environment", "Sandbox"] + files)
    }

    /// A notification that verifies but cannot be mapped (a renewal without its transaction)
    /// rejects the run like a forged one: FILE:LINE, exit 2, nothing appended, no store made.
    @Test func aNotificationThatCannotBeMappedIsAnInputError() throws {
        let signer = try AppStoreSigner()
        try withDirectory { dir in
            let good = try signer.body("SUBSCRIBED", subtype: "INITIAL_BUY", uuid: "10000000-0000-4000-8000-000000000001", signedDate: Self.start,
                                       data: [("signedTransactionInfo", try transaction(signer))])
            let bare = try signer.body("DID_RENEW", uuid: "10000000-0000-4000-8000-000000000002", signedDate: Self.start)
            try (good + "\n").write(toFile: dir + "/a.jsonl", atomically: true, encoding: .utf8)
            try (good + "\n" + bare + "\n").write(toFile: dir + "/b.jsonl", atomically: true, encoding: .utf8)
            let refused = try run(dir, signer, [dir + "/a.jsonl", dir + "/b.jsonl"])
            #expect(refused.status == 2)
            #expect(refused.stderr == "\(dir)/b.jsonl:2: /signedPayload: malformed JWS in data: a DID_RENEW notification without signedTransactionInfo\n")
            #expect(!FileManager.default.fileExists(atPath: dir + "/s.lmdb"))
        }
    }

    /// Files are prepared together: a token in the first names the subject of the second's
    /// notification about the same subscription.
    @Test func anEarlierFileNamesTheSubjectOfALaterOne() throws {
        let signer = try AppStoreSigner()
        try withDirectory { dir in
            let token = "aaaaaaaa-1111-4000-8000-000000000001"
            try (try signer.body("SUBSCRIBED", subtype: "INITIAL_BUY", uuid: "20000000-0000-4000-8000-000000000001", signedDate: Self.start,
                                 data: [("signedTransactionInfo", try transaction(signer, token: token))]) + "\n")
                .write(toFile: dir + "/a.jsonl", atomically: true, encoding: .utf8)
            try (try signer.body("DID_RENEW", uuid: "20000000-0000-4000-8000-000000000002", signedDate: Self.start + 86_400_000,
                                 data: [("signedTransactionInfo", try transaction(signer))]) + "\n")
                .write(toFile: dir + "/b.jsonl", atomically: true, encoding: .utf8)
            let ingested = try run(dir, signer, [dir + "/a.jsonl", dir + "/b.jsonl"])
            #expect(ingested.status == 0, "\(ingested.stderr)")
            #expect(ingested.stdout == "Ingested 4 events at positions 1…4.\n")
            let events = try Run(["export", "--subject", token, "--store", dir + "/s.lmdb"])
            #expect(events.stdout.split(separator: "\n").count == 4)
        }
    }

    /// A notification without a token waits under `appstore:<id>`; the app's report of the
    /// purchase through `ledger append` binds it, and the customer's status and audit count it.
    @Test func theAppsReportThroughAppendBindsAWaitingNotification() throws {
        let signer = try AppStoreSigner()
        try withDirectory { dir in
            try (try signer.body("SUBSCRIBED", subtype: "INITIAL_BUY", uuid: "30000000-0000-4000-8000-000000000001", signedDate: Self.start,
                                 data: [("signedTransactionInfo", try transaction(signer))]) + "\n")
                .write(toFile: dir + "/n.jsonl", atomically: true, encoding: .utf8)
            #expect(try run(dir, signer, [dir + "/n.jsonl"]).status == 0)
            let report = #"{"type":"subscription.purchased","subject":"user-50","occurredAt":"2026-03-01T09:30:00Z","source":"app","#
                + #""data":{"productId":"pro.monthly","transactionId":"2000000100","originalTransactionId":"2000000100","#
                + #""purchasedAt":"2026-03-01T09:30:00Z","expiresAt":"2026-03-31T09:30:00Z"}}"#
            try (report + "\n").write(toFile: dir + "/app.jsonl", atomically: true, encoding: .utf8)
            let appended = try Run(["append", "--store", dir + "/s.lmdb", dir + "/app.jsonl"])
            #expect(appended.status == 0, "\(appended.stderr)")
            let exported = try Run(["export", "--subject", "user-50", "--store", dir + "/s.lmdb"])
            #expect(exported.stdout.split(separator: "\n").map { $0.contains(#""type":"appstore.subject_bound""#) } == [false, true])
            let audit = try Run(["audit", "user-50", "--store", dir + "/s.lmdb", "--at", "2026-03-02T00:00:00Z", "--json"])
            #expect(audit.status == 0, "\(audit.stderr)")
            #expect(audit.stdout.contains(#""type":"appstore.notification""#))
        }
    }
}

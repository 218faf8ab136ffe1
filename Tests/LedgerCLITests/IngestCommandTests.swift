import Foundation
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

import Foundation
import LedgerCore
import Testing

/// `status`, `rebuild`, `stats` and `verify` over the read models, through the built binary.
@Suite struct ModelCommandTests {
    /// A subscriber whose renewal failed on Jan 31 and a steady one, as JSONL.
    static let events = """
        {"type":"account.created","subject":"grace","occurredAt":"2026-01-01T00:00:00Z","source":"app","schemaVersion":1,"data":{"signedIn":true}}
        {"type":"subscription.purchased","subject":"grace","occurredAt":"2026-01-01T00:00:00Z","source":"appstore","schemaVersion":1,"data":{"productId":"pro.monthly","transactionId":"g1","originalTransactionId":"g1","purchasedAt":"2026-01-01T00:00:00Z","expiresAt":"2026-01-31T00:00:00Z"}}
        {"type":"subscription.renewal_failed","subject":"grace","occurredAt":"2026-01-31T00:00:00Z","source":"appstore","schemaVersion":1,"data":{"originalTransactionId":"g1"}}
        {"type":"subscription.purchased","subject":"steady","occurredAt":"2026-01-01T00:00:00Z","source":"appstore","schemaVersion":1,"data":{"productId":"pro.yearly","transactionId":"s1","originalTransactionId":"s1","purchasedAt":"2026-01-01T00:00:00Z","expiresAt":"2027-01-01T00:00:00Z"}}

        """

    func store(_ dir: String) throws -> String {
        let store = dir + "/s.lmdb"
        let appended = try Run(["append", "--store", store, "-"], stdin: Self.events)
        #expect(appended.status == 0, "\(appended.stderr)")
        return store
    }

    @Test func statusPrintsEveryModelsKeysInOrder() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["status", "grace", "--store", store, "--at", "2026-01-15T00:00:00+02:00", "--json"])
            #expect(run.status == 0)
            #expect(run.stdout == #"""
                {"subject":"grace","at":"2026-01-14T22:00:00.000Z","entitlement":{"planState":"pro","trialEligible":false,"expiresAt":"2026-01-31T00:00:00.000Z","renewsAt":"2026-01-31T00:00:00.000Z","autoRenew":true,"billingIssue":false,"purchasePending":false,"productId":"pro.monthly","banners":[],"reason":{"rule":"storeCoverage","policyKey":null,"position":2}},"retention":{"tier":"active","enteredAt":"2026-01-01T00:00:00.000Z","nextTier":null,"nextTierAt":null,"capabilities":{"viewThumbnails":true,"downloadOriginals":true,"upload":true,"retrieveArchive":true,"earnCredits":true},"reactivation":{"available":false,"fee":null}},"badge":{"count":0,"unreadInbox":0,"maintenanceDueToday":false,"billingIssue":false,"securityFlag":false}}

                """#)
        }
    }

    @Test func anUnknownSubjectIsAGuestNotAnError() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["--store", store, "status", "nobody", "--json"])
            #expect(run.status == 0)
            let entitlement = try #require(try run.json()["entitlement"] as? [String: Any])
            #expect(entitlement["planState"] as? String == "guest")
            #expect(entitlement["expiresAt"] is NSNull)
        }
    }

    @Test func statusReadsLikeACard() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z"])
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("grace at 2026-02-05T00:00:00.000Z\n\nentitlement\n  planState        free\n"))
            #expect(run.stdout.contains("  billingIssue     true\n"))
            #expect(run.stdout.contains("  reason           rule=signedIn policyKey=– position=1\n"))
        }
    }

    @Test func statsListsEachModelsCheckpointAndPolicy() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["stats", "--store", store, "--json"])
            let json = try run.json()
            let policy = try #require(json["policy"] as? [String: Any])
            let models = try #require(json["models"] as? [String: [String: Any]])
            #expect(models.keys.sorted() == ["badge", "entitlement", "retention"])
            for model in models.values {
                #expect(model["checkpoint"] as? Int == 4)
                #expect(model["policyHash"] as? String == policy["hash"] as? String)
                #expect(model["stale"] as? Bool == false)
            }
        }
    }

    /// The walk-through of the README's "Changing a rule": a dry run names who changes and
    /// changes nothing; the rebuild swaps it in and the store takes the new policy.
    @Test func aDryRunThenARebuildUnderPhotolalasPolicy() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let policy = FileManager.default.currentDirectoryPath + "/Schemas/policies/photolala.json"
            let dry = try Run(["rebuild", "--store", store, "--policy", policy, "--dry-run", "--at", "2026-02-05T00:00:00Z", "--json"])
            #expect(dry.status == 0, "\(dry.stderr)")
            let report = try dry.json()
            #expect(report["dryRun"] as? Bool == true)
            #expect(report["at"] as? String == "2026-02-05T00:00:00.000Z")
            let changes = try #require(report["changes"] as? [[String: Any]])
            // Photolala's 60-day billing grace: "grace" is pro again, so retention-active too.
            #expect(Set(changes.map { $0["subject"] as? String }) == ["grace"])
            #expect(changes.first?["field"] as? String == "planState")
            let summary = try #require(report["summary"] as? [String: [String: Int]])
            #expect(summary["entitlement.planState"] == ["free→pro": 1])
            #expect(summary["retention.tier"] == ["grace→active": 1])
            let hashes = try #require(report["policy"] as? [String: String])
            #expect(hashes["from"] == Policy.reference.hash)

            let still = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z", "--json"])
            #expect(still.stdout.contains(#""planState":"free""#))

            let real = try Run(["rebuild", "--store", store, "--policy", policy, "--at", "2026-02-05T00:00:00Z"])
            #expect(real.status == 0, "\(real.stderr)")
            #expect(real.stdout.split(separator: "\n").contains { $0.split(separator: " ") == ["grace", "entitlement", "planState", "free", "pro"] })
            #expect(real.stdout.contains("Swapped in."))
            let now = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z", "--json"])
            #expect(now.stdout.contains(#""planState":"pro""#))
            let stats = try Run(["stats", "--store", store, "--json"]).json()
            #expect((stats["policy"] as? [String: Any])?["name"] as? String == "photolala")
            let verify = try Run(["verify", "--store", store])
            #expect(verify.status == 0)
            #expect(verify.stdout.contains("read models (entitlement, retention, badge) equal a fresh rebuild"))
        }
    }

    @Test func rebuildingAnUnknownModelIsAUsageError() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["rebuild", "entitlements", "--store", store])
            #expect(run.status == 2)
            #expect(run.stderr == "ledger: no read model named entitlements; the models are entitlement, retention, badge\n")
        }
    }
}

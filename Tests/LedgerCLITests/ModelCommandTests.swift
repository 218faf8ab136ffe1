import Foundation
@_spi(Storage) import LedgerCore
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
                {"subject":"grace","at":"2026-01-14T22:00:00.000Z","entitlement":{"planState":"pro","trialEligible":false,"expiresAt":"2026-01-31T00:00:00.000Z","renewsAt":"2026-01-31T00:00:00.000Z","autoRenew":true,"billingIssue":false,"purchasePending":false,"productId":"pro.monthly","banners":[],"reason":{"rule":"storeCoverage","policyKey":null,"position":2}},"retention":{"tier":"active","enteredAt":"2026-01-01T00:00:00.000Z","nextTier":null,"nextTierAt":null,"capabilities":{"viewThumbnails":true,"downloadOriginals":true,"upload":true,"retrieveArchive":true,"earnCredits":true},"reactivation":{"available":false,"fee":null}},"badge":{"count":0,"unreadInbox":0,"maintenanceDueToday":false,"billingIssue":false,"securityFlag":false},"access":{"deviceId":null,"sessionActive":false,"sessionsToday":0,"canStartSession":true,"nextAccessAt":null,"devices":[],"signals":{"shortSessions":0,"bulkUsage":0,"subscribeCancelCycles":0,"clockTampering":0}},"limits":{"person":{"count":0,"limit":null,"state":"ok"},"tag":{"count":0,"limit":null,"state":"ok"}},"deletion":{"state":"none","requestedAt":null,"scheduledAt":null,"completedSteps":[],"failedSteps":[],"subscriptionWarning":true,"export":{"state":"none","location":null}}}

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
            // SPEC §5: and a word on stderr, so that a mistyped name is not taken for a guest.
            #expect(run.stderr == "ledger: no events for subject nobody\n")
            #expect(try Run(["--store", store, "status", "grace", "--json"]).stderr == "")
        }
    }

    @Test func statusReadsLikeACard() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z"])
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("grace at 2026-02-05T00:00:00.000Z\n\nentitlement: free (rule signedIn, event #1)\n  trialEligible    false\n"))
            #expect(run.stdout.contains("  billingIssue     true\n"))
            #expect(run.stdout.contains("\nretention: grace since 2026-02-03T00:00:00.000Z; browseOnly from 2026-03-06T00:00:00.000Z\n"))
            #expect(run.stdout.contains("  capabilities  can viewThumbnails, downloadOriginals, retrieveArchive; not upload, earnCredits\n"))
            #expect(run.stdout.contains("  reactivation  available, free\n"))
            #expect(run.stdout.contains("\nbadge: 1\n"))
        }
    }

    /// SPEC §4: under a policy without a `retention` section (Careguide's) `status --json`
    /// reports `"retention": null`, and the card says there is none.
    @Test func statusUnderAPolicyWithoutRetentionShowsNone() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let careguide = FileManager.default.currentDirectoryPath + "/Schemas/policies/careguide.json"
            #expect(try Run(["init", "--store", store, "--policy", careguide]).status == 0)
            #expect(try Run(["append", "--store", store, "-"], stdin: Self.events).status == 0)
            let json = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z", "--json"])
            #expect(json.status == 0)
            #expect(json.stdout.contains(#","retention":null,"badge":{"#))
            let card = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z"])
            #expect(card.stdout.contains("\nretention: none (the store's policy has no retention section)\n"))
        }
    }

    @Test func statsListsEachModelsCheckpointAndPolicy() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["stats", "--store", store, "--json"])
            let json = try run.json()
            let policy = try #require(json["policy"] as? [String: Any])
            let models = try #require(json["models"] as? [String: [String: Any]])
            #expect(models.keys.sorted() == ["access", "badge", "deletion", "due", "entitlement", "holders", "limits", "retention", "transactions"])
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
            #expect(report["notCompared"] as? [String] == [])
            let changes = try #require(report["changes"] as? [[String: Any]])
            // Photolala's 60-day billing grace: "grace" is pro again, so retention-active too.
            let planChanges = changes.filter { ["entitlement", "retention", "badge"].contains($0["model"] as? String) }
            #expect(Set(planChanges.map { $0["subject"] as? String }) == ["grace"])
            #expect(changes.first?["field"] as? String == "planState")
            // Photolala has no limits or deletion section: those models answer null for everyone.
            let dropped = changes.filter { ["limits", "deletion"].contains($0["model"] as? String) }
            #expect(Set(dropped.map { $0["subject"] as? String }) == ["grace", "steady"])
            #expect(dropped.allSatisfy { $0["to"] is NSNull })
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
            #expect(real.stdout.contains("Swapped in: the new states written and the old deleted in "))
            // The first line times the fold alone; the last adds the writing.
            #expect(real.stdout.hasPrefix("Rebuilt entitlement, retention, badge, access, limits, deletion, due, holders, transactions: folded 4 events in "))
            #expect(real.stdout.contains("; folding and writing "))
            // The policy line says how long comparing the views took.
            let policyLine = try #require(real.stdout.split(separator: "\n").first { $0.hasPrefix("Policy ") })
            #expect(policyLine.contains("views compared at 2026-02-05T00:00:00.000Z, in "))
            #expect(policyLine.hasSuffix(" s."))
            let now = try Run(["status", "grace", "--store", store, "--at", "2026-02-05T00:00:00Z", "--json"])
            #expect(now.stdout.contains(#""planState":"pro""#))
            let stats = try Run(["stats", "--store", store, "--json"]).json()
            #expect((stats["policy"] as? [String: Any])?["name"] as? String == "photolala")
            let verify = try Run(["verify", "--store", store])
            #expect(verify.status == 0)
            #expect(verify.stdout.contains("read models (entitlement, retention, badge, access, limits, deletion, due, holders, transactions) equal a fresh rebuild"))
        }
    }

    @Test func rebuildingAnUnknownModelIsAUsageError() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["rebuild", "entitlements", "--store", store])
            #expect(run.status == 2)
            #expect(run.stderr == "ledger: no read model named entitlements; the models are entitlement, retention, badge, access, limits, deletion, due, holders, transactions\n")
        }
    }
}

/// `ledger audit` through the built binary, on the README's example subject: a trial, a
/// conversion, a failed renewal, a recovery, and a refund recorded a week after it happened.
@Suite struct AuditCommandTests {
    func store(_ dir: String) throws -> String {
        let store = dir + "/alex.lmdb"
        let example = FileManager.default.currentDirectoryPath + "/Schemas/examples/alex.jsonl"
        let restored = try Run(["append", "--store", store, "--restore", example])
        #expect(restored.status == 0, "\(restored.stderr)")
        return store
    }

    @Test func auditJSONHasEveryKeyOfTheSpec() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["audit", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z", "--json"])
            #expect(run.status == 0, "\(run.stderr)")
            let json = try run.json()
            #expect(json["subject"] as? String == "alex")
            #expect(json["at"] as? String == "2026-03-20T00:00:00.000Z")
            #expect(json["knownAt"] is NSNull)
            let entries = try #require(json["entries"] as? [[String: Any]])
            // Every event, and a time entry: the local day after alex's session began.
            #expect(entries.map { $0["position"] as? Int } == [1, 2, 3, nil, 4, 5, 6, 7, 8, 9])
            for entry in entries {
                #expect(Set(entry.keys) == ["position", "type", "occurredAt", "recordedAt", "source", "summary", "changes"])
            }
            let refund = try #require(entries.last)
            #expect(refund["type"] as? String == "subscription.refunded")
            #expect(refund["occurredAt"] as? String == "2026-03-02T10:00:00.000Z")
            #expect(refund["recordedAt"] as? String == "2026-03-09T10:00:00.000Z")
            let first = try #require((refund["changes"] as? [[String: Any]])?.first)
            #expect(first["model"] as? String == "entitlement")
            #expect(first["field"] as? String == "planState")
            #expect(first["from"] as? String == "pro")
            #expect(first["to"] as? String == "free")
            #expect(first["rule"] as? String == "storeCoverage")
        }
    }

    /// `--limit` gives a page and where the next starts; `--cursor` the pages after it, which
    /// together are the whole timeline; a cursor no page gave is a usage error.
    @Test func auditPagesWithLimitAndCursor() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let whole = try Run(["audit", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z", "--json"]).json()
            var positions: [Int?] = []
            var page = try Run(["audit", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z", "--limit", "4", "--json"]).json()
            var pages = 1
            while true {
                positions += try #require(page["entries"] as? [[String: Any]]).map { $0["position"] as? Int }
                guard let next = page["next"] as? String else { break }
                #expect(next.hasPrefix("1773964800000.p9."))
                page = try Run(["audit", "alex", "--store", store, "--cursor", next, "--limit", "4", "--json"]).json()
                pages += 1
            }
            #expect(pages == 3)
            #expect(page["next"] is NSNull)
            #expect(positions == (whole["entries"] as? [[String: Any]])?.map { $0["position"] as? Int })
            let people = try Run(["audit", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z", "--limit", "4"])
            #expect(people.stdout.hasSuffix("\nMore entries follow: --cursor 1773964800000.p9.4\n"))
            let bad = try Run(["audit", "alex", "--store", store, "--cursor", "next-page"])
            #expect(bad.status == 2)
            #expect(bad.stderr.contains("--cursor: not a cursor a page gave (its \"next\"), got next-page"))
            let both = try Run(["audit", "alex", "--store", store, "--cursor", "1773964800000.p9.4", "--at", "2026-03-20T00:00:00Z"])
            #expect(both.status == 2)
            #expect(both.stderr.contains("--cursor holds the moment and the knowledge of its first page: leave --at and --known-at out"))
            let huge = try Run(["audit", "alex", "--store", store, "--cursor", "1773964800000.p9.9223372036854775807"])
            #expect(huge.status == 2)
        }
    }

    /// Known at Mar 5 (before the refund was recorded on Mar 9), the timeline ends with the
    /// recovery and the subject is pro; the refund appears only once it was recorded.
    @Test func knownAtLeavesOutTheRefundRecordedAWeekLate() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let then = try Run(["audit", "alex", "--store", store, "--at", "2026-03-05T00:00:00Z", "--known-at", "2026-03-05T00:00:00Z", "--json"])
            #expect(then.status == 0, "\(then.stderr)")
            let json = try then.json()
            #expect(json["knownAt"] as? String == "2026-03-05T00:00:00.000Z")
            let types = (json["entries"] as? [[String: Any]])?.map { $0["type"] as? String }
            #expect(types?.contains("subscription.refunded") == false)
            #expect(types?.last == "inbox.message_read")
            let byPosition = try Run(["audit", "alex", "--store", store, "--at", "2026-03-05T00:00:00Z", "--known-at", "9", "--json"]).json()
            #expect((byPosition["entries"] as? [[String: Any]])?.last?["type"] as? String == "subscription.refunded")
            #expect(byPosition["knownAt"] as? Int == 9)
        }
    }

    @Test func theHumanTimelineShowsChangesAndLateRecording() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["audit", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z"])
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("alex: audit at 2026-03-20T00:00:00.000Z, everything recorded\nTimes are UTC, then local in Europe/Berlin (the zone of the latest session).\n"))
            #expect(run.stdout.contains("2026-03-02T10:00:00.000Z  2026-03-02 11:00 +01:00  #9     subscription.refunded [appstore]\n    transaction t3 refunded\n    recorded 2026-03-09T10:00:00.000Z, 7 days after it happened\n"))
            #expect(run.stdout.contains("    retention.tier                      active → grace   (refund)\n"))
        }
    }

    @Test func statusShowsTimesInUTCAndInTheZoneOfTheLatestSession() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["status", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z"])
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("alex at 2026-03-20T00:00:00.000Z (2026-03-20 01:00 +01:00 in Europe/Berlin, the zone of the latest session)\n"))
            #expect(run.stdout.contains("  expiresAt        2026-03-02T10:00:00.000Z (2026-03-02 11:00 +01:00)\n"))
            // After the switch to summer time (March 29 in Berlin) the offset is +02:00.
            #expect(run.stdout.contains("browseOnly from 2026-04-02T10:00:00.000Z (2026-04-02 12:00 +02:00)\n"))
            // JSON stays UTC.
            let json = try Run(["status", "alex", "--store", store, "--at", "2026-03-20T00:00:00Z", "--json"]).json()
            #expect((json["entitlement"] as? [String: Any])?["expiresAt"] as? String == "2026-03-02T10:00:00.000Z")
        }
    }

    @Test func aBadKnownAtIsAUsageError() throws {
        try withDirectory { dir in
            let store = try store(dir)
            let run = try Run(["audit", "alex", "--store", store, "--known-at", "last tuesday"])
            #expect(run.status == 2)
            #expect(run.stderr.contains("--known-at: expected an RFC 3339 time with a zone or a log position, got last tuesday"))
        }
    }
}

import Foundation
import Testing

/// `ledger demo` end to end, through the built binary.
@Suite struct DemoCommandTests {
    static let now = "2026-11-21T00:00:00Z"

    func demo(_ store: String, subjects: Int = 1000, seed: Int = 42, extra: [String] = []) throws -> Run {
        try Run(["demo", "--store", store, "--subjects", String(subjects), "--seed", String(seed), "--now", Self.now] + extra)
    }

    @Test func theSameSeedAndNowGiveTheSameStoreAndASecondRunAppendsNothing() throws {
        try withDirectory { dir in
            let first = try demo(dir + "/a.lmdb", subjects: 300, seed: 9, extra: ["--json"])
            #expect(first.status == 0, "\(first.stderr)")
            let one = try first.json()
            let events = try #require(one["events"] as? Int)
            #expect(events > 300 * 5)
            #expect(one["appended"] as? Int == events)
            #expect(one["duplicates"] as? Int == 0)

            let again = try demo(dir + "/a.lmdb", subjects: 300, seed: 9, extra: ["--json"]).json()
            #expect(again["events"] as? Int == events)
            #expect(again["appended"] as? Int == 0)
            #expect(again["duplicates"] as? Int == events)

            // A second store built apart holds the very same log, recordedAt included.
            #expect(try demo(dir + "/b.lmdb", subjects: 300, seed: 9, extra: ["--json"]).status == 0)
            let a = try Run(["export", "--store", dir + "/a.lmdb"])
            let b = try Run(["export", "--store", dir + "/b.lmdb"])
            #expect(a.stdout.split(separator: "\n").count == events)
            #expect(a.stdout == b.stdout)

            // Another seed gives other histories.
            #expect(try demo(dir + "/c.lmdb", subjects: 300, seed: 10, extra: ["--json"]).status == 0)
            #expect(try Run(["export", "--store", dir + "/c.lmdb"]).stdout != a.stdout)
        }
    }

    @Test func everyDemoEventPassesTheStrictJSONInputAndAppendsBackToTheSameViews() throws {
        try withDirectory { dir in
            #expect(try demo(dir + "/d.lmdb", subjects: 300, extra: ["--json"]).status == 0)
            let export = try Run(["export", "--store", dir + "/d.lmdb"])
            let file = dir + "/demo.jsonl"
            try export.stdout.write(toFile: file, atomically: true, encoding: .utf8)
            let appended = try Run(["append", "--store", dir + "/copy.lmdb", file, "--json"])
            #expect(appended.status == 0, "\(appended.stderr)")
            #expect(try appended.json()["appended"] as? Int == export.stdout.split(separator: "\n").count)
            for subject in ["customer-0", "customer-66", "customer-185", "customer-299"] {
                let original = try Run(["status", subject, "--store", dir + "/d.lmdb", "--at", Self.now, "--json"]).stdout
                let copy = try Run(["status", subject, "--store", dir + "/copy.lmdb", "--at", Self.now, "--json"]).stdout
                #expect(original == copy, "\(subject)")
            }
        }
    }

    @Test func theStoreHoldsEveryPlanStateRuleAndTierAtItsNow() throws {
        try withDirectory { dir in
            let run = try demo(dir + "/d.lmdb", extra: ["--json"])
            #expect(run.status == 0, "\(run.stderr)")
            let json = try run.json()
            #expect(Array(json.keys).sorted() == ["access", "appendSeconds", "appended", "badges", "cancellationsHonoured", "cancelledIfSoft", "deletions",
                                                 "dueNext24h", "duplicates", "events", "eventsByType", "existingUserGrace", "limits", "now", "planStates",
                                                 "rules", "seconds", "seed", "store", "subjects", "telling", "tiers"])
            // The access model's customers and signals, and the next day's due items by kind.
            let access = try #require(json["access"] as? [String: Int])
            for key in ["withADevice", "inASession", "cannotStartASession", "shortSessions", "bulkUsage"] {
                #expect((access[key] ?? 0) > 0, "no customer counts for access \(key)")
            }
            let due = try #require(json["dueNext24h"] as? [String: Int])
            // (A failed payment is due when it happened: none lies ahead of the demo's now.)
            for kind in ["trialEndingSoon", "retentionEmail", "tierChanged"] { #expect((due[kind] ?? 0) > 0, "nothing \(kind) due in 24 h") }
            // Collections near the free limits: some at the warning, some blocked.
            let limits = try #require(json["limits"] as? [String: Int])
            #expect(limits.keys.contains { $0.hasSuffix("warning") } && limits.keys.contains { $0.hasSuffix("blocked") })
            // Collectors from before the limits took effect: inside the existing users' grace on
            // its last day (the reference grace ends 2026-01-31), some of them over a free limit.
            let grace = try #require(json["existingUserGrace"] as? [String: Any])
            #expect(grace["ends"] as? String == "2026-01-31T00:00:00.000Z")
            #expect(grace["at"] as? String == "2026-01-30T23:59:59.000Z")
            let inside = try #require(grace["inside"] as? Int), over = try #require(grace["overAFreeLimit"] as? Int)
            #expect(inside > over && over > 0)
            // Deletion is hard under the reference policy: the cancellations are not honoured, and
            // the dry rebuild under a soft mode names those it would cancel.
            #expect(json["cancellationsHonoured"] as? Int == 0)
            #expect((json["cancelledIfSoft"] as? Int ?? 0) > 0)
            let deletions = try #require(json["deletions"] as? [String: Int])
            for state in ["requested", "inProgress", "failed", "completed"] { #expect(deletions[state] != nil, "deletion state \(state) is not counted") }
            #expect((deletions["completed"] ?? 0) > 0 && (deletions["failed"] ?? 0) > 0)
            let plans = try #require(json["planStates"] as? [String: Int])
            for plan in ["guest", "free", "trial", "pro", "pro_grace"] { #expect((plans[plan] ?? 0) > 0, "no customer is \(plan)") }
            #expect(plans.values.reduce(0, +) == 1000)
            let rules = try #require(json["rules"] as? [String: Int])
            for rule in ["deleted", "storeCoverage", "billingGrace", "supportGrant", "deviceVerified", "offlineGrace", "signedIn", "noAccount"] {
                #expect((rules[rule] ?? 0) > 0, "no customer's plan is decided by \(rule)")
            }
            let tiers = try #require(json["tiers"] as? [String: Int])
            for tier in ["active", "free", "grace", "browseOnly", "archived", "pendingDeletion", "deleted"] {
                #expect((tiers[tier] ?? 0) > 0, "no customer is in \(tier)")
            }
            #expect(tiers.values.reduce(0, +) == 1000)
            let types = try #require(json["eventsByType"] as? [String: Int])
            #expect(types.values.reduce(0, +) == json["events"] as? Int)
            for type in ["subscription.refund_reversed", "subscription.product_changed", "support.entitlement_granted", "family.organizer_cancelled",
                         "entitlement.verification_failed", "oneoff.purchased", "inbox.message_read", "maintenance.scheduled", "security.flag_raised",
                         "account.deleted", "purchase.pending", "session.backgrounded", "session.foregrounded", "usage.recorded"] {
                #expect((types[type] ?? 0) > 0, "the demo never emits \(type)")
            }
            let telling = try #require(json["telling"] as? [[String: String]])
            #expect(telling.count == 3)
        }
    }

    /// Under a policy whose deletion mode is soft, the demo's cancelled deletion requests are
    /// honoured (under the reference policy, hard, they are ignored): fewer deletions stand, and
    /// as many as the hard store's dry rebuild said.
    @Test func aSoftDeletionPolicyHonoursTheDemosCancellations() throws {
        try withDirectory { dir in
            let hard = try demo(dir + "/hard.lmdb", extra: ["--json"]), softRun = try demo(dir + "/soft.lmdb", extra: ["--json", "--policy", "stampbook-soft"])
            #expect(softRun.status == 0, "\(softRun.stderr)")
            let standing = { (run: Run) throws -> Int in try #require(run.json()["deletions"] as? [String: Int]).values.reduce(0, +) }
            #expect(try standing(softRun) < standing(hard))
            let honoured = try #require(try softRun.json()["cancellationsHonoured"] as? Int)
            let ifSoft = try hard.json()["cancelledIfSoft"] as? Int
            #expect(honoured > 0 && honoured == ifSoft)
            #expect(try softRun.json()["cancelledIfSoft"] is NSNull)
            // stampbook-soft has no limits section: no grace to count.
            #expect(try softRun.json()["existingUserGrace"] is NSNull)
            // A store built under one policy is not silently reused under another.
            let again = try demo(dir + "/hard.lmdb", extra: ["--policy", "stampbook-soft"])
            #expect(again.status == 1)
            #expect(again.stderr.contains("was built under the policy reference, not stampbook-soft; build the demo under another policy into a new store"), "\(again.stderr)")
            let text = try demo(dir + "/soft.lmdb", extra: ["--policy", "stampbook-soft", "--audits", "0"]).stdout
            #expect(text.contains("Off under this policy  retention, limits, access"), "\(text)")
            let stats = try Run(["stats", "--store", dir + "/soft.lmdb", "--json"]).json()
            let hardStats = try Run(["stats", "--store", dir + "/hard.lmdb", "--json"]).json()
            #expect((stats["policy"] as? [String: Any])?["hash"] as? String != (hardStats["policy"] as? [String: Any])?["hash"] as? String)
        }
    }

    @Test func statusAndAuditOfATellingCustomerAgree() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            let json = try demo(store, extra: ["--json"]).json()
            let telling = try #require(json["telling"] as? [[String: String]])
            for pick in telling {
                let subject = try #require(pick["subject"])
                let status = try Run(["status", subject, "--store", store, "--at", Self.now, "--json"])
                #expect(status.status == 0)
                let view = try status.json()
                let entitlement = try #require(view["entitlement"] as? [String: Any])
                let retention = try #require(view["retention"] as? [String: Any])
                let audit = try Run(["audit", subject, "--store", store, "--at", Self.now, "--json"])
                #expect(audit.status == 0)
                let entries = try #require(try audit.json()["entries"] as? [[String: Any]])
                #expect(entries.count > 3)
                // The audit's last word on a field is what status says now.
                func last(_ model: String, _ field: String) -> String? {
                    let changes = entries.flatMap { ($0["changes"] as? [[String: Any]]) ?? [] }
                    return changes.last { $0["model"] as? String == model && $0["field"] as? String == field }?["to"] as? String
                }
                #expect(last("entitlement", "planState") == entitlement["planState"] as? String, "\(subject)")
                #expect(last("retention", "tier") == retention["tier"] as? String, "\(subject)")
            }
            // The late refund's customer: recorded days after it happened, so --known-at leaves it out.
            let refund = try #require(telling.first { $0["why"]?.contains("refund") == true }?["subject"])
            let human = try Run(["audit", refund, "--store", store, "--at", Self.now])
            #expect(human.stdout.contains("days after it happened"))
            #expect(human.stdout.contains("subscription.refunded"))
            #expect(human.stdout.contains("Times are UTC, then local in "))
        }
    }

    @Test func theHumanSummaryNamesEveryTierAndAuditsThreeCustomers() throws {
        try withDirectory { dir in
            let run = try demo(dir + "/d.lmdb")
            #expect(run.status == 0)
            for word in ["Customers at 2026-11-21T00:00:00.000Z", "pro_grace", "offlineGrace", "pendingDeletion", "Events by type", "subscription.renewed"] {
                #expect(run.stdout.contains(word), "missing \(word)")
            }
            #expect(run.stdout.components(separatedBy: ": audit at ").count == 4)
            #expect(!run.stdout.contains("\u{1B}["), "no colour when not a terminal")
            #expect(run.stderr == "", "no progress when not a terminal")
        }
    }

    @Test func aStoreWithOtherEventsIsRefusedAndKeptAsItWas() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            #expect(try demo(store, subjects: 50, seed: 1, extra: ["--json"]).status == 0)
            let before = try Run(["export", "--store", store]).stdout
            let run = try demo(store, subjects: 50, seed: 2)
            #expect(run.status == 1)
            #expect(run.stderr.contains("holds other events"))
            #expect(run.stderr.contains("delete it (rm -rf \(store)) or pass another --store"))
            #expect(try Run(["export", "--store", store]).stdout == before)
        }
    }
}

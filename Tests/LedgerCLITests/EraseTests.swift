import Foundation
import Testing

/// `ledger erase`, and an erased customer as `export`, `audit`, `status`, `verify` and a
/// re-import show it (SPEC §2.3 "Personal data", §5).
@Suite struct EraseTests {
    let lines = [
        #"{"type":"subscription.purchased","subject":"ann","occurredAt":"2026-03-01T09:00:00Z","source":"appstore","data":{"productId":"pro.monthly","transactionId":"t1","originalTransactionId":"t1","purchasedAt":"2026-03-01T09:00:00Z","expiresAt":"2026-04-01T09:00:00Z","price":"9.99","currency":"EUR"}}"#,
        #"{"type":"support.note_added","subject":"ann","occurredAt":"2026-03-02T09:00:00Z","source":"support","data":{"text":"Ann called about a double charge.","agent":"agent-7"},"meta":{"email":"ann@example.com"}}"#,
        #"{"type":"account.export_completed","subject":"ann","occurredAt":"2026-03-03T09:00:00Z","source":"system","data":{"location":"s3://exports/ann.zip"}}"#,
        #"{"type":"support.note_added","subject":"bob","occurredAt":"2026-03-02T09:00:00Z","source":"support","data":{"text":"Bob is fine.","agent":"agent-7"}}"#,
    ]

    func store(in dir: String) throws -> String {
        let store = dir + "/s.lmdb"
        #expect(try Run(["append", "--store", store, "-"], stdin: lines.joined(separator: "\n") + "\n").status == 0)
        return store
    }

    /// A month's App Store subscription of `subject` bought now (so it covers now), with
    /// auto-renew turned off when `autoRenew` is false.
    func appendCoveringSubscription(_ subject: String, to store: String, autoRenew: Bool = true) throws {
        let now = ISO8601DateFormatter().string(from: Date())
        let later = ISO8601DateFormatter().string(from: Date().addingTimeInterval(30 * 86_400))
        var lines = [#"{"type":"subscription.purchased","subject":"\#(subject)","occurredAt":"\#(now)","source":"appstore","data":{"productId":"pro.monthly","transactionId":"t-\#(subject)","originalTransactionId":"t-\#(subject)","purchasedAt":"\#(now)","expiresAt":"\#(later)"}}"#]
        if !autoRenew {
            lines.append(#"{"type":"subscription.auto_renew_changed","subject":"\#(subject)","occurredAt":"\#(now)","source":"appstore","data":{"originalTransactionId":"t-\#(subject)","enabled":false}}"#)
        }
        #expect(try Run(["append", "--store", store, "-"], stdin: lines.joined(separator: "\n") + "\n").status == 0)
    }

    /// Every file under `path`, its bytes.
    func storeBytes(_ path: String) -> [Data] {
        (FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? []).compactMap { FileManager.default.contents(atPath: path + "/" + $0) }
    }

    @Test func eraseDestroysThePersonalDataAndKeepsTheFinancialFacts() throws {
        try withDirectory { dir in
            let store = try store(in: dir)
            let run = try Run(["erase", "ann", "--store", store])
            #expect(run.status == 0)
            #expect(run.stderr == "")
            #expect(run.stdout == """
                Erasing ann:
                  requested  account.deletion_requested at #5
                  profile    done
                  auth       done
                  deleted    account.deleted at #8: the key is destroyed; personal fields read as "[Deleted User]"

                """)
            for plain in ["Ann called about a double charge.", "ann@example.com", "s3://exports/ann.zip", "Bob is fine."] {
                #expect(!storeBytes(store).contains { $0.range(of: Data(plain.utf8)) != nil }, "\(plain) is in a file of the store")
            }
            let exported = try Run(["export", "--store", store, "--subject", "ann"]).stdout
            #expect(exported.contains(#""data":{"agent":"agent-7","text":"[Deleted User]"}"#))
            #expect(exported.contains(#""meta":{"email":"[Deleted User]"}"#))
            #expect(exported.contains(#""data":{"location":"[Deleted User]"}"#))
            #expect(exported.contains(#""price":"9.99""#) && exported.contains(#""transactionId":"t1""#))
            #expect(try Run(["export", "--store", store, "--subject", "bob"]).stdout.contains("Bob is fine."))

            let audit = try Run(["audit", "ann", "--store", store, "--at", "2026-03-10T00:00:00Z"]).stdout
            #expect(audit.contains("purchased pro.monthly, transaction t1, until 2026-04-01T09:00:00.000Z"))
            #expect(audit.contains(#/entitlement.planState +guest → pro   \(storeCoverage\)/#))
            #expect(audit.contains(#"support note by agent-7: "[Deleted User]""#))
            #expect(audit.contains("data export ready at [Deleted User]"))
            let status = try Run(["status", "ann", "--store", store, "--json"]).json()
            #expect((status["deletion"] as? [String: Any])?["state"] as? String == "completed")
            #expect(((status["deletion"] as? [String: Any])?["export"] as? [String: Any])?["location"] as? String == "[Deleted User]")

            let verify = try Run(["verify", "--store", store])
            #expect(verify.status == 0)
            #expect(verify.stdout.contains("Personal data: 1 sealed field open under their subject's key; 1 erased subject (ann): 1 key destroyed, none in the key store, no replaced key store on disk; their 3 fields read as \"[Deleted User]\"."))
            let json = try Run(["verify", "--store", store, "--json"]).json()
            #expect((json["personalData"] as? [String: Any])?["erasedSubjects"] as? [String] == ["ann"])

            // Run again: nothing left to do.
            let again = try Run(["erase", "ann", "--store", store, "--json"])
            #expect(again.stdout == #"{"subject":"ann","requested":null,"steps":[],"deleted":null,"erased":true,"subscriptionWarning":false,"subscriptionRenews":false}"# + "\n")
        }
    }

    /// An export with an erased customer appends into a fresh store with the same views, and
    /// back into its own store as duplicates, not conflicts.
    @Test func anExportWithAnErasedCustomerRoundTrips() throws {
        try withDirectory { dir in
            let store = try store(in: dir)
            #expect(try Run(["erase", "ann", "--store", store]).status == 0)
            let exported = try Run(["export", "--store", store]).stdout
            let copy = dir + "/copy.lmdb"
            #expect(try Run(["append", "--store", copy, "-"], stdin: exported).status == 0)
            for subject in ["ann", "bob"] {
                let at = "2026-03-10T00:00:00Z"
                #expect(try Run(["status", subject, "--store", copy, "--at", at, "--json"]).stdout == Run(["status", subject, "--store", store, "--at", at, "--json"]).stdout)
            }
            #expect(try Run(["export", "--store", copy, "--subject", "ann"]).stdout.contains("[Deleted User]"))
            let again = try Run(["append", "--store", store, "--json", "-"], stdin: exported)
            #expect(again.status == 0)
            #expect(again.stdout == #"{"appended":0,"duplicates":8,"firstPosition":null,"lastPosition":null}"# + "\n")
            #expect(try Run(["verify", "--store", copy, "--json"]).json()["ok"] as? Bool == true)
        }
    }

    /// A customer whose subscription still covers them is told that deleting the account does
    /// not cancel it at Apple.
    @Test func eraseSaysTheSubscriptionKeepsRenewing() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            try appendCoveringSubscription("cat", to: store)
            let run = try Run(["erase", "cat", "--store", store, "--json"])
            #expect(run.status == 0)
            #expect(try run.json()["subscriptionWarning"] as? Bool == true)
            #expect(try run.json()["subscriptionRenews"] as? Bool == true)
            let words = try Run(["erase", "cat", "--store", store])
            #expect(words.stdout.contains("cat was erased before, and nothing personal about the customer has been recorded since."))
            #expect(words.stdout.contains("The customer's App Store subscription keeps renewing at Apple: deleting the account does not cancel it; only the customer can, in their Apple account."))
        }
    }

    /// A personal field whose ciphertext was altered fails the `profile` step with its error;
    /// the key is not destroyed and the command exits 1.
    @Test func aDamagedPersonalFieldFailsTheProfileStep() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let bob = #"{"type":"usage.recorded","subject":"bob","occurredAt":"2026-03-02T09:00:00Z","source":"app","data":{"feature":"export","count":1}}"#
            #expect(try Run(["append", "--store", store, "-"], stdin: [lines[0], lines[1], bob].joined(separator: "\n") + "\n").status == 0)
            // Alter one base64 digit of ann's sealed note in the file, as damage would (not the
            // last record: an append never extends a chain whose last link is broken).
            let data = dir + "/s.lmdb/data.mdb"
            var bytes = try #require(FileManager.default.contents(atPath: data))
            let marker = Data("sealed.1.".utf8)
            let first = try #require(bytes.range(of: marker))
            // Every copy of that sealed value in the file (a freed page may hold an old one).
            let value = bytes[first.lowerBound ..< first.upperBound + 60]
            var from = bytes.startIndex
            while let found = bytes.range(of: value, in: from ..< bytes.endIndex) {
                let at = found.lowerBound + marker.count + 48
                bytes[at] = bytes[at] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
                from = found.upperBound
            }
            try bytes.write(to: URL(fileURLWithPath: data))
            let run = try Run(["erase", "ann", "--store", store, "--json"])
            #expect(run.status == 1)
            let json = try run.json()
            let steps = try #require(json["steps"] as? [[String: Any]])
            #expect(steps.map { $0["step"] as? String } == ["profile", "auth"])
            #expect(steps.map { $0["outcome"] as? String } == ["failed", "completed"])
            #expect((steps[0]["error"] as? String)?.contains("does not open under its subject's key") == true)
            #expect(json["deleted"] is NSNull && json["erased"] as? Bool == false)
        }
    }

    /// On a terminal, erase says what it would do (and that the subscription keeps renewing)
    /// and does nothing without --yes; with it, it erases.
    @Test func onATerminalEraseAsksForYes() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            try appendCoveringSubscription("cat", to: store)
            let ledger = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger").path
            // script(1) runs the command on a pseudo-terminal.
            let asked = try Run(["-qec", "\(ledger) erase cat --store \(store)", "/dev/null"], environment: ["NO_COLOR": "1"], executable: "/usr/bin/script")
            #expect(asked.status == 2)
            #expect(asked.stdout.contains("erase would append cat's deletion steps and account.deleted, destroying the key of the customer's personal data"))
            #expect(asked.stdout.contains("keeps renewing at Apple: deleting the account does not cancel it; only the customer can, in their Apple account. Run again with --yes to erase."))
            #expect(try Run(["export", "--store", store]).stdout.split(separator: "\n").count == 1)
            let done = try Run(["-qec", "\(ledger) erase cat --store \(store) --yes", "/dev/null"], environment: ["NO_COLOR": "1"], executable: "/usr/bin/script")
            #expect(done.status == 0)
            #expect(done.stdout.contains("deleted    account.deleted at #5"))
        }
    }

    /// With auto-renew off, the subscription does not keep renewing: erase says it stays in
    /// force until it expires.
    @Test func eraseSaysASubscriptionWithoutAutoRenewRunsOut() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            try appendCoveringSubscription("dan", to: store, autoRenew: false)
            let run = try Run(["erase", "dan", "--store", store])
            #expect(run.status == 0)
            #expect(run.stdout.contains("The customer's App Store subscription stays in force at Apple until it expires (auto-renew is off): deleting the account does not refund it."))
        }
    }

    /// A subject the store has never seen is not made up by erasing it (a typo).
    @Test func eraseRefusesASubjectWithNoEvents() throws {
        try withDirectory { dir in
            let store = try store(in: dir)
            let run = try Run(["erase", "anne", "--store", store, "--yes"])
            #expect(run.status == 2)
            #expect(run.stderr.contains("no events for subject anne: nothing to erase"))
            #expect(try Run(["export", "--store", store, "--subject", "anne"]).stdout == "")
        }
    }

    @Test func schemasListsThePersonalFields() throws {
        let run = try Run(["schemas", "--personal", "--json"])
        #expect(run.stdout == #"{"personal":[{"type":"account.deletion_requested","pointer":"/data/reason"},{"type":"account.export_requested","pointer":"/data/location"},{"type":"account.export_completed","pointer":"/data/location"},{"type":"support.note_added","pointer":"/data/text"},{"type":"*","pointer":"/meta/email"},{"type":"*","pointer":"/meta/name"}]}"# + "\n")
    }
}

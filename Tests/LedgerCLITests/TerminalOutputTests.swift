import Foundation
import Glibc
import Testing

/// What the command line writes besides its result: progress bars and colour only on a
/// terminal (and colour never with NO_COLOR), help with worked examples, `due` saying it is
/// not built yet. A terminal is made with util-linux's `script`, which runs the command on a
/// pseudo-terminal.
@Suite struct TerminalOutputTests {
    /// Runs `ledger ARGS` on a pseudo-terminal; returns what the terminal showed.
    func onTerminal(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let ledger = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger").path
        let command = ([ledger] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try Run(["-qec", command, "/dev/null"], environment: environment, executable: "/usr/bin/script")
    }

    /// Event data holding escape sequences, carriage returns, bells and C1 controls is shown
    /// escaped by `audit`, `status`, `due` and `lookup`, and in errors: it can neither recolour,
    /// clear nor overwrite the terminal. The JSON output keeps the data as it is.
    @Test func controlCharactersInEventDataAreShownEscaped() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let lines = [
                #"{"type":"account.created","subject":"user-1","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#,
                #"{"type":"support.note_added","subject":"user-1","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"hi \u001b[2J\u001b[31mRED\r over","agent":"bob\u009b"}}"#,
                #"{"type":"session.started","subject":"user-1","occurredAt":"2026-03-02T10:00:00Z","source":"app","data":{"deviceId":"d\u001b]0;pwned\u0007","timeZone":"UTC"}}"#,
                #"{"type":"subscription.purchased","subject":"user-\u001b[1m1","occurredAt":"2026-03-01T09:30:00Z","source":"appstore","data":{"productId":"pro.monthly","transactionId":"t\r1","originalTransactionId":"o1","purchasedAt":"2026-03-01T09:30:00Z","expiresAt":"2026-04-01T09:30:00Z"}}"#,
            ]
            try (lines.joined(separator: "\n") + "\n").write(toFile: dir + "/e.jsonl", atomically: true, encoding: .utf8)
            #expect(try Run(["append", "--store", store, dir + "/e.jsonl"]).status == 0)
            let runs = [
                try Run(["audit", "user-1", "--at", "2026-03-03T00:00:00Z", "--store", store]),
                try Run(["status", "user-1", "--at", "2026-03-03T00:00:00Z", "--store", store]),
                try Run(["status", "user-\u{1B}[1m1", "--at", "2026-03-03T00:00:00Z", "--store", store]),
                try Run(["due", "--from", "2026-03-01T00:00:00Z", "--to", "2026-05-01T00:00:00Z", "--store", store]),
                try Run(["lookup", "--transaction-id", "t\r1", "--store", store]),
                try Run(["status", "bad\u{7}", "--store", store + "-missing"]),
            ]
            for run in runs {
                let shown = run.stdout + run.stderr
                #expect(!shown.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7F ... 0x9F).contains($0.value) }, "\(shown)")
            }
            #expect(runs[0].stdout.contains("session started on d‹U+001B›]0;pwned‹U+0007› in UTC"))
            #expect(runs[0].stdout.contains("support note by bob‹U+009B›"))
            #expect(runs[1].stdout.contains("access: on d‹U+001B›]0;pwned‹U+0007›: in a session"))
            #expect(runs[4].stdout == "user-‹U+001B›[1m1\n")
            let json = try Run(["audit", "user-1", "--at", "2026-03-03T00:00:00Z", "--json", "--store", store])
            #expect(json.stdout.contains(#"d\u001b]0;pwned\u0007"#))
        }
    }

    /// A progress line never wraps (a wrapped line leaves a stale copy per redraw): it fits
    /// the terminal's width, here `$COLUMNS`; and `TERM=dumb` gets no escape sequence at all.
    @Test func progressFitsTheTerminalAndADumbOneGetsNoEscapes() throws {
        try withDirectory { dir in
            let narrow = try onTerminal(["demo", "--store", dir + "/n.lmdb", "--subjects", "3000", "--now", "2026-11-21T00:00:00Z", "--audits", "0"],
                                        environment: ["NO_COLOR": "1", "TERM": "xterm", "COLUMNS": "60"])
            #expect(narrow.status == 0)
            let redraws = narrow.stdout.components(separatedBy: "\r").map { $0.replacingOccurrences(of: "\u{1B}[K", with: "") }
                .filter { $0.hasPrefix("appending") || $0.hasPrefix("generating") }
            #expect(!redraws.isEmpty)
            for line in redraws { #expect(line.trimmingCharacters(in: .whitespacesAndNewlines).count <= 59, "\(line)") }
            let dumb = try onTerminal(["demo", "--store", dir + "/d.lmdb", "--subjects", "3000", "--now", "2026-11-21T00:00:00Z", "--audits", "0"],
                                      environment: ["TERM": "dumb"])
            #expect(dumb.status == 0)
            #expect(dumb.stdout.contains("\rappending ["))
            #expect(!dumb.stdout.contains("\u{1B}"))
        }
    }

    /// The demo's summary fits the terminal's width: the tiers beside the plans where both fit,
    /// else below them; the events in one column where two do not fit. (The telling audits
    /// are `ledger audit`'s, left out here.)
    @Test func theDemoSummaryFitsTheTerminal() throws {
        try withDirectory { dir in
            let narrow = try Run(["demo", "--store", dir + "/d.lmdb", "--subjects", "2000", "--now", "2026-11-21T00:00:00Z", "--audits", "0"],
                                 environment: ["COLUMNS": "80"])
            #expect(narrow.status == 0)
            // Only a command to copy whole, which names the (long, temporary) store path, may be wider.
            for line in narrow.stdout.split(separator: "\n") where !line.contains(dir) { #expect(line.count <= 80, "\(line)") }
            #expect(narrow.stdout.range(of: #"decided by +Retention tier"#, options: .regularExpression) != nil)
            let tight = try Run(["demo", "--store", dir + "/d.lmdb", "--subjects", "2000", "--now", "2026-11-21T00:00:00Z", "--audits", "0"],
                                environment: ["COLUMNS": "50"])
            #expect(tight.stdout.contains("\n  Retention tier"))
            let wide = try Run(["demo", "--store", dir + "/d.lmdb", "--subjects", "2000", "--now", "2026-11-21T00:00:00Z", "--audits", "0"],
                               environment: ["COLUMNS": "160"])
            #expect(wide.stdout.contains("decided by           Retention tier") || wide.stdout.range(of: #"decided by +Retention tier"#, options: .regularExpression) != nil)
        }
    }

    /// Ctrl-C during a progress bar ends its line, so the shell's prompt starts on a line of its
    /// own, and the command stops with status 130.
    @Test func interruptingAProgressBarEndsItsLine() throws {
        try withDirectory { dir in
            let ledger = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger").path
            let store = dir + "/i.lmdb"
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
            process.arguments = ["-qec", "'\(ledger)' demo --store '\(store)' --subjects 200000 --now 2026-11-21T00:00:00Z --audits 0", "/dev/null"]
            process.environment = ["TERM": "xterm", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"]
            let out = Pipe()
            process.standardOutput = out
            process.standardInput = Pipe()
            try process.run()
            var shown = ""
            while !shown.contains("\r\u{1B}[K") {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                shown += String(decoding: chunk, as: UTF8.self)
            }
            #expect(shown.contains("\r\u{1B}[K"), "no progress bar: \(shown)")
            // The ledger under script: the newest process of that command line.
            let pgrep = try Run(["-n", "-f", "demo --store \(store)"], executable: "/usr/bin/pgrep")
            guard let pid = Int32(pgrep.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                Issue.record("no ledger process: \(pgrep.stdout) \(pgrep.stderr)")
                process.terminate()
                return
            }
            kill(pid, SIGINT)
            shown += String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 130)
            // The terminal writes a newline as \r\n: the output ends with one after the bar.
            #expect(shown.unicodeScalars.last == "\n", "the progress line was left open: \(shown.suffix(80).debugDescription)")
            // The bar's last state, whose rate and time left come once it has run a while.
            let last = shown.split(separator: "\r\u{1B}[K").last.map(String.init) ?? ""
            #expect(last.hasSuffix("\r\n") && (last.contains(" customers") || last.contains(" events")), "\(shown.suffix(80).debugDescription)")
        }
    }

    /// Every example in every `--help` stays on its line at 80 columns (a long one goes on with
    /// a backslash), so that it can be copied and pasted whole.
    @Test func helpExamplesFitEightyColumns() throws {
        let commands = [[], ["status"], ["audit"], ["due"], ["subjects"], ["lookup"], ["event"], ["init"], ["append"], ["export"],
                        ["rebuild"], ["stats"], ["policy"], ["verify"], ["erase"], ["ingest", "appstore"], ["serve"],
                        ["token", "create"], ["schemas"], ["demo"]]
        for command in commands {
            let lines = try Run(command + ["--help"], environment: ["COLUMNS": "80"]).stdout.split(separator: "\n", omittingEmptySubsequences: false)
            for (line, next) in zip(lines, lines.dropFirst()) where line.hasPrefix("  ledger ") {
                #expect(line.count <= 80, "\(command): \(line)")
                // A wrapped example goes on at the start of the next line.
                #expect(next.isEmpty || next.hasPrefix(" ") || next.first?.isUppercase == true, "\(command): \(line) / \(next)")
            }
        }
    }

    @Test func aTerminalGetsAProgressBarWithRateAndETAAndColour() throws {
        try withDirectory { dir in
            let run = try onTerminal(["demo", "--store", dir + "/d.lmdb", "--subjects", "3000", "--now", "2026-11-21T00:00:00Z", "--audits", "0"],
                                     environment: ["NO_COLOR": "", "TERM": "xterm"])
            #expect(run.status == 0)
            #expect(run.stdout.contains("\r\u{1B}[Kappending ["), "a bar redrawn in place")
            #expect(run.stdout.contains("/s, ETA "))
            #expect(run.stdout.contains("\u{1B}[1mCustomers at 2026-11-21T00:00:00.000Z\u{1B}[0m"))
        }
    }

    @Test func appendAndVerifyShowTheirProgressOnATerminal() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            #expect(try Run(["demo", "--store", store, "--subjects", "300", "--now", "2026-11-21T00:00:00Z", "--json"]).status == 0)
            let file = dir + "/all.jsonl"
            try Run(["export", "--store", store]).stdout.write(toFile: file, atomically: true, encoding: .utf8)
            let append = try onTerminal(["append", "--store", dir + "/copy.lmdb", file])
            #expect(append.status == 0)
            #expect(append.stdout.contains("\r\u{1B}[Kchecking ["))
            #expect(append.stdout.contains(" bytes"))
            #expect(append.stdout.contains("\r\u{1B}[Kappending ["))
            let verify = try onTerminal(["verify", "--store", store])
            #expect(verify.status == 0)
            #expect(verify.stdout.contains("\r\u{1B}[Kchecking the log ["))
            #expect(verify.stdout.contains("\r\u{1B}[Krebuilding the models to compare ["))
            // With --json, never.
            let quiet = try onTerminal(["verify", "--store", store, "--json"])
            #expect(quiet.status == 0)
            #expect(!quiet.stdout.contains("\u{1B}"))
        }
    }

    @Test func noColourWhenNO_COLORIsSetEvenOnATerminal() throws {
        try withDirectory { dir in
            let run = try onTerminal(["demo", "--store", dir + "/d.lmdb", "--subjects", "200", "--now", "2026-11-21T00:00:00Z", "--audits", "1"],
                                     environment: ["NO_COLOR": "1", "TERM": "xterm"])
            #expect(run.status == 0)
            #expect(run.stdout.contains("Customers at 2026-11-21T00:00:00.000Z"))
            #expect(!run.stdout.contains("\u{1B}[1m") && !run.stdout.contains("\u{1B}[0m"))
        }
    }

    @Test func noProgressOrColourWhenNotATerminal() throws {
        try withDirectory { dir in
            let store = dir + "/d.lmdb"
            let demo = try Run(["demo", "--store", store, "--subjects", "300", "--now", "2026-11-21T00:00:00Z"])
            #expect(demo.status == 0)
            let export = try Run(["export", "--store", store])
            let file = dir + "/all.jsonl"
            try export.stdout.write(toFile: file, atomically: true, encoding: .utf8)
            for arguments in [["verify", "--store", store], ["rebuild", "--store", store, "--dry-run"], ["append", "--store", dir + "/copy.lmdb", file],
                              ["status", "customer-1", "--store", store], ["audit", "customer-1", "--store", store]] {
                let run = try Run(arguments)
                #expect(run.status == 0, "\(arguments): \(run.stderr)")
                #expect(run.stderr == "", "\(arguments) wrote to stderr: \(run.stderr)")
                #expect(!run.stdout.contains("\u{1B}"), "\(arguments) wrote escape codes")
            }
            #expect(demo.stderr == "")
        }
    }

    @Test func everyCommandsHelpHasAWorkedExample() throws {
        for command in ["init", "append", "export", "status", "audit", "rebuild", "due", "verify", "stats", "schemas", "demo"] {
            let run = try Run([command, "--help"])
            #expect(run.status == 0, "\(command)")
            // The usage line names the command too, so look only after "Example".
            let example = try #require(run.stdout.range(of: "Example").map { run.stdout[$0.upperBound...] }, "\(command) --help has no example")
            #expect(example.contains("ledger \(command) ") || example.contains("ledger \(command)\n"), "\(command) --help's example does not run it")
        }
    }

    /// SPEC §5's `due --json`: from, to, and the items with their detail, times in UTC. Alex's
    /// refund on 2 March ends access: the retention flow's e-mails and tiers follow from then.
    @Test func dueJSONHasSpecsShape() throws {
        try withDirectory { dir in
            let store = dir + "/alex.lmdb"
            #expect(try Run(["append", "--store", store, "--restore", FileManager.default.currentDirectoryPath + "/Schemas/examples/alex.jsonl"]).status == 0)
            let run = try Run(["due", "--store", store, "--from", "2026-01-01T00:00:00+01:00", "--to", "2026-12-01T00:00:00Z", "--json"])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout == #"""
                {"from":"2025-12-31T23:00:00.000Z","to":"2026-12-01T00:00:00.000Z","items":[{"subject":"alex","at":"2026-01-10T09:02:00.000Z","kind":"trialEndingSoon","detail":{"transactionId":"t1","trialEndsAt":"2026-01-12T09:02:00.000Z","channel":"push"}},{"subject":"alex","at":"2026-02-12T09:02:00.000Z","kind":"paymentFailed","detail":{"originalTransactionId":"o1","channel":"push"}},{"subject":"alex","at":"2026-03-09T10:00:00.000Z","kind":"retentionEmail","detail":{"day":7}},{"subject":"alex","at":"2026-03-25T10:00:00.000Z","kind":"retentionEmail","detail":{"day":23}},{"subject":"alex","at":"2026-03-31T10:00:00.000Z","kind":"retentionEmail","detail":{"day":29}},{"subject":"alex","at":"2026-04-02T10:00:00.000Z","kind":"retentionEmail","detail":{"day":31}},{"subject":"alex","at":"2026-04-02T10:00:00.000Z","kind":"tierChanged","detail":{"tier":"browseOnly"}},{"subject":"alex","at":"2026-05-01T10:00:00.000Z","kind":"retentionEmail","detail":{"day":60}},{"subject":"alex","at":"2026-06-01T10:00:00.000Z","kind":"tierChanged","detail":{"tier":"archived"}}]}

                """#)
        }
    }

    @Test func dueChecksItsOptions() throws {
        let help = try Run(["due", "--help"])
        #expect(help.stdout.contains("trialEndingSoon"))
        let bad = try Run(["due", "--from", "tomorrow", "--to", "2026-11-22T00:00:00Z"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--from: expected an RFC 3339 time"))
        let backwards = try Run(["due", "--from", "2026-11-22T00:00:00Z", "--to", "2026-11-21T00:00:00Z"])
        #expect(backwards.status == 2)
        #expect(backwards.stderr.contains("--from must be before --to"))
    }

    @Test func schemasTakesJSONToo() throws {
        let run = try Run(["schemas", "--json"])
        #expect(run.status == 0)
        #expect(!run.stdout.dropLast().contains("\n"), "one line")
        #expect(try run.json()["$schema"] != nil)
    }
}

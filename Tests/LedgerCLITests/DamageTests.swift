import Foundation
@_spi(Storage) import LedgerCore
import Testing

/// A damaged store, or a careless operator, gets a clear refusal: never a crash, never a
/// write lost.
@Suite struct DamageTests {
    /// A store holding the example corpus, at `dir/s.lmdb`.
    func store(in dir: String) throws -> String {
        let store = dir + "/s.lmdb"
        let run = try Run(["append", "--store", store, validExamples])
        #expect(run.status == 0, "\(run.stderr)")
        return store
    }

    func truncate(_ file: String, to size: off_t) { #expect(Glibc.truncate(file, size) == 0) }

    /// `truncate -s 8192 data.mdb` used to crash every command with SIGBUS inside liblmdb.
    @Test func aTruncatedDataFileIsRefusedByEveryCommand() throws {
        try withDirectory { dir in
            let store = try store(in: dir)
            truncate(store + "/data.mdb", to: 8192)
            for command in [["verify"], ["stats"], ["status", "user-1"], ["export"], ["append", validExamples]] {
                let run = try Run([command[0], "--store", store] + command.dropFirst())
                #expect(run.status == 1, "\(command): \(run.stderr)")
                #expect(run.stderr.contains("the store is truncated"), "\(command): \(run.stderr)")
                #expect(run.stderr.contains("data.mdb is 8192 bytes, but its last page ends at byte "), "\(command): \(run.stderr)")
            }
        }
    }

    /// An empty data.mdb beside a lock.mdb is a cut file, not a fresh store to fill.
    @Test func anEmptyDataFileIsDamageNotANewStore() throws {
        try withDirectory { dir in
            let store = try store(in: dir)
            truncate(store + "/data.mdb", to: 0)
            for command in [["stats"], ["append", validExamples]] {
                let run = try Run([command[0], "--store", store] + command.dropFirst())
                #expect(run.status == 1, "\(command): \(run.stderr)")
                #expect(run.stderr.contains("the store is truncated") && run.stderr.contains("data.mdb is empty"), "\(command): \(run.stderr)")
            }
            #expect((try FileManager.default.attributesOfItem(atPath: store + "/data.mdb")[.size] as? Int) == 0)
        }
    }

    /// The append spools the checked events to a temporary file before writing; killed, it used
    /// to leave that file (with every event's data) behind. The spool has no name at any time.
    @Test func aKilledAppendLeavesNoSpoolFileBehind() throws {
        try withDirectory { dir in
            let temporary = dir + "/tmp"
            try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger")
            process.arguments = ["append", "--store", dir + "/s.lmdb", "-"]
            process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary]) { $1 }
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Half the input is checked and spooled; the append waits for the rest. The spool is
            // open (a descriptor of the child's) and has no name.
            let lines = try String(contentsOfFile: validExamples, encoding: .utf8)
            input.fileHandleForWriting.write(Data(lines.utf8))
            let descriptors = "/proc/\(process.processIdentifier)/fd"
            func spool() -> String? {
                (try? FileManager.default.contentsOfDirectory(atPath: descriptors))?.lazy
                    .compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: descriptors + "/" + $0) }
                    .first { $0.hasPrefix(temporary + "/ledger-append-") }
            }
            var open: String?
            for _ in 0..<500 where open == nil {
                open = spool()
                if open == nil { usleep(10_000) }
            }
            #expect(open?.hasSuffix(" (deleted)") == true, "the child's spool: \(open ?? "none seen")")
            #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [], "the spool has a name while the append runs")
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [])
        }
    }

    /// `init` into an existing world-writable directory used to leave it 0777.
    @Test func aStoreMadeInAnOpenDirectoryIsTightenedTo0700() throws {
        try withDirectory { dir in
            let store = dir + "/open"
            try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
            #expect(chmod(store, 0o777) == 0)
            let run = try Run(["init", "--store", store])
            #expect(run.status == 0, "\(run.stderr)")
            #expect((try FileManager.default.attributesOfItem(atPath: store)[.posixPermissions] as? Int) == 0o700)
            // An existing store is left as its operator set it.
            #expect(chmod(store, 0o750) == 0)
            #expect(try Run(["stats", "--store", store]).status == 0)
            #expect((try FileManager.default.attributesOfItem(atPath: store)[.posixPermissions] as? Int) == 0o750)
            // A shared directory holding other files is not the store's to change: refused.
            let shared = dir + "/shared"
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            try Data("x".utf8).write(to: URL(fileURLWithPath: shared + "/notes.txt"))
            #expect(chmod(shared, 0o777) == 0)
            let refused = try Run(["init", "--store", shared])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("is a directory of other files, not a store; choose another --store"), "\(refused.stderr)")
            #expect((try FileManager.default.attributesOfItem(atPath: shared)[.posixPermissions] as? Int) == 0o777)
            #expect(!FileManager.default.fileExists(atPath: shared + "/data.mdb"))
            // A directory only its owner may write to is left as it is, whatever it holds.
            let home = dir + "/home"
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
            #expect(chmod(home, 0o755) == 0)
            #expect(try Run(["init", "--store", home]).status == 0)
            #expect((try FileManager.default.attributesOfItem(atPath: home)[.posixPermissions] as? Int) == 0o755)
        }
    }

    /// A restore with recordedAt in 9999 used to poison the store's clock for good: recorded
    /// times never go back, so every later append was stamped 9999.
    @Test func aRestoreRecordedFarInTheFutureIsRefused() throws {
        try withDirectory { dir in
            let future = #"{"position":1,"recordedAt":"9999-01-01T00:00:00.000Z","type":"account.created","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#
            let file = dir + "/future.jsonl"
            try Data((future + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", dir + "/s.lmdb", "--restore", file])
            #expect(run.status == 2, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("\(file):1: /recordedAt: recordedAt 9999-01-01T00:00:00.000Z is later than this machine's clock ("))
            #expect(run.stderr.contains("by more than 5 minutes"))
            #expect(try Run(["export", "--store", dir + "/s.lmdb"]).stdout == "")
            // Within a few minutes of the clock (another machine's) is a restore like any other.
            let soon = Timestamp.now().adding(seconds: 120)
            try Data((future.replacingOccurrences(of: "9999-01-01T00:00:00.000Z", with: soon.description) + "\n").utf8).write(to: URL(fileURLWithPath: file))
            #expect(try Run(["append", "--store", dir + "/s.lmdb", "--restore", file]).status == 0)
        }
    }

    /// An event at the 64 KiB limit exported as a longer line (position and recordedAt added)
    /// and could not be restored: the limit is on the event encoded, not on its line.
    @Test func anEventAtTheLimitExportsAndRestores() throws {
        try withDirectory { dir in
            func line(_ length: Int) -> String {
                #"{"type":"support.note_added","subject":"u","occurredAt":"2026-03-01T09:00:00Z","source":"support","data":{"text":"\#(String(repeating: "n", count: length))","agent":"a"}}"#
            }
            // The longest text that keeps the event within 65,536 bytes encoded (57 bytes go to
            // the rest of this event): found by appending, so the test does not trust the sum.
            var length = 65_536 - 57 + 3
            let file = dir + "/big.jsonl"
            var run: Run
            repeat {
                length -= 1
                try Data((line(length) + "\n").utf8).write(to: URL(fileURLWithPath: file))
                run = try Run(["append", "--store", dir + "/probe-\(length).lmdb", file])
            } while run.status != 0 && length > 65_000
            #expect(run.status == 0, "\(run.stderr)")
            try Data((line(length + 1) + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let over = try Run(["append", "--store", dir + "/over.lmdb", file])
            #expect(over.stderr == "\(file):1: /: event is 65537 bytes, over the 65536-byte limit\n")

            let exported = try Run(["export", "--store", dir + "/probe-\(length).lmdb"]).stdout
            #expect(exported.utf8.count > 65_536 + 60)
            let restored = try Run(["append", "--store", dir + "/restored.lmdb", "--restore", "-"], stdin: exported)
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(try Run(["export", "--store", dir + "/restored.lmdb"]).stdout == exported)
        }
    }

    /// `append good.jsonl conflict.jsonl` exited 2 naming only the conflict, though good.jsonl
    /// (a batch of its own) was appended: it now says what was.
    @Test func aFailedSecondFileSaysWhatTheFirstAppended() throws {
        try withDirectory { dir in
            let store = try store(in: dir)   // the 56 example events
            let conflict = dir + "/conflict.jsonl"
            let good = dir + "/good.jsonl"
            try Data(#"{"type":"account.created","subject":"new","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#.utf8 + [10])
                .write(to: URL(fileURLWithPath: good))
            // The first example's id, with other content.
            let first = try #require(try String(contentsOfFile: validExamples, encoding: .utf8).split(separator: "\n").first)
            try Data(first.replacingOccurrences(of: "user-42", with: "user-43").utf8 + [10]).write(to: URL(fileURLWithPath: conflict))

            let text = try Run(["append", "--store", store, good, conflict])
            #expect(text.status == 2)
            #expect(text.stderr.hasPrefix("\(conflict):1: /id: event id "))
            #expect(text.stdout == "Appended 1 event at position 57 before this error (the files before it); nothing after was appended.\n")

            try Data(#"{"type":"account.created","subject":"newer","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#.utf8 + [10])
                .write(to: URL(fileURLWithPath: good))
            let json = try Run(["append", "--store", store, "--json", good, conflict])
            #expect(json.status == 2)
            let shape = try json.json()
            #expect(shape["appended"] as? Int == 1 && shape["firstPosition"] as? Int == 58 && shape["lastPosition"] as? Int == 58)
            #expect((shape["errors"] as? [[String: Any]])?.first?["line"] as? Int == 1)
        }
    }

    /// A repeated id inside one file named a position that does not exist (the batch was never
    /// stored): it names the earlier line.
    @Test func aRepeatedIdInOneFileNamesTheEarlierLine() throws {
        try withDirectory { dir in
            let file = dir + "/dup.jsonl"
            let event = { (subject: String, day: Int) in
                #"{"id":"0b6d2f4e-8a1c-4c3b-9f00-000000000001","type":"account.created","subject":"\#(subject)","occurredAt":"2026-03-0\#(day)T09:00:00Z","source":"app","data":{"signedIn":true}}"#
            }
            let other = #"{"type":"account.created","subject":"v","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#
            try Data([event("u", 1), other, event("u", 2)].joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", dir + "/s.lmdb", file])
            #expect(run.status == 2)
            #expect(run.stderr == "\(file):3: /id: event id 0b6d2f4e-8a1c-4c3b-9f00-000000000001 is also on line 1 of this batch, with other content; "
                    + "an id names one fact, so give a new fact a new id\n")
            #expect(try Run(["export", "--store", dir + "/s.lmdb"]).stdout == "")
        }
    }

    /// Runs `script` with `ledger` on PATH in a mount namespace of its own, where it may mount
    /// a small tmpfs at `mountPoint` (util-linux's unshare: no privilege needed).
    func inOwnMounts(_ script: String, in dir: String) throws -> Run {
        let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().path
        return try Run(["--user", "--map-root-user", "--mount", "sh", "-c", "cd \(dir) && PATH=\(binary):$PATH && " + script],
                       executable: "/usr/bin/unshare")
    }

    /// A full disk said "Input/output error [code 5]" (LMDB's word for a write cut short).
    @Test func aFullDiskSaysSoAndKeepsNothingOfTheBatch() throws {
        try withDirectory { dir in
            let lines = (0..<30_000).map { #"{"type":"account.created","subject":"customer-\#($0)","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"# }
            try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: dir + "/many.jsonl"))
            try FileManager.default.createDirectory(atPath: dir + "/small", withIntermediateDirectories: false)
            let run = try inOwnMounts("""
                mount -t tmpfs -o size=2m tmpfs small && ledger append --store small/s.lmdb \(validExamples) > /dev/null \
                && ledger append --store small/s.lmdb many.jsonl; echo "exit $?"; ledger stats --store small/s.lmdb --json
                """, in: dir)
            #expect(run.stdout.hasPrefix("exit 1\n"), "\(run.stdout) \(run.stderr)")
            #expect(run.stderr.contains("No space left on device"), "\(run.stderr)")
            #expect(run.stderr.contains("the disk holding the store is full; nothing of this write was kept: free disk space"), "\(run.stderr)")
            // The store holds what it held before, and still reads.
            #expect(run.stdout.contains(#""events":56"#), "\(run.stdout)")
        }
    }

    /// Reading commands work on a store whose file system is mounted read-only; writing ones
    /// say why they cannot.
    @Test func aStoreOnAReadOnlyMountCanBeRead() throws {
        try withDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/ro", withIntermediateDirectories: false)
            let run = try inOwnMounts("""
                mount -t tmpfs -o size=8m tmpfs ro && ledger append --store ro/s.lmdb \(validExamples) > /dev/null && mount -o remount,ro ro \
                && for command in stats verify export "status user-42" "audit user-42" "due --from 2026-01-01T00:00:00Z --to 2027-01-01T00:00:00Z"; do
                     ledger $command --store ro/s.lmdb > /dev/null 2>> errors; echo "$command: $?"; done
                ledger append --store ro/s.lmdb \(validExamples) > /dev/null; echo "append: $?"
                """, in: dir)
            #expect(run.stdout == """
                stats: 0
                verify: 0
                export: 0
                status user-42: 0
                audit user-42: 0
                due --from 2026-01-01T00:00:00Z --to 2027-01-01T00:00:00Z: 0
                append: 1

                """, "\(run.stderr)")
            #expect(run.stderr.contains("Read-only file system") && run.stderr.contains("reading commands work; to write, remount it read-write"), "\(run.stderr)")
        }
    }

    /// A damaged page made liblmdb abort or fault (SIGSEGV, SIGBUS) in `verify` and `export`.
    /// Both check the pages first and report the damaged one.
    @Test func aDamagedPageIsReportedNotACrash() throws {
        try withDirectory { dir in
            let store = try store(in: dir)
            let file = store + "/data.mdb"
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
            // The events tree's second leaf (the first whose first key is a position after 1):
            // flagged a branch page, liblmdb read its records as child pointers and aborted or
            // faulted in both commands.
            func firstPosition(_ page: Int) -> UInt64? {
                let base = page * 4096
                guard u16(base + 10) == 0x02, u16(base + 12) > 16 else { return nil }
                let node = base + u16(base + 16)
                guard u16(node + 6) == 8 else { return nil }
                return bytes[(node + 8) ..< (node + 16)].reduce(0) { $0 << 8 | UInt64($1) }
            }
            let page = try #require((2 ..< bytes.count / 4096).filter { (firstPosition($0) ?? 0) > 1 }.min { (firstPosition($0) ?? 0) < (firstPosition($1) ?? 0) })
            bytes[page * 4096 + 10] = 0x01
            try Data(bytes).write(to: URL(fileURLWithPath: file))

            let verify = try Run(["verify", "--store", store])
            #expect(verify.status == 1, "\(verify.stderr)")
            #expect(verify.stdout.contains("damagedPage: page \(page) of data.mdb (events): its flags 0x1 say it is not the leaf page level 2 of 2 must be"), "\(verify.stdout)")
            #expect(verify.stdout.contains("the store is damaged: stop writing to it, keep a copy, and restore it from an export or a backup"))
            let json = try Run(["verify", "--store", store, "--json"]).json()
            #expect((json["problem"] as? [String: Any])?["kind"] as? String == "damagedPage")
            let export = try Run(["export", "--store", store])
            #expect(export.status == 1, "\(export.stderr)")
            #expect(export.stderr.hasPrefix("ledger: the store cannot be exported: damagedPage: page \(page) of data.mdb (events)"), "\(export.stderr)")
        }
    }

    /// One write transaction keeps what it writes in memory until it commits; --commit-every
    /// bounds that for long files. The same store results, and a file refused half-way says
    /// how far it got.
    @Test func commitEveryNAppendsInBatchesOfN() throws {
        try withDirectory { dir in
            let whole = try Run(["append", "--store", dir + "/whole.lmdb", validExamples])
            let batched = try Run(["append", "--store", dir + "/batched.lmdb", "--commit-every", "5", "--json", validExamples])
            #expect(whole.status == 0 && batched.status == 0, "\(batched.stderr)")
            #expect(batched.stdout == #"{"appended":56,"duplicates":0,"firstPosition":1,"lastPosition":56}"# + "\n")
            let export = { (store: String) in try Run(["export", "--store", dir + "/" + store]).stdout.replacingOccurrences(
                of: #""recordedAt":"[^"]*""#, with: "", options: .regularExpression) }
            #expect(try export("whole.lmdb") == export("batched.lmdb"))

            // Line 8 reuses line 1's id with other content: the batches before it stay.
            var lines = try String(contentsOfFile: validExamples, encoding: .utf8).split(separator: "\n").prefix(10).map(String.init)
            lines[7] = lines[0].replacingOccurrences(of: "user-42", with: "user-43")
            let file = dir + "/clash.jsonl"
            try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
            let clash = try Run(["append", "--store", dir + "/clash.lmdb", "--commit-every", "3", "--json", file])
            #expect(clash.status == 2)
            #expect(clash.stderr.hasPrefix("\(file):8: /id: event id "), "\(clash.stderr)")
            let shape = try clash.json()
            #expect(shape["appended"] as? Int == 6 && shape["lastPosition"] as? Int == 6)
            let text = try Run(["append", "--store", dir + "/clash-text.lmdb", "--commit-every", "3", file])
            #expect(text.stdout == "Appended 6 events at positions 1…6 before this error (the batches before it); nothing after was appended.\n")
            #expect(try Run(["stats", "--store", dir + "/clash.lmdb", "--json"]).json()["events"] as? Int == 6)
        }
    }
}

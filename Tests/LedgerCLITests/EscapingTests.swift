import Foundation
import Testing

/// One escaping rule for everything the command line shows of its input (GitHub issue 59):
/// for people, every control, bidirectional and invisible character is written as `‹U+XXXX›`;
/// in JSON, DEL and the C1 controls are `\u00XX` escapes as the C0 ones are; a JSON pointer
/// escapes `~` and `/` inside a key (RFC 6901).
@Suite struct EscapingTests {
    /// What a terminal would act on or show as nothing: a C0 or C1 control, DEL, a format
    /// character (bidi controls, zero-width spaces), a line or paragraph separator.
    static func hides(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// `text` but for the newlines that end its lines holds nothing a terminal hides.
    static func visible(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0 != "\n" && hides($0) }
    }

    /// A data key holding an erase-line escape and a carriage return once printed raw in the
    /// error line, so that a terminal showed "Appended 1 event…" over the real error (exit 2,
    /// nothing appended). The key, the file name and the message are shown escaped.
    @Test func anAppendErrorQuotingAKeyCannotRewriteTheTerminal() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let file = dir + "/e\u{1B}[31m.jsonl"
            let line = #"{"type":"account.created","subject":"user-1","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true,"\u001b[2K\rAppended 1 event at position 1.":1}}"#
            try Data((line + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let run = try Run(["append", "--store", store, file])
            #expect(run.status == 2)
            #expect(Self.visible(run.stderr), "\(run.stderr.debugDescription)")
            #expect(run.stderr.hasPrefix(dir + "/e‹U+001B›[31m.jsonl:1: /data/‹U+001B›[2K‹U+000D›Appended 1 event at position 1.: unknown key"), "\(run.stderr)")
            #expect(run.stdout == "")
            #expect(try Run(["export", "--store", store]).stdout == "")
        }
    }

    /// An error names a key holding `/` and `~` by its RFC 6901 pointer: `~1` and `~0`.
    @Test func anErrorsPointerEscapesSlashAndTildeInAKey() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let line = #"{"type":"account.created","subject":"user-1","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true,"a/b~c":1}}"#
            let run = try Run(["append", "--store", store, "--json", "-"], stdin: line + "\n")
            #expect(run.status == 2)
            #expect(run.stderr.hasPrefix("-:1: /data/a~1b~0c: unknown key"), "\(run.stderr)")
            #expect(run.stdout.contains(#""pointer":"/data/a~1b~0c""#), "\(run.stdout)")
        }
    }

    /// `--json` escapes DEL and the C1 controls (U+009B is a one-byte CSI) as it escapes C0:
    /// `\u009b`, lower-case hex. What it reads back is the same event.
    @Test func jsonOutputEscapesC1Controls() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let subject = "user-\u{9B}1"
            let lines = [
                #"{"id":"0b6d2f4e-8a1c-4c3b-9f00-1234567890ab","type":"account.created","subject":"user-\u009b1","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#,
                #"{"type":"support.note_added","subject":"user-\u009b1","occurredAt":"2026-03-02T10:00:00Z","source":"support","data":{"text":"hi \u009b2J\u007f\u0085","agent":"bob\u009f"}}"#,
            ]
            #expect(try Run(["append", "--store", store, "-"], stdin: lines.joined(separator: "\n") + "\n").status == 0)
            let runs = [
                "export": try Run(["export", "--store", store]),
                "event": try Run(["event", "1", "--json", "--store", store]),
                "status": try Run(["status", subject, "--at", "2026-03-03T00:00:00Z", "--json", "--store", store]),
                "audit": try Run(["audit", subject, "--at", "2026-03-03T00:00:00Z", "--json", "--store", store]),
                "subjects": try Run(["subjects", "--json", "--store", store]),
            ]
            for (name, run) in runs {
                #expect(run.status == 0, "\(name): \(run.stderr)")
                #expect(!run.stdout.unicodeScalars.contains { (0x7F ... 0x9F).contains($0.value) }, "\(name): \(run.stdout.debugDescription)")
                #expect(run.stdout.contains(#"user-\u009b1"#), "\(name): \(run.stdout)")
            }
            #expect(runs["export"]?.stdout.contains(#""text":"hi \u009b2J\u007f\u0085""#) == true)
            #expect(runs["subjects"]?.stdout == #"{"subjects":["user-\u009b1"]}"# + "\n")
            // The export appends back as the same events: duplicates.
            let again = try Run(["append", "--store", store, "--json", "-"], stdin: runs["export"]?.stdout ?? "")
            #expect(again.stdout == #"{"appended":0,"duplicates":2,"firstPosition":null,"lastPosition":null}"# + "\n", "\(again.stderr)")
        }
    }

    /// A right-to-left override makes `user-\u{202E}gnp.exe` read as `user-exe.png`; a
    /// zero-width space makes two subjects look alike. People see each as `‹U+XXXX›`.
    @Test func bidiAndInvisibleCharactersAreShownToPeople() throws {
        try withDirectory { dir in
            let store = dir + "/s.lmdb"
            let lines = ["user-\\u202egnp.exe", "zero\\u200bwidth\\ufeff", "soft\\u00adhyphen\\u2066"].map { subject in
                #"{"type":"account.created","subject":"\#(subject)","occurredAt":"2026-03-01T09:00:00Z","source":"app","data":{"signedIn":true}}"#
            }
            #expect(try Run(["append", "--store", store, "-"], stdin: lines.joined(separator: "\n") + "\n").status == 0)
            let status = try Run(["status", "user-\u{202E}gnp.exe", "--at", "2026-03-03T00:00:00Z", "--store", store], environment: ["NO_COLOR": "1"])
            #expect(status.stdout.hasPrefix("user-‹U+202E›gnp.exe at 2026-03-03T00:00:00.000Z"), "\(status.stdout)")
            let subjects = try Run(["subjects", "--store", store])
            #expect(subjects.stdout == "soft‹U+00AD›hyphen‹U+2066›\nuser-‹U+202E›gnp.exe\nzero‹U+200B›width‹U+FEFF›\n")
            let audit = try Run(["audit", "zero\u{200B}width\u{FEFF}", "--store", store], environment: ["NO_COLOR": "1"])
            let missing = try Run(["status", "nobody\u{200F}", "--store", store])
            for run in [status, subjects, audit, missing] { #expect(Self.visible(run.stdout + run.stderr), "\((run.stdout + run.stderr).debugDescription)") }
            #expect(audit.stdout.hasPrefix("zero‹U+200B›width‹U+FEFF›: audit at"))
            #expect(missing.stderr.contains("no events for subject nobody‹U+200F›"))
        }
    }
}

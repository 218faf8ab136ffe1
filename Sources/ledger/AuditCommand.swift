import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Cluster) import LedgerCluster

struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "One subject's timeline: every event in business-time order, what it changed in each read model, and why.",
        discussion: """
            Entries are in occurredAt order (position breaks ties). Each lists the read-model fields it \
            changed with the rule that changed them. Changes that need no event — a trial running out, a \
            grace ending, a retention boundary — appear as "time" entries with no position.

            --at T shows the timeline up to T (default now). --known-at T|POS uses only what the ledger had \
            recorded by time T or up to position POS: what support could have seen then, against what \
            turned out to be true.

            --limit N shows N entries at most, and says where the next page starts; --cursor C (a \
            page's "next") shows the page after it, as of the moment and as known at the position \
            the first page was read with.

            Examples:
              ledger audit user-42
              ledger audit user-42 --at 2026-03-05T00:00:00Z --known-at 120
              ledger audit user-42 --known-at 1200 --json
              ledger audit user-42 --limit 100 --json   # a page; "next" is its --cursor
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The subject (account) to audit.")
    var subject: String

    @Option(help: "Show the timeline up to this time (RFC 3339; default: now).")
    var at: String?

    @Option(name: .customLong("known-at"), help: "Use only the events recorded by this time (RFC 3339) or up to this position.")
    var knownAt: String?

    @Option(help: "Show at most this many entries, and where the next page starts.")
    var limit: Int?

    @Option(help: "Start where an earlier page's \"next\" says (default limit: 100).")
    var cursor: String?

    func validate() throws {
        if let at { _ = try parseTime(at, option: "--at") }
        if let knownAt { _ = try parseKnownAt(knownAt) }
        if let problem = EventLimits.subjectProblem(subject) { throw ValidationError("SUBJECT: \(problem)") }
        if let limit, !(1 ... AuditPaging.maximumLimit).contains(limit) {
            throw ValidationError("--limit must be 1 to \(AuditPaging.maximumLimit), not \(limit)")
        }
        if cursor != nil && (at != nil || knownAt != nil) {
            throw ValidationError("--cursor holds the moment and the knowledge of its first page: leave --at and --known-at out")
        }
        if let cursor, AuditCursor(parsing: cursor) == nil {
            throw ValidationError("--cursor: not a cursor a page gave (its \"next\"), got \(Terminal.safe(cursor))")
        }
    }


    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        let t = try at.map { try parseTime($0, option: "--at") } ?? Timestamp.now()
        let page = cursor.flatMap(AuditCursor.init(parsing:))
        if let url = try cluster.url(global) {
            guard limit == nil && page == nil else { throw CommandFailure.failure("--limit and --cursor: a cluster does not page audits yet") }
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            let report = try client.audit(of: subject, at: t, knownAt: knownAt)
            print(global.json ? report.json.text : Self.render(report))
            return
        }
        let known = try knownAt.map(parseKnownAt)
        let ledger = try global.openLedger()
        defer { ledger.close() }
        let report = if limit != nil || page != nil {
            try ledger.audit(of: subject, at: t, knownAt: known, limit: limit ?? 100, after: page)
        } else {
            try ledger.audit(of: subject, at: t, knownAt: known)
        }
        if global.json {
            print(report.json.text)
            return
        }
        print(Self.render(report))
    }

    /// The timeline for people: one block per entry, the changes indented under it. Times are
    /// UTC, each followed by the subject's local time when its zone is known.
    static func render(_ report: AuditReport) -> String {
        let zone = report.timeZone
        var lines: [String] = []
        let scope: String
        switch report.knownAt {
        case .time(let t): scope = "as recorded by \(t)"
        case .position(let p): scope = "as recorded up to position \(p)"
        case nil: scope = "everything recorded"
        }
        lines.append(Terminal.paint("\(Terminal.safe(report.subject)): audit at \(report.at), \(scope)", .bold))
        if let zone { lines.append("Times are UTC, then local in \(zone) (the zone of the latest session).") }
        if report.entries.isEmpty { lines.append("no events") }
        // Wide enough for the longest position (padding never cuts one short).
        let headWidth = max(6, report.entries.map { ($0.position.map { "#\($0)" } ?? "time").count + 1 }.max() ?? 0)
        for entry in report.entries {
            lines.append("")
            let head = entry.position.map { "#\($0)" } ?? "time"
            var first = "\(entry.occurredAt)"
            if let zone { first += Terminal.paint("  \(entry.occurredAt.local(in: zone))", .dim) }
            first += "  \(head.padding(toLength: headWidth, withPad: " ", startingAt: 0)) "
            first += entry.type == "time" ? Terminal.paint(Terminal.safe(entry.summary), .cyan) : Terminal.paint(entry.type, .bold) + " [\(entry.source ?? "?")]"
            lines.append(first)
            if entry.type != "time" { lines.append("    \(Terminal.safe(entry.summary))") }
            if let lateness = entry.lateness { lines.append(Terminal.paint("    \(lateness)", .yellow)) }
            let width = entry.changes.map { $0.model.count + $0.field.count + 1 }.max() ?? 0
            for change in entry.changes {
                let name = "\(change.model).\(change.field)".padding(toLength: width, withPad: " ", startingAt: 0)
                lines.append("    \(name)  \(label(change.from)) → \(label(change.to))   " + Terminal.paint("(\(change.rule))", .dim))
            }
        }
        if report.laterEvents > 0 {
            lines.append("")
            lines.append("\(report.laterEvents) later event(s) occurred after \(report.at) and are not shown.")
        }
        if let next = report.next {
            lines.append("")
            lines.append("More entries follow: --cursor \(next)")
        }
        return lines.joined(separator: "\n")
    }

    static func label(_ value: JSON) -> String { Terminal.safe(AuditChange.words(value)) }
}

import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerDemo
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Cluster) import LedgerCluster
@_spi(Storage) import LedgerStore

/// Parses `--known-at`: a log position or an RFC 3339 time with a zone (`KnownAt(parsing:)`).
func parseKnownAt(_ text: String) throws -> KnownAt {
    if let known = KnownAt(parsing: text) { return known }
    return .time(try parseTime(text, option: "--known-at", orElse: "an RFC 3339 time with a zone or a log position"))
}

/// Parses a command-line time (`--at`, `--now`…): any RFC 3339 time with a zone that events
/// could carry (years 0000–9999 once in UTC), by the parser events' times go through.
func parseTime(_ text: String, option: String, orElse expected: String = "an RFC 3339 time with a zone (e.g. 2026-03-05T00:00:00Z)") throws -> Timestamp {
    guard let t = Timestamp(rfc3339: text) else {
        if let reason = Timestamp.reason(rfc3339: text) { throw ValidationError("\(option): \(text) \(reason)") }
        throw ValidationError("\(option): expected \(expected), got \(text)")
    }
    return t
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Every read model's view of one subject at a time (default now).",
        discussion: """
            The view at T uses only events whose occurredAt is at or before T. A subject the store has \
            never seen is a guest, not an error. A model that is stale (see `ledger stats`) is still \
            shown, with a warning on standard error.

            With --known-at, only the events recorded by then (a time, or a log position) count: what \
            support would have been shown at that moment.

            Examples:
              ledger status user-42
              ledger status user-42 --at 2026-03-05T00:00:00Z --json
              ledger status user-42 --at 2026-03-05T00:00:00Z --known-at 120
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The subject (account) to show.")
    var subject: String

    @Option(help: "The time to evaluate at (RFC 3339; default: now).")
    var at: String?

    @Option(name: .customLong("known-at"), help: "Only what was recorded by then: an RFC 3339 time or a log position (default: everything).")
    var knownAt: String?

    func validate() throws {
        if let at { _ = try parseTime(at, option: "--at") }
        if let knownAt { _ = try parseKnownAt(knownAt) }
        if let problem = EventLimits.subjectProblem(subject) { throw ValidationError("SUBJECT: \(problem)") }
    }

    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        let t = try at.map { try parseTime($0, option: "--at") } ?? Timestamp.now()
        if let url = try cluster.url(global) {
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            let status = try client.status(of: subject, at: t, knownAt: knownAt)
            try show(json: status.json, cards: status.cards, stale: status.stale, version: status.version, zone: status.zone, at: t)
            return
        }
        let known = try knownAt.map(parseKnownAt)
        let ledger = try global.openLedger()
        defer { ledger.close() }
        let status = try ledger.status(of: subject, at: t, knownAt: known)
        try show(json: status.json, cards: status.answers.map { ($0.model, $0.view?.card) }, stale: status.stale,
                 version: ledger.log.version(of: subject), zone: global.json ? nil : ledger.timeZone(of: subject, at: t), at: t)
    }

    /// Prints a status, from a store or a cluster alike.
    private func show(json: JSON, cards: [(model: String, card: ViewCard?)], stale: [String], version: UInt64, zone: String?, at t: Timestamp) throws {
        // SPEC §5: the view of no events, and a word on stderr (a mistyped name looks like a guest).
        if version == 0 { Terminal.warn("ledger: no events for subject \(Terminal.safe(subject))") }
        for name in stale {
            let answered = cards.contains { $0.model == name }
            Terminal.warn(Terminal.paint("ledger: warning:", .yellow, stderr: true) + (answered
                ? " the \(name) model is stale or behind the log; its answer may not follow the current rules (run `ledger rebuild \(name)`)"
                : " the \(name) model was built by another code version, whose states this ledger cannot read, so it is left out (run `ledger rebuild \(name)`)"))
        }
        if global.json {
            print(json.text)
            return
        }
        var header = "\(Terminal.safe(subject)) at \(t)"
        if let zone { header += " (\(t.local(in: zone)) in \(zone), the zone of the latest session)" }
        print(Terminal.paint(header, .bold))
        let shown = StatusCard(zone: zone)
        for (model, card) in cards {
            print("")
            guard let card else {
                print(Terminal.paint("\(model): none", .bold) + " (the store's policy has no \(model) section)")
                continue
            }
            print(shown.headline(model, card))
            printTable(card.rows.map { ["  " + $0.label, shown.human($0.value)] })
        }
    }
}

/// How `status` shows a view to people: a headline per model, then one row per field (the
/// model's `ViewCard`); times in UTC followed by the subject's local time when its zone is known.
struct StatusCard {
    var zone: String?

    /// `model: ` and the card's headline, its first part in bold.
    func headline(_ model: String, _ card: ViewCard) -> String {
        var line = ""
        for (index, part) in card.headline.enumerated() {
            let text: String
            switch part {
            case .text(let words): text = Terminal.safe(words)
            case .value(let value): text = Terminal.safe(human(value))
            }
            line += index == 0 ? Terminal.paint("\(model): \(text)", .bold) : text
        }
        return line.isEmpty ? Terminal.paint(model, .bold) : line
    }

    /// A view value for people (`ViewCard.words(for:zone:)`).
    func human(_ value: JSON) -> String { ViewCard.words(for: value, zone: zone) }
}

struct RebuildCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebuild",
        abstract: "Rebuild read models from scratch into a shadow copy, report what changes, and swap atomically.",
        discussion: """
            Folds the whole log again into a new generation of every model while appends go on, compares \
            every subject's views at --at (default now) with the served ones (in the models named, or all), \
            then catches the new generation up and swaps it in in one transaction: readers see the old models \
            or the new, never half. With --policy the new generation is built under that policy, which \
            becomes the store's. With --dry-run nothing is written: the report says exactly who would \
            change, field by field.

            With --cluster every node rebuilds its store into a new generation and reports its \
            partitions' changes; once all are ready, the policy becomes the cluster's and each node \
            swaps its generation in.

            Examples:
              ledger rebuild --policy Schemas/policies/photolala.json --dry-run
              ledger rebuild entitlement --at 2026-03-05T00:00:00Z --json
              ledger rebuild
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Models whose changes to report (default: all; every model is rebuilt).")
    var models: [String] = []

    @Option(help: "A policy document, or a built-in pack by name (careguide…), to build under (default: the store's).")
    var policy: String?

    @Flag(help: "Report what would change; change nothing.")
    var dryRun = false

    @Option(help: "The time views are compared at (RFC 3339; default: now).")
    var at: String?

    @Option(help: "At most this many changes listed in the human output (the summary counts them all).")
    var limit = 50

    @OptionGroup var cluster: ClusterOptions

    func validate() throws {
        if let at { _ = try parseTime(at, option: "--at") }
    }

    func run() throws {
        let t = try at.map { try parseTime($0, option: "--at") } ?? Timestamp.now()
        let chosen = try policy.map { try readPolicy($0, json: global.json) }
        if let url = try cluster.url(global) {
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            let report = dryRun ? try client.rebuildDryRun(models, policy: chosen, at: t) : try client.rebuild(models, policy: chosen, at: t)
            // The nodes that did not switch (the rebuild is recorded: they follow by themselves).
            var missed: [(node: String, error: String)] = []
            if case .object(let o) = report, case .object(let nodes)? = o["nodes"] {
                for node in nodes.members {
                    if case .object(let answer) = node.value, case .string(let error)? = answer["error"] { missed.append((node.key, error)) }
                }
            }
            let unswitched = CommandFailure.failure("the rebuild is recorded, but \(counted(missed.count, "node")) did not switch; "
                + "\(missed.count == 1 ? "it follows by itself" : "they follow by themselves") (see `ledger stats --cluster`)")
            if global.json {
                print(report.text)
                if !missed.isEmpty { throw unswitched }
                return
            }
            guard case .object(let o) = report, case .array(let list)? = o["changes"] else { return }
            let changes = list.compactMap { item -> ViewChange? in
                guard case .object(let c) = item, case .string(let subject)? = c["subject"], case .string(let model)? = c["model"],
                      case .string(let field)? = c["field"] else { return nil }
                return ViewChange(subject: Terminal.safe(subject), model: model, field: field, from: c["from"] ?? .null, to: c["to"] ?? .null)
            }
            var summary: [String: [String: Int]] = [:]
            if case .object(let fields)? = o["summary"] {
                for field in fields.members {
                    guard case .object(let counts) = field.value else { continue }
                    for count in counts.members { if case .number(let n) = count.value { summary[field.key, default: [:]][count.key] = Int(n.int64 ?? 0) } }
                }
            }
            func hash(_ key: String) -> String {
                guard case .object(let p)? = o["policy"], case .string(let hash)? = p[key] else { return "?" }
                return String(hash.prefix(12)) + "…"
            }
            print("\(dryRun ? "Dry run" : "Rebuilt") over the cluster, views compared at \(t): policy \(hash("from")) → \(hash("to")).")
            if changes.isEmpty { print("No view changes.") } else { printChanges(changes, summary: summary) }
            print("")
            guard !dryRun else {
                print("Nothing was changed (--dry-run). Run without --dry-run to rebuild every node and switch them in together.")
                return
            }
            if case .object(let nodes)? = o["nodes"] {
                for node in nodes.members {
                    if case .object(let answer) = node.value, let caughtUp = answer["caughtUp"] {
                        print("Node \(Terminal.safe(node.key)) switched in, with \(AuditChange.words(caughtUp)) events appended meanwhile.")
                    }
                }
            }
            for (node, error) in missed {
                FileHandle.standardError.write(Data("Node \(Terminal.safe(node)) did not switch: \(Terminal.safe(error))\n".utf8))
            }
            if !missed.isEmpty { throw unswitched }
            return
        }
        let ledger = try global.openLedger()
        defer { ledger.close() }
        let before = try ledger.policy()
        let progress = ProgressBar(enabled: !global.json)
        let result = Result { () throws(LedgerError) -> RebuildReport in
            try ledger.rebuild(models, policy: chosen, dryRun: dryRun, at: t) { step in progress.show(step) }
        }
        progress.clear()
        let report: RebuildReport
        switch result {
        case .success(let built):
            report = built
        case .failure(let error):
            // An unknown model name is a usage error.
            throw error.code == .unknownModel ? CommandFailure.input(error.message) : error
        }
        if global.json {
            print(report.json.text)
            return
        }
        let after = chosen ?? before
        let rate = report.foldSeconds > 0 ? Double(report.events) / report.foldSeconds : 0
        print("\(dryRun ? "Dry run" : "Rebuilt") \(report.models.joined(separator: ", ")): folded \(counted(report.events, "event")) in \(String(format: "%.2f", report.foldSeconds)) s (\(formatCount(Int(rate))) events/s).")
        print("Policy \(Terminal.safe(before.name)) v\(before.version) (\(report.policyFrom.prefix(12))…) → \(Terminal.safe(after.name)) v\(after.version) (\(report.policyTo.prefix(12))…); views compared at \(t), in \(String(format: "%.2f", report.compareSeconds)) s.")
        // A rebuild makes a whole new generation: the models not named are rebuilt with the
        // named ones, under the same policy, so none is left stale.
        let others = ledger.modelNames.filter { !report.models.contains($0) }
        if !dryRun && !others.isEmpty {
            print("The other models (\(others.joined(separator: ", "))) were rebuilt with \(report.models.count == 1 ? "it" : "them"), under the same policy: none is stale; their changes are not listed.")
        }
        for name in report.notCompared {
            print("The served \(name) model was built by another version, whose states this ledger cannot read: its views were not compared.")
        }
        if report.changes.isEmpty {
            if report.notCompared.count < report.models.count { print(report.notCompared.isEmpty ? "No view changes." : "No view changes in the models compared.") }
        } else {
            printChanges(report.changes, summary: report.summary)
        }
        print("")
        if dryRun {
            print("Nothing was changed (--dry-run). Run without --dry-run to swap the new build in.")
        } else {
            // The fold's time above is not the whole rebuild: say what writing took.
            let meanwhile = report.caughtUp > 0 ? ", with \(report.caughtUp) events appended meanwhile" : ""
            let total = report.foldSeconds + report.writeSeconds
            let overall = total > 0 ? Double(report.events) / total : 0
            print("Swapped in\(meanwhile): the new states written and the old deleted in \(String(format: "%.2f", report.writeSeconds)) s; folding and writing "
                  + "\(String(format: "%.2f", total)) s (\(Int(overall)) events/s).")
        }
    }

    /// The changes as a table (at most `limit` rows) and the summary's counts, as `rebuild`
    /// prints them for a store and for a cluster.
    private func printChanges(_ changes: [ViewChange], summary: [String: [String: Int]]) {
        let subjects = Set(changes.map(\.subject)).count
        print("")
        print("\(counted(changes.count, "field change")) in \(counted(subjects, "subject")):")
        if limit > 0 {
            var rows = [["SUBJECT", "MODEL", "FIELD", "FROM", "TO"]]
            for change in changes.prefix(limit) {
                rows.append([change.subject, change.model, change.field, words(change.from), words(change.to)])
            }
            printTable(rows, indent: "  ")
        }
        if changes.count > limit { print("  … \(limit > 0 ? "and \(formatCount(changes.count - limit)) more" : "not listed") (--limit N, or --json for all)") }
        print("")
        print("Summary:")
        var summaryRows: [[String]] = []
        // A field of identifiers (a device id) has a transition per customer: the most
        // common eight are shown, and how many more there are. By count, then by name
        // (bytes): the same order on every run; no value cut.
        for field in summary.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            let transitions = (summary[field] ?? [:]).sorted { a, b in a.value != b.value ? a.value > b.value : a.key.utf8.lexicographicallyPrecedes(b.key.utf8) }
            for (transition, count) in transitions.prefix(8) { summaryRows.append([field, transition, formatCount(count)]) }
            if transitions.count > 8 {
                let rest = transitions.dropFirst(8)
                summaryRows.append([field, "… \(counted(rest.count, "more transition")) (--json for all)", formatCount(rest.reduce(0) { $0 + $1.value })])
            }
        }
        printTable(summaryRows, indent: "  ", rightAligned: [2])
    }

    /// A changed value for people, whole: strings bare, null as –.
    private func words(_ value: JSON) -> String { AuditChange.words(value) }
}

struct DueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "due",
        abstract: "What falls due in a window: reminders, alerts and queued deletions, across subjects.",
        discussion: """
            Lists each item that falls due at --from ≤ at < --to, sorted by (at, subject, kind, detail), \
            from a time-ordered index the appends keep (never a scan of every subject): trialEndingSoon \
            (the policy's notifications.trialEndingLeadHours before a free trial ends), paymentFailed (the \
            first failed renewal of a billing issue) and deletionQueued (when a deletion falls due). Each item \
            is decided on the subject's events by its time: a future one is a prediction a late fact can move \
            or remove. The retention e-mails and tier changes of SPEC §4 are not listed yet.

            Examples:
              ledger due --from 2026-11-21T00:00:00Z --to 2026-11-22T00:00:00Z
              ledger due --from 2026-11-21T00:00:00Z --to 2026-11-28T00:00:00Z --json
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "The window's start, inclusive (RFC 3339).")
    var from: String

    @Option(help: "The window's end, exclusive (RFC 3339).")
    var to: String

    func validate() throws {
        let start = try parseTime(from, option: "--from")
        let end = try parseTime(to, option: "--to")
        guard start < end else { throw ValidationError("--from must be before --to") }
    }

    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        let start = try parseTime(from, option: "--from"), end = try parseTime(to, option: "--to")
        let items: [DueItem]
        if let url = try cluster.url(global) {
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            items = try client.dueItems(from: start, to: end)
        } else {
            let ledger = try global.openLedger()
            defer { ledger.close() }
            items = try ledger.due(from: start, to: end)
            if let model = try ledger.stats().models.first(where: { $0.name == DueModel.name }), model.stale {
                Terminal.warn(Terminal.paint("ledger: warning:", .yellow, stderr: true)
                              + " the due model is stale (\(model.staleReason ?? "run `ledger rebuild`")): the list may not follow the current rules")
            }
        }
        if global.json {
            print(DueItem.json(items, from: start, to: end).text)
            return
        }
        print(Terminal.paint("\(counted(items.count, "item")) due at \(start) ≤ at < \(end)", .bold))
        guard !items.isEmpty else { return }
        printTable([["AT", "SUBJECT", "KIND", "DETAIL"]] + items.map { item in
            [item.at.description, item.subject, item.kind, item.detail.members.map { "\($0.key)=\(StatusCard(zone: nil).human($0.value))" }.joined(separator: " ")]
        })
    }
}

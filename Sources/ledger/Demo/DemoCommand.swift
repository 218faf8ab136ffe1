import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerDemo
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Build a realistic store that shows every rule, then summarise it and audit three customers.",
        discussion: """
            Generates --subjects customers' histories over the 18 months before --now: trials that convert \
            or lapse, monthly and yearly plans, cancellations, billing failures that recover or lapse, \
            refunds (some recorded days late, some reversed), upgrades, support grants, family members, \
            devices that verify offline, recovery passes, daily sessions around local midnight in seven \
            time zones, collections near the free limits, inbox traffic, maintenance, security flags, and \
            deletion requests (some cancelled, some failing a step and retried). Each event keeps a \
            realistic recordedAt (seconds after it happened; hours for an offline app; days for a late \
            refund), so the store is appended in recorded order, with the read models built as it goes.

            Then it prints how many customers are in each plan state and retention tier at --now, the \
            limits, deletions, access and the next 24 hours of the due list, the events by type, and the \
            audit of three telling customers. The same --seed and --now always give the same store: \
            running it again appends nothing. The store must be new or one this demo built with the \
            same options. --policy builds it under another policy (`--policy stampbook-soft`: a soft \
            deletion mode honours the cancellations).

            Examples:
              ledger demo --store demo.lmdb
              ledger demo --store big.lmdb --subjects 1000000 --seed 7 \\
                --now 2026-11-21T00:00:00Z
              ledger demo --store soft.lmdb --policy stampbook-soft    (a store of its own)
              ledger status customer-17 --store demo.lmdb
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "How many customers to generate.")
    var subjects = 10_000

    @Option(help: "The generator's seed.")
    var seed: UInt64 = 42

    @Option(help: "The demo's present moment (RFC 3339; default: now).")
    var now: String?

    @Option(help: "How many telling customers to audit at the end (0: none).")
    var audits = 3

    @Option(help: "The policy to build a new store under: a file, or a built-in pack's name (default: reference).")
    var policy: String?

    func validate() throws {
        guard subjects > 0 else { throw ValidationError("--subjects must be at least 1") }
        guard subjects <= Int(UInt32.max) else { throw ValidationError("--subjects must be at most \(UInt32.max)") }
        guard audits >= 0 else { throw ValidationError("--audits must be 0 or more") }
        if let now { _ = try parseTime(now, option: "--now") }
    }

    func run() throws {
        let present = try now.map { try parseTime($0, option: "--now") } ?? Timestamp.now()
        let clock = ContinuousClock()
        let started = clock.now
        let progress = ProgressBar(enabled: !global.json)
        let asked = try policy.map { try readPolicy($0, json: global.json) }
        let ledger = try global.openLedger(create: true, policy: asked)
        defer { ledger.close() }
        // A store built before keeps its policy: another one needs a store of its own.
        if let asked, try ledger.policy() != asked {
            throw CommandFailure.failure("the store at \(global.storePath) was built under the policy \(try ledger.policy().name), not \(asked.name); "
                                         + "build the demo under another policy into a new store (--store \(asked.name).lmdb) or remove this one")
        }

        let generator = DemoGenerator(subjects: subjects, seed: seed, now: present.milliseconds)
        let order = generator.recordedOrder { done in progress.update("planning", done: done, total: subjects, unit: "customers") }
        let appendStarted = clock.now
        let outcome = Result { () throws(LedgerError) -> DemoGenerator.Appended in
            try generator.append(order, to: ledger.log) { done in progress.update("appending", done: done, total: order.count) }
        }
        let appended: DemoGenerator.Appended
        switch outcome {
        case .success(let result):
            appended = result
        case .failure(let error):
            progress.clear()
            guard error.code == .idConflict else { throw error }
            throw CommandFailure.failure("the store at \(global.storePath) already holds other events (another demo, built with other --subjects, --seed or --now, or a store of your own); the demo builds its own store: delete it (rm -rf \(global.storePath)) or pass another --store")
        }
        let appendSeconds = (clock.now - appendStarted).seconds
        let summary = try DemoSummary(ledger: ledger, at: present) { done in progress.update("summarising", done: done, total: subjects, unit: "customers") }
        progress.clear()
        let telling = Array(generator.telling().prefix(audits))
        let reports = try telling.map { try ledger.audit(of: DemoHistory.subject($0.index), at: present, knownAt: nil) }
        let totalSeconds = (clock.now - started).seconds

        if global.json {
            print(JSON.object([
                ("store", .string(global.storePath)),
                ("subjects", .int(subjects)),
                ("seed", .uint(seed)),
                ("now", .time(present)),
                ("events", .int(order.count)),
                ("appended", .int(appended.summary.appended)),
                ("duplicates", .int(appended.summary.duplicates)),
                ("seconds", .double(totalSeconds)),
                ("appendSeconds", .double(appendSeconds)),
                ("planStates", summary.json(summary.planStates)),
                ("rules", summary.json(summary.rules)),
                ("tiers", summary.json(summary.tiers)),
                ("badges", summary.json(summary.badges)),
                ("access", summary.json(summary.access)),
                ("limits", summary.json(summary.limits)),
                ("deletions", summary.json(summary.deletions)),
                ("cancellationsHonoured", .int(summary.cancellationsHonoured)),
                ("cancelledIfSoft", summary.cancelledIfSoft.map { .int($0) } ?? .null),
                ("existingUserGrace", summary.graceEnds.milliseconds > 0
                    ? .object([("ends", .time(summary.graceEnds)), ("at", .time(summary.graceSeenAt)),
                               ("inside", .int(summary.insideGrace)), ("overAFreeLimit", .int(summary.overLimitsInsideGrace))])
                    : .null),
                ("dueNext24h", summary.json(summary.dueNext24h)),
                ("eventsByType", summary.json(DemoSummary.mostFirst(appended.types))),
                ("telling", .array(telling.map { .object([("subject", .string(DemoHistory.subject($0.index))), ("why", .string($0.why))]) })),
            ]).text)
            return
        }

        let first = Timestamp(milliseconds: present.milliseconds - DemoHistory.span)
        print(wrapped("Demo store \(global.storePath):", prose: "\(formatCount(subjects)) customers, \(formatCount(order.count)) events from \(first.date) to \(present.date) (seed \(seed), now \(present))."))
        let rate = appendSeconds > 0 ? Int(Double(appended.summary.appended) / appendSeconds) : 0
        var line = "Appended \(formatCount(appended.summary.appended)) in recorded order in \(formatDuration(appendSeconds))"
        if appended.summary.appended > 0 { line += " (\(formatCount(rate)) events/s, read models built as it went)" }
        if appended.summary.duplicates > 0 { line += "; \(formatCount(appended.summary.duplicates)) were already there" }
        print(wrapped("", prose: line + "; \(formatDuration(totalSeconds)) in all."))
        print("")
        print(summary.render(at: present, store: global.storePath))
        print("")
        print(Terminal.paint("Events by type", .bold))
        let types = DemoSummary.mostFirst(appended.types)
        // Two columns where they fit the terminal, else one.
        let half = (types.count + 1) / 2
        var rows: [[String]] = []
        for i in 0..<half {
            var row = [types[i].0, formatCount(types[i].1)]
            if i + half < types.count { row += ["", types[i + half].0, formatCount(types[i + half].1)] }
            rows.append(row)
        }
        if (tableLines(rows, indent: "  ", rightAligned: [1, 4]).map(\.count).max() ?? 0) > Terminal.columns {
            rows = types.map { [$0.0, formatCount($0.1)] }
        }
        printTable(rows, indent: "  ", rightAligned: [1, 4])
        for (pick, report) in zip(telling, reports) {
            print("")
            print(Terminal.paint("── \(DemoHistory.subject(pick.index)): \(pick.why) ──", .bold))
            print(AuditCommand.render(report))
        }
        print("")
        print(wrapped("Next:", ["`ledger status SUBJECT --store \(global.storePath)`,", "`ledger audit SUBJECT --store \(global.storePath)`,",
                                "`ledger verify --store \(global.storePath)`."], separator: " "))
    }

}

/// What the demo store holds at its present: customers per plan state (and the rule that
/// decided it), per retention tier and per badge count, read from the served read models.
struct DemoSummary {
    static let planOrder = ["guest", "free", "trial", "pro", "pro_grace"]
    static let tierOrder = ["active", "free", "grace", "browseOnly", "archived", "pendingDeletion", "deleted"]

    /// planState → rule → customers.
    private(set) var byPlanAndRule: [String: [String: Int]] = [:]
    private(set) var tiers: [(String, Int)] = []
    private(set) var badges: [(String, Int)] = []
    /// "kind state" → customers at warning or blocked, by kind then state.
    private(set) var limits: [(String, Int)] = []
    /// Deletion state → customers, deletions begun only.
    private(set) var deletions: [(String, Int)] = []
    /// Customers with a device, in a session, unable to start one; and the signals' totals.
    private(set) var access: [(String, Int)] = []
    /// Due kind → items in the 24 hours from the present.
    private(set) var dueNext24h: [(String, Int)] = []
    /// Deletions the customer cancelled that the policy honoured, and (under a hard mode) how
    /// many a soft mode would cancel: a dry rebuild under `stampbook-soft`'s deletion section.
    private(set) var cancellationsHonoured = 0
    private(set) var cancelledIfSoft: Int?
    /// The existing users' limits grace: when it ends, the moment counted (the present, or the
    /// grace's last second once it is over), customers inside it, and those of them over a free limit.
    private(set) var graceEnds = Timestamp(milliseconds: 0)
    private(set) var graceSeenAt = Timestamp(milliseconds: 0)
    private(set) var insideGrace = 0
    private(set) var overLimitsInsideGrace = 0
    /// The models the policy switches off (its section missing).
    private(set) var off: [String] = []
    static let deletionOrder = ["requested", "inProgress", "failed", "completed"]

    /// Customers per plan state, in the plans' order.
    var planStates: [(String, Int)] {
        Self.ordered(byPlanAndRule.mapValues { $0.values.reduce(0, +) }, Self.planOrder)
    }

    /// Customers per deciding rule, most first.
    var rules: [(String, Int)] {
        Self.mostFirst(byPlanAndRule.values.reduce(into: [:]) { total, rules in total.merge(rules, uniquingKeysWith: +) })
    }

    init(ledger: Ledger, at t: Timestamp, progress: (Int) -> Void) throws {
        var seen = 0
        var viewed: Set<String> = []
        func counted() {
            seen += 1
            if seen % 4096 == 0 { progress(seen / 3) }
        }
        try ledger.forEachView(of: EntitlementModel.self, at: t) { _, view in
            byPlanAndRule[view.planState.rawValue, default: [:]][view.reason.rule, default: 0] += 1
            counted()
        }
        var tiers: [String: Int] = [:]
        try ledger.forEachView(of: RetentionModel.self, at: t) { _, view in
            viewed.insert("retention")
            tiers[view.tier.rawValue, default: 0] += 1
            counted()
        }
        var badges: [String: Int] = [:]
        try ledger.forEachView(of: BadgeModel.self, at: t) { _, view in
            badges[view.count >= 3 ? "3+" : String(view.count), default: 0] += 1
            counted()
        }
        var limits: [String: Int] = [:]
        try ledger.forEachView(of: LimitsModel.self, at: t) { _, view in
            viewed.insert("limits")
            for (kind, entry) in view.kinds where entry.state != .ok { limits["\(kind) \(entry.state.rawValue)", default: 0] += 1 }
        }
        var deletions: [String: Int] = [:]
        try ledger.forEachView(of: DeletionModel.self, at: t) { _, view in
            viewed.insert("deletion")
            if view.state != .none { deletions[view.state.rawValue, default: 0] += 1 }
            if view.rule == "deletion.softGraceDays" { cancellationsHonoured += 1 }
        }
        let policy = try ledger.policy()
        if policy.deletion?.mode == .hard, let soft = Policy.pack(named: "stampbook-soft")?.deletion {
            // What a soft mode would change: the rebuild a user would run, dry.
            var variant = policy
            variant.deletion = soft
            let report = try ledger.rebuild([DeletionModel.name], policy: variant, dryRun: true, at: t)
            cancelledIfSoft = Set(report.changes.filter { $0.field == "state" && $0.to == .string("none") }.map(\.subject)).count
        }
        if let limits = policy.limits {
            // The existing users' grace: now, or at its last moment when it is over.
            graceEnds = limits.effectiveAt.adding(days: limits.existingUserGraceDays)
            graceSeenAt = min(t, graceEnds.adding(seconds: -1))
            try ledger.forEachView(of: LimitsModel.self, at: graceSeenAt) { _, view in
                guard view.unlimited == .existingUserGrace else { return }
                insideGrace += 1
                if view.kinds.contains(where: { kind, entry in limits.free[kind].map { entry.count > $0 } ?? false }) { overLimitsInsideGrace += 1 }
            }
        }
        var access: [String: Int] = [:]
        try ledger.forEachView(of: AccessModel.self, at: t) { _, view in
            viewed.insert("access")
            guard view.current.deviceId != nil else { return }
            access["withADevice", default: 0] += 1
            if view.current.sessionActive { access["inASession", default: 0] += 1 }
            if !view.current.canStartSession { access["cannotStartASession", default: 0] += 1 }
            access["shortSessions", default: 0] += Int(view.signals.shortSessions)
            access["bulkUsage", default: 0] += Int(view.signals.bulkUsage)
            access["subscribeCancelCycles", default: 0] += Int(view.signals.subscribeCancelCycles)
            access["clockTampering", default: 0] += Int(view.signals.clockTampering)
        }
        // A model the policy switches off answers no one (SPEC §4: its section is missing).
        off = ["retention", "limits", "deletion", "access"].filter { !viewed.contains($0) }
        self.access = Self.ordered(access, ["withADevice", "inASession", "cannotStartASession", "shortSessions", "bulkUsage",
                                            "subscribeCancelCycles", "clockTampering"])
        var due: [String: Int] = [:]
        for item in try ledger.due(from: t, to: t.adding(seconds: 86_400)) { due[item.kind, default: 0] += 1 }
        dueNext24h = Self.ordered(due, ["trialEndingSoon", "paymentFailed", "retentionEmail", "tierChanged", "deletionQueued"])
        self.tiers = Self.ordered(tiers, Self.tierOrder)
        self.badges = Self.ordered(badges, ["0", "1", "2", "3+"])
        self.limits = limits.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        self.deletions = Self.ordered(deletions, Self.deletionOrder)
    }

    /// Counts, largest first (ties by name).
    static func mostFirst(_ counts: [String: Int]) -> [(String, Int)] {
        counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private static func ordered(_ counts: [String: Int], _ order: [String]) -> [(String, Int)] {
        order.map { ($0, counts[$0] ?? 0) } + counts.filter { !order.contains($0.key) }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    func json(_ counts: [(String, Int)]) -> JSON { .object(counts.map { ($0.0, .int($0.1)) }) }

    /// Three tables: plan states with their rules, retention tiers, badge counts.
    func render(at t: Timestamp, store: String) -> String {
        var lines: [String] = []
        // Each plan's deciding rules one per row, most first; the tiers beside the plans where
        // both fit the terminal, else below them.
        var left: [[String]] = [["Plan state", "", "decided by"]]
        for (plan, count) in planStates {
            let rules = (byPlanAndRule[plan] ?? [:]).sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { "\($0.key) \(formatCount($0.value))" }
            left.append([plan, formatCount(count), rules.first ?? ""])
            for rule in rules.dropFirst() { left.append(["", "", rule]) }
        }
        let right = [["Retention tier", ""]] + tiers.map { [$0.0, formatCount($0.1)] }
        let leftLines = tableLines(left, indent: "  ", rightAligned: [1])
        let rightLines = tableLines(right, indent: "", rightAligned: [1])
        let width = (leftLines.map { $0.count }.max() ?? 0) + 4
        lines.append(Terminal.paint("Customers at \(t)", .bold))
        if width + (rightLines.map(\.count).max() ?? 0) <= Terminal.columns {
            for i in 0..<max(leftLines.count, rightLines.count) {
                let l = i < leftLines.count ? leftLines[i] : ""
                let r = i < rightLines.count ? rightLines[i] : ""
                let line = r.isEmpty ? l : l.padding(toLength: width, withPad: " ", startingAt: 0) + r
                lines.append(i == 0 ? Terminal.paint(line, .dim) : line)
            }
        } else {
            for (i, line) in leftLines.enumerated() { lines.append(i == 0 ? Terminal.paint(line, .dim) : line) }
            lines.append("")
            for (i, line) in rightLines.enumerated() { lines.append(i == 0 ? Terminal.paint("  " + line, .dim) : "  " + line) }
        }
        lines.append("")
        lines.append(wrapped("Badge count", badges.map { "\($0.0): \(formatCount($0.1))" }))
        lines.append(wrapped("Free-tier limits", limits.isEmpty ? ["everyone within them"] : limits.map { "\($0.0): \(formatCount($0.1))" }))
        if graceEnds.milliseconds > 0 {
            lines.append(wrapped("Existing-user grace", prose: "until \(graceEnds.date): \(formatCount(insideGrace)) customers inside it "
                                 + (graceSeenAt < t ? "on its last day" : "now") + ", \(formatCount(overLimitsInsideGrace)) of them over a free limit"))
        }
        lines.append(wrapped("Deletions", deletions.map { "\($0.0): \(formatCount($0.1))" }
                             + (cancelledIfSoft == nil ? ["cancelled (honoured): \(formatCount(cancellationsHonoured))"] : [])))
        if let cancelledIfSoft {
            // The command stays on a line of its own, to be copied whole.
            lines.append(wrapped("", prose: "\(formatCount(cancelledIfSoft)) cancelled requests not honoured (deletion.mode hard); a soft mode would:"))
            lines.append("  ledger rebuild deletion --policy stampbook-soft --dry-run \\\n    --at \(t) --store \(store)")
        }
        let devices = Dictionary(access, uniquingKeysWith: +)
        lines.append(wrapped("Access", prose: "\(formatCount(devices["withADevice"] ?? 0)) with a device, \(formatCount(devices["inASession"] ?? 0)) in a session, "
                             + "\(formatCount(devices["cannotStartASession"] ?? 0)) used today's free session; signals: short sessions \(formatCount(devices["shortSessions"] ?? 0)), "
                             + "bulk usage \(formatCount(devices["bulkUsage"] ?? 0)), subscribe-cancel cycles \(formatCount(devices["subscribeCancelCycles"] ?? 0)), "
                             + "clock tampering \(formatCount(devices["clockTampering"] ?? 0))"))
        lines.append(wrapped("Due in the next 24 h", dueNext24h.map { "\($0.0): \(formatCount($0.1))" }))
        lines.append("  ledger due --from \(t) --to \(t.adding(seconds: 86_400)) \\\n    --store \(store)")
        if !off.isEmpty {
            lines.append(wrapped("Off under this policy", prose: "\(off.joined(separator: ", ")): its sections are missing, so their counts above are empty"))
        }
        return lines.joined(separator: "\n")
    }
}

extension JSON {
    /// The string, if this is one.
    var stringValue: String? { if case .string(let s) = self { s } else { nil } }
}

extension Timestamp {
    /// The UTC date, `YYYY-MM-DD`.
    var date: String { String(description.prefix(10)) }
}

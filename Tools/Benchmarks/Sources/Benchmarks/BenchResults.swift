import Foundation
@_spi(Storage) import LedgerDemo

/// The figures of one run, by the names `bench --json` prints, with the targets they are
/// held to.
struct BenchResults {
    private(set) var figures: [String: Double] = [:]
    /// Bytes per event of the SQLite peer's database and WAL (shown, not a target).
    var sqliteBytesPerEvent: Double?
    /// The ledger store's bytes per event by table (shown, not a target).
    var storageByTable: [(table: String, bytesPerEvent: Double)] = []
    /// Bytes written (handed to the kernel) per event by the append cases (shown, not a target).
    var writtenPerEvent: [String: Double] = [:]
    /// Events and transactions of the group-commit case.
    var groupTransactions: (events: Int, transactions: Int)?
    /// The mean number of items in a one-day due window.
    var dueItems: Double?
    /// How many events the import.heapMiB cases imported.
    var importEvents: Int?
    /// How many events the cluster cases appended in batches.
    var clusterEvents: Int?
    /// The long-history cases' own figures, for their notes.
    var longHistory: LongHistory.Figures?

    subscript(name: String) -> Double? {
        get { figures[name] }
        set { figures[name] = newValue }
    }

    /// A target: a figure (or a ratio of two) that must be at least, or at most, a bound.
    struct Target {
        var what: String
        var value: Double
        var bound: Double
        var atLeast: Bool
        var unit: String

        var met: Bool { atLeast ? value >= bound : value <= bound }
    }

    /// Every target whose figures this run measured.
    var targets: [Target] {
        var targets: [Target] = []
        func ratio(_ what: String, _ a: String, _ b: String, atLeast bound: Double) {
            guard let x = figures[a], let y = figures[b], y > 0 else { return }
            targets.append(Target(what: what, value: x / y, bound: bound, atLeast: true, unit: "×"))
        }
        func figure(_ what: String, _ name: String, _ bound: Double, atLeast: Bool, unit: String) {
            guard let x = figures[name] else { return }
            targets.append(Target(what: what, value: x, bound: bound, atLeast: atLeast, unit: unit))
        }
        ratio("ledger append / SQLite append", "append.ledger", "append.sqlite", atLeast: 1.5)
        ratio("ledger append / SQLite append with read models", "append.ledger", "append.sqliteModels", atLeast: 3)
        ratio("ledger append / its raw layout (shown)", "append.ledger", "append.rawLayout", atLeast: 0)
        if let x = writtenPerEvent["append.ledger"], let y = writtenPerEvent["append.rawLayout"], y > 0 {
            targets.append(Target(what: "bytes the ledger writes per event / its raw layout's", value: x / y, bound: 1, atLeast: false, unit: "×"))
        }
        ratio("ledger append / the facts alone", "append.ledger", "append.factsOnly", atLeast: 0.6)
        for model in BenchCommand.modelCases {
            ratio("the facts and \(model.dropFirst("append.model.".count)) alone / the facts alone (shown)", model, "append.factsOnly", atLeast: 0)
        }
        ratio("ledger rebuild / SQLite-fed rebuild", "rebuild.ledger", "rebuild.sqlite", atLeast: 3)
        ratio("ledger rebuild on every core / on one thread (shown)", "rebuild.ledger", "rebuild.ledger1", atLeast: 0)
        figure("status p50", "status.p50us", 10, atLeast: false, unit: " µs")
        figure("status p99", "status.p99us", 50, atLeast: false, unit: " µs")
        ratio("group commit / one event per commit", "append.groupCommit", "append.singleCommit", atLeast: 10)
        figure("due list of a one-day window", "due.windowUs", 2_000, atLeast: false, unit: " µs")
        figure("append to a 100,000-event customer / to a 10-event one", "append.longHistory", 1.5, atLeast: false, unit: "×")
        figure("status of a 100,000-event customer / of a 10-event one", "status.longHistory", 2, atLeast: false, unit: "×")
        figure("audit of a 100,000-event customer", "audit.longHistory", 3, atLeast: false, unit: " s")
        figure("audit of 100,000 events / of 10,000", "audit.longHistoryGrowth", 12, atLeast: false, unit: "×")
        ratio("one-event appends beside 4 reading threads / alone", "append.underReadLoad", "append.alone", atLeast: 0.5)
        ratio("append with personal fields / as they are (shown)", "append.personal", "append.plain", atLeast: 0)
        for nodes in ClusterBench.nodeCounts {
            ratio("cluster append, \(nodes) node\(nodes == 1 ? "" : "s") / single-store append (shown)", "cluster.append\(nodes)", "append.ledger", atLeast: 0)
        }
        figure("erase one subject of 100,000 with a key each (shown)", "erase.ms", 0, atLeast: false, unit: " ms")
        if let x = figures["storage.bytesPerEvent"], let y = figures["payload.bytesPerEvent"], y > 0 {
            targets.append(Target(what: "ledger bytes on disk / raw bytes", value: x / y, bound: 1.6, atLeast: false, unit: "×"))
        }
        return targets
    }

    /// The human report: the figures, then each target met or missed.
    func render(events: Int, customers: Int, recordBytes: Double) -> String {
        var lines = ["\(formatCount(events)) events of \(formatCount(customers)) customers, \(Int(recordBytes.rounded())) bytes per record on average; durable commits.", ""]
        var rows: [[String]] = []
        for name in BenchCommand.cases {
            guard let value = figures[name] else { continue }
            let shown: String
            switch name {
            case "status.p50us", "status.p99us": shown = String(format: "%.1f µs", value)
            case "storage.bytesPerEvent", "payload.bytesPerEvent": shown = String(format: "%.0f bytes/event", value)
            case "append.longHistory", "status.longHistory": shown = String(format: "%.2f ×", value)
            case "due.windowUs": shown = String(format: "%.1f µs", value)
            case "audit.longHistory": shown = String(format: "%.2f s", value)
            case "import.heapMiB", "import.heapMiBEvery": shown = String(format: "%.0f MiB", value)
            case "erase.ms": shown = String(format: "%.1f ms", value)
            case _ where name.hasPrefix("cluster.visible"): shown = String(format: "%.1f ms", value)
            default: shown = "\(formatCount(Int(value.rounded()))) events/s"
            }
            var note = ""
            if name == "scan.raw", let rebuild = figures["rebuild.ledger"] {
                note = String(format: "ledger rebuild = %.2f × the raw scan", rebuild / value)
            }
            if name == "append.groupCommit", let group = groupTransactions {
                note = "\(formatCount(group.events)) events in \(formatCount(group.transactions)) transactions"
            }
            if name == "append.sqlite", let bytes = sqliteBytesPerEvent {
                note = String(format: "its database and WAL: %.0f bytes/event", bytes)
            }
            if let long = longHistory {
                switch name {
                case "append.longHistory": note = String(format: "one-event transaction: %.0f µs to 100,000 events, %.0f µs to 10", long.appendLongUs, long.appendShortUs)
                case "status.longHistory": note = String(format: "p50: %.1f µs at 100,000 events, %.1f µs at 10", long.statusLongUs, long.statusShortUs)
                case "audit.longHistory": note = String(format: "10,000 events: %.2f s (× %.1f for 10 × the events)", long.auditMediumSeconds, long.auditLongSeconds / long.auditMediumSeconds)
                default: break
                }
            }
            if name.hasPrefix("cluster.append"), let clusterEvents, let single = figures["append.ledger"], single > 0 {
                let nodes = name.dropFirst("cluster.append".count)
                note = String(format: "%@ node%@ on 3 NATS servers, 3 replicas: %.2f × append.ledger; %@ events in batches of %@", String(nodes), nodes == "1" ? "" : "s",
                              value / single, formatCount(clusterEvents), formatCount(Bench.batch))
            }
            if name.hasPrefix("cluster.visibleP50") { note = "one-event appends, each returned once its node folded it" }
            if name == "append.personal" { note = "the first \(formatCount(Bench.personalEvents)) events, each with meta email and name sealed" }
            if name == "erase.ms" { note = "deletion steps and account.deleted, the key store rewritten without the key; \(formatCount(Bench.eraseSubjects)) subjects, a key each" }
            if name == "due.windowUs", let dueItems { note = String(format: "a one-day window: %.0f items on average", dueItems) }
            if let importEvents {
                if name == "import.heapMiB" { note = "peak heap of `ledger append` of \(formatCount(importEvents)) events in one transaction" }
                if name == "import.heapMiBEvery" { note = "the same with --commit-every \(formatCount(ImportPeak.every))" }
            }
            if let written = writtenPerEvent[name] {
                note += (note.isEmpty ? "" : "; ") + String(format: "writes %.0f bytes/event", written)
            }
            if name == "storage.bytesPerEvent", !storageByTable.isEmpty {
                note = storageByTable.map { String(format: "%@ %.0f", $0.table, $0.bytesPerEvent) }.joined(separator: ", ")
            }
            rows.append([name, shown, note])
        }
        lines += tableLines(rows, indent: "  ", rightAligned: [1])
        if !targets.isEmpty {
            lines += ["", "Floors"]
            lines += tableLines(targets.map { target in
                let value = target.unit == " events/s" ? formatCount(Int(target.value.rounded())) : String(format: target.unit == "×" ? "%.2f" : "%.1f", target.value)
                let bound = target.unit == " events/s" ? formatCount(Int(target.bound)) : String(format: "%g", target.bound)
                return [target.what, value + target.unit, target.bound == 0 ? "" : (target.atLeast ? "≥ " : "≤ ") + bound + target.unit,
                        target.bound == 0 ? "" : (target.met ? "met" : "missed")]
            }, indent: "  ", rightAligned: [1, 2])
        }
        return lines.joined(separator: "\n")
    }
}

import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerDemo
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Cluster) import LedgerCluster
@_spi(Storage) import LedgerStore

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create an empty store with a policy (the reference policy by default).",
        discussion: """
            Creates the store directory (mode 0700) and its files (mode 0600: they hold customers' data), \
            and records the policy its read models are built with. The policy is a JSON document \
            (Schemas/policy.schema.json); Schemas/policies/ has one pack per source app. With \
            --appstore-root, --appstore-bundle-id and --appstore-environment it also records the App \
            Store settings `ledger ingest appstore` and `ledger serve` then use without flags; given \
            only those, it records them in an existing store.

            Examples:
              ledger init --store customers.lmdb
              ledger init --store photos.lmdb --policy photolala
              ledger init --store mine.lmdb --policy my-policy.json
              ledger init --store app.lmdb --appstore-root AppleRootCA-G3.cer \\
                --appstore-bundle-id com.example.app --appstore-environment Production
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .long, help: "A policy document, or a built-in pack by name: reference, handz, photolala, facerecall, careguide, stampbook, stampbook-soft (default: reference).")
    var policy: String?

    @OptionGroup var appStore: AppStoreOptions

    func validate() throws {
        try appStore.validate(required: false)
    }

    func run() throws {
        let path = global.storePath
        let exists = FileManager.default.fileExists(atPath: path + "/data.mdb")
        let appStoreConfiguration = try appStore.configuration()
        // An existing store takes App Store settings alone (for `ledger serve`); its policy
        // changes only by a rebuild.
        if exists && (policy != nil || appStoreConfiguration == nil) {
            throw CommandFailure.failure("a store already exists at \(path); use it, or choose another --store"
                + (policy != nil ? " (a store's policy changes by `ledger rebuild --policy`)" : ""))
        }
        let chosen = exists ? nil : try policy.map { try readPolicy($0, json: global.json) } ?? Policy.reference
        let ledger = try global.openLedger(create: !exists, policy: chosen)
        defer { ledger.close() }
        if let appStoreConfiguration { try ledger.setAppStoreConfiguration(appStoreConfiguration) }
        let recorded = try ledger.policy()
        if global.json {
            print(JSON.object([
                ("store", .string(path)), ("created", .bool(!exists)),
                ("policy", .object([("name", .string(recorded.name)), ("version", .integer(recorded.version)), ("hash", .string(recorded.hash))])),
            ]).text)
        } else if exists {
            print("Recorded the App Store settings in \(Terminal.safe(path)).")
        } else {
            print("Created an empty store at \(Terminal.safe(path)) with policy \(Terminal.safe(recorded.name)) v\(recorded.version).")
        }
    }
}

/// Reads a policy file strictly, or names a built-in pack (`careguide`: SPEC §5) when no such
/// file exists; a file's problems are input errors (exit 2), one per line as
/// `FILE: POINTER: MESSAGE`.
func readPolicy(_ file: String, json: Bool = false) throws -> Policy {
    guard let data = FileManager.default.contents(atPath: file) else {
        if let pack = Policy.pack(named: file) { return pack }
        let names = ([Policy.reference.name] + Policy.packTexts.map(\.name)).joined(separator: ", ")
        throw CommandFailure.input("cannot read the policy file \(file), nor is it a built-in pack (\(names))")
    }
    switch Policy.decode(Array(data)) {
    case .success(let policy):
        return policy
    case .failure(let failure):
        // SPEC §5's input errors: FILE:LINE: POINTER: MESSAGE on stderr, and the list on stdout
        // with --json.
        let problems = failure.violations.map { violation in
            InputProblem(file: file, line: line(of: violation.field, in: Array(data)), pointer: violation.field, message: violation.message)
        }
        Terminal.report(problems)
        if json { print(JSON.object([("errors", .array(problems.map(\.json)))]).text) }
        throw ExitCode(2)
    }
}

/// The line of `text` where the JSON `pointer` leads: its last key found in order after the
/// ones before it (a key that is missing: where its parent is); 1 when none is.
func line(of pointer: String, in text: [UInt8]) -> Int {
    var offset = 0
    var found = 0
    for component in pointer.split(separator: "/") {
        let needle = Array("\"\(component.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~"))\"".utf8)
        guard needle.count <= text.count - offset,
              let start = (offset ... text.count - needle.count).first(where: { text[$0 ..< $0 + needle.count].elementsEqual(needle) }) else { break }
        offset = start + needle.count
        found = start
    }
    return 1 + text[..<found].count { $0 == 0x0A }
}

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Counts, positions, sizes, and each read model's checkpoint and policy.",
        discussion: """
            A model is stale when the version or the policy that built it differs from this ledger's and \
            the store's, or it is behind the log: its answers may not follow the current rules until \
            `ledger rebuild`.

            With --cluster, each node's figures for its store, with the partitions it holds and \
            how far it has folded each.

            Examples:
              ledger stats --store customers.lmdb --json
              ledger stats --cluster nats://127.0.0.1:4222
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        if let url = try cluster.url(global) {
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            let stats = try client.stats()
            if global.json {
                print(stats.text)
                return
            }
            guard case .object(let o) = stats, case .object(let nodes)? = o["nodes"] else { return }
            /// "photolala v1" of a `{name, version}` object, else `–`.
            func policyName(_ json: JSON?) -> String {
                guard case .object(let p)? = json, case .string(let name)? = p["name"] else { return "–" }
                return Terminal.safe(name) + (p["version"].map { " v\($0.serialized())" } ?? "")
            }
            let recorded = o["policy"].flatMap { $0 == .null ? nil : $0 }
            print("Cluster: \(o["partitions"]?.serialized() ?? "?") partitions, stream at sequence \(o["lastSequence"]?.serialized() ?? "?"), "
                  + (recorded.map { "policy \(policyName($0)) (the last rebuild's)" } ?? "each store's own policy (no rebuild over the cluster set one)"))
            var rows = [["NODE", "PARTITIONS", "FOLDED UP TO", "EVENTS", "SUBJECTS", "STALE MODELS", "POLICY"]]
            for node in nodes.members {
                guard case .object(let n) = node.value else { continue }
                var held = 0, folded: Int64 = 0
                if case .object(let partitions)? = n["partitions"] {
                    held = partitions.keys.count
                    folded = partitions.members.compactMap { member -> Int64? in if case .number(let v) = member.value { return v.int64 } else { return nil } }.max() ?? 0
                }
                func count(_ key: String) -> String {
                    if case .number(let v)? = n[key], let value = v.int64 { return formatCount(Int(value)) }
                    return "–"
                }
                var stale = 0
                if case .object(let models)? = n["models"] {
                    stale = models.members.count { if case .object(let m) = $0.value, case .bool(true)? = m["stale"] { true } else { false } }
                }
                rows.append([Terminal.safe(node.key), String(held), String(folded), count("events"), count("subjects"), String(stale), policyName(n["policy"])])
            }
            printTable(rows)
            return
        }
        let ledger = try global.openLedger()
        defer { ledger.close() }
        let all = try ledger.stats()
        let (stats, policy, models) = (all.log, all.policy, all.models)
        if global.json {
            print(all.json.text)
            return
        }
        print("""
            Store          \(Terminal.safe(ledger.log.path))
            Events         \(stats.events)
            Subjects       \(stats.subjects)
            Last position  \(stats.lastPosition)
            Policy         \(Terminal.safe(policy.name)) v\(policy.version) (\(policy.hash.prefix(12))…)
            Size           \(formatBytes(stats.usedBytes)) used of a \(formatBytes(stats.mapSize)) map

            """)
        var rows = [["MODEL", "CHECKPOINT", "POLICY", "VERSION", "STATE"]]
        for model in models {
            let checkpoint = model.checkpoint.map { String($0) } ?? "–"
            let policy = model.policyHash.map { String($0.prefix(12)) + "…" } ?? "–"
            let version = model.version.map { "v\($0)" } ?? "–"
            let state = model.staleReason.map { "stale: \($0)" } ?? (model.rebuilding ? "current (a rebuild is under way or was left unfinished)" : "current")
            rows.append([model.name, checkpoint, policy, version, state])
        }
        printTable(rows)
    }
}

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check the log and every read model.",
        discussion: """
            Walks every event, recomputes its SHA-256 link to its predecessor, and checks the id and \
            (subject, version) indexes both ways. Then folds the whole log afresh and compares every \
            served read model with it, state by state, byte for byte; a stale model (built by another \
            code version or policy) is a problem too. Exits 1 when it finds one.

            With --cluster, checks the stream against the nodes instead: every event of each \
            partition, up to its node's checkpoint, is in that node's store exactly once and in \
            stream order, and each node's read models equal a fresh fold of its store.

            Examples:
              ledger verify --store customers.lmdb
              ledger verify --cluster nats://127.0.0.1:4222
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        if let url = try cluster.url(global) {
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            let found = try client.verify()
            let nodes = found.nodes.sorted { $0.key < $1.key }
            if global.json {
                print(JSON.object([
                    "ok": .bool(found.problems.isEmpty), "events": .integer(Int64(found.events)),
                    "nodes": .object(JSONObject(nodes.map { ($0.key, .integer(Int64($0.value))) })),
                    "problems": .array(found.problems.map { .string($0) }),
                ]).text)
            } else if found.problems.isEmpty {
                print(Terminal.paint("OK", .green) + ": \(counted(found.events, "event")) in the stream, each in exactly one node's store, in order; "
                      + "\(counted(nodes.count, "node")) (" + nodes.map { "\(Terminal.safe($0.key)): \(counted($0.value, "partition"))" }.joined(separator: ", ")
                      + "), each one's read models equal to a fresh fold.")
            } else {
                print(Terminal.paint("FAILED", .red) + ":")
                for problem in found.problems { print("  \(Terminal.safe(problem))") }
            }
            if !found.problems.isEmpty { throw ExitCode(1) }
            return
        }
        try global.requireStore()
        // Opening the ledger reads pages through liblmdb: a damaged one is found first.
        if let problem = try EventLog.checkPages(path: global.storePath) {
            print(global.json ? Self.json(VerifyReport(eventsChecked: 0, problem: problem), models: []).text
                              : Terminal.paint("FAILED", .red) + ": \(problem)")
            throw ExitCode(1)
        }
        let ledger = try global.openLedger()
        defer { ledger.close() }
        let progress = ProgressBar(enabled: !global.json)
        let result = try ledger.verify(checkingPages: false) { step in
            let what = step.phase == .log ? "checking the log" : "rebuilding the models to compare"
            progress.update(what, done: Int(step.done), total: Int(step.total))
        }
        progress.clear()
        let (report, models, ok) = (result.log, result.models, result.isValid)
        if global.json {
            print(Self.json(report, models: models).text)
        } else if let problem = report.problem {
            print(Terminal.paint("FAILED", .red) + " after \(report.eventsChecked) good events: \(Terminal.safe("\(problem)"))")
        } else if !models.isEmpty {
            print("Log OK: \(report.eventsChecked) events. Read models " + Terminal.paint("FAILED", .red) + ":")
            for problem in models { print("  \(Terminal.safe("\(problem)"))") }
        } else {
            print(Terminal.paint("OK", .green) + ": \(report.eventsChecked) events; positions gap-free, hash chain intact, indexes complete; read models (\(ledger.modelNames.joined(separator: ", "))) equal a fresh rebuild.")
            print(Self.words(report.personal))
        }
        if !ok { throw ExitCode(1) }
    }

    static func json(_ report: VerifyReport, models: [ModelProblem]) -> JSON {
        JSON.object([
            ("ok", .bool(report.isValid && models.isEmpty)),
            ("eventsChecked", .uint(report.eventsChecked)),
            ("problem", report.problem.map { p in
                .object([("kind", .string(p.kind.rawValue)), ("position", .uint(p.position)), ("message", .string(p.message))])
            } ?? .null),
            ("models", .array(models.map { p in
                .object([("model", .string(p.model)), ("key", p.key.map(JSON.string) ?? .null), ("message", .string(p.message))])
            })),
            ("personalData", .object([
                ("opened", .uint(report.personal.opened)), ("erased", .uint(report.personal.erased)),
                ("inTheClear", .uint(report.personal.inTheClear)), ("keysDestroyed", .uint(report.personal.keysDestroyed)),
                ("erasedSubjects", .array(report.personal.erasedSubjects.map(JSON.string))),
            ])),
        ])
    }

    /// What verify says of personal data, for an auditor.
    static func words(_ personal: PersonalDataCheck) -> String {
        var text = "Personal data: \(personal.opened) sealed field\(personal.opened == 1 ? "" : "s") open under their subject's key"
        if personal.erasedSubjects.isEmpty {
            text += "; no subject erased."
        } else {
            let count = personal.erasedSubjects.count
            let shown = personal.erasedSubjects.prefix(10).joined(separator: ", ") + (count > 10 ? ", …" : "")
            text += "; \(count) erased subject\(count == 1 ? "" : "s") (\(shown)): \(personal.keysDestroyed) key\(personal.keysDestroyed == 1 ? "" : "s") destroyed, "
                + "none in the key store, no replaced key store on disk; their \(personal.erased) field\(personal.erased == 1 ? "" : "s") read as \"[Deleted User]\"."
        }
        if personal.inTheClear > 0 {
            text += " \(personal.inTheClear) personal field\(personal.inTheClear == 1 ? " was" : "s were") stored in the clear before this store sealed them: restore an export into a new store to seal them."
        }
        return text
    }
}

/// Prints rows as columns padded to their widest cell; the columns in `rightAligned` (numbers)
/// are padded on the left.
/// Prints `rows` as aligned columns, each cell made safe for a terminal (`Terminal.safe`).
func printTable(_ rows: [[String]], indent: String = "", rightAligned: Set<Int> = []) {
    for line in tableLines(rows.map { $0.map(Terminal.safe) }, indent: indent, rightAligned: rightAligned) { print(line) }
}

func formatBytes(_ bytes: Int) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
}

struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "The store's policy document, with its name, version and hash.",
        discussion: """
            The document is the canonical JSON the store keeps; `ledger init --policy FILE` and \
            `ledger rebuild --policy FILE` take it back.

            Examples:
              ledger policy --store demo.lmdb
              ledger policy --json > policy.json
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let log = try global.openLogForReading()
        defer { log.close() }
        let policy = try log.policy() ?? .reference
        let document = policy.json
        if global.json {
            print(JSON.object([("name", .string(policy.name)), ("version", .integer(policy.version)), ("hash", .string(policy.hash)),
                               ("policy", document)]).text)
            return
        }
        print(Terminal.paint("\(Terminal.safe(policy.name)) v\(policy.version)", .bold) + "  sha256 \(policy.hash)")
        print(Terminal.safeLines(document.pretty()))
    }
}

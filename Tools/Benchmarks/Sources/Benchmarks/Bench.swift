import ArgumentParser
import CCallgrind
import Foundation
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerDemo
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore
import Synchronization

@main
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-bench",
        abstract: "Measure the ledger against raw LMDB and an SQLite event store, side by side in one run.",
        discussion: """
            Every case runs in one temporary directory on the same events: the demo's customer \
            histories (100,000 customers, about 1.5 million events; --quick: 20,000 customers, about \
            300,000 events) in recorded order, with durable (fsynced) commits. Compare the ratios: \
            absolute figures drift on shared machines. Tools/Benchmarks/README.md says what each case \
            does and what it is held to.

            Examples:
              Tools/bench --quick
              Tools/bench --case append.ledger --subjects 20000
            """
    )

    @Flag(help: "A smaller run: 20,000 customers.")
    var quick = false

    @Flag(help: "Print the results as JSON.")
    var json = false

    @Option(help: "How many customers' histories to use (default 100,000; --quick 20,000).")
    var subjects: Int?

    @Option(help: "Also write the JSON results to this file.")
    var results: String?

    @Option(name: .customLong("case"), help: "Run only this case and what it needs (for profiling), e.g. rebuild.ledger.")
    var only: String?

    @Option(help: "Events whose read-model writes an append keeps in memory before it stores them (EventLog.Options.modelTailLimit; 0: every append stores its own).")
    var modelTailLimit: Int = EventLog.Options().modelTailLimit

    @Flag(help: "Under callgrind: dump the instruction count of the --case's measured phase alone (Tools/bench --callgrind).")
    var callgrind = false

    @Flag(help: "Also append the events with the facts alone, and once per read model with the facts and that model alone (append.factsOnly, append.model.NAME): what each model costs. With --case, beside that case.")
    var eachModel = false

    /// The import.heapMiB cases' child: appends FILE to a new store at --import-store with
    /// --import-every, and prints its peak heap (KiB).
    @Option(help: .hidden) var importChild: String?
    @Option(help: .hidden) var importStore: String?
    @Option(help: .hidden) var importEvery: Int = 0

    func validate() throws {
        if callgrind && only == nil { throw ValidationError("--callgrind needs a --case") }
        if let subjects, subjects < 100 { throw ValidationError("--subjects must be at least 100") }
        if let only, !Self.cases.contains(only) {
            throw ValidationError("no case named \(only); the cases are \(Self.cases.joined(separator: ", "))")
        }
    }

    static let cases = ["append.raw", "append.rawLayout", "append.ledger", "append.factsOnly", "append.sqlite", "append.sqliteModels", "append.groupCommit",
                        "append.singleCommit", "scan.raw", "rebuild.ledger1", "rebuild.ledger", "rebuild.sqlite", "status.p50us", "status.p99us",
                        "storage.bytesPerEvent", "payload.bytesPerEvent", "append.longHistory", "status.longHistory", "audit.longHistory", "due.windowUs",
                        "import.heapMiB", "import.heapMiBEvery", "append.plain", "append.personal", "erase.ms",
                        "append.alone", "append.underReadLoad",
                        "cluster.append1", "cluster.append2", "cluster.append3",
                        "cluster.visibleP50ms1", "cluster.visibleP50ms2", "cluster.visibleP50ms3",
                        "cluster.visibleP99ms1", "cluster.visibleP99ms2", "cluster.visibleP99ms3"]
        + modelCases

    /// `append.model.NAME` for each read model: the facts and that model alone (run with
    /// `--each-model`, or one with `--case`).
    static let modelCases = ReadModels.all.map { "append.model.\($0.name)" }

    /// The cluster cases, which also run `append.ledger` (their peer) in the same run.
    static let clusterCases = cases.filter { $0.hasPrefix("cluster.") }

    func run() throws {
        if let importChild, let importStore {
            print(try ImportPeak.child(file: importChild, store: importStore, every: importEvery))
            return
        }
        let customers = subjects ?? (quick ? 20_000 : 100_000)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let progress = Progress(enabled: !json)
        defer { progress.clear() }

        progress.update("drafting", done: 0, total: customers, unit: "customers")
        var bench = Bench(root: root, events: Self.dataset(customers: customers), only: only, callgrind: callgrind, eachModel: eachModel, progress: progress)
        bench.modelTailLimit = modelTailLimit
        // 100,000 events whatever the run's size, but on the tiny runs of the benchmark's own tests.
        bench.longEvents = customers >= 1_000 ? 100_000 : customers * 10
        let figures = try bench.run(singles: quick ? 300 : 1_000, perThread: quick ? 20 : 60)
        progress.clear()

        let machine: [(String, JSON)] = [
            ("cores", .integer(Int64(ProcessInfo.processInfo.activeProcessorCount))),
            ("quick", .bool(quick)),
            ("subjects", .integer(Int64(customers))),
            ("events", .integer(Int64(bench.events.count))),
            ("eventBytes", Self.number(bench.meanRecordBytes)),
        ]
        let report = JSON.object(JSONObject([
            ("machine", .object(JSONObject(machine))),
            ("results", .object(JSONObject(figures.figures.sorted { $0.key < $1.key }.map { ($0.key, Self.number($0.value)) }))),
        ])).serialized()
        if let results {
            guard FileManager.default.createFile(atPath: results, contents: Data((report + "\n").utf8)) else {
                throw BenchFailure("could not write the results to \(results)")
            }
        }
        print(json ? report : figures.render(events: bench.events.count, customers: customers, recordBytes: bench.meanRecordBytes))
    }

    /// A figure to one decimal.
    static func number(_ value: Double) -> JSON { JSONNumber((value * 10).rounded() / 10).map(JSON.number) ?? .null }

    /// The demo's customer histories at a fixed present, every event in recorded order.
    static func dataset(customers: Int) -> [EventDraft] {
        let generator = DemoGenerator(subjects: customers, seed: 42, now: Bench.present.milliseconds)
        let order = generator.recordedOrder { _ in }
        return generator.draft(order, 0..<order.count).compactMap { $0?.draft }
    }
}

/// One benchmark run over one set of events, each case in its own store under `root`.
struct Bench {
    /// The present the status views are read at (the demo's histories end before it).
    static let present = Timestamp(milliseconds: 1_795_219_200_000)   // 2026-11-21T00:00:00Z
    static let batch = 1_000
    /// Events of the sealing cases (`append.plain`, `append.personal`).
    static let personalEvents = 200_000
    /// Subjects, each with a key, of the store `erase.ms` erases in.
    static let eraseSubjects = 100_000
    /// Events in the store of `append.underReadLoad`, and the threads reading beside it.
    static let readLoadEvents = 50_000
    static let readers = 4

    let root: URL
    let events: [EventDraft]
    let only: String?
    /// Mark `only`'s measured phase for callgrind.
    let callgrind: Bool
    /// Run the `append.model.NAME` cases too.
    let eachModel: Bool
    let progress: Progress
    /// The long-history cases' long customer's events.
    var longEvents = 100_000
    /// `EventLog.Options.modelTailLimit` of every ledger the run opens.
    var modelTailLimit = EventLog.Options().modelTailLimit

    /// A ledger at `store` with the run's options.
    func openLedger(_ store: String, models: [any ReadModel.Type] = ReadModels.all) throws -> Ledger {
        var options = EventLog.Options()
        options.modelTailLimit = modelTailLimit
        return try Ledger(path: store, models: models, options: options)
    }
    /// The mean size of an event's record in the log, hash included (over the first 10,000).
    let meanRecordBytes: Double

    init(root: URL, events: [EventDraft], only: String?, callgrind: Bool, eachModel: Bool, progress: Progress) {
        self.root = root
        self.events = events
        self.only = only
        self.callgrind = callgrind
        self.eachModel = eachModel
        self.progress = progress
        let sample = events.prefix(10_000)
        let bytes = sample.reduce(0) { $0 + EventRecord.encode($1, version: 1, recordedAt: Bench.present).count + EventRecord.hashSize }
        meanRecordBytes = Double(bytes) / Double(max(sample.count, 1))
    }

    private func wanted(_ names: String...) -> Bool { only.map(names.contains) ?? true }
    private func path(_ name: String) -> String { root.appendingPathComponent(name).path }

    /// The events in batches of `Bench.batch`, made before any clock starts.
    private var batches: [[EventDraft]] {
        stride(from: 0, to: events.count, by: Bench.batch).map { Array(events[$0 ..< min($0 + Bench.batch, events.count)]) }
    }

    func run(singles: Int, perThread: Int) throws -> BenchResults {
        var results = BenchResults()
        var stateBytes: [Int]?
        if wanted("append.raw", "scan.raw", "payload.bytesPerEvent", "storage.bytesPerEvent") {
            let raw = try raw()
            results["append.raw"] = raw.append
            results.writtenPerEvent["append.raw"] = raw.writtenPerEvent
            results["scan.raw"] = raw.scan
            results["payload.bytesPerEvent"] = raw.bytesPerEvent
        }
        if wanted("append.ledger", "append.rawLayout", "cluster.append1", "cluster.append2", "cluster.append3", "rebuild.ledger", "rebuild.ledger1", "status.p50us", "status.p99us", "storage.bytesPerEvent", "due.windowUs",
                  "import.heapMiB", "import.heapMiBEvery") {
            let ledger = try openLedger(path("ledger"))
            defer { ledger.close() }
            let batches = self.batches
            (results["append.ledger"], results.writtenPerEvent["append.ledger"]) = try counting(events.count) {
                try measure("append.ledger", events.count, "ledger append") { done in
                    for (index, batch) in batches.enumerated() {
                        try ledger.log.append(batch)
                        done(index * Bench.batch)
                    }
                    // What the model tail holds at the end is stored too.
                    try ledger.storeModels()
                }
            }
            results["storage.bytesPerEvent"] = Double(ledger.log.environment.info().usedBytes) / Double(events.count)
            results.storageByTable = try storageByTable(ledger.log.environment)
            stateBytes = try PeerFold.all.map { fold in
                let states = try ledger.servedStates(of: fold.name)
                return states.isEmpty ? 0 : states.reduce(0) { $0 + $1.state.count } / states.count
            }
            if wanted("rebuild.ledger1") {
                ledger.setFoldThreads(1)
                results["rebuild.ledger1"] = try measure("rebuild.ledger1", events.count, "ledger rebuild on one thread") { _ in
                    try ledger.rebuild()
                }
                ledger.setFoldThreads(0)
            }
            if wanted("rebuild.ledger") {
                results["rebuild.ledger"] = try measure("rebuild.ledger", events.count, "ledger rebuild on every core") { _ in
                    try ledger.rebuild()
                }
            }
            if wanted("status.p50us", "status.p99us") {
                let (p50, p99) = try statusLatency(ledger)
                results["status.p50us"] = p50
                results["status.p99us"] = p99
            }
            if wanted("due.windowUs") {
                (results["due.windowUs"], results.dueItems) = try dueLatency(ledger)
            }
            if wanted("import.heapMiB", "import.heapMiBEvery") {
                progress.update("importing", done: 0, total: 2, unit: "imports")
                let file = path("import.jsonl")
                let lines = try ImportPeak.export(ledger.log, to: file, events: ImportPeak.events)
                results.importEvents = lines
                results["import.heapMiB"] = try ImportPeak.measure(file: file, store: path("import-whole"), every: 0)
                results["import.heapMiBEvery"] = try ImportPeak.measure(file: file, store: path("import-every"), every: ImportPeak.every)
            }
        }
        if wanted("append.factsOnly") || eachModel {
            (results["append.factsOnly"], results.writtenPerEvent["append.factsOnly"]) = try appendBatches("append.factsOnly", models: [],
                                                                                                            "append, the facts alone")
        }
        for model in ReadModels.all {
            let name = "append.model.\(model.name)"
            guard only == name || eachModel else { continue }
            (results[name], results.writtenPerEvent[name]) = try appendBatches(name, models: [model], "append, the facts and \(model.name) alone")
        }
        if wanted("append.rawLayout") {
            (results["append.rawLayout"], results.writtenPerEvent["append.rawLayout"]) = try rawLayout(stateBytes: stateBytes)
        }
        if wanted("append.sqlite", "rebuild.sqlite") {
            let peer = try SQLitePeer(path: path("peer.sqlite"))
            let recordedAt = Timestamp.now()
            let batches = self.batches
            (results["append.sqlite"], results.writtenPerEvent["append.sqlite"]) = try counting(events.count) {
                try measure("append.sqlite", events.count, "SQLite append") { done in
                    for (index, batch) in batches.enumerated() {
                        try peer.append(batch, recordedAt: recordedAt)
                        done(index * Bench.batch)
                    }
                }
            }
            results.sqliteBytesPerEvent = Double(SQLitePeer.bytesOnDisk(path("peer.sqlite"))) / Double(events.count)
            var read = events.count
            if wanted("rebuild.sqlite") {
                results["rebuild.sqlite"] = try measure("rebuild.sqlite", events.count, "SQLite rebuild") { _ in read = try peer.rebuild() }
            }
            guard read == events.count else {
                throw BenchFailure("the SQLite peer read back \(read) of \(events.count) events; this is a bug in the benchmark")
            }
        }
        if wanted("append.sqliteModels") {
            let peer = try SQLitePeer(path: path("peer-models.sqlite"))
            let recordedAt = Timestamp.now()
            let batches = self.batches
            (results["append.sqliteModels"], results.writtenPerEvent["append.sqliteModels"]) = try counting(events.count) {
                try measure("append.sqliteModels", events.count, "SQLite append with read models") { done in
                    for (index, batch) in batches.enumerated() {
                        try peer.appendWithModels(batch, recordedAt: recordedAt)
                        done(index * Bench.batch)
                    }
                }
            }
        }
        if wanted("append.singleCommit") {
            let ledger = try openLedger(path("single"))
            defer { ledger.close() }
            results["append.singleCommit"] = try measure("append.singleCommit", singles, "one event per commit") { done in
                for i in 0..<singles {
                    try ledger.log.append([events[i % events.count]])
                    done(i)
                }
            }
        }
        if wanted("append.groupCommit") {
            let ledger = try openLedger(path("group"))
            defer { ledger.close() }
            let total = 64 * perThread
            let failures = Mutex(0)
            let events = self.events
            results["append.groupCommit"] = try measure("append.groupCommit", total, "group commit") { _ in
                let group = DispatchGroup()
                for thread in 0..<64 {
                    group.enter()
                    Thread.detachNewThread {
                        defer { group.leave() }
                        for i in 0..<perThread {
                            do {
                                try ledger.log.append([events[(thread * perThread + i) % events.count]])
                            } catch {
                                failures.withLock { $0 += 1 }
                            }
                        }
                    }
                }
                group.wait()
            }
            let transactions = ledger.log.commitCounters.transactions
            guard failures.withLock({ $0 }) == 0, try ledger.log.lastPosition() == UInt64(min(total, events.count)) else {
                throw BenchFailure("group commit lost events; this is a bug")
            }
            results.groupTransactions = (total, transactions)
        }
        if wanted("append.plain", "append.personal") {
            // The cost of sealing: the same events appended as they are (the demo's few notes
            // and deletion reasons), then each with two personal meta fields to seal.
            let subset = Array(events.prefix(Bench.personalEvents))
            let personal = subset.map { draft in
                var draft = draft
                draft.meta["email"] = "\(draft.subject)@example.com"
                draft.meta["name"] = "Customer \(draft.subject)"
                return draft
            }
            for (name, drafts) in [("append.plain", subset), ("append.personal", personal)] {
                let ledger = try Ledger(path: path(name))
                defer { ledger.close() }
                results[name] = try measure(name, drafts.count, name == "append.plain" ? "append, as they are" : "append, each event with personal fields") { done in
                    for start in stride(from: 0, to: drafts.count, by: Bench.batch) {
                        try ledger.log.append(Array(drafts[start ..< min(start + Bench.batch, drafts.count)]))
                        done(start)
                    }
                }
            }
        }
        if only.map({ $0.hasPrefix("cluster.") }) ?? true {
            if let missing = ClusterBench.available {
                FileHandle.standardError.write(Data("cluster cases skipped: \(missing)\n".utf8))
            } else {
                // The first events of the run (at most 20,000), then 300 one-event appends of
                // later ones; the same for each node count.
                let count = min(events.count / 2, 20_000)
                let fed = Array(events.prefix(count)), singles = Array(events.dropFirst(count).prefix(300))
                for nodes in ClusterBench.nodeCounts {
                    progress.update("cluster of \(nodes) node\(nodes == 1 ? "" : "s")", done: nodes - 1, total: ClusterBench.nodeCounts.count, unit: "clusters")
                    let figures = try ClusterBench.measure(nodes: nodes, events: fed, singles: singles, directory: root.appendingPathComponent("cluster-\(nodes)"))
                    results["cluster.append\(nodes)"] = figures.perSecond
                    results["cluster.visibleP50ms\(nodes)"] = figures.visibleP50ms
                    results["cluster.visibleP99ms\(nodes)"] = figures.visibleP99ms
                }
                results.clusterEvents = count
            }
        }
        if wanted("append.alone", "append.underReadLoad") {
            (results["append.alone"], results["append.underReadLoad"]) = try appendUnderReadLoad(singles: singles)
        }
        if wanted("erase.ms") {
            results["erase.ms"] = try eraseMilliseconds()
        }
        if wanted("append.longHistory", "status.longHistory", "audit.longHistory") {
            let long = try LongHistory(longEvents: longEvents, path: path("long"), progress: progress).run()
            results["append.longHistory"] = long.appendLongUs / long.appendShortUs
            results.longHistory = long
            results["status.longHistory"] = long.statusLongUs / long.statusShortUs
            results["audit.longHistory"] = long.auditLongSeconds
            results["audit.longHistoryGrowth"] = long.auditLongSeconds / long.auditMediumSeconds
        }
        return results
    }

    /// Every event appended in batches of `Bench.batch` to a new store folding only `models`
    /// (and the facts): events per second and bytes written per event.
    private func appendBatches(_ name: String, models: [any ReadModel.Type], _ phase: String) throws -> (Double, Double?) {
        let ledger = try openLedger(path(name), models: models)
        defer { ledger.close() }
        let batches = self.batches
        return try counting(events.count) {
            try measure(name, events.count, phase) { done in
                for (index, batch) in batches.enumerated() {
                    try ledger.log.append(batch)
                    done(index * Bench.batch)
                }
                try ledger.storeModels()
            }
        }
    }

    /// One-event durable appends per second to a store of `Bench.readLoadEvents` events, alone,
    /// then beside `Bench.readers` threads that read without pause — each subject's events
    /// (`events(of:).collect()`) and its status, by turns — as a server answering support
    /// while the App Store's webhook appends.
    private func appendUnderReadLoad(singles: Int) throws -> (alone: Double, loaded: Double) {
        let ledger = try openLedger(path("readLoad"))
        defer { ledger.close() }
        let loaded = Array(events.prefix(Bench.readLoadEvents))
        for start in stride(from: 0, to: loaded.count, by: Bench.batch) {
            try ledger.log.append(Array(loaded[start ..< min(start + Bench.batch, loaded.count)]))
        }
        let subjects = Array(Set(loaded.map(\.subject))).sorted()
        let rest = Array(events.dropFirst(Bench.readLoadEvents).prefix(2 * singles))
        guard rest.count == 2 * singles, !subjects.isEmpty else { throw BenchFailure("too few events for append.underReadLoad") }
        let alone = try measure("append.alone", singles, "one-event appends, alone") { done in
            for (i, event) in rest.prefix(singles).enumerated() {
                try ledger.log.append([event])
                done(i)
            }
        }
        let stop = Mutex(false)
        let reads = Mutex(0)
        let group = DispatchGroup()
        for thread in 0..<Bench.readers {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var i = thread
                while !stop.withLock({ $0 }) {
                    let subject = subjects[i % subjects.count]
                    if i & 1 == 0 { _ = try? ledger.events(of: subject).collect() } else { _ = try? ledger.status(of: subject, at: Bench.present) }
                    reads.withLock { $0 += 1 }
                    i += Bench.readers
                }
            }
        }
        defer {
            stop.withLock { $0 = true }
            group.wait()
        }
        while reads.withLock({ $0 }) < Bench.readers { usleep(1_000) }   // every reader under way
        let underLoad = try measure("append.underReadLoad", singles, "one-event appends, \(Bench.readers) threads reading") { done in
            for (i, event) in rest.dropFirst(singles).enumerated() {
                try ledger.log.append([event])
                done(i)
            }
        }
        return (alone, underLoad)
    }

    /// Milliseconds to erase one subject (`Ledger.erase`: its deletion steps, then
    /// `account.deleted`, whose key store compaction copies every other key) in a store of
    /// `Bench.eraseSubjects` subjects, each with a personal note and so a key: the mean of five.
    private func eraseMilliseconds() throws -> Double {
        let ledger = try openLedger(path("erase"))
        defer { ledger.close() }
        let subjects = Bench.eraseSubjects
        progress.update("subjects with a key each", done: 0, total: subjects)
        for start in stride(from: 0, to: subjects, by: 10_000) {
            try ledger.log.append((start ..< min(start + 10_000, subjects)).map { i in
                var note = SupportNoteAdded()
                note.text = "Customer \(i) asked about an invoice."
                note.agent = "agent-7"
                return EventDraft(subject: "customer-\(i)", type: SupportNoteAdded.type, occurredAt: Bench.present, source: .support,
                                  meta: ["email": "customer-\(i)@example.com"], payload: EventCatalog.encode(note.eventData))
            })
            progress.update("subjects with a key each", done: start, total: subjects)
        }
        let clock = ContinuousClock()
        let victims = [7, 20_011, 45_003, 70_001, 99_991].map { "customer-\($0 % subjects)" }
        let start = clock.now
        for victim in victims {
            guard try ledger.erase(victim, at: Bench.present).deletedAt != nil else { throw BenchFailure("erasing \(victim) failed") }
        }
        return (clock.now - start).seconds * 1000 / Double(victims.count)
    }

    /// Events per second of `body`, the measured phase of case `name`, which reports how many
    /// events it has done.
    private func measure(_ name: String, _ count: Int, _ phase: String, _ body: ((Int) -> Void) throws -> Void) throws -> Double {
        let marked = callgrind && name == only
        // Not beside the frees the case before left on a utility thread (a rebuild's states).
        waitForReleasesAside()
        let clock = ContinuousClock()
        if marked { callgrind_phase_begin() }
        let start = clock.now
        progress.update(phase, done: 0, total: count)
        try body { done in progress.update(phase, done: done, total: count) }
        let elapsed = clock.now - start
        if marked { callgrind_phase_end() }
        return Double(count) / max(elapsed.seconds, 1e-9)
    }

    /// `body`'s result, and the bytes this process handed the kernel to write while it ran
    /// (`wchar` of `/proc/self/io`: every write and pwrite of every thread, the store's pages
    /// and meta pages, the SQLite peer's WAL and checkpoints) per event; `nil` where there is
    /// no such file.
    private func counting<R>(_ events: Int, _ body: () throws -> R) rethrows -> (R, Double?) {
        let before = Self.bytesWritten()
        let result = try body()
        guard let before, let after = Self.bytesWritten() else { return (result, nil) }
        return (result, Double(after - before) / Double(max(events, 1)))
    }

    /// The process's `wchar` from `/proc/self/io`, or `nil`.
    private static func bytesWritten() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("wchar:") {
            return Int(line.dropFirst("wchar:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// The records the ledger would write (hash included), one buffer after another.
    private func records() -> (bytes: [UInt8], ends: [Int]) {
        // One buffer: as an array each, the million freed records left the heap scattered,
        // and the cases after this one ran slower.
        var bytes: [UInt8] = []
        var ends: [Int] = []
        ends.reserveCapacity(events.count)
        for event in events {
            bytes += EventRecord.encode(event, version: 1, recordedAt: Bench.present)
            bytes += repeatElement(0xA5, count: EventRecord.hashSize)
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    /// The raw LMDB limit: the records the ledger would write (hash included), under 8-byte
    /// big-endian keys with MDB_APPEND, 1,000 per durable transaction; no checks, no indexes,
    /// no hashing. Then a full cursor scan of it (each record's length and first byte read, so
    /// that every page is touched). Returns both rates and the store's bytes per event.
    private func raw() throws -> (append: Double, writtenPerEvent: Double?, scan: Double, bytesPerEvent: Double) {
        let (bytes, ends) = records()
        let env = try Environment(path: path("raw"))
        let db = try env.openDatabase("events")
        let (append, written) = try counting(ends.count) {
            try measure("append.raw", ends.count, "raw LMDB append") { done in
                try bytes.withUnsafeBytes { bytes in
                    for start in stride(from: 0, to: ends.count, by: Bench.batch) {
                        try env.write { txn in
                            for i in start ..< min(start + Bench.batch, ends.count) {
                                let record = UnsafeRawBufferPointer(rebasing: bytes[(i == 0 ? 0 : ends[i - 1]) ..< ends[i]])
                                try LogSchema.withKey(UInt64(i + 1)) { key in try txn.put(db, key: key, value: record, flags: .append) }
                            }
                        }
                        done(start)
                    }
                }
            }
        }
        var checksum = 0
        let scan = try measure("scan.raw", ends.count, "raw LMDB scan") { _ in
            try env.read { txn in
                try txn.withCursor(db) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        checksum &+= current.value.count &+ Int(current.value.first ?? 0)
                        entry = try cursor.next()
                    }
                }
            }
        }
        guard checksum != 0 else { throw BenchFailure("the raw scan read nothing; this is a bug in the benchmark") }
        return (append, written, scan, Double(env.info().usedBytes) / Double(ends.count))
    }

    /// The ledger's layout with none of its logic: raw LMDB making the puts the ledger makes
    /// for each event, 1,000 events per durable transaction — the record (MDB_APPEND), and for
    /// each fold that reads the event (the subject's facts, each read model), its subject's
    /// state under the key the ledger keeps it under (generation ‖ subject ‖ tag: one subject's
    /// states are neighbours), with a value as long as that fold's mean state; and, as the
    /// index tail does every 100,000 events, the id and stream entries of those events put in
    /// key order. No checks, no hashing, no folding: the design's own limit.
    private func rawLayout(stateBytes: [Int]?) throws -> (Double, Double?) {
        let (bytes, ends) = records()
        let env = try Environment(path: path("rawLayout"))
        let log = try env.openDatabase("events")
        let ids = try env.openDatabase("ids", flags: [.create, .dupSort, .dupFixed])
        let streams = try env.openDatabase("streams")
        let models = try env.openDatabase("models")
        // The facts read every type, for their activity, but change (and are put) for the
        // plan's types almost alone: the first event, a session's zone or a clock ahead seldom.
        let readers = PeerFold.all.map { fold in fold.name == "facts" ? SubjectFacts.planReads : fold.eventTypes }
        let values = PeerFold.all.indices.map { [UInt8](repeating: 0x5A, count: max(stateBytes?[$0] ?? 120, 1)) }
        let tailLimit = EventLog.Options().indexTailLimit
        return try counting(ends.count) {
            try measure("append.rawLayout", ends.count, "raw layout append") { done in
                var tail: [(id: [UInt8], stream: [UInt8], position: UInt64)] = []
                var versions: [String: UInt64] = [:]
                try bytes.withUnsafeBytes { bytes in
                    for start in stride(from: 0, to: ends.count, by: Bench.batch) {
                        try env.write { txn in
                            for i in start ..< min(start + Bench.batch, ends.count) {
                                let event = events[i]
                                let record = UnsafeRawBufferPointer(rebasing: bytes[(i == 0 ? 0 : ends[i - 1]) ..< ends[i]])
                                try LogSchema.withKey(UInt64(i + 1)) { key in try txn.put(log, key: key, value: record, flags: .append) }
                                for (tag, types) in readers.enumerated() where types.contains(event.type) {
                                    let subject = Array(event.subject.utf8)
                                    try txn.put(models, key: [0, 0, 0, 1, UInt8(subject.count >> 8), UInt8(truncatingIfNeeded: subject.count)] + subject + [UInt8(tag)],
                                                value: values[tag])
                                }
                                let version = versions[event.subject, default: 0] + 1
                                versions[event.subject] = version
                                tail.append((Array(event.id.bytes.prefix(8)), LogSchema.streamKey(event.subject, version: version), UInt64(i + 1)))
                            }
                            if tail.count >= tailLimit {
                                tail.sort { $0.id.lexicographicallyPrecedes($1.id) }
                                for entry in tail { try txn.put(ids, key: [UInt8(ascii: "i")], value: entry.id + LogSchema.key(entry.position).suffix(6)) }
                                tail.sort { $0.stream.lexicographicallyPrecedes($1.stream) }
                                for entry in tail { try txn.put(streams, key: entry.stream, value: LogSchema.key(entry.position)) }
                                tail.removeAll(keepingCapacity: true)
                            }
                        }
                        done(start)
                    }
                }
            }
        }
    }

    /// The ledger store's bytes per event by table: the log, its two indexes, the read models'
    /// states, the pages free for reuse (freed by the last transactions), and the rest (meta,
    /// generations, LMDB's bookkeeping). LMDB does not count the id index's packed values in
    /// its own statistics (they are the values of one key), so the index is what remains.
    private func storageByTable(_ env: Environment) throws -> [(table: String, bytesPerEvent: Double)] {
        let page = env.info().pageSize
        // The engine's own databases by name: `models` (states, items, anchor lists),
        // `generations` (records) and `modelIndex` (index entries).
        let tables = try [LogSchema.events, LogSchema.streams, "models", LogSchema.meta, "generations", "modelIndex"]
            .map { try env.openDatabase($0, flags: []) }
        var (sizes, free, bookkeeping) = try env.read { txn in
            (try tables.map { try txn.sizeOnDisk($0) }, try txn.freePages() * page, try txn.bookkeepingPages() * page)
        }
        sizes[2] += sizes[5]
        let other = sizes[3] + sizes[4] + bookkeeping
        let ids = env.info().usedBytes - sizes[0 ..< 3].reduce(0, +) - free - other
        let perEvent = { (bytes: Int) in Double(bytes) / Double(max(events.count, 1)) }
        return [("events", perEvent(sizes[0])), ("ids", perEvent(ids)), ("streams", perEvent(sizes[1])), ("models", perEvent(sizes[2])),
                ("free", perEvent(free)), ("other", perEvent(other))]
    }

    /// The due list of a one-day window (`Ledger.due`) at random days of the histories' last
    /// 60 days and the next 30, in process: p50 in µs, and the mean number of items a window holds.
    private func dueLatency(_ ledger: Ledger) throws -> (Double, Double) {
        var generator = SplitMix(seed: 11)
        let samples = 2_000
        var micros: [Double] = []
        var items = 0
        let clock = ContinuousClock()
        progress.update("due", done: 0, total: samples, unit: "windows")
        for i in 0 ..< samples + 100 {
            let from = Bench.present.adding(seconds: (Int64(generator.next() % 90) - 60) * 86_400)
            let start = clock.now
            let due = try ledger.due(from: from, to: from.adding(seconds: 86_400))
            let elapsed = clock.now - start
            if i >= 100 {
                micros.append(elapsed.seconds * 1e6)
                items += due.count
            }
        }
        micros.sort()
        return (micros[micros.count / 2], Double(items) / Double(samples))
    }

    /// Status (every model's view) of random customers, in process: p50 and p99 in µs.
    private func statusLatency(_ ledger: Ledger) throws -> (Double, Double) {
        let subjects = Array(Set(events.lazy.map(\.subject))).sorted()
        var generator = SplitMix(seed: 7)
        let samples = 20_000
        var micros: [Double] = []
        micros.reserveCapacity(samples)
        let clock = ContinuousClock()
        progress.update("status", done: 0, total: samples, unit: "queries")
        let marked = callgrind && (only == "status.p50us" || only == "status.p99us")
        if marked { callgrind_phase_begin() }
        defer { if marked { callgrind_phase_end() } }
        for i in 0 ..< samples + 1_000 {
            let subject = subjects[Int(generator.next() % UInt64(subjects.count))]
            let start = clock.now
            let status = try ledger.status(of: subject, at: Bench.present)
            let elapsed = clock.now - start
            guard !status.answers.isEmpty else { throw BenchFailure("status of \(subject) came back empty; this is a bug") }
            if i >= 1_000 { micros.append(elapsed.seconds * 1e6) }   // the first 1,000 warm the caches
        }
        micros.sort()
        return (micros[micros.count / 2], micros[min(micros.count - 1, micros.count * 99 / 100)])
    }
}

/// The peak heap of `ledger append` of one JSONL file, in one transaction and committing every
/// `every` events: each import runs in a child process of its own (this binary), which samples
/// its anonymous resident memory every 5 ms. Mapped store pages, which the OS can drop, are not
/// counted.
enum ImportPeak {
    /// The events imported: the log's first ones.
    static let events = 400_000
    static let every = 20_000

    /// Writes the log's first `events` events as export lines; returns how many.
    static func export(_ log: EventLog, to file: String, events: Int) throws -> Int {
        guard FileManager.default.createFile(atPath: file, contents: nil), let out = FileHandle(forWritingAtPath: file) else {
            throw BenchFailure("could not write \(file)")
        }
        defer { try? out.close() }
        var buffer: [UInt8] = []
        var count = 0
        try log.events(from: 1, through: UInt64(events)).forEach { event in
            buffer.append(contentsOf: try EventLine.export(event))
            buffer.append(0x0A)
            count += 1
            if buffer.count >= 1 << 20 {
                out.write(Data(buffer))
                buffer.removeAll(keepingCapacity: true)
            }
        }
        out.write(Data(buffer))
        return count
    }

    /// Runs the child; its peak heap in MiB.
    static func measure(file: String, store: String, every: Int) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--import-child", file, "--import-store", store, "--import-every", String(every)]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0, let kib = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchFailure("the import child failed (exit \(process.terminationStatus)): \(text)")
        }
        return kib / 1024
    }

    /// In the child: the import, and the highest RssAnon seen meanwhile (KiB).
    static func child(file: String, store: String, every: Int) throws -> Int {
        let sampler = Sampler()
        Thread.detachNewThread {
            while !sampler.done.withLock({ $0 }) {
                sampler.sample()
                usleep(5_000)
            }
        }
        let ledger = try Ledger(path: store)
        _ = try JSONLImport.append([file], to: ledger.log, commitEvery: every > 0 ? every : nil)
        ledger.close()
        sampler.sample()
        sampler.done.withLock { $0 = true }
        return sampler.peak.withLock { $0 }
    }

    /// The highest RssAnon of this process seen so far.
    final class Sampler: Sendable {
        let peak = Mutex(0)
        let done = Mutex(false)

        func sample() {
            guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
                  let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
                  let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return }
            peak.withLock { $0 = max($0, kib) }
        }
    }
}

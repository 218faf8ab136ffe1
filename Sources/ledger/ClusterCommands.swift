import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore
@_spi(Cluster) import LedgerCluster
@_spi(Cluster) import LedgerServer

/// `--cluster URL`: the commands that reach a cluster (append, status, audit, due) take it, or
/// `$LEDGER_CLUSTER` when no `--store` is given.
struct ClusterOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("A ledger cluster's NATS servers (nats://HOST:PORT,…) rather than a store (default: $LEDGER_CLUSTER when no --store is given).", valueName: "url"))
    var cluster: String?

    /// The cluster to use, `nil` for a store.
    /// - Throws: when both `--store` and `--cluster` are given.
    func url(_ global: GlobalOptions) throws -> String? {
        if let cluster {
            guard global.store == nil else { throw CommandFailure.input("give --store or --cluster, not both") }
            return cluster
        }
        guard global.store == nil, let url = ProcessInfo.processInfo.environment["LEDGER_CLUSTER"], !url.isEmpty else { return nil }
        return url
    }

    func validate() throws {
        if let cluster, cluster.isEmpty { throw ValidationError("--cluster must not be empty") }
    }

    /// A client of the cluster at `url`; errors say what to do.
    static func connect(_ url: String) throws -> ClusterClient {
        try ClusterClient(urls: url)
    }
}

struct NodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Run a node of a ledger cluster: hold some partitions of the NATS stream, fold them into a store, answer for them.",
        discussion: """
            The cluster's log is a NATS JetStream stream; each node folds the partitions it holds a \
            lease on into its own store (the same engine and read models) and answers their appends \
            and reads, which any node, `ledger … --cluster URL` and `$LEDGER_CLUSTER` reach by NATS. \
            The first node creates the stream with --partitions partitions (fixed from then on). \
            SIGTERM or Ctrl-C stops a node, handing its leases back: the others take its partitions \
            within a second or two; a node that dies loses them when its leases lapse (15 s). A node \
            that joins takes its share.

            Examples:
              ledger node --nats nats://127.0.0.1:4222 --store node-1.lmdb
              Tools/cluster up --nodes 3
            """
    )

    @Option(name: .long, help: ArgumentHelp("The NATS servers (nats://HOST:PORT,…).", valueName: "url"))
    var nats: String

    @Option(name: .long, help: "This node's store directory.")
    var store: String

    @Option(name: .long, help: "This node's name in the leases (default: host name and process id).")
    var name: String?

    @Option(name: .long, help: "How many partitions a new cluster spreads its subjects over (an existing one keeps its own).")
    var partitions = ClusterLayout.defaultPartitions

    @Option(name: .long, help: "JetStream copies of the stream (3 for a 3-server cluster; 1 for a single server).")
    var replicas = ClusterNode.replicas

    @Option(name: .long, help: "Serve the JSON API of `ledger serve` for the whole cluster, and /healthz, on this port (0: any free port; default: no HTTP).")
    var port: Int?

    @Option(name: .long, help: "The address --port listens on.")
    var host = "127.0.0.1"

    func validate() throws {
        if let port { guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") } }
        guard (1...4096).contains(partitions) else { throw ValidationError("--partitions must be 1 to 4096") }
        guard (1...5).contains(replicas) else { throw ValidationError("--replicas must be 1 to 5") }
    }

    func run() throws {
        let node = try ClusterNode(urls: nats, path: store, name: name, partitions: partitions, replicas: replicas) { line in
            // When, to the millisecond: leases move within seconds.
            Terminal.warn("\(Timestamp.now()) \(Terminal.safe(line))")
        }
        node.start()
        let ready = "ledger node \(node.name) ready: store \(store), \(node.layout.partitions) partitions in the cluster"
        if let port {
            let client = try ClusterClient(urls: nats)
            defer { client.close() }
            let server = try LedgerServer(ledger: node.ledger, cluster: NodeAnswers(node: node, client: client))
            let (host, name, partitions) = (self.host, node.name, node.layout.partitions)
            // Stops on SIGTERM or SIGINT, once the requests in flight are answered.
            try Blocking.run {
                try await server.run(host: host, port: port) { bound in
                    FileHandle.standardError.write(Data("ledger node \(name) ready on http://\(host):\(bound): \(partitions) partitions in the cluster (SIGTERM or Ctrl-C stops)\n".utf8))
                }
            }
            FileHandle.standardError.write(Data("ledger node \(node.name): stopping, handing back \(counted(node.partitions.count, "partition"))\n".utf8))
            node.stop()
            return
        }
        FileHandle.standardError.write(Data("\(ready) (SIGTERM or Ctrl-C stops)\n".utf8))
        let stop = DispatchSemaphore(value: 0)
        var sources: [DispatchSourceSignal] = []
        for signo in [SIGTERM, SIGINT] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
            source.setEventHandler { stop.signal() }
            source.resume()
            sources.append(source)
        }
        stop.wait()
        FileHandle.standardError.write(Data("ledger node \(node.name): stopping, handing back \(counted(node.partitions.count, "partition"))\n".utf8))
        node.stop()
        _ = sources
    }
}

/// What a node's server answers from (`ledger node --port`): the cluster, through a client of
/// its own, for any subject; the node itself for `/healthz`.
struct NodeAnswers: ClusterAnswers {
    let node: ClusterNode
    let client: ClusterClient

    func append(_ drafts: [EventDraft]) throws(LedgerError) -> AppendResult { try client.append(drafts) }

    func status(of subject: String, at t: Timestamp, knownAt: KnownAt?) throws(LedgerError) -> JSON {
        try client.status(of: subject, at: t, knownAt: knownAt.map(Self.text)).json
    }

    func audit(of subject: String, at t: Timestamp, knownAt: KnownAt?) throws(LedgerError) -> JSON {
        try client.audit(of: subject, at: t, knownAt: knownAt.map(Self.text)).json
    }

    func exportLines(of subject: String) throws(LedgerError) -> [String] {
        guard case .array(let lines) = try client.read("events", subject: subject) else {
            throw LedgerError(.storage, "the events of \(subject) came back without their lines")
        }
        return try lines.enumerated().map { (i, line) throws(LedgerError) -> String in
            guard case .string(let text) = line else { throw LedgerError(.storage, "event \(i) of \(subject) came back as no export line") }
            return text
        }
    }

    func subjects(holdingTransaction transactionId: String?, original originalTransactionId: String?) throws(LedgerError) -> [String] {
        try client.lookup(transactionId: transactionId, originalTransactionId: originalTransactionId)
    }

    func due(from: Timestamp, to: Timestamp) throws(LedgerError) -> [DueItem] {
        try client.dueItems(from: from, to: to)
    }

    func stats() throws(LedgerError) -> JSON { try client.stats() }

    func customer(_ subject: String, at t: Timestamp, knownAt: KnownAt?) throws(LedgerError) -> CustomerPage {
        let status = try client.status(of: subject, at: t, knownAt: knownAt.map(Self.text))
        return CustomerPage(cards: status.cards, audit: try client.audit(of: subject, at: t, knownAt: knownAt.map(Self.text)),
                            zone: status.zone, version: status.version)
    }

    func health() -> JSON {
        ["node": .string(node.name), "partitions": .array(node.partitions.map { .integer(Int64($0)) }),
         "clusterPartitions": .integer(Int64(node.layout.partitions))]
    }

    /// A known-at as a request names it: a position's digits, or a time.
    static func text(_ knownAt: KnownAt) -> String {
        switch knownAt {
        case .time(let t): t.description
        case .position(let p): String(p)
        }
    }
}

extension AppendCommand {
    /// Appends the files to a cluster: every file is checked first (nothing is appended if a
    /// line is bad); then each file goes in batches of up to 500 events, each partition's part
    /// to its holder.
    func appendToCluster(_ url: String) throws {
        guard !restore else {
            throw CommandFailure.input("--restore keeps a store's positions; a cluster's stream numbers its events itself: append the export without --restore")
        }
        guard commitEvery == nil else {
            throw CommandFailure.input("--commit-every sizes a store's transactions; a cluster takes files in batches of 500 events: leave it out")
        }
        var batches: [(file: String, lines: [Int], drafts: [EventDraft])] = []
        var problems: [InputProblem] = []
        var total = 0
        for file in files {
            let bytes: [UInt8]
            if file == "-" {
                bytes = Array(FileHandle.standardInput.readDataToEndOfFile())
            } else {
                bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            }
            switch JSONLImport.events(in: bytes, named: file) {
            case .success(let events): batches.append((file, events.map(\.line), events.map(\.draft)))
            case .failure(let found):
                problems += found.problems
                total += found.problems.count
            }
        }
        guard problems.isEmpty else {
            Terminal.report(problems)
            if global.json { print(JSON.object(["errors": .array(problems.map(\.json))]).text) }
            throw ExitCode(2)
        }
        let client = try ClusterOptions.connect(url)
        defer { client.close() }
        var summary = StreamSummary()
        for batch in batches {
            for start in stride(from: 0, to: batch.drafts.count, by: 500) {
                let end = min(start + 500, batch.drafts.count)
                let result: AppendResult
                do throws(LedgerError) {
                    result = try client.append(Array(batch.drafts[start..<end]))
                } catch {
                    var error = error
                    if let index = error.index { error.file = batch.file; error.line = batch.lines[start + index] }
                    if summary.appended + summary.duplicates > 0 { FileHandle.standardError.write(Data("ledger: \(Self.sentence(summary)) before this error.\n".utf8)) }
                    throw error
                }
                var part = StreamSummary()
                part.appended = result.appended
                part.duplicates = result.duplicates
                part.firstPosition = result.firstPosition
                part.lastPosition = result.lastPosition
                summary = summary.merged(with: part)
            }
        }
        if global.json {
            print(Self.shape(summary).text)
        } else {
            print(Self.sentence(summary) + ".")
        }
    }
}

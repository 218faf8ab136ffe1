import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections
@_spi(Cluster) import LedgerCluster
@_spi(Storage) import LedgerStore

struct SubjectsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subjects",
        abstract: "The subjects with events, in byte order: find a customer.",
        discussion: """
            Read from the stream index, never from the events.

            Examples:
              ledger subjects --prefix customer-18 --limit 5 --store demo.lmdb
              ledger subjects --json
            """
    )

    @Option(name: .long, help: "Only subjects starting with these characters.")
    var prefix = ""

    @Option(name: .long, help: "At most this many (default: all).")
    var limit: Int?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    }

    func run() throws {
        let log = try global.openLogForReading()
        defer { log.close() }
        let subjects = try log.subjects(prefix: prefix, limit: limit ?? .max)
        if global.json {
            print(JSON.object([("subjects", .array(subjects.map(JSON.string)))]).text)
        } else if subjects.isEmpty {
            Terminal.warn("ledger: no subject starts with \(Terminal.safe(prefix))")
        } else {
            for subject in subjects { print(Terminal.safe(subject)) }
        }
    }
}

struct EventCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "event",
        abstract: "One stored event, by its position or its id.",
        discussion: """
            With --json, the event as `ledger export` writes it (its position and recordedAt included).

            Examples:
              ledger event 17 --store demo.lmdb
              ledger event 0b6d2f4e-8a1c-4c3b-9f00-1234567890ab --json
            """
    )

    @Argument(help: "A log position, or an event id (a UUID).")
    var which: String

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard UInt64(which) != nil || EventID(which) != nil else {
            throw ValidationError("POSITION|ID: expected a log position or an event id (a UUID), got \(which)")
        }
    }

    func run() throws {
        let log = try global.openLogForReading()
        defer { log.close() }
        let found = try UInt64(which).map { position throws(LedgerError) in try log.event(at: position) }
            ?? EventID(which).flatMap { id throws(LedgerError) in try log.event(id: id) }
        guard let event = found else {
            throw CommandFailure.failure("no event \(UInt64(which) != nil ? "at position" : "with id") \(which) (the log ends at \(try log.lastPosition()))")
        }
        if global.json {
            print(String(decoding: try EventLine.export(event), as: UTF8.self))
            return
        }
        let line = try EventLine.export(event)
        guard case .object(let object)? = try? JSONParser.parse(line) else { return }
        var rows: [[String]] = []
        for member in object.members where member.key != "data" {
            rows.append([member.key, Self.words(member.value)])
        }
        if case .object(let data)? = object["data"] {
            for member in data.members { rows.append(["data." + member.key, Self.words(member.value)]) }
        }
        printTable(rows)
    }

    static func words(_ value: JSON) -> String {
        if case .string(let text) = value { return text }
        return value.serialized()
    }
}

struct LookupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookup",
        abstract: "Who holds a store transaction or subscription: the subjects whose events name it.",
        discussion: """
            Read from an index the appends keep (the transactions and holders models), never a scan. \
            A subscription whose App Store notifications wait under appstore:<id> is held by that \
            subject until one is bound to it, then by the bound subject.

            Examples:
              ledger lookup --transaction-id 2000000101 --store shop.lmdb
              ledger lookup --original-transaction-id 2000000100 --json
            """
    )

    @Option(name: .customLong("transaction-id"), help: "A transaction's id.")
    var transactionId: String?

    @Option(name: .customLong("original-transaction-id"), help: "A subscription's original transaction id.")
    var originalTransactionId: String?

    @OptionGroup var global: GlobalOptions

    @OptionGroup var cluster: ClusterOptions

    func validate() throws {
        guard (transactionId == nil) != (originalTransactionId == nil) else {
            throw ValidationError("give one of --transaction-id or --original-transaction-id")
        }
    }

    func run() throws {
        let subjects: [String]
        if let url = try cluster.url(global) {
            let client = try ClusterOptions.connect(url)
            defer { client.close() }
            subjects = try client.lookup(transactionId: transactionId, originalTransactionId: originalTransactionId)
        } else {
            let ledger = try global.openLedger()
            defer { ledger.close() }
            subjects = try transactionId.map { id throws(LedgerError) in try ledger.subjects(holdingTransaction: id) }
                ?? ledger.subjects(holdingOriginalTransaction: originalTransactionId ?? "")
        }
        if global.json {
            print(JSON.object([("subjects", .array(subjects.map(JSON.string)))]).text)
        } else if subjects.isEmpty {
            Terminal.warn("No subject holds \(transactionId.map { "transaction \(Terminal.safe($0))" } ?? "subscription \(Terminal.safe(originalTransactionId ?? ""))").")
        } else {
            for subject in subjects { print(Terminal.safe(subject)) }
        }
    }
}

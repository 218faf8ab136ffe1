// A child process for the crash-safety and multi-process tests. Not part of the product.
//
//   ledger-test-child append-loop STORE FIRST_BATCH BATCH_SIZE   append batches forever; print "acked N" after each returns
//   ledger-test-child append-many STORE COUNT                    append COUNT events in batches of 100, print "done"
//   ledger-test-child hold-reader STORE                          open a read transaction, print "ready", sleep
//   ledger-test-child hold-writer STORE                          write in a transaction, print "ready", commit on a line of stdin
//   ledger-test-child rebuild STORE                              rebuild every read model; print "phase P" as each phase starts, "done" at the end
//   ledger-test-child ledger-loop STORE TAIL_LIMIT                 append a batch of purchases, sessions and inbox messages to a
//                                                                Ledger (model tail of TAIL_LIMIT events) forever; print "acked P" after
//                                                                each (P: the log's last position then)
//   ledger-test-child ledger-hold STORE COUNT                    append COUNT such events to a Ledger in batches of 1,000, print
//                                                                "appended", close it on a line of stdin, print "closed"
//   ledger-test-child erase-loop STORE SUBJECTS                  give SUBJECTS subjects a note each (once), print "ready", then erase
//                                                                each not yet erased (Ledger.erase), printing "erased S" after each returns
import Glibc
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

/// Writes a line straight to a file descriptor: no stdio buffer, so a line the parent reads
/// was said before the kill.
func say(_ line: String, to fd: Int32 = 1) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    say("ledger-test-child: \(message)", to: 2)
    exit(2)
}

/// A `usage.recorded` payload.
func usage(feature: String) -> [UInt8] {
    var usage = UsageRecorded()
    usage.feature = feature
    return EventCatalog.encode(usage.eventData)
}

/// The events of batch `n`: ids (n, i), so the parent can tell which batch each event is from.
func batch(_ n: UInt64, size: Int) -> [EventDraft] {
    (0..<size).map { i in
        EventDraft(id: EventID(high: n, low: UInt64(i)), subject: "subject-\(n % 7)", type: UsageRecorded.type,
                   schemaVersion: UsageRecorded.schemaVersion, occurredAt: Timestamp(milliseconds: Int64(n) * 1000 + Int64(i)),
                   source: .system, meta: ["batch": "\(n)"], payload: usage(feature: String(repeating: "x", count: 190) + "-\(n)-\(i)"))
    }
}

/// A support note about `subject`, whose text (personal) names it: `note of S`.
func personalNote(_ subject: String) -> EventDraft {
    var note = SupportNoteAdded()
    note.text = "note of \(subject)"
    note.agent = "agent-1"
    return EventDraft(subject: subject, type: SupportNoteAdded.type, occurredAt: Timestamp(milliseconds: 1_790_000_000_000), source: .support,
                      meta: ["email": "\(subject)@example.com"], payload: EventCatalog.encode(note.eventData))
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: ledger-test-child MODE STORE …") }
let store = arguments[2]
var options = EventLog.Options()
options.initialMapSize = 256 << 10   // tiny, so the map grows while the parent watches

switch arguments[1] {
case "append-loop":
    guard arguments.count == 5, let first = UInt64(arguments[3]), let size = Int(arguments[4]) else { fail("append-loop STORE FIRST_BATCH BATCH_SIZE") }
    do {
        let log = try EventLog(path: store, options: options)
        var n = first
        while true {
            try log.append(batch(n, size: size))
            say("acked \(n)")
            n += 1
        }
    } catch {
        fail("\(error)")
    }

case "append-many":
    guard arguments.count == 4, let count = Int(arguments[3]) else { fail("append-many STORE COUNT") }
    do {
        say("opening")
        let log = try EventLog(path: store, options: options)
        var written = 0
        var n: UInt64 = 0
        while written < count {
            let size = min(100, count - written)
            try log.append(batch(n, size: size))
            written += size
            n += 1
        }
        say("done")
    } catch {
        fail("\(error)")
    }

case "hold-reader":
    do {
        let env = try Environment(path: store)
        try env.read { _ in
            say("ready")
            while true { sleep(60) }
        }
    } catch {
        fail("\(error)")
    }

case "hold-writer":
    // A writer in the middle of its transaction: it commits when the parent writes a line.
    do {
        let env = try Environment(path: store)
        let db = try env.openDatabase("held")
        try env.write { txn in
            try txn.put(db, key: [1], value: [1])
            say("ready")
            _ = readLine()
        }
        say("committed")
    } catch {
        fail("\(error)")
    }

case "rebuild":
    do {
        let ledger = try Ledger(path: store)
        var phase: RebuildProgress.Phase?
        let report = try ledger.rebuild { progress in
            if progress.phase != phase {
                phase = progress.phase
                say("phase \(progress.phase.rawValue)")
            }
            // Slow down the writing, so the parent can kill the child in the middle of it.
            if progress.phase == .writing { usleep(2_000_000) }
        }
        say("done \(report.events)")
    } catch {
        fail("\(error)")
    }

case "ledger-loop", "ledger-hold":
    do {
        var ledgerOptions = EventLog.Options()
        let hold = arguments[1] == "ledger-hold"
        guard arguments.count == 4, let number = Int(arguments[3]) else { fail("\(arguments[1]) STORE NUMBER") }
        if !hold { ledgerOptions.modelTailLimit = number }
        let ledger = try Ledger(path: store, options: ledgerOptions)
        var n = Int64(try ledger.log.lastPosition())
        var appended = 0
        while !hold || appended < number {
            // Ten events over seven subjects: a monthly purchase, a session, a message.
            var events: [LedgerEvent] = []
            for _ in 0 ..< (hold ? 100 : 1) {
                let at = Timestamp(milliseconds: 1_767_225_600_000 + n * 3_600_000)
                for i in 0 ..< 10 {
                    let subject = "c\((n + Int64(i)) % 7)"
                    switch i % 3 {
                    case 0:
                        var purchase = SubscriptionPurchased()
                        purchase.productId = "pro.monthly"
                        purchase.transactionId = "t\(n)-\(i)"
                        purchase.originalTransactionId = "o-\(subject)"
                        purchase.purchasedAt = at
                        purchase.expiresAt = at.adding(seconds: 30 * 86_400)
                        events.append(LedgerEvent(subject: subject, occurredAt: at, source: .appstore, data: purchase.eventData))
                    case 1:
                        var session = SessionStarted()
                        session.deviceId = "d1"
                        session.timeZone = "Europe/Berlin"
                        events.append(LedgerEvent(subject: subject, occurredAt: at.adding(seconds: Int64(i)), source: .app, data: session.eventData))
                    default:
                        var message = InboxMessageDelivered()
                        message.messageId = "m\(n)-\(i)"
                        events.append(LedgerEvent(subject: subject, occurredAt: at.adding(seconds: Int64(i)), source: .system, data: message.eventData))
                    }
                }
                n += 10
            }
            try ledger.append(events)
            appended += events.count
            if !hold { say("acked \(try ledger.log.lastPosition())") }
        }
        say("appended")
        _ = readLine()
        ledger.close()
        say("closed")
    } catch {
        fail("\(error)")
    }

case "erase-loop":
    guard arguments.count == 4, let count = Int(arguments[3]) else { fail("erase-loop STORE SUBJECTS") }
    do {
        let ledger = try Ledger(path: store)
        let subjects = (0..<count).map { "p-\($0)" }
        if try ledger.log.lastPosition() == 0 {
            try ledger.log.append(subjects.map { subject in personalNote(subject) })
        }
        say("ready")
        for subject in subjects where try ledger.view(DeletionModel.self, of: subject)?.state != .completed {
            guard try ledger.erase(subject).deletedAt != nil else { fail("erasing \(subject) did not finish") }
            say("erased \(subject)")
        }
        say("done")
    } catch {
        fail("\(error)")
    }

default:
    fail("unknown mode \(arguments[1])")
}

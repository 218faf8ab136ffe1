import Foundation
import Glibc
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) @testable import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

/// Tests that need a second, real process: `ledger-test-child` (see Tests/LedgerTestChild).
/// Serialized: each kills or races a child against the same kind of store.
@Suite(.serialized) struct ProcessTests {
    static let batchSize = 20

    /// `lock.mdb` deleted while a writer is inside its transaction: the next process makes a new
    /// lock file, so LMDB's writer mutex no longer keeps it out. It used to commit at once, and
    /// the first writer's commit then wrote over it: a write that reported success was lost.
    /// The writers' `flock` on the store makes the second wait for the first.
    @Test func aSecondWriterWaitsForTheFirstEvenWithoutLockMdb() throws {
        try withStorePath { path in
            try writeStore(path, [draft("before")])
            let holder = try Child(["hold-writer", path])
            #expect(holder.waitFor(lineStartingWith: "ready") != nil)
            #expect(unlink(path + "/lock.mdb") == 0)

            // The second is on its way to write (opening the store writes too): it must wait.
            let second = try Child(["append-many", path, "3"])
            #expect(second.waitFor(lineStartingWith: "opening") != nil)
            usleep(300_000)
            #expect(second.process.isRunning, "the second writer committed while the first was in its transaction")
            holder.send("commit")
            #expect(holder.finish().lines.contains("committed"))
            #expect(second.finish().lines.contains("done"))

            let log = try EventLog(path: path)
            defer { log.close() }
            #expect(try log.stats().events == 4)
            #expect(try log.events().collect().map(\.id.high) == [log.events().collect()[0].id.high, 0, 0, 0])
            #expect(try log.verify().isValid)
        }
    }

    /// A child appends batches in a loop and is SIGKILLed at a random moment, 25 times over
    /// one store. After each kill the store must open, verify, hold every batch whose append
    /// returned (the child said "acked"), and hold no batch in part.
    @Test func aStoreSurvivesSIGKILLDuringAppends() throws {
        try withStorePath { path in
            try EventLog(path: path).close()      // create it, so children never race to
            var generator = SystemRandomNumberGenerator()
            var perBatch: [UInt64: Int] = [:]
            var acknowledged = Set<UInt64>()
            var checkedThrough: UInt64 = 0
            var killedMidWay = 0

            for run in 0..<25 {
                let first = UInt64(run) * 1_000_000
                let child = try Child(["append-loop", path, "\(first)", "\(Self.batchSize)"])
                // Let it get going, then kill it somewhere inside its loop.
                #expect(child.waitFor(lineStartingWith: "acked") != nil, "run \(run): the child never acknowledged a batch")
                usleep(UInt32.random(in: 0...80_000, using: &generator))
                let lines = child.kill()
                let acked = lines.compactMap { $0.hasPrefix("acked ") ? UInt64($0.dropFirst(6)) : nil }
                acknowledged.formUnion(acked)

                let log = try EventLog(path: path)
                let report = try log.verify()
                #expect(report.isValid, "run \(run): \(report.problem.map(String.init(describing:)) ?? "")")
                // The child never closed its log: its latest index entries were only in its
                // memory (the index tail), and are read back from the log.
                for batch in acked {
                    #expect(try log.event(id: EventID(high: batch, low: UInt64(Self.batchSize - 1)))?.id.high == batch, "run \(run): batch \(batch) by id")
                }
                try log.events(from: checkedThrough + 1).forEach { event in
                    perBatch[event.id.high, default: 0] += 1
                    checkedThrough = event.position
                }
                // Batches the child wrote but was killed before acknowledging count as "mid-way".
                let last = acked.max() ?? first
                if perBatch[last + 1] != nil { killedMidWay += 1 }
            }

            for batch in acknowledged {
                #expect(perBatch[batch] == Self.batchSize, "acknowledged batch \(batch) must be whole")
            }
            for (batch, count) in perBatch {
                #expect(count == Self.batchSize, "batch \(batch) is partial: \(count) of \(Self.batchSize) events")
            }
            #expect(acknowledged.count >= 25)
            // Not an assertion of luck, just a record of how often the kill beat the acknowledgement.
            print("crash test: \(acknowledged.count) batches acknowledged, \(perBatch.count) stored, \(killedMidWay) runs killed between commit and acknowledgement")
        }
    }

    /// The parent reads while a child process appends 20,000 events into a tiny map that it
    /// grows several times; the parent sees its commits as they land, in order, with no gaps.
    /// A child appends `account.deleted` for one subject after another (each append destroys a
    /// key: the key store written afresh without it, the switch committed, the old directory
    /// removed) and is SIGKILLed at moments spread over that work. Reopened each time: every
    /// subject whose `account.deleted` is stored has no key left and reads "[Deleted User]"
    /// (an acknowledged erasure is always stored), every other one still opens — never a deleted
    /// account whose key survives, never a lost key of a live subject.
    @Test func killingErasuresAtAnyMomentKeepsEveryLiveKeyAndNoDestroyedOne() throws {
        try withStorePath { path in
            let subjects = (0..<1500).map { "p-\($0)" }
            // The notes, appended here, and each subject's key as the key store holds it.
            var keys: [String: [UInt8]] = [:]
            do {
                let log = try EventLog(path: path)
                try log.append(subjects.map { subject in
                    var note = SupportNoteAdded()
                    note.text = "note of \(subject)"
                    note.agent = "agent-1"
                    return EventDraft(subject: subject, type: SupportNoteAdded.type, occurredAt: Timestamp(milliseconds: 1_790_000_000_000), source: .support,
                                      meta: ["email": "\(subject)@example.com"], payload: EventCatalog.encode(note.eventData))
                })
                let generation = try log.storage.read("") { txn in try log.storage.keyGeneration(txn) }
                for subject in subjects { keys[subject] = try log.storage.keyStore.keys(of: subject, generation: generation).first?.bytes }
                log.close()
            }
            #expect(keys.count == subjects.count)
            func onDisk(_ subjects: some Sequence<String>) -> [String] {
                let files = (FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? []).compactMap { FileManager.default.contents(atPath: path + "/" + $0) }
                return subjects.filter { subject in files.contains { $0.range(of: Data(keys[subject] ?? [])) != nil } }
            }
            var acknowledged = Set<String>()
            var kills = 0
            for delay: UInt32 in [0, 2, 5, 9, 14, 20, 30, 45, 70, 110, 160, 230] {
                let child = try Child(["erase-loop", path, "\(subjects.count)"])
                guard child.waitFor(lineStartingWith: "ready") != nil else {
                    Issue.record("the child did not start: \(child.finish().lines)")
                    return
                }
                usleep(delay * 1000)
                let lines = child.kill()
                kills += lines.contains("done") ? 0 : 1
                acknowledged.formUnion(lines.filter { $0.hasPrefix("erased ") }.map { String($0.dropFirst("erased ".count)) })
                // Before anything opens the store for writing (which would finish an erasure
                // cut short): an acknowledged erasure's key is in no file.
                #expect(onDisk(acknowledged) == [], "an acknowledged erasure's key is still on disk")

                let log = try EventLog(path: path)
                var erased: [String] = []
                for subject in subjects {
                    let events = try log.events(subject: subject).collect()
                    let deleted = events.contains { $0.type == AccountDeleted.type }
                    if acknowledged.contains(subject) { #expect(deleted, "\(subject): an acknowledged erasure is not stored") }
                    let note = events.first.flatMap { event in EventCatalog.layout(of: event.type, version: event.schemaVersion)?.decode(binary: event.payload) }
                        .flatMap { value in EventCatalog.layout(of: SupportNoteAdded.type, version: 1)?.json(value)["text"] }
                    let live = try log.liveKeys(of: subject)
                    if deleted {
                        erased.append(subject)
                        #expect(note == .string("[Deleted User]") && events.first?.meta["email"] == "[Deleted User]", "\(subject)")
                        #expect(live == 0, "\(subject): a deleted account's key survived")
                    } else {
                        #expect(note == .string("note of \(subject)"), "\(subject): a live subject's note does not open")
                        #expect(live == 1, "\(subject)")
                    }
                }
                // Opened for writing, every stored deletion's key is gone from every file.
                #expect(onDisk(erased) == [], "a deleted account's key survived")
                let report = try log.verify()
                #expect(report.problem == nil)
                #expect(report.personal.erasedSubjects == erased.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
                log.close()
            }
            #expect(kills >= 8, "too few kills landed before the child finished")
            #expect(acknowledged.count > 3)
        }
    }

    @Test func aSecondProcessReadsWhileTheFirstAppends() throws {
        try withStorePath { path in
            var options = EventLog.Options()
            options.initialMapSize = 64 << 10     // smaller than the child will grow it
            let log = try EventLog(path: path, options: options)
            let child = try Child(["append-many", path, "20000"])
            var observed: [UInt64] = []
            var read: UInt64 = 0
            while true {
                // Whether the child had finished *before* this head was read: only then is a
                // head we have fully read the final one.
                let finished = !child.process.isRunning
                let head = try log.lastPosition()
                if observed.last != head { observed.append(head) }
                try log.events(from: read + 1, through: head).forEach { event in
                    #expect(event.position == read + 1, "positions must arrive gap-free")
                    read = event.position
                }
                if finished && head == read { break }
                usleep(2_000)
            }
            let (status, lines) = child.finish()
            #expect(status == 0)
            #expect(lines.contains("done"))
            #expect(try log.lastPosition() == 20_000)
            #expect(read == 20_000)
            #expect(observed == observed.sorted(), "the head never moves backwards")
            #expect(observed.filter { $0 > 0 && $0 < 20_000 }.count >= 2, "the parent saw the log part-written, more than once")
            #expect(log.environment.adoptedResizes > 0, "the child grew the map; this process adopted the new size")
            #expect(try log.verify().isValid)
        }
    }

    /// A process that dies holding a read transaction leaves its reader slot taken until
    /// `mdb_reader_check` frees it; opening a store (or `checkReaders()`) does that.
    @Test func aReaderSlotLeftByAKilledProcessIsFreed() throws {
        try withStorePath { path in
            let log = try EventLog(path: path)
            try log.append([draft("user-1")])
            #expect(log.environment.activeReaders() == 0)
            let child = try Child(["hold-reader", path])
            #expect(child.waitFor(lineStartingWith: "ready") != nil)
            #expect(log.environment.activeReaders() == 1)
            _ = child.kill()
            #expect(log.environment.activeReaders() == 1, "the dead child's slot stays taken until checked")
            #expect(try log.environment.checkReaders() == 1)
            #expect(log.environment.activeReaders() == 0)
            #expect(try log.event(at: 1)?.subject == "user-1")
        }
    }
}

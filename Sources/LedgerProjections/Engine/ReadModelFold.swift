import Foundation
import LedgerCore

/// Read models folded from scratch in memory, one event at a time: how a rebuild (and verify)
/// folds the log, open to events read from anywhere else (the benchmark feeds it events read
/// back from SQLite, so that both rebuilds run the very same projectors).
///
/// The caller's thread reads and decodes events and numbers their subjects; the folding
/// itself runs on a second thread, fed batches of events through a bounded hand-over, so a
/// rebuild keeps two cores busy. At 100,000 customers the folding thread once spent 1.4 s of
/// CPU against the reading thread's 0.75 s, most of it waiting on memory for the states (and
/// the key table); numbering the subjects on the reading thread took it to 1.1 s against 1.3 s,
/// and starting to load the states a few events ahead (`StateFold.prefetch`) left the two
/// about even. Moving the events instead of copying them (`EventBuffer`) then took a third of
/// the folding thread's instructions and a quarter of the reading thread's (callgrind, 5,000
/// customers: 191.7 → 128.7 M and 333.7 → 253.5 M); the folding thread still waits on memory
/// at full size. (Two folding threads, each with some of the models, made no difference on two
/// cores.) Call `finish()` before reading the states.
///
/// ```swift
/// let fold = ReadModelFold()
/// for event in events { try fold.apply(event) }      // in position order
/// try fold.finish()
/// try fold.forEachState { model, key, state in … }   // each key's encoded state
/// ```
public final class ReadModelFold: @unchecked Sendable {
    // @unchecked: `folds` are touched by the folding thread alone between the first hand-over
    // and `finish()`, which waits for that thread; the hand-over's lock orders the two. The
    // table is numbered by the caller's thread (and by a model keyed by something other than
    // the subject, on the folding thread), under its lock. `discard()` hands the folds and the
    // table to a freeing thread, which touches them alone from then on.
    let runners: [ModelRunner]
    private(set) var folds: [any StateFold]
    /// The keys the folds have met, shared by all of them.
    private(set) var table: KeyTable
    /// Every event type some model reads; others may be skipped before decoding.
    public let eventTypes: Set<String>
    /// For each event type (by `EventData.ordinal`), the folds (by index) of the models that
    /// read it.
    let readers: [[Int]]

    /// Events waiting to be handed over, with their subjects' numbers (the caller's thread).
    private var pending = Batch()
    private var handOff: HandOff<Batch>?
    private var finished = false
    static let batch = 2_048

    /// Empty states of `projections`.
    public convenience init(_ projections: [any Projection.Type] = ReadModels.all) {
        self.init(projections.map { ModelRunner.make($0) })
    }

    /// `expectedKeys`: how many keys the folds will likely hold (a rebuild: the store's
    /// subjects), to make room for at once.
    init(_ runners: [ModelRunner], expectedKeys: Int = 0) {
        self.runners = runners
        let table = KeyTable(expecting: expectedKeys)
        self.table = table
        folds = runners.map { $0.makeFold(table) }
        readers = ModelRunner.readers(runners)
        eventTypes = Set(zip(EventCatalog.typeNames, readers).lazy.filter { !$0.1.isEmpty }.map(\.0))
        pending.reserve()
    }

    deinit { handOff?.cancel() }

    /// Folds one event into every model that reads it. Events must come in position order.
    public func apply(_ event: consuming RecordedEvent) throws {
        precondition(!finished, "ReadModelFold.apply after finish()")
        let ordinal = event.data.ordinal
        guard !readers[ordinal].isEmpty else { return }
        let subject = table.number(of: event.subject)
        pending.events.append(event)
        pending.subjects.append(subject)
        pending.ordinals.append(ordinal)
        if pending.events.count >= Self.batch {
            let handOff = self.handOff ?? startFolding()
            try handOff.put(takePending(more: true))
        }
    }

    /// Folds a stored event, decoding its payload first. - Throws: `LedgerError.corruptRecord`
    /// when the payload does not decode.
    public func apply(_ event: StoredEvent) throws {
        try apply(try RecordedEvent(event))
    }

    /// Folds what is left and waits for the folding thread. Rethrows what folding threw.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        let last = takePending(more: false)
        if let handOff {
            try handOff.put(last)
            try handOff.closeAndWait()
        } else {
            try Self.fold(last, readers, folds)
        }
    }

    /// The events waiting, taken (the folding thread owns them from then on: see
    /// `EventBuffer`), and an empty batch in their place, with room for a whole batch when
    /// `more` will come.
    private func takePending(more: Bool) -> Batch {
        var taken = Batch()
        if more { taken.reserve() }
        swap(&taken, &pending)
        return taken
    }

    /// Keys held, over all models (after `finish()`).
    public var stateCount: Int { folds.reduce(0) { $0 + $1.count } }

    /// Every model's states, model by model, keys in byte order (the order a store keeps
    /// them), after `finish()`.
    public func forEachState(_ body: (_ model: String, _ key: [UInt8], _ state: [UInt8]) throws -> Void) rethrows {
        for (runner, fold) in zip(runners, folds) {
            for (key, state) in fold.encodedStates() { try body(runner.name, key, state) }
        }
    }

    /// Frees the folded states on a thread of their own, after `finish()` and once they are
    /// read (a rebuild's, once written); the fold holds none afterwards.
    public func discard() {
        precondition(finished, "ReadModelFold.discard before finish()")
        let states: Any = (folds, table)
        folds = []
        table = KeyTable()
        Self.freeInBackground(consume states)
    }

    /// Folded states a caller is done with, freed on a thread of their own. A rebuild holds
    /// every key's decoded states in memory until they are written: freeing them took about an
    /// eighth of a rebuild at 100,000 customers (0.54 s of 4.2 s), after the rebuilt models
    /// were served. The caller must hold no other reference to them, or they are freed
    /// wherever the last one ends.
    private static func freeInBackground(_ value: consuming Any) {
        let doomed = Doomed(consume value)
        freeing.enter()
        let thread = Thread {
            doomed.free()
            freeing.leave()
        }
        thread.name = "ledger free"
        thread.start()
    }

    /// The frees under way.
    private static let freeing = DispatchGroup()

    /// Waits until the states every rebuild and `discard()` handed off are freed: the
    /// benchmark waits before its next case, so that no case runs beside another's freeing.
    public static func waitUntilFreed() { freeing.wait() }

    /// How many events ahead of the one it folds the folding thread starts loading states.
    private static let prefetchAhead = 16

    /// Folds `batch` into the folds `readers` names (for each event type, by index in `folds`).
    private static func fold(_ batch: consuming Batch, _ readers: [[Int]], _ folds: [any StateFold]) throws {
        let subjects = batch.subjects, ordinals = batch.ordinals, events = batch.events
        let count = events.count
        for i in 0 ..< count {
            // The states of the event `prefetchAhead` on start loading while this one folds.
            let ahead = i + Self.prefetchAhead
            if ahead < count {
                for index in readers[ordinals[ahead]] { folds[index].prefetch(subjects[ahead]) }
            }
            // Moved out, never copied: a copy (and passing `events[i]` to a model made one for
            // each model), even to read the event's type, retains and releases every string
            // of its payload.
            guard let event = events.takeNext() else { break }
            for index in readers[ordinals[i]] { try folds[index].apply(event, subject: subjects[i], memo: nil) { _ in nil } }
        }
    }

    private func startFolding() -> HandOff<Batch> {
        let handOff = HandOff<Batch>(depth: 4)
        self.handOff = handOff
        let work = Work(readers: readers, folds: folds)
        let thread = Thread {
            while let batch = handOff.take() {
                do {
                    try Self.fold(batch, work.readers, work.folds)
                } catch {
                    handOff.fail(error)
                    return
                }
            }
        }
        thread.name = "ledger fold"
        thread.start()
        return handOff
    }
}

/// Events handed to the folding thread, each with its subject's number in the shared table
/// and its type's (`EventData.ordinal`).
private struct Batch: Sendable {
    var events = EventBuffer(capacity: 0)
    var subjects: [Int] = []
    var ordinals: [Int] = []

    mutating func reserve() {
        events = EventBuffer(capacity: ReadModelFold.batch)
        subjects.reserveCapacity(ReadModelFold.batch)
        ordinals.reserveCapacity(ReadModelFold.batch)
    }
}

/// A batch's events in memory of their own: the reading thread moves each one in, the folding
/// thread moves each one out, in order, so that no event is copied (a copy retains and
/// releases every string of its payload) and none moved more than in and out. (An array gave
/// them up without a copy only from its end: reversed first, by moves, `memmove` was 5 % of a
/// rebuild's `perf` samples at 100,000 customers, most of them the folding thread's; 2.8 %
/// with this buffer.)
private final class EventBuffer: @unchecked Sendable {
    // @unchecked: the reading thread fills it before handing it over, and only the folding
    // thread touches it after.
    private let base: UnsafeMutablePointer<RecordedEvent>
    private let capacity: Int
    /// Events moved in, and of those the ones moved out (from the first).
    private(set) var count = 0
    private var taken = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(capacity: max(capacity, 1))
    }

    deinit {
        (base + taken).deinitialize(count: count - taken)
        base.deallocate()
    }

    /// Moves `event` in after the others. A full batch is handed over before the next event
    /// comes (`ReadModelFold.apply`).
    func append(_ event: consuming RecordedEvent) {
        precondition(count < capacity, "a full batch was not handed over")
        (base + count).initialize(to: event)
        count += 1
    }

    /// Moves out the first event not yet taken; `nil` when all are.
    func takeNext() -> RecordedEvent? {
        guard taken < count else { return nil }
        defer { taken += 1 }
        return (base + taken).move()
    }
}

/// The models and folds the folding thread owns until `finish()` (not the fold itself, so
/// that dropping an unfinished fold ends the thread).
private struct Work: @unchecked Sendable {
    let readers: [[Int]]
    let folds: [any StateFold]
}

/// States on their way to a freeing thread.
private final class Doomed: @unchecked Sendable {
    // @unchecked: after the hand-over only the freeing thread touches `value`.
    private var value: Any?
    init(_ value: consuming Any) { self.value = value }
    func free() { value = nil }
}

import Foundation
import LedgerCore
import CPrefetch
import Synchronization

/// A projection with its types erased, as the engine runs it.
struct ModelRunner: Sendable {
    let name: String
    let codeVersion: UInt32
    let eventTypes: Set<String>
    /// A fresh fold numbering its keys in `table` (shared with the other models' folds).
    let makeFold: @Sendable (KeyTable) -> any StateFold
    /// The view of a stored state (`nil`: the key has none) as JSON, `nil` when the policy
    /// has no such model (`Projection.isServed(by:)`); the memo, when given, is shared by the
    /// states of one query (`StateReader.leading`).
    let viewJSON: @Sendable (UnsafeRawBufferPointer?, Timestamp, Policy, DecodeMemo?) throws(StateReader.Damaged) -> JSONObject?
    /// `Projection.isServed(by:)`.
    let isServed: @Sendable (Policy) -> Bool

    /// A fresh in-memory fold of one subject's history, as the audit steps through it.
    let makeTimeline: @Sendable () -> any SubjectTimeline

    /// The runner of a projection. The built-in models' runners are made from their concrete
    /// types, so that the compiler specializes their code (a rebuild folds every event through
    /// it; generic code pays a metadata lookup and a witness call per dictionary access);
    /// any other projection runs the same code, generically.
    static func make(_ projection: any Projection.Type) -> ModelRunner {
        switch ObjectIdentifier(projection) {
        case ObjectIdentifier(EntitlementProjection.self): ModelRunner(EntitlementProjection.self)
        case ObjectIdentifier(RetentionProjection.self): ModelRunner(RetentionProjection.self)
        case ObjectIdentifier(BadgeProjection.self): ModelRunner(BadgeProjection.self)
        default: ModelRunner(projection)
        }
    }

    /// For each catalog event type, by `EventData.ordinal`, the runners (by index) that read
    /// it: one array index per event instead of a hash of its type name per model, for the
    /// rebuild's fold and the append's inline one.
    static func readers(_ runners: [ModelRunner]) -> [[Int]] {
        EventCatalog.typeNames.map { type in runners.indices.filter { runners[$0].eventTypes.contains(type) } }
    }

    init<P: Projection>(_ projection: P.Type) {
        makeTimeline = { TypedTimeline<P>() }
        name = P.name
        codeVersion = P.codeVersion
        eventTypes = P.eventTypes
        makeFold = { table in TypedFold(P.self, table: table) }
        isServed = { P.isServed(by: $0) }
        viewJSON = { bytes, t, policy, memo throws(StateReader.Damaged) in
            guard P.isServed(by: policy) else { return nil }
            let state = try bytes.map { bytes throws(StateReader.Damaged) in try P.State.decode(bytes, memo: memo) } ?? P.State()
            return P.view(of: state, at: t, policy: policy).json
        }
    }
}

/// The keys a set of folds has met, numbered in the order first met: the folds of one rebuild
/// (or one append) share a table, so an event's subject is hashed once for all the models that
/// read it, and each model keeps its states in an array by number instead of a table of its own.
///
/// A rebuild's reading thread numbers the subjects while its folding thread folds: numbering
/// takes a lock, so that a model keyed by something other than the subject may number its
/// keys on the folding thread meanwhile. `keys` is read once the folds are done.
final class KeyTable: Sendable {
    private struct Numbering {
        var numbers: [String: Int] = [:]
        /// The keys by number.
        var keys: [String] = []
    }

    /// A `Mutex` (an atomic exchange when nobody else holds it), not an `NSLock`: the reading
    /// thread takes it for every event, and `pthread_mutex_lock` alone was 2.7 % of a
    /// rebuild's samples (`perf`, 100,000 customers).
    private let numbering: Mutex<Numbering>
    /// How many keys the table was made to expect (a rebuild: the store's subjects): folds
    /// make room for that many states at once.
    let expected: Int

    /// A table with room for `expected` keys from the start: growing the dictionary to a
    /// hundred thousand keys hashed every key again at each doubling.
    init(expecting expected: Int = 0) {
        var numbering = Numbering()
        numbering.numbers.reserveCapacity(expected)
        numbering.keys.reserveCapacity(expected)
        self.numbering = Mutex(numbering)
        self.expected = expected
    }

    /// The number of `key`, given it the first time.
    func number(of key: String) -> Int {
        numbering.withLock { table in
            if let number = table.numbers[key] { return number }
            let number = table.keys.count
            table.numbers[key] = number
            table.keys.append(key)
            return number
        }
    }

    /// The keys by number.
    var keys: [String] { numbering.withLock { $0.keys } }
}

/// States of one model being folded in memory: a rebuild's whole model, or the keys one
/// write transaction touches.
protocol StateFold: AnyObject {
    /// The key table this fold shares with the other folds of its rebuild or append.
    var table: KeyTable { get }
    /// Keys held.
    var count: Int { get }
    /// Applies `event` to its key's state; `subject` is the number of the event's subject in
    /// `table` (the caller looks it up once for every model), and `load` gives the stored
    /// state's bytes the first time a key is touched (`nil`: none stored), decoded with `memo`
    /// when given (the models that read one event share it: `StateReader.leading`).
    func apply(_ event: RecordedEvent, subject: Int, memo: DecodeMemo?, load: (String) throws -> [UInt8]?) throws
    /// Every held key (UTF-8) with its encoded state, in key byte order: the order LMDB
    /// stores them, so writing them is an append.
    func encodedStates() -> [(key: [UInt8], state: [UInt8])]
    /// Whether a state is held for the key numbered `slot` in `table`.
    func holds(_ slot: Int) -> Bool
    /// Encodes the state held for the key numbered `slot` after the bytes `writer` holds
    /// (`StateWriter.startState()`), if this model holds one; whether it did.
    func encodeState(_ slot: Int, into writer: inout StateWriter) -> Bool
    /// Every held key.
    var keys: [String] { get }
    /// Starts loading the state held for the key numbered `slot` into the CPU's cache, without
    /// waiting: the rebuild's folding thread calls it a few events ahead of the one it folds,
    /// and the encoding threads (`EncodedStates`) a few keys ahead of the one they encode.
    func prefetch(_ slot: Int)
}

extension StateFold {
    /// Applies `event`, numbering its subject in the fold's own table.
    func apply(_ event: RecordedEvent, load: (String) throws -> [UInt8]?) throws {
        try apply(event, subject: table.number(of: event.subject), memo: nil, load: load)
    }
}

/// A model's states in memory, by their keys' numbers in a shared `KeyTable`.
final class TypedStates<P: Projection> {
    let table: KeyTable
    /// By key number; a number this model holds no state for has an empty state here and
    /// `false` in `held`. (Unchecked exclusivity: one thread folds, and no access overlaps
    /// another; the checks were an eighth of the folding thread.)
    @exclusivity(unchecked) private(set) var states: [P.State] = []
    @exclusivity(unchecked) private(set) var held: [Bool] = []
    @exclusivity(unchecked) private(set) var count = 0

    init(table: KeyTable) {
        self.table = table
        // Room for the keys the table expects: growing copied every state (a move, but of a
        // hundred thousand states) at each doubling.
        states.reserveCapacity(table.expected)
        held.reserveCapacity(table.expected)
    }

    func apply(_ event: RecordedEvent, subject: Int, memo: DecodeMemo?, load: (String) throws -> [UInt8]?) throws {
        guard let key = P.key(for: event) else { return }
        // A model keyed by something other than the subject numbers its key in the same table,
        // so a key is one slot whichever event reached it.
        let slot = key == event.subject ? subject : table.number(of: key)
        if slot >= states.count {
            // Grown to this slot, not to the table's size: another thread may be numbering keys.
            let missing = slot + 1 - states.count
            // Each made in place: copies of one empty state (`repeatElement`) retained each of
            // its arrays, for every new key.
            for _ in 0 ..< missing { states.append(P.State()) }
            held.append(contentsOf: repeatElement(false, count: missing))
        }
        if !held[slot] {
            if let bytes = try load(key) {
                states[slot] = try bytes.withUnsafeBytes { buffer throws(StateReader.Damaged) in try P.State.decode(buffer, memo: memo) }
            }
            held[slot] = true
            count += 1
        }
        // Mutates the stored state in place: no copy of its arrays.
        P.apply(event, to: &states[slot])
    }

    /// Starts loading the state of `slot`, and whether it is held, into the cache. At 100,000
    /// customers the folding thread spent most of its time waiting on memory for them; with
    /// this 16 events ahead, `ledger rebuild` of the demo's customers folded in 1.14 s (median
    /// of eight runs, alternated) instead of 1.29 s. The states' own arrays are not reached:
    /// their addresses are in the state, not yet loaded.
    func prefetch(_ slot: Int) {
        guard slot < states.count else { return }
        states.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            let state = UnsafeRawPointer(base + slot)
            for offset in stride(from: 0, to: MemoryLayout<P.State>.size, by: 64) { ledger_prefetch(state + offset) }
        }
        held.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            ledger_prefetch(base + slot)
        }
    }

    /// The numbers of the held keys.
    var heldSlots: [Int] { held.indices.filter { held[$0] } }

    func holds(_ slot: Int) -> Bool { slot < held.count && held[slot] }

    func encodeState(_ slot: Int, into writer: inout StateWriter) -> Bool {
        guard holds(slot) else { return false }
        writer.startState()
        // Encoded where it lies, not from a copy.
        states.withUnsafeBufferPointer { $0[slot].encode(to: &writer) }
        return true
    }
}

/// A `StateFold` over `TypedStates<P>`, its methods closures made where `P` is known: made from
/// a concrete type (`ModelRunner.make`), they are specialized code, which a generic class's
/// methods called through the protocol would not be.
final class TypedFold: StateFold {
    let table: KeyTable
    private let countOf: () -> Int
    private let keysOf: () -> [String]
    private let applyTo: (RecordedEvent, Int, DecodeMemo?, (String) throws -> [UInt8]?) throws -> Void
    private let holdsSlot: (Int) -> Bool
    private let encodeSlot: (Int, inout StateWriter) -> Bool
    private let prefetchSlot: (Int) -> Void

    init<P: Projection>(_ projection: P.Type, table: KeyTable) {
        let states = TypedStates<P>(table: table)
        self.table = table
        countOf = { states.count }
        keysOf = {
            let keys = table.keys
            return states.heldSlots.map { keys[$0] }
        }
        applyTo = { event, subject, memo, load in try states.apply(event, subject: subject, memo: memo, load: load) }
        holdsSlot = { slot in states.holds(slot) }
        encodeSlot = { slot, writer in states.encodeState(slot, into: &writer) }
        prefetchSlot = { slot in states.prefetch(slot) }
    }

    var count: Int { countOf() }
    var keys: [String] { keysOf() }
    func apply(_ event: RecordedEvent, subject: Int, memo: DecodeMemo?, load: (String) throws -> [UInt8]?) throws {
        try applyTo(event, subject, memo, load)
    }
    func encodedStates() -> [(key: [UInt8], state: [UInt8])] { EncodedStates([(self, nil)]).pairs }
    func holds(_ slot: Int) -> Bool { holdsSlot(slot) }
    func encodeState(_ slot: Int, into writer: inout StateWriter) -> Bool { encodeSlot(slot, &writer) }
    func prefetch(_ slot: Int) { prefetchSlot(slot) }
}

/// One model folding one subject's events in business-time order, viewed between them.
protocol SubjectTimeline: AnyObject {
    func apply(_ event: RecordedEvent)
    /// The times its view may change with no new event (see `Projection.changeTimes`).
    func changeTimes(policy: Policy) -> [Timestamp]
    /// The view at `t`, compared with the one this method returned last.
    func step(to t: Timestamp, policy: Policy) -> TimelineStep
}

/// One model's view at a step of the audit's walk.
struct TimelineStep {
    /// The view's leaves, restated fields left out.
    var view: FlatView
    /// The rule behind each field's change since the previous step (`ProjectionView.rule(for:since:)`).
    var rules: [String: String]
    /// The model's words for the change, had no event caused it (`ProjectionView.timeChange(since:)`).
    var timeChange: String?
}

final class TypedTimeline<P: Projection>: SubjectTimeline {
    private var state = P.State()
    private var last: P.View?

    func apply(_ event: RecordedEvent) {
        guard P.eventTypes.contains(event.type) else { return }
        P.apply(event, to: &state)
    }

    func changeTimes(policy: Policy) -> [Timestamp] { P.changeTimes(of: state, policy: policy) }

    func step(to t: Timestamp, policy: Policy) -> TimelineStep {
        let view = P.view(of: state, at: t, policy: policy)
        let previous = last
        last = view
        let leaves = FlatView(pairs: ProjectionEngine.flatten(view.json).pairs.filter { !P.View.restatedFields.contains($0.0) })
        var rules: [String: String] = [:]
        for (field, _) in leaves.pairs {
            rules[field] = previous.map { view.rule(for: field, since: $0) } ?? view.rule(for: field)
        }
        return TimelineStep(view: leaves, rules: rules, timeChange: previous.flatMap { view.timeChange(since: $0) })
    }
}

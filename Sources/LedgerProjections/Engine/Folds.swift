@_spi(Storage) import LedgerCore
import LedgerModels

/// What the engine folds and stores per key: the subjects' facts (`SubjectFacts`, which every
/// view reads) and each registered model. One list, `Fold.all(models)`: index 0 is the facts.
struct Fold: Sendable {
    let name: String
    let version: UInt32
    let reads: Set<String>
    /// The model, `nil` for the facts.
    let model: (any ReadModel.Type)?
    /// Whether its keys are subjects (`ReadModel.keyedBySubject`; the facts' are).
    var keyedBySubject: Bool { model?.keyedBySubject ?? true }

    static let factsName = "facts"
    /// Bumped when `SubjectFacts.apply` or its fields change meaning.
    static let factsVersion: UInt32 = 6

    static func all(_ models: [any ReadModel.Type]) -> [Fold] {
        [Fold(name: factsName, version: factsVersion, reads: SubjectFacts.reads, model: nil)]
            + models.map { Fold(name: $0.name, version: $0.version, reads: $0.reads, model: $0) }
    }

    /// The key whose state `event` changes in this fold (`nil`: none).
    func key(for event: RecordedEvent) -> String? { model.map { $0.key(for: event) } ?? event.subject }

    /// The item `event` names in this fold, if any.
    func item(for event: RecordedEvent) -> String? { model?.item(for: event) }

    /// Empty states of this fold, to fold events into under `policy` (the store's, or the one
    /// a rebuild builds under).
    /// `keys`: how many keys it may hold, room made at once (0: grown as they come).
    func makeStates(policy: Policy, keys: Int = 0) -> any StateFold {
        guard let model else { return States<FactsFolding>(policy: policy, keys: keys) }
        return states(model, policy: policy, keys: keys)
    }

    private func states<M: ReadModel>(_ model: M.Type, policy: Policy, keys: Int) -> any StateFold { States<ModelFolding<M>>(policy: policy, keys: keys) }
}

/// A reducer the engine runs: the facts' or a model's.
protocol Folding {
    associatedtype State: StateRecord & Equatable
    associatedtype Item: StateRecord & Equatable
    static func key(for event: RecordedEvent) -> String?
    static func item(for event: RecordedEvent) -> String?
    /// Throws when a part of the stored state it reads only now is damaged (`FoldedFacts`).
    static func apply(_ event: RecordedEvent, to state: inout State, policy: Policy) throws(StateDecoder.Damaged)
    static func apply(_ event: RecordedEvent, to state: inout State, item: inout Item)
    /// The subject's facts a state holds: the facts' whole, `nil` for a model's.
    static func facts(of state: State) throws(StateDecoder.Damaged) -> SubjectFacts?
    /// A model's index entries of a state (`ReadModel.indexEntries`); none for the facts.
    static func indexEntries(of state: State, facts: SubjectFacts, policy: Policy) -> [IndexEntry]
    /// Whether a state was read whole (`StateFold.readPlan(of:)`).
    static func readPlan(of state: State) -> Bool
}

/// The facts, folded with the plan's facts left unread by the events that do not change them.
enum FactsFolding: Folding {
    static func key(for event: RecordedEvent) -> String? { event.subject }
    static func item(for event: RecordedEvent) -> String? { nil }
    static func apply(_ event: RecordedEvent, to state: inout FoldedFacts, policy: Policy) throws(StateDecoder.Damaged) {
        try state.apply(event, policy: policy)
    }
    /// Never called: the facts name no items.
    static func apply(_ event: RecordedEvent, to state: inout FoldedFacts, item: inout NoItem) {}
    static func facts(of state: FoldedFacts) throws(StateDecoder.Damaged) -> SubjectFacts? { try state.whole() }
    static func indexEntries(of state: FoldedFacts, facts: SubjectFacts, policy: Policy) -> [IndexEntry] { [] }
    static func readPlan(of state: FoldedFacts) -> Bool { state.planRead }
}

enum ModelFolding<M: ReadModel>: Folding {
    static func key(for event: RecordedEvent) -> String? { M.key(for: event) }
    static func item(for event: RecordedEvent) -> String? { M.item(for: event) }
    static func apply(_ event: RecordedEvent, to state: inout M.State, policy: Policy) { M.apply(event, to: &state, policy: policy) }
    static func apply(_ event: RecordedEvent, to state: inout M.State, item: inout M.Item) { M.apply(event, to: &state, item: &item) }
    static func facts(of state: M.State) -> SubjectFacts? { nil }
    static func indexEntries(of state: M.State, facts: SubjectFacts, policy: Policy) -> [IndexEntry] {
        M.indexEntries(of: state, facts: facts, policy: policy)
    }
    static func readPlan(of state: M.State) -> Bool { true }
}

/// A key and one of its items. The item is compared by its UTF-8 bytes, as the store keys it
/// (`String`'s `==` takes two spellings of one character for one).
struct ItemKey: Hashable {
    var key: String
    var item: String

    static func == (a: ItemKey, b: ItemKey) -> Bool { a.key == b.key && a.item.utf8.elementsEqual(b.item.utf8) }

    func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        // The item's bytes at once (a byte at a time cost 1 % of an append): contiguous
        // always, so that equal bytes always hash alike.
        var item = item
        item.makeContiguousUTF8()
        item.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// One of `count` parts of the keys, by a stable hash of each key: a fold from scratch can hold
/// one part at a time, so that its memory is a part's.
struct Partition: Sendable, Hashable {
    let count: Int
    let index: Int

    static let whole = Partition(count: 1, index: 0)

    func contains(_ key: String) -> Bool {
        guard count > 1 else { return true }
        // Over the stored bytes where they lie (the view's iterator cost 8 times as much).
        let hash = key.utf8.withContiguousStorageIfAvailable { Self.hash($0) } ?? Self.hash(key.utf8)
        return Int(hash % UInt64(count)) == index
    }

    /// FNV-1a: the same part for a key in every process and run.
    private static func hash<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}

protocol StateFold: AnyObject {
    /// From now on, a fold from scratch (`apply(_:)`) keeps only the keys of `part`.
    func restrict(to part: Partition)
    /// Applies `event` to its key's state (and the item it names); `load` gives the stored
    /// state's bytes the first time a key is touched, `loadItem` an item's (`nil`: none stored).
    func apply(_ event: RecordedEvent, load: (String) throws -> [UInt8]?, loadItem: (ItemKey) throws -> [UInt8]?) throws
    /// Applies `event` to its key's state, starting from an empty one (a fold from scratch).
    func apply(_ event: RecordedEvent)
    /// Every held key with its encoded state, in no order; a state loaded from the store and
    /// left as it was is left out (there is nothing to write).
    func encoded() -> [(key: String, state: [UInt8])]
    /// The keys held.
    var keys: [String] { get }
    /// Every held item with its encoded state, in no order.
    func encodedItems() -> [(key: ItemKey, state: [UInt8])]
    /// Takes in `other`'s states and items, which are of other keys (another part's).
    func absorb(_ other: any StateFold)
    /// Whether `key`'s state was read whole: false for facts whose events so far left the
    /// plan's facts unread (`FoldedFacts`), true for any other state.
    func readPlan(of key: String) -> Bool
    /// The subject's facts of `key`, from the state held or else from `stored` (the facts' fold
    /// alone; `nil` for a model's).
    func facts(of key: String, stored: [UInt8]?) throws -> SubjectFacts?
    /// The index entries of `key` (`ReadModel.indexEntries`), from the state held or else from
    /// `stored`, with its facts.
    func indexEntries(of key: String, stored: [UInt8]?, facts: SubjectFacts, policy: Policy) throws -> [IndexEntry]
}

/// A key's state or an item, boxed (`States`).
private final class Box<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// One fold's states in memory, by key: a rebuild's whole model, or the keys one write
/// transaction touches.
///
/// The states and items are boxed and held as objects: a dictionary of `F.State` in this
/// generic class runs unspecialized, asking the runtime for its type at every access (a sixth
/// of what applying an event to its state cost), where one of objects is specialized code.
final class States<F: Folding>: StateFold {
    private var states: [String: AnyObject] = [:]
    private var items: [ItemKey: AnyObject] = [:]
    /// The stored bytes of the states and items loaded: one an event left as it was is not
    /// written again (a model that reads every type changes seldom).
    private var loadedStates: [String: [UInt8]] = [:]
    private var loadedItems: [ItemKey: [UInt8]] = [:]

    var keys: [String] { Array(states.keys) }
    /// The policy folded under.
    let policy: Policy
    private var part = Partition.whole

    func restrict(to part: Partition) { self.part = part }

    init(policy: Policy, keys: Int = 0) {
        self.policy = policy
        states.reserveCapacity(keys)
        loadedStates.reserveCapacity(keys)
    }

    private static func state(_ box: AnyObject) -> Box<F.State> { unsafeDowncast(box, to: Box<F.State>.self) }
    private static func item(_ box: AnyObject) -> Box<F.Item> { unsafeDowncast(box, to: Box<F.Item>.self) }

    /// The state held for `key`, if any (an optional of a generic state costs a metadata
    /// lookup: the fold's own paths ask the box).
    func held(_ key: String) -> F.State? { states[key].map { Self.state($0).value } }

    /// `key`'s box, made with `make()` when there is none.
    private func box(_ key: String, _ make: () throws -> F.State) rethrows -> Box<F.State> {
        if let box = states[key] { return Self.state(box) }
        let box = Box(try make())
        states[key] = box
        return box
    }

    private func box(_ item: ItemKey, _ make: () throws -> F.Item) rethrows -> Box<F.Item> {
        if let box = items[item] { return Self.item(box) }
        let box = Box(try make())
        items[item] = box
        return box
    }

    func apply(_ event: RecordedEvent, load: (String) throws -> [UInt8]?, loadItem: (ItemKey) throws -> [UInt8]?) throws {
        guard let key = F.key(for: event) else { return }
        // A key held was looked up in the store (found or not) when it was first touched.
        let state = try box(key) {
            let stored = try load(key)
            loadedStates[key] = stored
            // Not `stored?.…`: an optional of a generic state costs a metadata lookup.
            guard let stored else { return F.State() }
            return try stored.withUnsafeBytes { buffer throws(StateDecoder.Damaged) in try F.State.decode(buffer) }
        }
        guard let itemKey = F.item(for: event).map({ ItemKey(key: key, item: $0) }) else {
            try F.apply(event, to: &state.value, policy: policy)
            return
        }
        let item = try box(itemKey) {
            let stored = try loadItem(itemKey)
            loadedItems[itemKey] = stored
            guard let stored else { return F.Item() }
            return try stored.withUnsafeBytes { buffer throws(StateDecoder.Damaged) in try F.Item.decode(buffer) }
        }
        F.apply(event, to: &state.value, item: &item.value)
    }

    func apply(_ event: RecordedEvent) {
        guard let key = F.key(for: event), part.contains(key) else { return }
        let state = box(key) { F.State() }
        if let item = F.item(for: event) {
            F.apply(event, to: &state.value, item: &box(ItemKey(key: key, item: item)) { F.Item() }.value)
        } else {
            // From scratch every part of a state is read: there is nothing stored to be damaged.
            try? F.apply(event, to: &state.value, policy: policy)
        }
    }

    func encoded() -> [(key: String, state: [UInt8])] {
        // From scratch nothing was loaded: no key is looked up.
        let loaded = !loadedStates.isEmpty
        return states.compactMap { key, box in
            let bytes = Self.state(box).value.encoded
            return loaded && loadedStates[key] == bytes ? nil : (key, bytes)
        }
    }

    func encodedItems() -> [(key: ItemKey, state: [UInt8])] {
        items.compactMap { key, box in
            let bytes = Self.item(box).value.encoded
            return loadedItems[key] == bytes ? nil : (key, bytes)
        }
    }

    func readPlan(of key: String) -> Bool { states[key].map { F.readPlan(of: Self.state($0).value) } ?? true }

    func absorb(_ other: any StateFold) {
        guard let other = other as? States<F> else { return }
        states.merge(other.states) { mine, _ in mine }
        items.merge(other.items) { mine, _ in mine }
        loadedStates.merge(other.loadedStates) { mine, _ in mine }
        loadedItems.merge(other.loadedItems) { mine, _ in mine }
    }

    func facts(of key: String, stored: [UInt8]?) throws -> SubjectFacts? {
        try F.facts(of: try state(of: key, stored: stored))
    }

    func indexEntries(of key: String, stored: [UInt8]?, facts: SubjectFacts, policy: Policy) throws -> [IndexEntry] {
        F.indexEntries(of: try state(of: key, stored: stored), facts: facts, policy: policy)
    }

    /// The state held for `key`, else `stored` decoded, else an empty one.
    private func state(of key: String, stored: [UInt8]?) throws -> F.State {
        if let box = states[key] { return Self.state(box).value }
        return try stored.map { bytes in try bytes.withUnsafeBytes { buffer throws(StateDecoder.Damaged) in try F.State.decode(buffer) } } ?? F.State()
    }
}

@_spi(Storage) import LedgerCore

/// A read model: a pure reducer over one key's events (the subject unless it says otherwise),
/// and a view of the state it folds at a time, under a policy. No I/O, no clock: the engine
/// (`LedgerProjections`) stores the states, keeps them current in each append's transaction and
/// rebuilds them; the audit folds them in memory.
///
/// A model declares itself once: its state's fields (`ModelState.code(_:)`, which both encodes and decodes them), its view's fields
/// (`Encodable`: the JSON `status` prints, in declaration order, `null` for no value), the
/// events it reads (`reads`), how each changes the state (`apply`, an exhaustive `switch`), and
/// what it answers (`view`). It is registered in `ReadModels.all`, which the engine, `status`,
/// `audit` and the command line all read.
///
/// What decides the plan (store coverage, billing grace, grants, device snapshots, sign-ins,
/// deletion) is folded once per subject into `SubjectFacts`, which every model's view receives:
/// no model holds another's state or calls another's reducer.
public protocol ReadModel: Sendable {
    associatedtype State: ModelState
    associatedtype View: ModelView
    /// A part of a key's state kept apart from it, one per item an event names (an inbox
    /// message, by its id): the engine stores each item under its own key and loads only the
    /// one an event names, so that what a key has had in the past — every message ever read —
    /// costs an append nothing. Views never see items: the state keeps what they need (a
    /// count). Default: none (`NoItem`).
    associatedtype Item: ModelState = NoItem

    /// The model's name, as `stats`, `status` and `rebuild` show it: lower-case, stable.
    static var name: String { get }
    /// Bumped whenever `apply` or the state's fields change meaning: a store built by another
    /// version is stale, and appends do not advance the model, until a rebuild. A change to
    /// `view` alone needs no bump: views are worked out from the stored state at query time.
    static var version: UInt32 { get }
    /// The event types `apply` reads; others never reach it (and their events load no state).
    static var reads: Set<String> { get }
    /// The key whose state an event changes: the subject unless a model says otherwise;
    /// `nil` skips the event.
    static func key(for event: RecordedEvent) -> String?
    /// Folds one event into its key's state.
    static func apply(_ event: RecordedEvent, to state: inout State)
    /// Folds one event into its key's state under the policy the store folds with (a rebuild
    /// under another policy folds again). For a model whose state keeps a policy's decision —
    /// access sessions, where a pause under `resumeWithinSeconds` resumes — rather than the facts
    /// it was decided from. Default: `apply(_:to:)`.
    static func apply(_ event: RecordedEvent, to state: inout State, policy: Policy)
    /// The item `event` names, if any: the engine then calls `apply(_:to:item:)` instead.
    static func item(for event: RecordedEvent) -> String?
    /// Folds an event that names an item into its key's state and that item's.
    static func apply(_ event: RecordedEvent, to state: inout State, item: inout Item)
    /// The earliest time the state and the facts it reads answer for, `nil` for any time. A
    /// state that keeps only what the present and the future need (a count, the latest of
    /// something) answers at t at or after the latest fact it folded, and so do the facts'
    /// activity's latest session zone and clock-tampering count (`SubjectActivity`); for an
    /// earlier t — `status --at` the past — the engine replays the key's events that happened
    /// by t through the same reducers (a model that says so keys its states by subject, the
    /// default `key(for:)`). Default: `nil`.
    static func answersFrom(_ state: State, facts: SubjectFacts) -> Timestamp?
    /// The answer at `t`, from the state, the key's subject facts and the policy; `nil` when the
    /// policy has no such model (it lacks the section the model reads: SPEC §4).
    static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> View?
    /// Times at which the view may change with no new event — a period running out, a grace
    /// ending, a day boundary — as a superset, beyond the subject facts' own
    /// (`Plan.changeTimes`, which the audit always adds): the audit evaluates the view at each
    /// and lists those where something changed, and between them, and between the events that
    /// change the state or the facts, takes the view to be the same. Only times after
    /// `answersFrom` matter. Unsorted, duplicates allowed. Default: none.
    static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp]
    /// The change times that lie in `window`, and possibly others: how the audit asks, one
    /// step at a time, so that a model whose times grow with its history (a tier's days after
    /// every period, each task's due date) lists only those near the step. Default: all of
    /// `changeTimes(of:facts:policy:)`.
    static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy, in window: ChangeWindow) -> [Timestamp]
    /// Whether the model keeps a time-ordered index across keys (`indexEntries`). Default: no.
    static var isIndexed: Bool { get }
    /// Whether `status` shows the model (SPEC §5's shape): an index alone, such as `due`, is
    /// read by range instead. Default: yes.
    static var shownInStatus: Bool { get }
    /// Whether `key(for:)` is the event's subject, so that a subject's events are all a key's:
    /// the audit and the replay fold such a model. One keyed otherwise (the holders of a store
    /// subscription, by its id) is read by its key alone and shown in neither. Default: yes.
    static var keyedBySubject: Bool { get }
    /// Entries of the model's time-ordered index across keys (`Ledger.index`): what falls due
    /// and when, worked out from the key's state and its facts under the policy. The engine
    /// keeps the index in each append's transaction, for every key whose state or facts the
    /// append changed, and rebuilds it with the model. Default: none.
    static func indexEntries(of state: State, facts: SubjectFacts, policy: Policy) -> [IndexEntry]
}

extension ReadModel {
    /// The view's personal fields (`ModelView.personalFields`).
    public static var personalFields: [String: String] { View.personalFields }

    public static func key(for event: RecordedEvent) -> String? { event.subject }
    public static func item(for event: RecordedEvent) -> String? { nil }
    public static func apply(_ event: RecordedEvent, to state: inout State, item: inout Item) { apply(event, to: &state) }
    public static func apply(_ event: RecordedEvent, to state: inout State, policy: Policy) { apply(event, to: &state) }
    public static func answersFrom(_ state: State, facts: SubjectFacts) -> Timestamp? { nil }

    /// Folds `event` into `state`, and into the item it names in `items` (by the item's UTF-8
    /// bytes, as the store keys it: two spellings of one character are two items), under
    /// `policy`: how a fold in memory (the audit, a replay) runs a model, as the engine does
    /// with stored items.
    public static func fold(_ event: RecordedEvent, into state: inout State, items: inout [[UInt8]: Item], policy: Policy) {
        if let item = item(for: event) {
            apply(event, to: &state, item: &items[Array(item.utf8), default: Item()])
        } else {
            apply(event, to: &state, policy: policy)
        }
    }
    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] { [] }
    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy, in window: ChangeWindow) -> [Timestamp] {
        changeTimes(of: state, facts: facts, policy: policy)
    }
    public static var isIndexed: Bool { false }
    public static var shownInStatus: Bool { true }
    public static var keyedBySubject: Bool { true }
    public static func indexEntries(of state: State, facts: SubjectFacts, policy: Policy) -> [IndexEntry] { [] }
}

/// A model's per-key state: empty to start with, encoded by its field list.
public protocol ModelState: StateRecord, Equatable {
    /// The state as a view reads it (default: decoded whole). A state with parts only folding
    /// reads may leave them out — the result is for `ReadModel.view` and `answersFrom` alone,
    /// never folded or stored.
    static func decodeForView(_ bytes: UnsafeRawBufferPointer) throws(StateDecoder.Damaged) -> Self
}

extension ModelState {
    public static func decodeForView(_ bytes: UnsafeRawBufferPointer) throws(StateDecoder.Damaged) -> Self { try decode(bytes) }
}

/// The item of a model that keeps none.
public struct NoItem: ModelState {
    public init() {}
    public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {}
}

/// An entry of a model's time-ordered index: at a time, of a kind, with details the model
/// encodes (`IndexEntry.detail`, JSON text). Entries of one key sort by (at, kind, detail).
public struct IndexEntry: Sendable, Hashable {
    public var at: Timestamp
    public var kind: String
    /// The entry's details as JSON text (`JSON.serialized()`), an object.
    public var detail: String
    /// The time the entry follows from, which the index files it under (default: `at`): the
    /// entries of one key with one anchor are stored together, so a fact that moves the
    /// anchor — a renewal moving a predicted lapse, with every e-mail and tier change counted
    /// from it — rewrites one stored entry, not one per entry. Keep the distances from
    /// `anchor` to `at` few (days of a policy): a range read looks up each distance in use.
    public var anchor: Timestamp

    public init(at: Timestamp, kind: String, detail: JSON = .object(JSONObject()), anchor: Timestamp? = nil) {
        self.at = at
        self.kind = kind
        self.detail = detail.serialized()
        self.anchor = anchor ?? at
    }

    /// An entry whose details are already JSON text (`JSON.serialized()` of an object): a
    /// model that files the same few details for every key serializes them once, and the
    /// engine reads stored entries back without writing their details again.
    package init(at: Timestamp, kind: String, serializedDetail: String, anchor: Timestamp) {
        (self.at, self.kind, self.detail, self.anchor) = (at, kind, serializedDetail, anchor)
    }
}

/// What a model answers: its JSON (SPEC §5's shape) comes from `Encodable`, and the audit and
/// the status card ask it for words.
public protocol ModelView: Encodable, Sendable, Equatable {
    /// The rule that decides a field (its dotted path in the JSON), as the audit names it when
    /// the field changes; `nil` when the field follows from the model's other fields (the audit
    /// then cites the rule of the other fields that changed with it).
    func rule(for field: String) -> String?
    /// The rule behind a field's change from `previous` to this view. Default: `rule(for:)`.
    func rule(for field: String, since previous: Self) -> String?
    /// What happened between `previous` and this view when no event caused it, in words for
    /// the audit's time entries ("the trial ran out: trial → free"); `nil` when this model has
    /// nothing to say beyond its changed fields.
    func timeChange(since previous: Self) -> String?
    /// Fields the audit does not list as changes because they restate others.
    static var restatedFields: Set<String> { get }
    /// The view for people: a headline and rows, values as JSON (the card shows times in UTC
    /// and the subject's zone). Default: the first field as the headline, then every field.
    var card: ViewCard { get }
    /// The view's personal fields (SPEC §2.3), by their dotted path in the JSON, with the
    /// pointer of the event field each comes from. A read model folds events as the log
    /// stores them, so these hold the sealed value until the ledger opens them for a reader.
    static var personalFields: [String: String] { get }
    /// The view with each personal field's value replaced by `reveal(value, pointer)`.
    func revealing<E: Error>(_ reveal: (String, String) throws(E) -> String) throws(E) -> Self
}

extension ModelView {
    public static var personalFields: [String: String] { [:] }
    public func revealing<E: Error>(_ reveal: (String, String) throws(E) -> String) throws(E) -> Self { self }

    public func rule(for field: String) -> String? { nil }
    public func rule(for field: String, since previous: Self) -> String? { rule(for: field) }
    public func timeChange(since previous: Self) -> String? { nil }
    public static var restatedFields: Set<String> { [] }

    /// The view as SPEC §5's JSON object.
    public var json: JSONObject { ViewEncoder.object(self) }

    public var card: ViewCard {
        let members = json.members
        guard let first = members.first else { return ViewCard(headline: [], rows: []) }
        return ViewCard(headline: [.value(first.value)], rows: members.dropFirst().map { ($0.key, $0.value) })
    }
}

/// A view for people: a headline made of words and values, then labelled rows.
public struct ViewCard: Sendable {
    public enum Part: Sendable, Equatable {
        case text(String)
        case value(JSON)
    }

    public var headline: [Part]
    public var rows: [(label: String, value: JSON)]

    public init(headline: [Part], rows: [(label: String, value: JSON)]) {
        self.headline = headline
        self.rows = rows
    }

    /// A view value for people: strings bare, null as –, lists joined, objects as key=value,
    /// and a time followed by its local time in `zone` when one is known. How `status` and the
    /// support pages show a card.
    public static func words(for value: JSON, zone: String?) -> String {
        switch value {
        case .null: return "–"
        case .string(let text):
            if let zone, text.count == 24, text.hasSuffix("Z"), let t = Timestamp(rfc3339: text) { return "\(text) (\(t.local(in: zone)))" }
            return text
        case .array(let items): return items.isEmpty ? "none" : items.map { words(for: $0, zone: zone) }.joined(separator: ", ")
        case .object(let object): return object.members.map { "\($0.key)=\(words(for: $0.value, zone: zone))" }.joined(separator: " ")
        default: return value.serialized()
        }
    }
}

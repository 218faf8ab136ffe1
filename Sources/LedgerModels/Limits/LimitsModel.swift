@_spi(Storage) import LedgerCore

/// Limits (SPEC §4, seed 001): how many resources of each kind the free tier allows, and where
/// the subject stands. Each resource (kind, resourceId) is an item holding its latest creation
/// or deletion; the state keeps the count per kind. Whether the subject is an existing user
/// (its first `account.created`, or first event) is the facts' (`SubjectActivity`). The
/// counts answer from the latest resource event on; an earlier time is replayed.
public enum LimitsModel: ReadModel {
    public static let name = "limits"
    public static let version: UInt32 = 2

    /// The count of one kind's resources that exist.
    public struct Count: StateRecord, Equatable {
        public var kind = ""
        public var count: Int64 = 0

        public init() {}
        public init(kind: String, count: Int64) { (self.kind, self.count) = (kind, count) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&kind)
            try coder.code(&count)
        }
    }

    public struct State: ModelState {
        /// By kind (its UTF-8 bytes), in byte order; only kinds with resources: the same
        /// resources give the same bytes whatever order their events came in.
        public var counts: [Count] = []
        /// The latest occurredAt of the resource events folded.
        public var latest: Timestamp?

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&counts)
            try coder.code(&latest)
        }

        /// The count of `kind` (0 with none).
        public func count(of kind: String) -> Int64 { counts.first { $0.kind.utf8.elementsEqual(kind.utf8) }?.count ?? 0 }

        mutating func add(_ delta: Int64, to kind: String) {
            if let index = counts.firstIndex(where: { $0.kind.utf8.elementsEqual(kind.utf8) }) {
                counts[index].count += delta
                if counts[index].count == 0 { counts.remove(at: index) }
            } else {
                let index = counts.firstIndex { !$0.kind.utf8.lexicographicallyPrecedes(kind.utf8) } ?? counts.endIndex
                counts.insert(Count(kind: kind, count: delta), at: index)
            }
        }
    }

    /// One resource: its latest creation (true) or deletion (false).
    public struct Resource: ModelState {
        public var latest: Dated<Bool>?

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&latest) }
    }
    public typealias Item = Resource

    public static let reads: Set<String> = [ResourceCreated.type, ResourceDeleted.type]

    public static func item(for event: RecordedEvent) -> String? {
        switch event.data {
        case .resourceCreated(let r): "\(r.kind.utf8.count):\(r.kind)\(r.resourceId)"
        case .resourceDeleted(let r): "\(r.kind.utf8.count):\(r.kind)\(r.resourceId)"
        default: nil
        }
    }

    public static func apply(_ event: RecordedEvent, to state: inout State, item resource: inout Resource) {
        let kind: String, created: Bool
        switch event.data {
        case .resourceCreated(let r): (kind, created) = (r.kind, true)
        case .resourceDeleted(let r): (kind, created) = (r.kind, false)
        default: return
        }
        if let latest = resource.latest, (latest.at, latest.position) > (event.occurredAt, event.position) { return }
        let before = resource.latest?.value ?? false
        resource.latest = Dated(at: event.occurredAt, position: event.position, value: created)
        if before != created { state.add(created ? 1 : -1, to: kind) }
        state.latest = max(state.latest ?? event.occurredAt, event.occurredAt)
    }

    /// Every event it reads names a resource (`apply(_:to:item:)`).
    public static func apply(_ event: RecordedEvent, to state: inout State) {}

    public static func answersFrom(_ state: State, facts: SubjectFacts) -> Timestamp? { state.latest }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> LimitsView? {
        guard let limits = policy.limits else { return nil }
        return LimitsRules.view(of: state, facts: facts, at: t, policy: policy, limits: limits)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        guard let limits = policy.limits else { return [] }
        return [limits.effectiveAt.adding(days: limits.existingUserGraceDays)]
    }
}

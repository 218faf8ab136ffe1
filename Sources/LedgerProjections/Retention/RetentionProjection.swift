import LedgerCore

/// Retention (SPEC §4, seed 000): what happens to a subject's data once paid access ends —
/// the tier, its capabilities, and what reactivating costs.
///
/// The tier depends on the plan, so the state keeps the same facts the entitlement model keeps
/// (folded by the same reducer, into this model's own copy: no model reads another's state)
/// plus recovery passes and family organizers' cancellations.
public enum RetentionProjection: Projection {
    public static let name = "retention"
    /// 2: strings and timestamps in the compact state encoding (back references, differences);
    /// 3: strings may also refer to a prefix, a transaction's kind and trial share a byte.
    public static let codeVersion: UInt32 = 3
    public static let eventTypes: Set<String> = EntitlementProjection.eventTypes.union(["oneoff.purchased", "family.organizer_cancelled"])

    public struct State: ProjectionState {
        // No initial values (as in `EntitlementProjection.State`): decoding assigns each field,
        // which over initial values would first build and then destroy an empty one.
        /// The facts the plan is decided from.
        public var access: EntitlementProjection.State
        /// Recovery passes bought (their transaction ids).
        public var recoveryPasses: [Dated<String>]
        /// Family organizers who cancelled the plan this subject shared.
        public var organizerCancellations: [Dated<String>]

        public init() {
            access = EntitlementProjection.State()
            recoveryPasses = []
            organizerCancellations = []
        }

        public func encode(to writer: inout StateWriter) {
            access.encode(to: &writer)
            writer.write(recoveryPasses) { $0.write($1) }
            writer.write(organizerCancellations) { $0.write($1) }
        }

        /// Fields into locals, then one memberwise init (see `EntitlementProjection.State`'s decoder).
        public init(from reader: inout StateReader) throws(StateReader.Damaged) {
            let access = try EntitlementProjection.State(from: &reader)
            let recoveryPasses = try reader.dated { r throws(StateReader.Damaged) in try r.string() }
            let organizerCancellations = try reader.dated { r throws(StateReader.Damaged) in try r.string() }
            self.init(access: access, recoveryPasses: recoveryPasses, organizerCancellations: organizerCancellations)
        }

        private init(access: EntitlementProjection.State, recoveryPasses: [Dated<String>], organizerCancellations: [Dated<String>]) {
            self.access = access
            self.recoveryPasses = recoveryPasses
            self.organizerCancellations = organizerCancellations
        }
    }

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        switch event.data {
        case .oneOffPurchased(let p) where p.kind == .recoveryPass:
            state.recoveryPasses.insertDated(Dated(at: event.occurredAt, position: event.position, value: p.transactionId))
        case .familyOrganizerCancelled(let c):
            state.organizerCancellations.insertDated(Dated(at: event.occurredAt, position: event.position, value: c.organizer))
        default:
            EntitlementProjection.apply(event, to: &state.access)
        }
    }

    public static func view(of state: State, at t: Timestamp, policy: Policy) -> RetentionView {
        RetentionRules.view(of: state, at: t, policy: policy)
    }

    public static func changeTimes(of state: State, policy: Policy) -> [Timestamp] {
        RetentionRules.changeTimes(of: state, policy: policy)
    }

    /// A policy without a `retention` section has no retention flow: no model (SPEC §4).
    public static func isServed(by policy: Policy) -> Bool { policy.retention != nil }
}

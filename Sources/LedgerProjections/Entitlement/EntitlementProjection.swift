import LedgerCore

/// Entitlement (SPEC §4, seed 004): what a subject may use at a time, and why.
///
/// The state is facts — transactions with their refunds and extensions, billing failures,
/// support grants, device snapshots, sign-ins — so a late or out-of-order event lands where its
/// time puts it. `view(of:at:policy:)` applies the six-step precedence.
public enum EntitlementProjection: Projection {
    public static let name = "entitlement"
    /// 2: strings and timestamps in the compact state encoding (back references, differences);
    /// 3: strings may also refer to a prefix, a transaction's kind and trial share a byte.
    public static let codeVersion: UInt32 = 3
    public static let eventTypes: Set<String> = SubscriptionFacts.eventTypes.union([
        "support.entitlement_granted", "entitlement.verified", "entitlement.verification_failed",
        "account.created", "account.signed_in", "account.signed_out", "account.deleted",
        "purchase.started", "purchase.pending", "purchase.failed",
    ])

    /// A device's StoreKit check.
    public enum Snapshot: Sendable, Equatable {
        case verified(plan: VerifiedPlan, expiresAt: Timestamp?)
        case failed
    }

    /// A client-side purchase attempt.
    public enum Attempt: UInt8, Sendable, Equatable {
        case started = 0, pending = 1, failed = 2
    }

    public struct State: ProjectionState {
        // No initial values: `init(from:)` assigns the whole state at once, which over initial
        // values would first build and then destroy an empty state on every decode.
        public var subscription: SubscriptionFacts
        /// Support grants, with their end.
        public var grants: [Dated<Timestamp>]
        public var snapshots: [Dated<Snapshot>]
        /// Signed in (true) or out (false), from account.created/signed_in/signed_out.
        public var signIns: [Dated<Bool>]
        public var deletions: [Dated<Bool>]
        public var attempts: [Dated<Attempt>]

        public init() {
            subscription = SubscriptionFacts()
            grants = []
            snapshots = []
            signIns = []
            deletions = []
            attempts = []
        }

        public func encode(to writer: inout StateWriter) {
            subscription.encode(to: &writer)
            writer.write(grants) { $0.write($1) }
            writer.write(snapshots) { w, s in
                switch s {
                case .verified(let plan, let expiresAt):
                    w.write(UInt8(0)); w.write(plan.rawValue); w.write(expiresAt) { $0.write($1) }
                case .failed:
                    w.write(UInt8(1))
                }
            }
            writer.write(signIns) { $0.write($1) }
            writer.write(deletions) { $0.write($1) }
            writer.write(attempts) { $0.write($1.rawValue) }
        }

        /// Retention's state begins with this model's state, folded from the same events to the
        /// same bytes (its own copy, SPEC §4), so a status query or an append that reads both
        /// decodes it once (`StateReader.leading`).
        public init(from reader: inout StateReader) throws(StateReader.Damaged) {
            self = try reader.leading { r throws(StateReader.Damaged) in try State(fields: &r) }
        }

        /// Reads each field into a local and assigns them all in one memberwise init: assigning
        /// the fields of `self` one by one, the compiler copied the finished state once more (a
        /// retain and a release per array). The three models' decoders doing so cost 5.4 % of a
        /// status query's instructions.
        private init(fields reader: inout StateReader) throws(StateReader.Damaged) {
            let subscription = try reader.leading { r throws(StateReader.Damaged) in try SubscriptionFacts(from: &r) }
            let grants = try reader.dated { r throws(StateReader.Damaged) in try r.timestamp() }
            let snapshots = try reader.dated { r throws(StateReader.Damaged) -> Snapshot in
                switch try r.byte() {
                case 0: return .verified(plan: try r.choice(VerifiedPlan.self), expiresAt: try r.optional { r throws(StateReader.Damaged) in try r.timestamp() })
                case 1: return .failed
                default: throw StateReader.Damaged(what: "bad snapshot kind")
                }
            }
            let signIns = try reader.dated { r throws(StateReader.Damaged) in try r.bool() }
            let deletions = try reader.dated { r throws(StateReader.Damaged) in try r.bool() }
            let attempts = try reader.dated { r throws(StateReader.Damaged) in
                guard let attempt = Attempt(rawValue: try r.byte()) else { throw StateReader.Damaged(what: "bad attempt") }
                return attempt
            }
            self.init(subscription: subscription, grants: grants, snapshots: snapshots, signIns: signIns, deletions: deletions, attempts: attempts)
        }

        private init(subscription: SubscriptionFacts, grants: [Dated<Timestamp>], snapshots: [Dated<Snapshot>], signIns: [Dated<Bool>],
                     deletions: [Dated<Bool>], attempts: [Dated<Attempt>]) {
            self.subscription = subscription
            self.grants = grants
            self.snapshots = snapshots
            self.signIns = signIns
            self.deletions = deletions
            self.attempts = attempts
        }
    }

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        if state.subscription.apply(event) { return }
        let at = event.occurredAt, position = event.position
        switch event.data {
        case .supportEntitlementGranted(let g):
            state.grants.insertDated(Dated(at: at, position: position, value: g.until))
        case .entitlementVerified(let v):
            state.snapshots.insertDated(Dated(at: at, position: position, value: .verified(plan: v.plan, expiresAt: v.expiresAt)))
        case .entitlementVerificationFailed:
            state.snapshots.insertDated(Dated(at: at, position: position, value: .failed))
        case .accountCreated(let c):
            state.signIns.insertDated(Dated(at: at, position: position, value: c.signedIn))
        case .accountSignedIn:
            state.signIns.insertDated(Dated(at: at, position: position, value: true))
        case .accountSignedOut:
            state.signIns.insertDated(Dated(at: at, position: position, value: false))
        case .accountDeleted:
            state.deletions.insertDated(Dated(at: at, position: position, value: true))
        case .purchaseStarted:
            state.attempts.insertDated(Dated(at: at, position: position, value: .started))
        case .purchasePending:
            state.attempts.insertDated(Dated(at: at, position: position, value: .pending))
        case .purchaseFailed:
            state.attempts.insertDated(Dated(at: at, position: position, value: .failed))
        default:
            break
        }
    }

    public static func view(of state: State, at t: Timestamp, policy: Policy) -> EntitlementView {
        EntitlementRules.view(of: state, at: t, policy: policy.subscription)
    }

    public static func changeTimes(of state: State, policy: Policy) -> [Timestamp] {
        EntitlementRules.changeTimes(of: state, policy: policy.subscription)
    }
}

@_spi(Storage) import LedgerCore

/// Deletion (SPEC §4, seeds 003 and 004 CH34): where the subject's account deletion stands, the
/// App Store subscription it does not cancel, and the data export. The state keeps the
/// deletion's and the export's events with their times, and the view runs SPEC §4's sequence
/// over those that happened by t, in business-time order (`DeletionWalk`).
public enum DeletionModel: ReadModel {
    public static let name = "deletion"
    public static let version: UInt32 = 1

    /// One step of the deletion's sequence.
    public enum Step: StateValue, Equatable, Sendable {
        case requested
        case cancelled
        case completed(step: String)
        case failed(step: String)
        case deleted

        public static func encode(_ value: Self, to encoder: inout StateEncoder) {
            switch value {
            case .requested: encoder.write(UInt8(0))
            case .cancelled: encoder.write(UInt8(1))
            case .completed(let step):
                encoder.write(UInt8(2))
                String.encode(step, to: &encoder)
            case .failed(let step):
                encoder.write(UInt8(3))
                String.encode(step, to: &encoder)
            case .deleted: encoder.write(UInt8(4))
            }
        }

        public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
            switch try decoder.byte() {
            case 0: return .requested
            case 1: return .cancelled
            case 2: return .completed(step: try String.decode(from: &decoder))
            case 3: return .failed(step: try String.decode(from: &decoder))
            case 4: return .deleted
            case let other: throw StateDecoder.Damaged(what: "unknown deletion step kind \(other)")
            }
        }
    }

    /// An export asked for, or done (with where it went).
    public struct Export: StateRecord, Equatable {
        public var completed = false
        public var location: String?

        public init() {}
        public init(completed: Bool, location: String?) { (self.completed, self.location) = (completed, location) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&completed)
            try coder.code(&location)
        }
    }

    public struct State: ModelState {
        public var steps: [Dated<Step>] = []
        public var exports: [Dated<Export>] = []
        /// Where the last view's walk over the steps got to (`DeletionWalk`); never stored.
        var walked = KeptDeletionWalk()

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&steps)
            try coder.code(&exports)
        }
    }

    public static let reads: Set<String> = [
        AccountDeletionRequested.type, AccountDeletionCancelled.type, AccountDeletionStepCompleted.type, AccountDeletionStepFailed.type,
        AccountDeleted.type, AccountExportRequested.type, AccountExportCompleted.type,
    ]

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        let at = event.occurredAt, position = event.position
        let step: Step
        switch event.data {
        case .accountDeletionRequested: step = .requested
        case .accountDeletionCancelled: step = .cancelled
        case .accountDeletionStepCompleted(let s): step = .completed(step: s.step)
        case .accountDeletionStepFailed(let s): step = .failed(step: s.step)
        case .accountDeleted: step = .deleted
        case .accountExportRequested:
            state.exports.insertDated(Dated(at: at, position: position, value: Export(completed: false, location: nil)))
            return
        case .accountExportCompleted(let e):
            state.exports.insertDated(Dated(at: at, position: position, value: Export(completed: true, location: e.location)))
            return
        case .subscriptionPurchased, .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionAutoRenewChanged, .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .purchaseStarted, .purchasePending, .purchaseFailed, .entitlementVerified, .entitlementVerificationFailed,
             .restoreRequested, .restoreSucceeded, .restoreFailed, .oneOffPurchased, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled,
             .sessionStarted, .sessionBackgrounded, .sessionForegrounded, .sessionEnded, .usageRecorded, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            return
        }
        state.walked.own()
        state.steps.insertDated(Dated(at: at, position: position, value: step))
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> DeletionView? {
        guard let rules = policy.deletion else { return nil }
        return DeletionRules.view(of: state, facts: facts, at: t, policy: rules)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        // The store coverage (subscriptionWarning) changes at the facts' own times, which the
        // audit adds; the deletion's own state changes only with its events.
        []
    }
}

@_spi(Storage) import LedgerCore

/// Access (SPEC §4, seed 002): Careguide's once-per-day sessions for free users, per device and
/// local calendar day, and the signals of abuse that inform support without blocking anyone.
///
/// A daily user's sessions are the longest history a subject has, so the state keeps only
/// what the present needs: each device's zone, its open session, its session counts of the
/// last local days, and the signals' counts. Sessions are built in business-time order under
/// the store's policy (a pause shorter than `resumeWithinSeconds` resumes: the reducer needs
/// that number, `apply(_:to:policy:)`). Telemetry queued offline arrives late, so the facts of
/// the last `reorderWindow` before the latest one are kept as they are (`recent`), in order,
/// and folded into the rest (the *settled* sessions) only once they are older: a late fact
/// inside the window takes its place among them. One older than a settled fact cannot: the
/// state then answers for no time, and every view of the subject is replayed from its events
/// in business-time order — exact, at the cost of its history. The state answers from its
/// latest fact on; an earlier time is replayed too (`ReadModel.answersFrom`).
public enum AccessModel: ReadModel {
    public static let name = "access"
    public static let version: UInt32 = 4

    /// What one session event did, on its device.
    public enum SessionAction: UInt8, StateValue, Equatable, Sendable {
        case started, backgrounded, foregrounded
        /// `session.ended` with reason `crash`: a pause (002: a crash is not a session end).
        case crashed
        /// `session.ended` with reason `user` or `timeout`.
        case ended
    }

    /// A session or usage fact kept as it came, while it is recent.
    public struct Fact: StateRecord, Equatable {
        public var action = SessionAction.started
        public var device = ""
        /// A start's zone; empty otherwise.
        public var zone = ""
        /// Usage: the feature and how many uses (`used` is set).
        public var used = false
        public var feature = ""
        public var count: Int64 = 0

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&action)
            try coder.code(&device)
            try coder.code(&zone)
            try coder.code(&used)
            try coder.code(&feature)
            try coder.code(&count)
        }
    }

    /// How late, in business time, a session fact may arrive after a later one and still take
    /// its place: facts older than the latest by more are settled (telemetry an app queued
    /// offline for a day and a half still lands in order).
    public static let reorderWindow: Int64 = 48 * 3_600_000

    /// Where a device's session stands.
    public enum Status: UInt8, StateValue, Equatable, Sendable {
        case none, active, paused, ended
    }

    /// Sessions begun on one local day (days since 1970-01-01).
    public struct DayCount: StateRecord, Equatable {
        public var day: Int64 = 0
        public var count: Int64 = 0

        public init() {}
        public init(day: Int64, count: Int64) { (self.day, self.count) = (day, count) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&day)
            try coder.code(&count)
        }
    }

    /// A feature's uses in the open session.
    public struct Usage: StateRecord, Equatable {
        public var feature = ""
        public var count: Int64 = 0

        public init() {}
        public init(feature: String, count: Int64) { (self.feature, self.count) = (feature, count) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&feature)
            try coder.code(&count)
        }
    }

    /// One device: its zone, its session, and the sessions of its recent local days.
    public struct Device: StateRecord, Equatable {
        public var id = ""
        /// The zone of its latest start (UTC before any).
        public var zone = "UTC"
        public var status = Status.none
        /// The open (or last) session's beginning, the position that began it, and its pause.
        public var begin = Timestamp(milliseconds: 0)
        public var beginPosition: UInt64 = 0
        public var pausedAt = Timestamp(milliseconds: 0)
        /// The open session's uses per feature, and whether it already counted as bulk usage.
        public var used: [Usage] = []
        public var bulk = false
        /// Sessions per local day, for the days a time after the latest fact can still be on.
        public var days: [DayCount] = []

        public init() {}
        public init(id: String) { self.id = id }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&id)
            try coder.code(&zone)
            try coder.code(&status)
            try coder.code(&begin)
            try coder.code(&beginPosition)
            try coder.code(&pausedAt)
            try coder.code(&used)
            try coder.code(&bulk)
            try coder.code(&days)
        }

        /// Sessions begun on local `day`.
        public func sessions(on day: Int64) -> Int64 { days.first { $0.day == day }?.count ?? 0 }
    }

    /// A `subscription.purchased`: its original transaction, and when it said it expires.
    public struct Purchase: StateRecord, Equatable {
        public var originalTransactionId = ""
        public var expiresAt = Timestamp(milliseconds: 0)

        public init() {}
        public init(originalTransactionId: String, expiresAt: Timestamp) { (self.originalTransactionId, self.expiresAt) = (originalTransactionId, expiresAt) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&originalTransactionId)
            try coder.code(&expiresAt)
        }
    }

    /// Every device's sessions, as the facts folded so far built them.
    public struct Sessions: StateRecord, Equatable {
        /// By device id (UTF-8 bytes).
        public var devices: [Device] = []
        /// The device of the latest session event.
        public var current: String?
        /// The latest fact folded: (occurredAt, position).
        public var latest: Timestamp?
        public var latestPosition: UInt64 = 0
        /// Sessions that ended less than 60 s after they began, and sessions with more than 10
        /// of one feature.
        public var shortSessions: Int64 = 0
        public var bulkUsage: Int64 = 0

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&devices)
            try coder.code(&current)
            try coder.code(&latest)
            try coder.code(&latestPosition)
            try coder.code(&shortSessions)
            try coder.code(&bulkUsage)
        }

        /// The device with `id`, if it has had a session event.
        public func device(_ id: String) -> Device? { devices.first { $0.id.utf8.elementsEqual(id.utf8) } }

        mutating func update(_ device: Device) {
            if let index = devices.firstIndex(where: { $0.id.utf8.elementsEqual(device.id.utf8) }) {
                devices[index] = device
            } else {
                let index = devices.firstIndex { !$0.id.utf8.lexicographicallyPrecedes(device.id.utf8) } ?? devices.endIndex
                devices.insert(device, at: index)
            }
        }
    }

    public struct State: ModelState {
        /// The sessions of the facts older than the window: a fact before their latest cannot
        /// be placed.
        public var settled = Sessions()
        /// The facts of the last `reorderWindow`, in business-time order, not settled yet.
        public var recent: [Dated<Fact>] = []
        /// The settled sessions with the recent facts folded in: what views read.
        public var present = Sessions()
        /// A session or usage fact arrived after a settled one: every view is replayed.
        public var disordered = false
        /// Subscription purchases, and `auto_renew_changed(false)` by original transaction id:
        /// a handful, kept with their times.
        public var purchases: [Dated<Purchase>] = []
        public var cancellations: [Dated<String>] = []
        /// The cycles of those two, derived (`SubscribeCancelCycles`).
        var cycles = SubscribeCancelCycles()

        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try codeViewed(&coder)
            try coder.lastPart { coder throws(StateDecoder.Damaged) in
                try coder.code(&settled)
                try coder.code(&recent)
            }
        }

        /// The fields a view reads, first: `decodeForView` stops after them.
        private mutating func codeViewed(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&present)
            try coder.code(&disordered)
            try coder.code(&purchases)
            try coder.code(&cancellations)
            if coder.isDecoding { cycles = SubscribeCancelCycles(purchases, cancellations) }
        }

        /// Without `settled` and `recent`, which only folding reads (half the bytes).
        public static func decodeForView(_ bytes: UnsafeRawBufferPointer) throws(StateDecoder.Damaged) -> Self {
            var state = Self()
            try StateCoder.decode(bytes, leavingLastPart: { coder throws(StateDecoder.Damaged) in try state.codeViewed(&coder) })
            return state
        }
    }

    /// The session and usage events, and the purchases and cancellations of the
    /// subscribe-cancel signal. The clock-tampering signal, which any event may raise, is the
    /// facts' (`SubjectActivity`).
    public static let reads: Set<String> = [
        SessionStarted.type, SessionBackgrounded.type, SessionForegrounded.type, SessionEnded.type, UsageRecorded.type,
        SubscriptionPurchased.type, SubscriptionAutoRenewChanged.type,
    ]

    /// Without the policy no session can be built: the model folds only under one.
    public static func apply(_ event: RecordedEvent, to state: inout State) {}

    public static func apply(_ event: RecordedEvent, to state: inout State, policy: Policy) {
        guard let access = policy.access else { return }
        let at = event.occurredAt
        var fact = Fact()
        switch event.data {
        case .sessionStarted(let e): (fact.action, fact.device, fact.zone) = (.started, e.deviceId, e.timeZone)
        case .sessionBackgrounded(let e): (fact.action, fact.device) = (.backgrounded, e.deviceId)
        case .sessionForegrounded(let e): (fact.action, fact.device) = (.foregrounded, e.deviceId)
        case .sessionEnded(let e): (fact.action, fact.device) = (e.reason == .crash ? .crashed : .ended, e.deviceId)
        case .usageRecorded(let u): (fact.used, fact.feature, fact.count) = (true, u.feature, u.count)
        case .subscriptionPurchased(let p):
            let purchase = Dated(at: at, position: event.position, value: Purchase(originalTransactionId: p.originalTransactionId, expiresAt: p.expiresAt))
            state.purchases.insertDated(purchase)
            state.cycles.purchased(purchase, in: state)
            return
        case .subscriptionAutoRenewChanged(let c):
            guard !c.enabled else { return }
            let cancellation = Dated(at: at, position: event.position, value: c.originalTransactionId)
            state.cancellations.insertDated(cancellation)
            state.cycles.cancelled(cancellation, in: state)
            return
        case .subscriptionRenewed, .subscriptionRenewalFailed, .subscriptionGraceExpired,
             .subscriptionExpired, .subscriptionRefunded, .subscriptionRefundReversed,
             .subscriptionRevoked, .subscriptionProductChanged, .subscriptionRenewalExtended,
             .purchaseStarted, .purchasePending, .purchaseFailed, .entitlementVerified, .entitlementVerificationFailed,
             .restoreRequested, .restoreSucceeded, .restoreFailed, .oneOffPurchased, .appStoreNotification, .appStoreSubjectBound,
             .accountCreated, .accountSignedIn, .accountSignedOut, .accountDeletionRequested, .accountDeletionCancelled,
             .accountDeletionStepCompleted, .accountDeletionStepFailed, .accountDeleted, .accountExportRequested, .accountExportCompleted,
             .supportEntitlementGranted, .supportNoteAdded, .familyOrganizerCancelled, .resourceCreated, .resourceDeleted,
             .inboxMessageDelivered, .inboxMessageRead, .maintenanceScheduled, .maintenanceCompleted,
             .securityFlagRaised, .securityFlagCleared, .notificationPreferencesChanged, .notificationSent:
            return
        }
        guard !state.disordered else { return }
        if let latest = state.settled.latest, (at, event.position) < (latest, state.settled.latestPosition) {
            // Older than a settled fact: sessions after it were counted without it.
            state = State(disorderedFrom: state)
            return
        }
        let w = access.resumeWithinSeconds.multipliedClamping(by: 1000)
        let dated = Dated(at: at, position: event.position, value: fact)
        if let last = state.recent.last, (last.at, last.position) > (at, event.position) {
            // Late, inside the window: the recent facts are folded again, in order.
            state.recent.insertDated(dated)
            state.present = state.settled
            for recent in state.recent { AccessRules.fold(recent, into: &state.present, w: w) }
        } else {
            state.recent.append(dated)
            AccessRules.fold(dated, into: &state.present, w: w)
        }
        // Facts older than the newest by more than the window are settled.
        guard let newest = state.recent.last?.at else { return }
        var settled = 0
        while settled < state.recent.count, newest.milliseconds(since: state.recent[settled].at) > reorderWindow {
            AccessRules.fold(state.recent[settled], into: &state.settled, w: w)
            settled += 1
        }
        state.recent.removeFirst(settled)
    }

    public static func answersFrom(_ state: State, facts: SubjectFacts) -> Timestamp? {
        if state.disordered { return Timestamp(milliseconds: .max) }
        return [state.present.latest, facts.activity.latestTampering].compactMap { $0 }.max()
    }

    /// `nil` under a policy without an `access` section: it has no daily limit (SPEC §4).
    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> AccessView? {
        guard let access = policy.access else { return nil }
        return AccessRules.view(of: state, facts: facts, at: t, policy: policy, access: access)
    }

    public static func changeTimes(of state: State, facts: SubjectFacts, policy: Policy) -> [Timestamp] {
        guard let access = policy.access else { return [] }
        return AccessRules.changeTimes(of: state, policy: access)
    }
}

extension AccessModel.State {
    /// A disordered state: it keeps what needs no order (purchases, cancellations) and drops
    /// the sessions, which every view now replays.
    init(disorderedFrom state: Self) {
        self.init()
        disordered = true
        (purchases, cancellations, cycles) = (state.purchases, state.cancellations, state.cycles)
    }
}

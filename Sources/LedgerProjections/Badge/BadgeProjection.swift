import LedgerCore

/// Badge (SPEC §4, seed 004 CH27 L229): the app icon's count and what makes it up.
///
/// The state keeps messages and reads by id, maintenance tasks with their local due dates,
/// the time zones of session starts, security flags and the subscription facts the shared
/// billing-issue rule reads.
public enum BadgeProjection: Projection {
    public static let name = "badge"
    /// 2: strings and timestamps in the compact state encoding (back references, differences);
    /// 3: strings may also refer to a prefix, a transaction's kind and trial share a byte.
    public static let codeVersion: UInt32 = 3
    public static let eventTypes: Set<String> = SubscriptionFacts.eventTypes.union([
        "inbox.message_delivered", "inbox.message_read", "maintenance.scheduled", "maintenance.completed",
        "session.started", "security.flag_raised", "security.flag_cleared",
    ])

    /// A maintenance task due on a local date.
    public struct Task: Sendable, Equatable {
        public var id: String
        /// Days since 1970-01-01 of its `dueDate`.
        public var dueDay: Int64
    }

    /// A security flag raised (true) or cleared (false).
    public struct Flag: Sendable, Equatable {
        public var name: String
        public var raised: Bool
    }

    public struct State: ProjectionState {
        // No initial values (as in `EntitlementProjection.State`): decoding assigns each field,
        // which over initial values would first build and then destroy an empty one.
        public var subscription: SubscriptionFacts
        public var delivered: [Dated<String>]
        public var read: [Dated<String>]
        public var scheduled: [Dated<Task>]
        public var completed: [Dated<String>]
        /// The time zone of each `session.started`.
        public var zones: [Dated<String>]
        public var flags: [Dated<Flag>]

        public init() {
            subscription = SubscriptionFacts()
            delivered = []
            read = []
            scheduled = []
            completed = []
            zones = []
            flags = []
        }

        public func encode(to writer: inout StateWriter) {
            subscription.encode(to: &writer)
            writer.write(delivered) { $0.write($1) }
            writer.write(read) { $0.write($1) }
            writer.write(scheduled) { w, task in w.write(task.id); w.write(task.dueDay) }
            writer.write(completed) { $0.write($1) }
            writer.write(zones) { $0.write($1) }
            writer.write(flags) { w, flag in w.write(flag.name); w.write(flag.raised) }
        }

        /// Fields into locals, then one memberwise init (see `EntitlementProjection.State`'s decoder).
        public init(from reader: inout StateReader) throws(StateReader.Damaged) {
            let subscription = try reader.leading { r throws(StateReader.Damaged) in try SubscriptionFacts(from: &r) }
            let delivered = try reader.dated { r throws(StateReader.Damaged) in try r.string() }
            let read = try reader.dated { r throws(StateReader.Damaged) in try r.string() }
            let scheduled = try reader.dated { r throws(StateReader.Damaged) in Task(id: try r.string(), dueDay: try r.int()) }
            let completed = try reader.dated { r throws(StateReader.Damaged) in try r.string() }
            let zones = try reader.dated { r throws(StateReader.Damaged) in try r.string() }
            let flags = try reader.dated { r throws(StateReader.Damaged) in Flag(name: try r.string(), raised: try r.bool()) }
            self.init(subscription: subscription, delivered: delivered, read: read, scheduled: scheduled, completed: completed, zones: zones, flags: flags)
        }

        private init(subscription: SubscriptionFacts, delivered: [Dated<String>], read: [Dated<String>], scheduled: [Dated<Task>],
                     completed: [Dated<String>], zones: [Dated<String>], flags: [Dated<Flag>]) {
            self.subscription = subscription
            self.delivered = delivered
            self.read = read
            self.scheduled = scheduled
            self.completed = completed
            self.zones = zones
            self.flags = flags
        }
    }

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        if state.subscription.apply(event) { return }
        let at = event.occurredAt, position = event.position
        switch event.data {
        case .inboxMessageDelivered(let m):
            state.delivered.insertDated(Dated(at: at, position: position, value: m.messageId))
        case .inboxMessageRead(let m):
            state.read.insertDated(Dated(at: at, position: position, value: m.messageId))
        case .maintenanceScheduled(let m):
            // The catalog checked the date; an unreadable one could never be today.
            guard let day = LocalTime.day(of: m.dueDate) else { return }
            state.scheduled.insertDated(Dated(at: at, position: position, value: Task(id: m.taskId, dueDay: day)))
        case .maintenanceCompleted(let m):
            state.completed.insertDated(Dated(at: at, position: position, value: m.taskId))
        case .sessionStarted(let s):
            state.zones.insertDated(Dated(at: at, position: position, value: s.timeZone))
        case .securityFlagRaised(let f):
            state.flags.insertDated(Dated(at: at, position: position, value: Flag(name: f.flag, raised: true)))
        case .securityFlagCleared(let f):
            state.flags.insertDated(Dated(at: at, position: position, value: Flag(name: f.flag, raised: false)))
        default:
            break
        }
    }

    public static func view(of state: State, at t: Timestamp, policy: Policy) -> BadgeView {
        BadgeRules.view(of: state, at: t, policy: policy)
    }

    public static func changeTimes(of state: State, policy: Policy) -> [Timestamp] {
        BadgeRules.changeTimes(of: state, policy: policy)
    }
}

import LedgerCore

/// The access view of one subject at a time (SPEC §4–§5): the current device's sessions, every
/// device's, and the signals.
public struct AccessView: ModelView, Hashable {
    /// Why a device may, or may not, start a session: the audit's rule for `canStartSession`.
    public enum Why: String, Sendable, Hashable {
        /// A paid plan: unlimited.
        case paid = "planState"
        /// The session is active, or paused and still resumable.
        case inSession = "access.resumeWithinSeconds"
        /// Under, or at, the free sessions of the local day.
        case dailyLimit = "access.freeSessionsPerDay"
        /// No session event yet.
        case noDevice = "sessions"
    }

    /// One device at the time.
    public struct Device: Sendable, Hashable, Encodable {
        public var deviceId: String?
        public var sessionActive: Bool
        public var sessionsToday: Int64
        public var canStartSession: Bool
        public var nextAccessAt: Timestamp?
        /// Not in the JSON: why `canStartSession`, the device's zone, and whether its session
        /// is paused and resumable (for the card).
        public var why: Why
        public var zone: String
        public var resumable: Bool

        enum CodingKeys: String, CodingKey { case deviceId, sessionActive, sessionsToday, canStartSession, nextAccessAt }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(deviceId, forKey: .deviceId)
            try container.encode(sessionActive, forKey: .sessionActive)
            try container.encode(sessionsToday, forKey: .sessionsToday)
            try container.encode(canStartSession, forKey: .canStartSession)
            try container.encode(nextAccessAt, forKey: .nextAccessAt)
        }

        /// No device: nothing to count, nothing to block.
        public static let none = Device(deviceId: nil, sessionActive: false, sessionsToday: 0, canStartSession: true, nextAccessAt: nil,
                                        why: .noDevice, zone: "UTC", resumable: false)
    }

    public struct Signals: Sendable, Hashable, Encodable {
        public var shortSessions: Int64
        public var bulkUsage: Int64
        public var subscribeCancelCycles: Int64
        public var clockTampering: Int64

        public init(shortSessions: Int64 = 0, bulkUsage: Int64 = 0, subscribeCancelCycles: Int64 = 0, clockTampering: Int64 = 0) {
            (self.shortSessions, self.bulkUsage, self.subscribeCancelCycles, self.clockTampering) = (shortSessions, bulkUsage, subscribeCancelCycles, clockTampering)
        }
    }

    /// The device of the latest session event (`Device.none` with none).
    public var current: Device
    /// Every device the subject used, by deviceId.
    public var devices: [Device]
    public var signals: Signals
    /// The free sessions a day (for the card).
    public var freeSessionsPerDay: Int64

    public init(current: Device, devices: [Device], signals: Signals, freeSessionsPerDay: Int64) {
        (self.current, self.devices, self.signals, self.freeSessionsPerDay) = (current, devices, signals, freeSessionsPerDay)
    }

    enum CodingKeys: String, CodingKey {
        case deviceId, sessionActive, sessionsToday, canStartSession, nextAccessAt, devices, signals
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(current.deviceId, forKey: .deviceId)
        try container.encode(current.sessionActive, forKey: .sessionActive)
        try container.encode(current.sessionsToday, forKey: .sessionsToday)
        try container.encode(current.canStartSession, forKey: .canStartSession)
        try container.encode(current.nextAccessAt, forKey: .nextAccessAt)
        try container.encode(devices, forKey: .devices)
        try container.encode(signals, forKey: .signals)
    }

    /// The current device's fields restate one of `devices`; the audit lists those.
    public static var restatedFields: Set<String> { ["devices"] }

    public func rule(for field: String) -> String? {
        switch field {
        case "canStartSession", "nextAccessAt": current.why.rawValue
        case "sessionActive", "deviceId": "sessions"
        case "sessionsToday": "access.freeSessionsPerDay"
        case "signals.shortSessions", "signals.bulkUsage": "sessions"
        case "signals.subscribeCancelCycles": "subscribeCancelCycles"
        case "signals.clockTampering": "access.maxClockSkewSeconds"
        default: nil
        }
    }

    public func timeChange(since previous: AccessView) -> String? {
        guard let device = current.deviceId, previous.current.deviceId == device else { return nil }
        if current.sessionsToday < previous.current.sessionsToday { return "a new local day began on \(device)" }
        if previous.current.resumable && !current.resumable && !current.sessionActive {
            return "the session on \(device) was not resumed in time: it ended when it paused"
        }
        return nil
    }

    /// "can start a session until local midnight", "used today's free session on d-1: next at T".
    public var card: ViewCard {
        var rows: [(label: String, value: JSON)] = devices.map { device in (device.deviceId ?? "-", .string(Self.words(device, free: freeSessionsPerDay))) }
        let s = signals
        if s != Signals() {
            rows.append(("signals", .string("short sessions \(s.shortSessions), bulk usage \(s.bulkUsage), subscribe-cancel cycles \(s.subscribeCancelCycles), clock tampering \(s.clockTampering)")))
        }
        guard let id = current.deviceId else { return ViewCard(headline: [.text("can start a session: no device yet")], rows: rows) }
        var headline: [ViewCard.Part] = [.text("on \(id): " + Self.words(current, free: freeSessionsPerDay))]
        if let next = current.nextAccessAt { headline += [.text(" — next free session at "), .value(.string(next.description))] }
        return ViewCard(headline: headline, rows: rows)
    }

    static func words(_ device: Device, free: Int64) -> String {
        switch device.why {
        case .paid: return "unlimited sessions (paid plan)"
        case .noDevice: return "can start a session"
        case .inSession: return device.sessionActive ? "in a session" : "session paused: it resumes if the app comes back in time"
        case .dailyLimit:
            let n = device.sessionsToday
            let used = n <= free ? "\(n) of \(free) free session\(free == 1 ? "" : "s") today" : "\(n) sessions today, \(free) free"
            return device.canStartSession ? "\(used): can start a session until local midnight" : "\(used): no more until the next local day"
        }
    }
}

/// SPEC §4's access rules, as pure functions: the sessions each device's events build, and
/// what the current device may do at t.
public enum AccessRules {
    /// One session, as the events built it.
    struct Session {
        var device: String
        var begin: Timestamp
        var beginPosition: UInt64
        /// The local date of its beginning, in the device's zone then (days since 1970-01-01).
        var day: Int64
        var end: Timestamp?
        var used: [String: Int64] = [:]
        var bulk = false
    }

    enum Status {
        case none
        case active(session: Int)
        case paused(at: Timestamp, session: Int)
        case ended
    }

    struct DeviceState {
        var zone = "UTC"
        var status = Status.none
    }

    /// The sessions of every device from the facts that happened by `t`, and where each
    /// device's stands at `t`; `w` is resumeWithinSeconds in milliseconds.
    static func sessions(_ state: AccessModel.State, at t: Timestamp, w: Int64) -> (sessions: [Session], devices: [String: DeviceState]) {
        var sessions: [Session] = []
        var devices: [String: DeviceState] = [:]

        // A session paused at p and not resumed before p + w ended at p.
        func settle(_ device: inout DeviceState, at x: Timestamp) {
            if case .paused(let p, let index) = device.status, x.milliseconds - p.milliseconds >= w {
                sessions[index].end = p
                device.status = .ended
            }
        }
        func begin(_ device: inout DeviceState, id: String, at x: Timestamp, position: UInt64) {
            sessions.append(Session(device: id, begin: x, beginPosition: position, day: LocalTime.day(at: x, in: LocalTime.zone(device.zone))))
            device.status = .active(session: sessions.count - 1)
        }

        let events = state.sessions.known(at: t), usage = state.usage.known(at: t)
        var e = events.startIndex, u = usage.startIndex
        while e < events.endIndex || u < usage.endIndex {
            let takeUsage = u < usage.endIndex && (e == events.endIndex || (usage[u].at, usage[u].position) < (events[e].at, events[e].position))
            if takeUsage {
                let use = usage[u]
                u += 1
                // The session active at u: the one begun last, the later in position at the same instant.
                var owner: Int?
                for device in devices.values {
                    guard case .active(let index) = device.status else { continue }
                    if let o = owner, (sessions[o].begin, sessions[o].beginPosition) > (sessions[index].begin, sessions[index].beginPosition) { continue }
                    owner = index
                }
                guard let owner else { continue }
                sessions[owner].used[use.value.feature, default: 0] += use.value.count
                if sessions[owner].used[use.value.feature, default: 0] > 10 { sessions[owner].bulk = true }
                continue
            }
            let fact = events[e]
            e += 1
            let x = fact.at, id = fact.value.device
            var device = devices[id] ?? DeviceState()
            settle(&device, at: x)
            switch fact.value.action {
            case .started:
                device.zone = fact.value.zone
                switch device.status {
                case .active: break
                case .paused(_, let index): device.status = .active(session: index)
                case .none, .ended: begin(&device, id: id, at: x, position: fact.position)
                }
            case .foregrounded:
                switch device.status {
                case .active: break
                case .paused(_, let index): device.status = .active(session: index)
                case .none, .ended: begin(&device, id: id, at: x, position: fact.position)
                }
            case .backgrounded, .crashed:
                if case .active(let index) = device.status { device.status = .paused(at: x, session: index) }
            case .ended:
                switch device.status {
                case .active(let index):
                    sessions[index].end = x
                    device.status = .ended
                case .paused(let p, let index):
                    sessions[index].end = p
                    device.status = .ended
                case .none, .ended: break
                }
            }
            devices[id] = device
        }
        for id in devices.keys {
            if var device = devices[id] {
                settle(&device, at: t)
                devices[id] = device
            }
        }
        return (sessions, devices)
    }

    static func view(of state: AccessModel.State, facts: SubjectFacts, at t: Timestamp, policy: Policy, access: Policy.Access) -> AccessView {
        let w = access.resumeWithinSeconds * 1000
        let (sessions, devices) = sessions(state, at: t, w: w)
        let paid = Plan.decide(facts, at: t, policy: policy.subscription).planState.isPaid

        func device(_ id: String, _ device: DeviceState) -> AccessView.Device {
            let zone = LocalTime.zone(device.zone)
            let today = LocalTime.day(at: t, in: zone)
            let count = Int64(sessions.count { $0.device == id && $0.day == today })
            var active = false, resumable = false
            switch device.status {
            case .active: active = true
            case .paused: resumable = true   // settled at t: still within resumeWithinSeconds
            case .none, .ended: break
            }
            let why: AccessView.Why = paid ? .paid : active || resumable ? .inSession : .dailyLimit
            let can = paid || active || resumable || count < access.freeSessionsPerDay
            return AccessView.Device(deviceId: id, sessionActive: active, sessionsToday: count, canStartSession: can,
                                     nextAccessAt: can ? nil : LocalTime.start(ofDay: today + 1, in: zone),
                                     why: why, zone: device.zone, resumable: resumable)
        }

        let all = devices.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { device($0.key, $0.value) }
        let currentID = state.sessions.known(at: t).last?.value.device
        let current = all.first { $0.deviceId == currentID } ?? .none
        return AccessView(current: current, devices: all, signals: signals(state, sessions: sessions, at: t, access: access),
                          freeSessionsPerDay: access.freeSessionsPerDay)
    }

    /// SPEC §4's four signals, over every event at or before `t`.
    static func signals(_ state: AccessModel.State, sessions: [Session], at t: Timestamp, access: Policy.Access) -> AccessView.Signals {
        let short = sessions.count { session in session.end.map { $0.milliseconds - session.begin.milliseconds < 60_000 } ?? false }
        let cancellations = state.cancellations.known(at: t)
        let cycles = state.purchases.known(at: t).count { purchase in
            cancellations.contains { c in
                c.value == purchase.value.originalTransactionId && (c.at, c.position) > (purchase.at, purchase.position) && c.at < purchase.value.expiresAt
            }
        }
        let tampering = state.skews.known(at: t).count { $0.value > access.maxClockSkewSeconds * 1000 }
        return AccessView.Signals(shortSessions: Int64(short), bulkUsage: Int64(sessions.count(where: \.bulk)),
                                  subscribeCancelCycles: Int64(cycles), clockTampering: Int64(tampering))
    }

    /// When a view may change with no event: a pause running past resumeWithinSeconds, and the
    /// two local midnights after each session event in every zone the subject reported (and UTC).
    static func changeTimes(of state: AccessModel.State, policy: Policy.Access) -> [Timestamp] {
        let zones = Set(state.sessions.map(\.value.zone).filter { !$0.isEmpty } + ["UTC"]).map(LocalTime.zone)
        var times: [Timestamp] = []
        for fact in state.sessions {
            switch fact.value.action {
            case .backgrounded, .crashed: times.append(fact.at.adding(seconds: policy.resumeWithinSeconds))
            case .started, .foregrounded, .ended: break
            }
            for zone in zones {
                // Two midnights: a session begun east of the device's zone now can fall on its next day.
                let day = LocalTime.day(at: fact.at, in: zone)
                times += [LocalTime.start(ofDay: day + 1, in: zone), LocalTime.start(ofDay: day + 2, in: zone)]
            }
        }
        return times
    }
}

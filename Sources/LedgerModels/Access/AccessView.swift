@_spi(Storage) import LedgerCore

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
        /// Not in the JSON: why `canStartSession`, and whether its session is paused and
        /// resumable (for the card and the audit's words).
        public var why: Why
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
                                        why: .noDevice, resumable: false)
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

/// SPEC §4's access rules, as pure functions: how each session event moves its device's
/// session, and what the current device may do at t.
package enum AccessRules {
    static let day: Int64 = 86_400_000

    /// Folds one fact (the next in business-time order) into the sessions.
    static func fold(_ fact: Dated<AccessModel.Fact>, into sessions: inout AccessModel.Sessions, w: Int64) {
        (sessions.latest, sessions.latestPosition) = (fact.at, fact.position)
        let f = fact.value
        if f.used {
            use(f.feature, f.count, in: &sessions)
        } else {
            fold(f.action, device: f.device, zone: f.zone, at: fact.at, position: fact.position, into: &sessions, w: w)
        }
    }

    /// Folds one session event at `x` (in business-time order) into its device's session;
    /// `w` is resumeWithinSeconds in milliseconds.
    static func fold(_ action: AccessModel.SessionAction, device id: String, zone: String, at x: Timestamp, position: UInt64,
                     into state: inout AccessModel.Sessions, w: Int64) {
        var device = state.device(id) ?? AccessModel.Device(id: id)
        settle(&device, at: x, w: w, state: &state)
        switch action {
        case .started:
            device.zone = zone
            switch device.status {
            case .active: break
            case .paused: device.status = .active
            case .none, .ended: begin(&device, at: x, position: position)
            }
        case .foregrounded:
            switch device.status {
            case .active: break
            case .paused: device.status = .active
            case .none, .ended: begin(&device, at: x, position: position)
            }
        case .backgrounded, .crashed:
            if device.status == .active { (device.status, device.pausedAt) = (.paused, x) }
        case .ended:
            switch device.status {
            case .active: end(&device, at: x, state: &state)
            case .paused: end(&device, at: device.pausedAt, state: &state)
            case .none, .ended: break
            }
        }
        state.update(device)
        state.current = id
        // A time at or after x is on a local day no earlier than x's UTC day − 1, in any zone.
        let oldest = x.milliseconds.floorDivided(by: day).quotient - 2
        for index in state.devices.indices { state.devices[index].days.removeAll { $0.day < oldest } }
    }

    /// A session paused at p and not resumed before p + w ended at p.
    static func settle(_ device: inout AccessModel.Device, at x: Timestamp, w: Int64, state: inout AccessModel.Sessions) {
        if device.status == .paused, x.milliseconds(since: device.pausedAt) >= w { end(&device, at: device.pausedAt, state: &state) }
    }

    static func begin(_ device: inout AccessModel.Device, at x: Timestamp, position: UInt64) {
        (device.status, device.begin, device.beginPosition, device.used, device.bulk) = (.active, x, position, [], false)
        let local = LocalTime.day(at: x, in: LocalTime.zone(device.zone))
        if let index = device.days.firstIndex(where: { $0.day == local }) {
            device.days[index].count += 1
        } else {
            device.days.append(AccessModel.DayCount(day: local, count: 1))
            device.days.sort { $0.day < $1.day }
        }
    }

    static func end(_ device: inout AccessModel.Device, at e: Timestamp, state: inout AccessModel.Sessions) {
        if e.milliseconds(since: device.begin) < 60_000 { state.shortSessions += 1 }
        (device.status, device.used) = (.ended, [])
    }

    /// Usage at u belongs to the session active then, the one begun last if several devices
    /// are active (the later in position at the same instant); more than 10 of one feature in a
    /// session is bulk usage, counted once.
    static func use(_ feature: String, _ count: Int64, in state: inout AccessModel.Sessions) {
        var owner: Int?
        for (index, device) in state.devices.enumerated() where device.status == .active {
            if let o = owner, (state.devices[o].begin, state.devices[o].beginPosition) > (device.begin, device.beginPosition) { continue }
            owner = index
        }
        guard let owner else { return }
        var device = state.devices[owner]
        if let index = device.used.firstIndex(where: { $0.feature.utf8.elementsEqual(feature.utf8) }) {
            device.used[index].count += count
        } else {
            device.used.append(AccessModel.Usage(feature: feature, count: count))
        }
        if !device.bulk, device.used.contains(where: { $0.count > 10 }) {
            device.bulk = true
            state.bulkUsage += 1
        }
        state.devices[owner] = device
    }

    /// How many purchases had auto-renew of their subscription turned off after them and
    /// before they expired (the subscribe-cancel signal). Walked from the latest down, keeping
    /// each subscription's earliest turning off after the purchase reached: one pass, where
    /// asking every purchase about every cancellation grew with their product. A folded
    /// state's views count the same from `SubscribeCancelCycles` without the walk.
    package static func cancelledPeriods(_ purchases: ArraySlice<Dated<AccessModel.Purchase>>, _ cancellations: ArraySlice<Dated<String>>) -> Int {
        var next: [String: Timestamp] = [:]
        var c = cancellations.endIndex
        var count = 0
        for p in purchases.indices.reversed() {
            while c > cancellations.startIndex, (cancellations[c - 1].at, cancellations[c - 1].position) > (purchases[p].at, purchases[p].position) {
                c -= 1
                next[cancellations[c].value] = cancellations[c].at
            }
            if let cancelled = next[purchases[p].value.originalTransactionId], cancelled < purchases[p].value.expiresAt { count += 1 }
        }
        return count
    }

    static func view(of stored: AccessModel.State, facts: SubjectFacts, at t: Timestamp, policy: Policy, access: Policy.Access) -> AccessView {
        let w = access.resumeWithinSeconds.multipliedClamping(by: 1000)
        let state = stored.present
        let paid = Plan.decide(facts, at: t, policy: policy.subscription).planState.isPaid
        var shortSessions = state.shortSessions
        let all = state.devices.map { kept -> AccessView.Device in
            var device = kept
            var settled = state
            settle(&device, at: t, w: w, state: &settled)
            shortSessions += settled.shortSessions - state.shortSessions
            let zone = LocalTime.zone(device.zone)
            let today = LocalTime.day(at: t, in: zone)
            let count = device.sessions(on: today)
            let active = device.status == .active, resumable = device.status == .paused
            let why: AccessView.Why = paid ? .paid : active || resumable ? .inSession : .dailyLimit
            let can = paid || active || resumable || count < access.freeSessionsPerDay
            return AccessView.Device(deviceId: device.id, sessionActive: active, sessionsToday: count, canStartSession: can,
                                     nextAccessAt: can ? nil : LocalTime.start(ofDay: today + 1, in: zone),
                                     why: why, resumable: resumable)
        }
        let current = all.first { id in state.current.map { id.deviceId?.utf8.elementsEqual($0.utf8) ?? false } ?? false } ?? .none
        let cycles = stored.cycles.count(by: t, of: stored) ?? cancelledPeriods(stored.purchases.known(at: t), stored.cancellations.known(at: t))
        let signals = AccessView.Signals(shortSessions: shortSessions, bulkUsage: state.bulkUsage, subscribeCancelCycles: Int64(cycles),
                                         clockTampering: facts.activity.tampering)
        return AccessView(current: current, devices: all, signals: signals, freeSessionsPerDay: access.freeSessionsPerDay)
    }

    /// When a view may change with no event: a pause running past resumeWithinSeconds, the next
    /// two local midnights after the latest session fact in each device's zone and UTC, and the
    /// midnights around each day a device counts sessions on.
    static func changeTimes(of state: AccessModel.State, policy: Policy.Access) -> [Timestamp] {
        let state = state.present
        guard let latest = state.latest else { return [] }
        let zones = Set(state.devices.map(\.zone) + ["UTC"]).map(LocalTime.zone)
        var times: [Timestamp] = []
        for device in state.devices where device.status == .paused { times.append(device.pausedAt.adding(seconds: policy.resumeWithinSeconds)) }
        for zone in zones {
            let day = LocalTime.day(at: latest, in: zone)
            times += [LocalTime.start(ofDay: day + 1, in: zone), LocalTime.start(ofDay: day + 2, in: zone)]
        }
        // A session's day counted in a zone far east of the device's present one can lie
        // further ahead: the days each device counts begin and end in its zone.
        for device in state.devices {
            let zone = LocalTime.zone(device.zone)
            for counted in device.days { times += [LocalTime.start(ofDay: counted.day, in: zone), LocalTime.start(ofDay: counted.day + 1, in: zone)] }
        }
        return times
    }
}

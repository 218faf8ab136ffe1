@_spi(Storage) import LedgerCore

/// The badge of one subject at a time (SPEC §4–§5).
public struct BadgeView: ModelView, Hashable {
    /// unreadInbox + maintenanceDueToday + billingIssue + securityFlag.
    public var count: Int64
    public var unreadInbox: Int64
    public var maintenanceDueToday: Bool
    public var billingIssue: Bool
    public var securityFlag: Bool

    public init(unreadInbox: Int64, maintenanceDueToday: Bool, billingIssue: Bool, securityFlag: Bool) {
        self.unreadInbox = unreadInbox
        self.maintenanceDueToday = maintenanceDueToday
        self.billingIssue = billingIssue
        self.securityFlag = securityFlag
        count = unreadInbox + (maintenanceDueToday ? 1 : 0) + (billingIssue ? 1 : 0) + (securityFlag ? 1 : 0)
    }

    /// The JSON's fields: the count first.
    enum CodingKeys: String, CodingKey {
        case count, unreadInbox, maintenanceDueToday, billingIssue, securityFlag
    }

    /// Each component is its own rule; the count follows from them.
    public func rule(for field: String) -> String? { field == "count" ? nil : field }

    public func timeChange(since previous: BadgeView) -> String? {
        guard maintenanceDueToday != previous.maintenanceDueToday else { return nil }
        return maintenanceDueToday ? "a maintenance task is due today" : "the maintenance due date passed"
    }
}

/// The badge formula of 004 CH27 L229 and its components, as pure functions.
package enum BadgeRules {
    static func view(of state: BadgeModel.State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> BadgeView {
        BadgeView(unreadInbox: unreadInbox(state, at: t), maintenanceDueToday: maintenanceDueToday(state, zone: facts.activity.zone(at: t) ?? "UTC", at: t),
                  billingIssue: facts.subscription.billingIssue(at: t, policy: policy.subscription),
                  securityFlag: securityFlag(state, at: t))
    }

    /// Messages delivered and not read, by id: a read recorded before its delivery still
    /// counts (the state's count, which answers from its latest inbox fact on).
    static func unreadInbox(_ state: BadgeModel.State, at t: Timestamp) -> Int64 { state.unread }

    /// The zone of the latest session start at or before `t` among `events`, `nil` with none:
    /// the badge's own rule for "today", folded from the events alone (how the audit and the
    /// command line show a subject's times locally).
    package static func sessionZone(in events: [RecordedEvent], at t: Timestamp) -> String? {
        var activity = SubjectActivity()
        for event in events where event.type == SessionStarted.type && event.occurredAt <= t { activity.apply(event, policy: .reference) }
        return activity.zone(at: t)
    }

    /// A scheduled, not completed task whose due date is the subject's local date at `t`.
    static func maintenanceDueToday(_ state: BadgeModel.State, zone: String, at t: Timestamp) -> Bool {
        let scheduled = state.scheduled.known(at: t)
        guard !scheduled.isEmpty else { return false }
        let today = LocalTime.day(at: t, in: LocalTime.zone(zone))
        // The tasks ever scheduled for today (few), then for each whether its latest date is
        // today (a rescheduled task is due on its latest date) and it is not done.
        let completed = state.completed.known(at: t)
        for candidate in scheduled where candidate.value.dueDay == today {
            let id = candidate.value.id
            guard scheduled.last(where: { $0.value.id == id })?.value.dueDay == today else { continue }
            if !completed.contains(where: { $0.value == id }) { return true }
        }
        return false
    }

    /// A flag raised and not cleared since: some flag's latest fact raises it. Walked from the
    /// latest fact back, each name decided by the first of its facts met (a flag raised and
    /// cleared a thousand times is decided by its latest), until every name is.
    static func securityFlag(_ state: BadgeModel.State, at t: Timestamp) -> Bool {
        var decided: Set<String> = []
        let named = state.flagsNamed == Int64(state.flags.count)
        for flag in state.flags.known(at: t).reversed() where decided.insert(flag.value.name).inserted {
            if flag.value.raised { return true }
            if named && decided.count == state.flagNames.count { return false }
        }
        return false
    }

    /// The maintenance and flag facts' times, and the local midnights that begin and end each
    /// due date in the latest session's zone and in UTC (the billing windows are the facts'
    /// own, `Plan.changeTimes`): those in `window`, and a few around it.
    static func changeTimes(of state: BadgeModel.State, facts: SubjectFacts, policy: Policy,
                            in window: ChangeWindow = ChangeWindow(after: nil, through: Timestamp(milliseconds: .max))) -> [Timestamp] {
        var times: [Timestamp] = []
        window.appendShifted(state.completed.lazy.map(\.at), byDays: 0, to: &times)
        window.appendShifted(state.flags.lazy.map(\.at), byDays: 0, to: &times)
        window.appendShifted(state.scheduled.lazy.map(\.at), byDays: 0, to: &times)
        // A local date begins within 14 hours of its UTC one, and so ends: only the dates from
        // two UTC days before the window to two after it can begin or end inside it.
        func utcDay(_ t: Timestamp) -> Int64 { t.milliseconds.floorDivided(by: 86_400_000).quotient }
        let firstDay = window.after.map { utcDay($0) - 3 } ?? Int64.min
        let lastDay = utcDay(window.through) + 2
        lazy var zones = Set([facts.activity.zone?.value ?? "UTC", "UTC"]).map(LocalTime.zone)
        for index in state.scheduled.indices {
            let day = state.scheduled[index].value.dueDay   // by index: a task copied out retains its id
            guard day >= firstDay && day <= lastDay else { continue }
            for zone in zones { times += [LocalTime.start(ofDay: day, in: zone), LocalTime.start(ofDay: day + 1, in: zone)] }
        }
        return times
    }
}

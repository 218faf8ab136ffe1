@_spi(Storage) import LedgerCore

/// What any event of a subject tells, whatever its type: when the subject's history begins,
/// the time zone of its latest session, and the events whose clock ran ahead of the ledger's.
/// Part of `SubjectFacts`, so that the limits, badge and access models, which each need one
/// of these, read only the types that are their own: the facts work them out once, from every
/// event, and keep them apart from the plan's facts, which an event of another type leaves
/// unread (`FoldedFacts`).
///
/// Each is exact for any time from `answersFrom` on; a view of an earlier time is replayed
/// from the events (`ReadModel.answersFrom(_:facts:)`).
public struct SubjectActivity: StateRecord, Equatable {
    /// The earliest occurredAt of any event, and of an `account.created` (SPEC §4 Limits: the
    /// first `account.created`, or with none the first event, says whether the subject is an
    /// existing user).
    public var firstEvent: Timestamp?
    public var firstCreated: Timestamp?
    /// The zone of the latest `session.started`, by (occurredAt, position): the subject's local
    /// date for the badge (SPEC §4 Badge).
    public var zone: Dated<String>?
    /// Events that occurred more than `access.maxClockSkewSeconds` after they were recorded,
    /// under the policy folded with (SPEC §4 Access `clockTampering`), and the latest such
    /// occurredAt.
    public var tampering: Int64 = 0
    public var latestTampering: Timestamp?

    public init() {}

    public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
        try coder.code(&firstEvent)
        try coder.code(&firstCreated)
        try coder.code(&zone)
        try coder.code(&tampering)
        try coder.code(&latestTampering)
    }

    /// Folds one event of any type, under `policy` (its clock skew).
    public mutating func apply(_ event: RecordedEvent, policy: Policy) {
        let at = event.occurredAt
        firstEvent = min(firstEvent ?? at, at)
        switch event.data {
        case .accountCreated: firstCreated = min(firstCreated ?? at, at)
        case .sessionStarted(let s):
            if let zone, (zone.at, zone.position) > (at, event.position) { break }
            zone = Dated(at: at, position: event.position, value: s.timeZone)
        default: break
        }
        if let access = policy.access, at > event.recordedAt.adding(seconds: access.maxClockSkewSeconds) {
            tampering += 1
            latestTampering = max(latestTampering ?? at, at)
        }
    }

    /// Whether the two give the same views at any time both answer for: equal but for when
    /// the latest session started (another start in the same zone changes no view).
    public func answersAlike(_ other: SubjectActivity) -> Bool {
        firstEvent == other.firstEvent && firstCreated == other.firstCreated && zone?.value == other.zone?.value
            && tampering == other.tampering && latestTampering == other.latestTampering
    }

    /// The zone of the latest session start at or before `t`, when the activity answers there.
    public func zone(at t: Timestamp) -> String? { zone.flatMap { $0.at <= t ? $0.value : nil } }

    /// The first `account.created` by `t`, or with none the first event by `t`.
    public func first(at t: Timestamp) -> Timestamp? {
        firstCreated.flatMap { $0 <= t ? $0 : nil } ?? firstEvent.flatMap { $0 <= t ? $0 : nil }
    }
}

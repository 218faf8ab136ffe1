@_spi(Storage) import LedgerCore
import LedgerModels

/// Events folded in memory as the engine folds them — each event positioned by its place in
/// the list, from 1, and recorded when it occurred — so that rule tests need no store.
///
/// ```swift
/// let history = try Folded([Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: apr1)])
/// #expect(history.view(EntitlementModel.self, at: mar8)?.planState == .pro)
/// ```
public struct Folded {
    public private(set) var events: [RecordedEvent] = []

    public init(_ events: [LedgerEvent]) throws {
        for event in events { try append(event) }
    }

    /// Appends `event` at the next position, recorded when it occurred unless `recordedAt` says.
    public mutating func append(_ event: LedgerEvent, recordedAt: Timestamp? = nil) throws {
        events.append(try event.recorded(at: UInt64(events.count + 1), recordedAt: recordedAt))
    }

    /// The subject's facts, folded under `policy`.
    public func facts(of subject: String = "u", policy: Policy = .reference) -> SubjectFacts {
        var facts = SubjectFacts()
        for event in events where event.subject == subject { facts.apply(event, policy: policy) }
        return facts
    }

    /// `model`'s state of `key`, folded in position order under `policy`, as the engine folds.
    public func state<M: ReadModel>(_ model: M.Type, of key: String = "u", policy: Policy = .reference) -> M.State {
        var state = M.State()
        var items: [[UInt8]: M.Item] = [:]
        for event in events where M.reads.contains(event.type) && M.key(for: event) == key { M.fold(event, into: &state, items: &items, policy: policy) }
        return state
    }

    /// `model`'s view of `subject` at `t` under `policy` (`nil`: the policy has no such model),
    /// as the ledger answers it: from the state of every event, or, when that state does not
    /// answer at `t` (`ReadModel.answersFrom`), from the events that happened by `t`.
    public func view<M: ReadModel>(_ model: M.Type, of subject: String = "u", at t: Timestamp, policy: Policy = .reference) -> M.View? {
        let state = state(model, of: subject, policy: policy)
        let facts = facts(of: subject, policy: policy)
        if let from = M.answersFrom(state, facts: facts), from > t { return Replay.view(model, of: subject, from: events, at: t, policy: policy) }
        return M.view(of: state, facts: facts, at: t, policy: policy)
    }

    /// The audit of `subject` at `t` from every event, under `policy`.
    public func audit(of subject: String = "u", at t: Timestamp, policy: Policy = .reference) -> AuditReport {
        Audit.report(subject: subject, events: events.filter { $0.subject == subject }, at: t, knownAt: nil, policy: policy)
    }
}

extension LedgerEvent {
    /// The event as the log records it at `position`, when it occurred unless `recordedAt` says.
    public func recorded(at position: UInt64, recordedAt: Timestamp? = nil) throws -> RecordedEvent {
        let stored = StoredEvent(position: position, version: position, recordedAt: recordedAt ?? occurredAt, hash: [], draft: try draft())
        return RecordedEvent(stored, data: data)
    }
}

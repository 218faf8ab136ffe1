@_spi(Storage) import LedgerCore

/// A subject's views at a time worked out from its events alone, through the same reducers
/// the engine runs: how the ledger answers for a time a stored state does not answer for
/// (`ReadModel.answersFrom`), such as `status --at` a past moment of a long history.
package enum Replay {
    /// Every model's view of `subject` at `t` (`nil` where the policy has no such model), from
    /// its events (in any order): those that happened by `t`, folded in business-time order
    /// (position breaking ties: how a model that folds sessions in order sees them), each into
    /// the models that key it to `subject`.
    package static func views(of subject: String, from events: [RecordedEvent], at t: Timestamp, models: [any ReadModel.Type],
                             policy: Policy) -> [(model: String, view: (any ModelView)?)] {
        let happened = events.filter { $0.subject == subject && $0.occurredAt <= t }.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
        let facts = self.facts(of: happened, policy: policy)
        return models.map { model in (model.name, view(model, of: subject, happened, facts: facts, at: t, policy: policy)) }
    }

    /// One model's view of `subject` at `t` from its events (in any order).
    package static func view<M: ReadModel>(_ model: M.Type, of subject: String, from events: [RecordedEvent], at t: Timestamp, policy: Policy) -> M.View? {
        let happened = events.filter { $0.subject == subject && $0.occurredAt <= t }.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
        return typedView(model, of: subject, happened, facts: facts(of: happened, policy: policy), at: t, policy: policy)
    }

    private static func facts(of events: [RecordedEvent], policy: Policy) -> SubjectFacts {
        var facts = SubjectFacts()
        for event in events { facts.apply(event, policy: policy) }
        return facts
    }

    private static func view(_ model: any ReadModel.Type, of subject: String, _ events: [RecordedEvent], facts: SubjectFacts, at t: Timestamp,
                             policy: Policy) -> (any ModelView)? {
        typedView(model, of: subject, events, facts: facts, at: t, policy: policy)
    }

    private static func typedView<M: ReadModel>(_ model: M.Type, of subject: String, _ events: [RecordedEvent], facts: SubjectFacts, at t: Timestamp,
                                                policy: Policy) -> M.View? {
        var state = M.State()
        var items: [[UInt8]: M.Item] = [:]
        for event in events where M.reads.contains(event.type) && M.key(for: event) == subject { M.fold(event, into: &state, items: &items, policy: policy) }
        return M.view(of: state, facts: facts, at: t, policy: policy)
    }
}

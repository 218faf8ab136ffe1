@_spi(Storage) import LedgerCore

/// A subject's facts as the engine folds them into a stored state: every event changes the
/// activity (`SubjectActivity`, a few fields), few change the plan's facts, whose stored bytes
/// stay unread — and are written back as they were — until an event of `SubjectFacts.planReads`
/// arrives. The bytes are those of `SubjectFacts`, whichever way they were made.
package struct FoldedFacts: StateRecord, Equatable {
    package private(set) var facts = SubjectFacts()
    /// The plan's facts as stored, while unread.
    private var plan: [UInt8]?

    package init() {}

    package mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
        try coder.code(&facts.activity)
        try coder.nested(unread: &plan) { coder throws(StateDecoder.Damaged) in try facts.codePlan(&coder) }
    }

    /// Folds one event under `policy`, reading the plan's facts first if it changes them.
    package mutating func apply(_ event: RecordedEvent, policy: Policy) throws(StateDecoder.Damaged) {
        facts.activity.apply(event, policy: policy)
        guard SubjectFacts.planReads.contains(event.type) else { return }
        if let plan {
            try StateCoder.decodeNested(plan) { coder throws(StateDecoder.Damaged) in try facts.codePlan(&coder) }
            self.plan = nil
        }
        facts.applyPlan(event)
    }

    /// Whether the plan's facts were read (and so may have changed).
    package var planRead: Bool { plan == nil }

    /// The facts whole, the plan's read if they were not.
    package func whole() throws(StateDecoder.Damaged) -> SubjectFacts {
        guard let plan else { return facts }
        var whole = facts
        try StateCoder.decodeNested(plan) { coder throws(StateDecoder.Damaged) in try whole.codePlan(&coder) }
        return whole
    }
}

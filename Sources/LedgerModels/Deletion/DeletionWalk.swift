import Synchronization
@_spi(Storage) import LedgerCore

/// SPEC §4's deletion sequence run over steps in business-time order: where it stands after
/// them. Its answer after a list of steps depends on the steps and the policy alone, not on
/// the time asked: a view at a later time, over the same steps and more after them, goes on
/// from it (`KeptDeletionWalk`).
struct DeletionWalk: Sendable {
    var current = DeletionState.none
    var requestedAt: Timestamp?
    var outcomes: [String: Bool] = [:]
    var rule = "none"
    /// How many steps it took, and the time and position of the last (what a later list must
    /// still hold at that place for the walk to go on from here).
    var taken = 0
    var last: (at: Timestamp, position: UInt64)?

    /// Takes the next step.
    mutating func take(_ step: Dated<DeletionModel.Step>, policy: Policy.Deletion) {
        defer { (taken, last) = (taken + 1, (step.at, step.position)) }
        // Once deleted, nothing after counts.
        if current == .completed { return }
        switch step.value {
        case .requested:
            // A request after `none` starts over; one while another is in force is ignored.
            guard current == .none else { return }
            (current, requestedAt, outcomes, rule) = (.requested, step.at, [:], "deletionRequested")
        case .cancelled:
            guard current != .none, policy.mode == .soft, outcomes.isEmpty, let requested = requestedAt,
                  step.at < requested.adding(days: policy.softGraceDays ?? 0) else { return }
            (current, requestedAt, rule) = (.none, nil, "deletion.softGraceDays")
        case .completed(let name), .failed(let name):
            // A step with no request in force is ignored.
            guard current != .none else { return }
            let done = if case .failed = step.value { false } else { true }
            let before = outcomes.updateValue(done, forKey: name)
            // Failed while any step's latest outcome is a failure: every outcome is asked only
            // when this one turned a failure into a success.
            if !done {
                current = .failed
            } else if current != .failed {
                current = .inProgress
            } else if before == false {
                current = outcomes.values.contains(false) ? .failed : .inProgress
            }
            rule = "deletionSteps"
        case .deleted:
            (current, rule) = (.completed, "accountDeleted")
        }
    }

    /// The walk through `steps` (the state's steps known at some time) under `policy`: gone on
    /// from `kept`'s last walk when that one took a start of these same steps under the same
    /// policy, and kept for the next. A subject retrying a failing step every hour has
    /// thousands of steps, and the audit asks after each.
    static func through(_ steps: ArraySlice<Dated<DeletionModel.Step>>, policy: Policy.Deletion, kept: KeptDeletionWalk) -> DeletionWalk {
        var walk = kept.last?.walk.withLock { $0 }.flatMap { $0.policy == policy && $0.walk.continues(steps) ? $0.walk : nil } ?? DeletionWalk()
        for index in (steps.startIndex + walk.taken) ..< steps.endIndex { walk.take(steps[index], policy: policy) }
        kept.last?.walk.withLock { $0 = (policy, walk) }
        return walk
    }

    /// Whether `steps` start with the steps this walk took: as many at least, and the one at
    /// the place of its last is its last (a step landing earlier shifts it on).
    private func continues(_ steps: ArraySlice<Dated<DeletionModel.Step>>) -> Bool {
        guard let last else { return true }
        guard taken <= steps.count else { return false }
        let step = steps[steps.startIndex + taken - 1]
        return (step.at, step.position) == (last.at, last.position)
    }
}

/// `DeletionModel.State`'s place for the last walk (`DeletionWalk.through`): a reference the
/// state's copies share until a step is folded into one (a state only decoded to be read once
/// has none; an export folded leaves it as it is), and passed over by `==` (two states with the same steps are equal,
/// whatever their last walk). Costs a reader a lock and a class in a value type; buys the
/// audit of a subject retrying a deletion step thousands of times one step's walk per event
/// instead of a walk over all of them.
struct KeptDeletionWalk: Sendable, Equatable {
    final class Last: Sendable {
        let walk: Mutex<(policy: Policy.Deletion, walk: DeletionWalk)?>

        init(copying other: Last? = nil) { walk = Mutex(other?.walk.withLock { $0 }) }
    }

    var last: Last?

    /// Before a step is folded: a place of the state's own, so that copies given different
    /// steps never go on from each other's walk (a copy keeps what the last walk found).
    mutating func own() {
        if !isKnownUniquelyReferenced(&last) { last = Last(copying: last) }
    }

    static func == (lhs: Self, rhs: Self) -> Bool { true }
}

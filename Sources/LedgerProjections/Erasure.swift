@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore

/// One step of an account deletion (seed 003: each subcollection, the images, the profile,
/// and the sign-in last): a name and the work. A step that throws is recorded as failed with
/// its error, and the next `erase` runs it again.
public struct ErasureStep: Sendable {
    public let name: String
    public let run: @Sendable (String) throws -> Void

    /// A step named `name` (an identifier, such as `photos`) that runs `run(subject)`.
    public init(_ name: String, run: @escaping @Sendable (String) throws -> Void) {
        self.name = name
        self.run = run
    }
}

/// What `Ledger.erase` did.
public struct ErasureReport: Sendable, Hashable {
    public enum Outcome: String, Sendable, Hashable {
        /// Run now, and done.
        case completed
        /// Run now, and failed (recorded with its error; the next `erase` runs it again).
        case failed
        /// Done by an earlier `erase`: not run again.
        case done
    }

    public struct Step: Sendable, Hashable {
        public var name: String
        public var outcome: Outcome
        public var error: String?

        public init(name: String, outcome: Outcome, error: String? = nil) { (self.name, self.outcome, self.error) = (name, outcome, error) }
    }

    public var subject: String
    /// Position of the `account.deletion_requested` this erase appended, `nil` when a request was in force.
    public var requestedAt: UInt64?
    public var steps: [Step]
    /// Position of the `account.deleted` this erase appended: the subject's keys are destroyed
    /// and its personal fields read as `"[Deleted User]"`. `nil` when a step failed, or when
    /// the subject was erased before and has no personal field since (`alreadyErased`).
    public var deletedAt: UInt64?
    /// The subject was erased before and nothing personal has been recorded since.
    public var alreadyErased: Bool
    /// A store transaction covers now: deleting the account does not cancel the subscription
    /// at the store (the deletion model's `subscriptionWarning`).
    public var subscriptionWarning: Bool
    /// That subscription renews at the store (auto-renew on): it keeps charging the customer
    /// until they cancel it there.
    public var subscriptionRenews: Bool

    /// Every step done and the subject's keys destroyed (now or before).
    public var isErased: Bool { deletedAt != nil || alreadyErased }

    /// `ledger erase --json`.
    public var json: JSON {
        .object(JSONObject([
            ("subject", .string(subject)),
            ("requested", requestedAt.map { .integer(Int64($0)) } ?? .null),
            ("steps", .array(steps.map { step in
                .object(JSONObject([("step", .string(step.name)), ("outcome", .string(step.outcome.rawValue)), ("error", step.error.map { .string($0) } ?? .null)]))
            })),
            ("deleted", deletedAt.map { .integer(Int64($0)) } ?? .null),
            ("erased", .bool(isErased)),
            ("subscriptionWarning", .bool(subscriptionWarning)),
            ("subscriptionRenews", .bool(subscriptionRenews)),
        ]))
    }
}

extension Ledger {
    /// The ledger's own deletion steps, last of any: `profile` opens every personal field of
    /// the subject (none is damaged or missing its key, so destroying the key leaves nothing
    /// readable behind), then `auth` checks the key store can forget the subject's keys (they
    /// are in its current generation, and its directories can be written).
    public var ownErasureSteps: [ErasureStep] {
        let log = self.log
        return [
            ErasureStep("profile") { subject in try log.events(subject: subject).forEach { _ in } },
            ErasureStep("auth") { subject in try log.checkCanForget(subject) },
        ]
    }

    /// Erases `subject` (SPEC §5 `ledger erase`, seed 003): appends `account.deletion_requested`
    /// when no request is in force, runs `steps` then the ledger's own (`ownErasureSteps`),
    /// each outcome appended as it is known (`account.deletion_step_completed` or `_failed`
    /// with the error; a failed step does not stop the others), and, once every step is done,
    /// `account.deleted`, which destroys the subject's keys before this returns. Run again, it
    /// runs only the steps not yet done.
    /// - Throws: `LedgerError` when an append fails; a step's failure is in the report.
    public func erase(_ subject: String, steps: [ErasureStep] = [], at now: Timestamp = .now(), source: EventSource = .support) throws(LedgerError) -> ErasureReport {
        // Before any step runs: a step deletes the app's data, which only an append records.
        try requireWritable("erase a customer")
        var policy = try policy()
        if policy.deletion == nil { policy.deletion = Policy.Deletion(mode: .hard, softGraceDays: nil) }
        func deletion() throws(LedgerError) -> DeletionView? {
            Replay.view(DeletionModel.self, of: subject, from: try recordedEvents(of: subject), at: now, policy: policy)
        }
        // Each append expects the stream where the erase last saw it: two erasures of one
        // subject at once, or an app appending meanwhile, stop this one rather than interleave.
        var version = try log.version(of: subject)
        func append(_ data: EventData) throws(LedgerError) -> UInt64? {
            do {
                let result = try self.append([LedgerEvent(subject: subject, occurredAt: now, source: source, data: data)], expecting: [subject: .exact(version)])
                version += 1
                return result.firstPosition
            } catch where error.code == .wrongExpectedVersion {
                throw LedgerError(.wrongExpectedVersion, "\(subject) changed while it was being erased (another erase, or the app, appended to it); run erase again",
                                  subject: subject)
            }
        }
        var view = try deletion()
        var report = ErasureReport(subject: subject, steps: [], alreadyErased: false, subscriptionWarning: view?.subscriptionWarning ?? false,
                                   subscriptionRenews: view?.renews ?? false)
        if view?.state == .completed {
            // Erased before: a customer who came back has a new key, which goes the same way.
            guard try log.liveKeys(of: subject) > 0 else {
                report.alreadyErased = true
                return report
            }
            report.deletedAt = try append(.accountDeleted(AccountDeleted()))
            return report
        }
        if view?.state == DeletionState.none || view == nil {
            report.requestedAt = try append(.accountDeletionRequested(AccountDeletionRequested()))
            view = try deletion()
        }
        let done = Set(view?.completedSteps ?? [])
        for step in steps + ownErasureSteps {
            if done.contains(step.name) {
                report.steps.append(.init(name: step.name, outcome: .done))
                continue
            }
            // Only the step's own failure is its outcome; an append that fails stops the erase.
            var failure: String?
            do {
                try step.run(subject)
            } catch {
                failure = (error as? LedgerError)?.message ?? "\(error)"
            }
            if let failure {
                var failed = AccountDeletionStepFailed()
                failed.step = step.name
                failed.error = failure
                _ = try append(.accountDeletionStepFailed(failed))
                report.steps.append(.init(name: step.name, outcome: .failed, error: failure))
            } else {
                var completed = AccountDeletionStepCompleted()
                completed.step = step.name
                _ = try append(.accountDeletionStepCompleted(completed))
                report.steps.append(.init(name: step.name, outcome: .completed))
            }
        }
        // A step someone else runs (the app's photos, backups…) whose latest outcome is a
        // failure holds the deletion too: this erase cannot run it.
        let ran = Set(report.steps.map(\.name))
        for name in view?.failedSteps ?? [] where !ran.contains(name) {
            report.steps.append(.init(name: name, outcome: .failed, error: "failed where it runs (not a step this erase runs): run it there, then erase again"))
        }
        guard report.steps.allSatisfy({ $0.outcome != .failed }) else { return report }
        report.deletedAt = try append(.accountDeleted(AccountDeleted()))
        return report
    }
}

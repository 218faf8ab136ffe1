import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// A policy built in code is not bounded by the decoder: with every span and count at 10^12 or
/// at half of Int64's range, every model still folds, answers, lists its change times and its due items,
/// and the audit still reads — the time arithmetic saturates instead of trapping.
@Suite struct HugePolicyTests {
    let mar1 = ts("2026-03-01T09:30:00Z")

    /// The reference policy with every number a rule multiplies set to `n`.
    func policy(_ n: Int64) -> Policy {
        var p = Policy.reference
        p.subscription.billingGraceDays = n
        p.subscription.billingRetryDays = n
        p.subscription.offlineGraceHours = n
        p.subscription.verificationIntervalHours = n
        p.retention?.graceDays = n
        p.retention?.browseOnlyUntilDay = n
        p.retention?.pendingDeletionFromDay = n
        p.retention?.recoveryPassDays = n
        p.retention?.familyMemberGraceDays = n
        p.limits?.existingUserGraceDays = n
        p.access?.freeSessionsPerDay = n
        p.access?.resumeWithinSeconds = n
        p.access?.maxClockSkewSeconds = n
        p.notifications?.trialEndingLeadHours = n
        p.notifications?.retentionEmailDays = [n]
        p.deletion = Policy.Deletion(mode: .soft, softGraceDays: n)
        return p
    }

    /// A history that reaches every rule with a policy number in it.
    func history() throws -> Folded {
        let apr1 = days(31, after: mar1)
        return try Folded([
            Make.created("u", at: mar1.adding(seconds: -60)),
            Make.purchase("u", at: mar1, txn: "t1", expires: days(7, after: mar1), trial: true),
            Make.renewal("u", at: days(7, after: mar1), txn: "t2", original: "t1", expires: apr1),
            Make.renewalFailed("u", at: apr1, original: "t1"),
            Make.verified("u", at: apr1),
            Make.session("u", at: apr1, zone: "Europe/Berlin"),
            Make.device("u", at: apr1.adding(seconds: 60), .backgrounded),
            Make.resource("u", at: apr1, "person", "p1"),
            Make.autoRenew("u", at: apr1, original: "t1", enabled: false),
            Make.expired("u", at: days(40, after: mar1), original: "t1"),
            Make.recoveryPass("u", at: days(50, after: mar1)),
            Make.scheduled("u", at: apr1, task: "k1", due: "2026-04-10"),
            Make.deletionRequested("u", at: days(60, after: mar1)),
        ])
    }

    func everything<M: ReadModel>(_ model: M.Type, _ history: Folded, at t: Timestamp, policy: Policy) {
        let state = history.state(model, policy: policy)
        _ = history.view(model, at: t, policy: policy)
        _ = M.changeTimes(of: state, facts: history.facts(), policy: policy)
        _ = M.changeTimes(of: state, facts: history.facts(), policy: policy, in: ChangeWindow(after: t, through: Timestamp(milliseconds: .max)))
        _ = M.indexEntries(of: state, facts: history.facts(), policy: policy)
    }

    @Test(arguments: [Int64(1_000_000_000_000), Int64.max / 2])
    func everyModelAnswersUnderAPolicyOfHugeNumbers(_ n: Int64) throws {
        let history = try history()
        let policy = policy(n)
        for t in [mar1, days(45, after: mar1), days(400, after: mar1)] {
            for model in ReadModels.all { everything(model, history, at: t, policy: policy) }
            #expect(!history.audit(at: t, policy: policy).json.serialized().isEmpty)
        }
    }
}

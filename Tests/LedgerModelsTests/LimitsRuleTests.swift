@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import Testing

/// Limits rules of SPEC §4 (seed 001: 25 people and 5 tags on the free tier), one rule per test
/// with the exact view, at and on both sides of each boundary.
@Suite struct LimitsRuleTests {
    let mar1 = ts("2026-03-01T12:00:00Z")

    /// The view at `t` as SPEC §5's JSON, compact.
    func view(_ events: [LedgerEvent], at t: Timestamp, policy: Policy = .reference) throws -> String {
        let view = try #require(try Folded(events).view(LimitsModel.self, at: t, policy: policy))
        return JSON.object(view.json).serialized()
    }

    func expected(people: Int64 = 0, personLimit: Int64? = 25, person: String = "ok", tags: Int64 = 0, tagLimit: Int64? = 5, tag: String = "ok") -> String {
        #"{"person":{"count":\#(people),"limit":\#(personLimit.map(String.init) ?? "null"),"state":"\#(person)"},"tag":{"count":\#(tags),"limit":\#(tagLimit.map(String.init) ?? "null"),"state":"\#(tag)"}}"#
    }

    /// A free user created after effectiveAt, with `n` resources of `kind`.
    func freeUser(_ kind: String, _ n: Int) -> [LedgerEvent] {
        [Make.created("u", at: mar1)] + (0 ..< n).map { Make.resource("u", at: mar1.adding(seconds: Int64($0 + 1)), kind, "\(kind)-\($0)") }
    }

    @Test func noSectionNoModel() throws {
        var policy = Policy.reference
        policy.limits = nil
        #expect(try Folded(freeUser("tag", 1)).view(LimitsModel.self, at: mar1, policy: policy) == nil)
    }

    /// 001: the warning from ⌈0.8 × 25⌉ = 20 people; blocked at 25.
    @Test func peopleWarnFrom20AndBlockAt25() throws {
        let t = days(1, after: mar1)
        #expect(try view(freeUser("person", 19), at: t) == expected(people: 19))
        #expect(try view(freeUser("person", 20), at: t) == expected(people: 20, person: "warning"))
        #expect(try view(freeUser("person", 24), at: t) == expected(people: 24, person: "warning"))
        #expect(try view(freeUser("person", 25), at: t) == expected(people: 25, person: "blocked"))
    }

    /// 001: the warning from ⌈0.8 × 5⌉ = 4 tags; blocked at 5.
    @Test func tagsWarnFrom4AndBlockAt5() throws {
        let t = days(1, after: mar1)
        #expect(try view(freeUser("tag", 3), at: t) == expected(tags: 3))
        #expect(try view(freeUser("tag", 4), at: t) == expected(tags: 4, tag: "warning"))
        #expect(try view(freeUser("tag", 5), at: t) == expected(tags: 5, tag: "blocked"))
        let card = try #require(try Folded(freeUser("tag", 4)).view(LimitsModel.self, at: t)).card
        #expect(card.rows.first { $0.label == "tag" }?.value == "4 of 5: one more before the paywall")
    }

    /// A resource counts when its latest creation or deletion (by kind and id) is a creation:
    /// a deletion takes one away, a creation again puts it back, the same id twice is one.
    @Test func aResourceCountsByItsLatestEvent() throws {
        let events = freeUser("tag", 2) + [Make.resource("u", at: days(1, after: mar1), "tag", "tag-0", deleted: true),
                                           Make.resource("u", at: days(2, after: mar1), "tag", "tag-1"),
                                           Make.resource("u", at: days(3, after: mar1), "tag", "tag-0")]
        #expect(try view(events, at: days(1, after: mar1)) == expected(tags: 1))
        #expect(try view(events, at: days(2, after: mar1)) == expected(tags: 1))
        #expect(try view(events, at: days(3, after: mar1)) == expected(tags: 2))
    }

    /// A paid plan has no limit; the count stays.
    @Test func aPaidPlanHasNoLimit() throws {
        let events = freeUser("tag", 6) + [Make.purchase("u", at: days(1, after: mar1), txn: "t1", expires: days(31, after: mar1))]
        #expect(try view(events, at: days(1, after: mar1)) == expected(personLimit: nil, tags: 6, tagLimit: nil))
        // A downgrade keeps the data: 6 of 5, blocked.
        #expect(try view(events, at: days(31, after: mar1)) == expected(tags: 6, tag: "blocked"))
    }

    /// An existing user (first account.created before effectiveAt) has no limit for
    /// t < effectiveAt + existingUserGraceDays × 24 h.
    @Test func anExistingUserHasAGrace() throws {
        let effectiveAt = ts("2026-01-01T00:00:00Z"), end = days(30, after: effectiveAt)
        let events = [Make.created("u", at: effectiveAt.adding(seconds: -1)), Make.resource("u", at: effectiveAt, "tag", "a")]
        #expect(try view(events, at: end.adding(seconds: -1)) == expected(personLimit: nil, tags: 1, tagLimit: nil))
        #expect(try view(events, at: end) == expected(tags: 1))
        // Created at effectiveAt: not an existing user.
        let newcomer = [Make.created("u", at: effectiveAt), Make.resource("u", at: effectiveAt, "tag", "a")]
        #expect(try view(newcomer, at: effectiveAt) == expected(tags: 1))
    }

    /// A trial is a paid plan: no limit while it covers.
    @Test func aTrialHasNoLimit() throws {
        let events = freeUser("tag", 5) + [Make.purchase("u", at: days(1, after: mar1), txn: "t1", expires: days(8, after: mar1), trial: true)]
        #expect(try view(events, at: days(8, after: mar1).adding(seconds: -1)) == expected(personLimit: nil, tags: 5, tagLimit: nil))
        #expect(try view(events, at: days(8, after: mar1)) == expected(tags: 5, tag: "blocked"))
    }

    /// An event before effectiveAt makes an existing user only until an account.created
    /// after effectiveAt is known: the first account.created decides once there is one.
    @Test func theFirstAccountCreatedDecidesOnceThereIsOne() throws {
        let effectiveAt = ts("2026-01-01T00:00:00Z")
        let events = [Make.usage("u", at: effectiveAt.adding(seconds: -1)), Make.resource("u", at: effectiveAt, "tag", "a"),
                      Make.created("u", at: days(1, after: effectiveAt))]
        #expect(try view(events, at: days(1, after: effectiveAt).adding(seconds: -1)) == expected(personLimit: nil, tags: 1, tagLimit: nil))
        #expect(try view(events, at: days(1, after: effectiveAt)) == expected(tags: 1))
    }

    /// With no account.created, the first event decides whether the subject is an existing user.
    @Test func withNoAccountTheFirstEventDecides() throws {
        let effectiveAt = ts("2026-01-01T00:00:00Z")
        let events = [Make.usage("u", at: effectiveAt.adding(seconds: -1)), Make.resource("u", at: effectiveAt, "tag", "a")]
        #expect(try view(events, at: effectiveAt) == expected(personLimit: nil, tags: 1, tagLimit: nil))
    }

    /// The audit cites the rule of each change: the fifth tag blocks the free tier.
    @Test func theAuditSaysTheFifthTagBlocks() throws {
        let report = try Folded(freeUser("tag", 5)).audit(at: days(1, after: mar1))
        let fifth = try #require(report.entries.last)
        #expect(fifth.summary == "tag tag-4 created")
        #expect(fifth.changes.filter { $0.model == "limits" } == [
            AuditChange(model: "limits", field: "tag.count", from: 4, to: 5, rule: "resourceCount"),
            AuditChange(model: "limits", field: "tag.state", from: "warning", to: "blocked", rule: "limits.free"),
        ])
    }

    /// ⌈ratio × limit⌉ in exact decimal: binary floating point makes ⌈0.07 × 100⌉ 8.
    @Test func theWarningThresholdIsExactDecimal() {
        #expect(LimitsRules.warningThreshold(limit: 100, ratio: 0.07) == 7)
        #expect(LimitsRules.warningThreshold(limit: 25, ratio: 0.8) == 20)
        #expect(LimitsRules.warningThreshold(limit: 5, ratio: 0.8) == 4)
        #expect(LimitsRules.warningThreshold(limit: 3, ratio: 0.5) == 2)
        #expect(LimitsRules.warningThreshold(limit: 7, ratio: 1) == 7)
        #expect(LimitsRules.warningThreshold(limit: 1_000_000, ratio: 0.00001) == 10)
        #expect(LimitsRules.warningThreshold(limit: 1_000_000, ratio: 0.000015) == 15)   // "1.5e-05"
        #expect(LimitsRules.warningThreshold(limit: 999_999, ratio: 0.000015) == 15)
    }
}

@_spi(Storage) import LedgerCore
import Testing

@Suite struct PolicyTests {
    func pack(_ name: String) throws -> Policy {
        try Policy.decode(Array(try schemaFile("policies/\(name).json").utf8)).get()
    }

    func problems(_ text: String) -> [String] {
        switch Policy.decode(Array(text.utf8)) {
        case .success: return []
        case .failure(let failure): return failure.violations.map { "\($0.field): \($0.message)" }
        }
    }

    @Test func theCompiledReferenceEqualsSchemasPoliciesReference() throws {
        #expect(try pack("reference") == Policy.reference)
        #expect(Policy.reference.limits?.effectiveAt.description == "2026-01-01T00:00:00.000Z")
    }

    @Test func everyPackDecodesAndRoundTripsThroughItsCanonicalJSON() throws {
        for name in ["reference", "handz", "photolala", "facerecall", "careguide", "stampbook"] {
            let policy = try pack(name)
            #expect(policy.name == name)
            #expect(try Policy.decode(policy.json).get() == policy)
            #expect(policy.hash.count == 64)
        }
    }

    /// `--policy careguide` works from anywhere: the binary holds each pack's file as written.
    @Test func theBuiltInPacksAreTheFilesOfSchemasPolicies() throws {
        #expect(Policy.packTexts.map(\.name) == ["handz", "photolala", "facerecall", "careguide", "stampbook", "stampbook-soft"])
        for (name, text) in Policy.packTexts {
            #expect(text + "\n" == (try schemaFile("policies/\(name).json")), "regenerate Sources/LedgerCore/Policy/PolicyPacks.swift from \(name).json")
            #expect(Policy.pack(named: name) == (try pack(name)))
        }
        #expect(Policy.pack(named: "reference") == Policy.reference)
        #expect(Policy.pack(named: "nosuch") == nil)
    }

    @Test func packsSwitchFeaturesOffByLeavingSectionsOut() throws {
        let photolala = try pack("photolala")
        #expect(photolala.retention?.startsAt == .cancellation)
        #expect(photolala.subscription.billingGraceDays == 60)
        #expect(photolala.subscription.billingGraceSource == .policy)
        #expect(photolala.limits == nil && photolala.access == nil)
        #expect(try pack("facerecall").limits?.free == ["person": 25, "tag": 5])
        #expect(try pack("careguide").access?.freeSessionsPerDay == 1)
        #expect(try pack("handz").retention == nil)
    }

    @Test func theHashChangesWithAnyNumberAndNotWithKeyOrder() throws {
        var longer = Policy.reference
        longer.subscription.billingGraceDays = 7
        #expect(longer.hash != Policy.reference.hash)
        let reordered = try #require(try JSONParser.parse(try schemaFile("policies/reference.json")).objectMembersReversed)
        #expect(try Policy.decode(reordered).get().hash == Policy.reference.hash)
    }

    @Test func unknownAndMissingKeysAreNamedByPointer() {
        #expect(problems(#"{"name":"x","version":1,"subscription":{"trialDays":7},"colour":1}"#) == [
            "/colour: unknown key; a policy has name, version, description, subscription, retention, limits, access, notifications, deletion",
            "/subscription/billingGraceDays: missing; every key of a present section is required",
            "/subscription/billingGraceSource: missing; every key of a present section is required",
            "/subscription/billingRetryDays: missing; every key of a present section is required",
            "/subscription/offlineGraceHours: missing; every key of a present section is required",
            "/subscription/verificationIntervalHours: missing; every key of a present section is required",
        ])
        #expect(problems(#"{"name":"x","version":1}"#) == ["/subscription: missing; every policy has it"])
    }

    /// limits.effectiveAt is read by the same parser as events' times: years 0000–9999 in UTC.
    @Test func anEffectiveTimeOutsideFourDigitYearsIsRefusedByPointer() throws {
        let text = try schemaFile("policies/reference.json").replacingOccurrences(of: "2026-01-01T00:00:00.000Z", with: "9999-12-31T23:59:59-00:01")
        #expect(problems(text) == [#"/limits/effectiveAt: "9999-12-31T23:59:59-00:01" is outside years 0000–9999 once in UTC (10000-01-01T00:00:59.000Z)"#])
    }

    @Test func wrongValuesSayWhatWasExpected() throws {
        var text = try schemaFile("policies/reference.json")
        text = text.replacingOccurrences(of: #""graceDays": 30"#, with: #""graceDays": 30.0"#)
        text = text.replacingOccurrences(of: #""mode": "hard""#, with: #""mode": "hard", "softGraceDays": 30"#)
        #expect(problems(text) == [
            "/retention/graceDays: expected a whole number of days from 0 to 36500 (100 years), got 30.0",
            "/deletion/softGraceDays: only a soft deletion has a grace period; remove it or set mode to soft",
        ])
    }
}

/// Every number a policy holds is bounded in its unit, so that no rule's sum of days, hours or
/// seconds can overflow a timestamp: a span is at most 100 years (36,500 days, 876,000 hours,
/// 3,153,600,000 seconds), sessions a day at most one a second, a limit at most 1,000,000.
@Suite struct PolicyBoundTests {
    /// The reference policy with `"key": old` written as `"key": new`.
    func reference(_ key: String, _ old: String, _ new: String) throws -> String {
        try schemaFile("policies/reference.json").replacingOccurrences(of: "\"\(key)\": \(old)", with: "\"\(key)\": \(new)")
    }

    @Test(arguments: [
        ("billingGraceDays", "3", "36500"), ("offlineGraceHours", "24", "876000"), ("resumeWithinSeconds", "300", "3153600000"),
        ("freeSessionsPerDay", "1", "86400"), ("person", "25", "1000000"), ("trialEndingLeadHours", "48", "876000"),
    ])
    func aNumberAtItsBoundIsAccepted(key: String, old: String, bound: String) throws {
        #expect(throws: Never.self) { try Policy.decode(Array(try reference(key, old, bound).utf8)).get() }
    }

    /// The defect: 10^12 days passed, and status, audit and the rebuild that would replace the
    /// policy trapped on the overflow.
    @Test(arguments: [
        ("billingGraceDays", "3", "1000000000000", "/subscription/billingGraceDays: expected a whole number of days from 0 to 36500 (100 years), got 1000000000000"),
        ("billingGraceDays", "3", "36501", "/subscription/billingGraceDays: expected a whole number of days from 0 to 36500 (100 years), got 36501"),
        ("pendingDeletionFromDay", "365", "36501", "/retention/pendingDeletionFromDay: expected a whole number of days from 1 to 36500 (100 years), got 36501"),
        ("offlineGraceHours", "24", "876001", "/subscription/offlineGraceHours: expected a whole number of hours from 0 to 876000 (100 years), got 876001"),
        ("trialEndingLeadHours", "48", "1000000000000", "/notifications/trialEndingLeadHours: expected a whole number of hours from 1 to 876000 (100 years), got 1000000000000"),
        ("resumeWithinSeconds", "300", "3153600001", "/access/resumeWithinSeconds: expected a whole number of seconds from 0 to 3153600000 (100 years), got 3153600001"),
        ("maxClockSkewSeconds", "300", "-1", "/access/maxClockSkewSeconds: expected a whole number of seconds from 0 to 3153600000 (100 years), got -1"),
        ("freeSessionsPerDay", "1", "86401", "/access/freeSessionsPerDay: expected a whole number of sessions from 1 to 86400 (one a second), got 86401"),
        ("person", "25", "1000001", "/limits/free/person: expected a whole number from 1 to 1000000 for a non-empty resource kind, got 1000001"),
        ("softLimitRatio", "0.8", "1.5", "/limits/softLimitRatio: expected a number in (0, 1], got 1.5"),
        ("softLimitRatio", "0.8", "0", "/limits/softLimitRatio: expected a number in (0, 1], got 0"),
    ])
    func aNumberPastItsBoundIsRefusedNamingThePointerAndTheBound(key: String, old: String, value: String, problem: String) throws {
        #expect(PolicyTests().problems(try reference(key, old, value)) == [problem])
    }

    @Test func aRetentionEmailPastOneHundredYearsIsRefused() throws {
        let text = try schemaFile("policies/reference.json").replacingOccurrences(of: "350\n", with: "36501\n")
        #expect(PolicyTests().problems(text) == [
            "/notifications/retentionEmailDays: expected a list of distinct whole days from 0 to 36500 (100 years), got [7,23,29,31,60,36501]",
        ])
    }
}

extension JSON {
    /// The same object with its members in reverse order.
    var objectMembersReversed: JSON? {
        guard case .object(let o) = self else { return nil }
        return .object(JSONObject(o.members.reversed().map { ($0.key, $0.value) }))
    }
}

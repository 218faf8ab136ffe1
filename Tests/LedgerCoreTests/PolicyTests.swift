import LedgerCore
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

    @Test func wrongValuesSayWhatWasExpected() throws {
        var text = try schemaFile("policies/reference.json")
        text = text.replacingOccurrences(of: #""graceDays": 30"#, with: #""graceDays": 30.0"#)
        text = text.replacingOccurrences(of: #""mode": "hard""#, with: #""mode": "hard", "softGraceDays": 30"#)
        #expect(problems(text) == [
            "/retention/graceDays: expected a whole number from 0 to 1000000, got 30.0",
            "/deletion/softGraceDays: only a soft deletion has a grace period; remove it or set mode to soft",
        ])
    }
}

/// Every whole number a policy holds is at most 1,000,000, so that no rule's sum of days,
/// hours or seconds can overflow a timestamp: at the bound, one above, and far above.
@Suite struct PolicyBoundTests {
    func reference(billingGraceDays value: String) throws -> String {
        try schemaFile("policies/reference.json")
            .replacingOccurrences(of: #""billingGraceDays": 3"#, with: "\"billingGraceDays\": \(value)")
    }

    @Test func aNumberAtTheBoundIsAccepted() throws {
        let policy = try Policy.decode(Array(try reference(billingGraceDays: "1000000").utf8)).get()
        #expect(policy.subscription.billingGraceDays == 1_000_000)
    }

    @Test(arguments: ["1000001", "1000000000000000"])
    func aNumberAboveTheBoundIsRefusedByPointer(_ value: String) throws {
        #expect(PolicyTests().problems(try reference(billingGraceDays: value)) == [
            "/subscription/billingGraceDays: expected a whole number from 0 to 1000000, got \(value)",
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

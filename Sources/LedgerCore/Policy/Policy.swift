import Crypto

/// The policy document (SPEC §3): every number a rule uses, never in code. A missing section
/// switches its feature off; within a present section every key is required; unknown keys are
/// errors. `Schemas/policy.schema.json` says the same in JSON Schema.
public struct Policy: Sendable, Hashable {
    /// Plan state.
    public struct Subscription: Sendable, Hashable {
        public var trialDays: Int64
        public var billingGraceDays: Int64
        public var billingGraceSource: GraceSource
        public var billingRetryDays: Int64
        public var offlineGraceHours: Int64
        public var verificationIntervalHours: Int64

        /// Whose billing grace end wins.
        public enum GraceSource: String, Sendable, Hashable, CaseIterable {
            /// The store's `gracePeriodExpiresAt` when given, else billingGraceDays.
            case store
            /// Always billingGraceDays.
            case policy
        }
    }

    /// Data retention after paid access ends (000).
    public struct Retention: Sendable, Hashable {
        public var startsAt: Start
        public var graceDays: Int64
        public var browseOnlyUntilDay: Int64
        public var pendingDeletionFromDay: Int64
        public var reactivationFee: Money
        public var recoveryPassDays: Int64
        public var familyMemberGraceDays: Int64

        /// What day 0 of the flow is.
        public enum Start: String, Sendable, Hashable, CaseIterable {
            /// When paid access ends.
            case accessEnd
            /// When auto-renew is turned off (for the period that then ended).
            case cancellation
        }
    }

    /// An amount in a currency, as decimal text.
    public struct Money: Sendable, Hashable, Encodable {
        public var amount: String
        public var currency: String
    }

    /// Free-tier resource limits (001).
    public struct Limits: Sendable, Hashable {
        /// Limit per resource kind.
        public var free: [String: Int64]
        public var softLimitRatio: Double
        public var effectiveAt: Timestamp
        public var existingUserGraceDays: Int64
    }

    /// Once-per-day access for free users (002).
    public struct Access: Sendable, Hashable {
        public var freeSessionsPerDay: Int64
        public var resumeWithinSeconds: Int64
        public var maxClockSkewSeconds: Int64
    }

    /// What falls due (004 CH27, 000).
    public struct Notifications: Sendable, Hashable {
        public var trialEndingLeadHours: Int64
        public var retentionEmailDays: [Int64]
    }

    /// Account deletion (003).
    public struct Deletion: Sendable, Hashable {
        public var mode: Mode
        /// Only with `soft`: how long a deletion can still be cancelled.
        public var softGraceDays: Int64?

        public init(mode: Mode, softGraceDays: Int64?) { (self.mode, self.softGraceDays) = (mode, softGraceDays) }

        public enum Mode: String, Sendable, Hashable, CaseIterable {
            case hard, soft
        }
    }

    public var name: String
    public var version: Int64
    public var description: String?
    public var subscription: Subscription
    public var retention: Retention?
    public var limits: Limits?
    public var access: Access?
    public var notifications: Notifications?
    public var deletion: Deletion?

    /// The document as canonical JSON: keys in the schema's order, absent sections omitted.
    public var json: JSON {
        var object: JSONObject = ["name": .string(name), "version": .integer(version)]
        if let description { object["description"] = .string(description) }
        object["subscription"] = [
            "trialDays": .integer(subscription.trialDays), "billingGraceDays": .integer(subscription.billingGraceDays),
            "billingGraceSource": .string(subscription.billingGraceSource.rawValue), "billingRetryDays": .integer(subscription.billingRetryDays),
            "offlineGraceHours": .integer(subscription.offlineGraceHours), "verificationIntervalHours": .integer(subscription.verificationIntervalHours),
        ]
        if let r = retention {
            object["retention"] = [
                "startsAt": .string(r.startsAt.rawValue), "graceDays": .integer(r.graceDays), "browseOnlyUntilDay": .integer(r.browseOnlyUntilDay),
                "pendingDeletionFromDay": .integer(r.pendingDeletionFromDay),
                "reactivationFee": ["amount": .string(r.reactivationFee.amount), "currency": .string(r.reactivationFee.currency)],
                "recoveryPassDays": .integer(r.recoveryPassDays), "familyMemberGraceDays": .integer(r.familyMemberGraceDays),
            ]
        }
        if let l = limits {
            let free = l.free.keys.sorted().map { ($0, JSON.integer(l.free[$0] ?? 0)) }
            object["limits"] = [
                "free": .object(JSONObject(free)), "softLimitRatio": JSONNumber(l.softLimitRatio).map(JSON.number) ?? .null,
                "effectiveAt": .string(l.effectiveAt.description), "existingUserGraceDays": .integer(l.existingUserGraceDays),
            ]
        }
        if let a = access {
            object["access"] = ["freeSessionsPerDay": .integer(a.freeSessionsPerDay), "resumeWithinSeconds": .integer(a.resumeWithinSeconds),
                                "maxClockSkewSeconds": .integer(a.maxClockSkewSeconds)]
        }
        if let n = notifications {
            object["notifications"] = ["trialEndingLeadHours": .integer(n.trialEndingLeadHours),
                                       "retentionEmailDays": .array(n.retentionEmailDays.map { .integer($0) })]
        }
        if let d = deletion {
            var section: JSONObject = ["mode": .string(d.mode.rawValue)]
            if let days = d.softGraceDays { section["softGraceDays"] = .integer(days) }
            object["deletion"] = .object(section)
        }
        return .object(object)
    }

    /// SHA-256 (hex) of the canonical JSON with sorted keys: what stores and read models record.
    public var hash: String {
        let digest = SHA256.hash(data: Array(json.serialized(sortedKeys: true).utf8))
        return digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

@_spi(Storage) import LedgerCore

/// Where a subject stands against one resource kind's free-tier limit.
public enum LimitState: String, Sendable, Hashable, Encodable {
    case ok, warning, blocked
}

/// The limits view of one subject at a time (SPEC §4–§5): one entry per kind of
/// `limits.free`, in key order.
public struct LimitsView: ModelView, Hashable {
    public struct Entry: Sendable, Hashable, Encodable {
        public var count: Int64
        /// `nil`: no limit (a paid plan, or the existing-user grace).
        public var limit: Int64?
        public var state: LimitState

        public init(count: Int64, limit: Int64?, state: LimitState) { (self.count, self.limit, self.state) = (count, limit, state) }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(count, forKey: .count)
            try container.encode(limit, forKey: .limit)
            try container.encode(state, forKey: .state)
        }

        enum CodingKeys: String, CodingKey { case count, limit, state }
    }

    /// Why there is no limit, if there is none: `planState` (a paid plan) or
    /// `limits.existingUserGraceDays`; `nil` when the free limits apply.
    public enum Unlimited: String, Sendable, Hashable {
        case planState
        case existingUserGrace = "limits.existingUserGraceDays"
    }

    /// By kind, in key order.
    public var kinds: [(kind: String, entry: Entry)]
    public var unlimited: Unlimited?
    /// The plan at the time, and when the existing-user grace ends (for the card's words).
    public var planState: PlanState
    public var graceEnds: Timestamp?

    public init(kinds: [(kind: String, entry: Entry)], unlimited: Unlimited?, planState: PlanState, graceEnds: Timestamp?) {
        (self.kinds, self.unlimited, self.planState, self.graceEnds) = (kinds, unlimited, planState, graceEnds)
    }

    public static func == (a: LimitsView, b: LimitsView) -> Bool {
        a.kinds.elementsEqual(b.kinds) { $0.kind == $1.kind && $0.entry == $1.entry } && a.unlimited == b.unlimited
            && a.planState == b.planState && a.graceEnds == b.graceEnds
    }

    public func hash(into hasher: inout Hasher) {
        for (kind, entry) in kinds {
            hasher.combine(kind)
            hasher.combine(entry)
        }
        hasher.combine(unlimited)
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (kind, entry) in kinds { try container.encode(entry, forKey: Key(stringValue: kind)) }
    }

    /// A count follows the resource events; a limit the plan or the grace; a state the limit
    /// (`limits.free`) or the warning ratio (`limits.softLimitRatio`).
    public func rule(for field: String) -> String? {
        if field.hasSuffix(".count") { return "resourceCount" }
        if field.hasSuffix(".limit") { return unlimited?.rawValue ?? "limits.free" }
        guard field.hasSuffix(".state") else { return nil }
        let kind = String(field.dropLast(".state".count))
        switch kinds.first(where: { $0.kind == kind })?.entry.state {
        case .warning?: return "limits.softLimitRatio"
        case .blocked?: return "limits.free"
        case .ok?, nil: return unlimited?.rawValue ?? "limits.softLimitRatio"
        }
    }

    /// "free tier" or why unlimited, then per kind "4 of 5: one more before the paywall".
    public var card: ViewCard {
        let headline: [ViewCard.Part]
        switch unlimited {
        case nil: headline = [.text("free tier limits apply")]
        case .planState?: headline = [.text("no limits: plan \(planState.rawValue)")]
        case .existingUserGrace?:
            headline = [.text("no limits until ")] + (graceEnds.map { [.value(.string($0.description))] } ?? []) + [.text(" (existing-user grace)")]
        }
        let rows = kinds.map { kind, entry -> (label: String, value: JSON) in
            guard let limit = entry.limit else { return (kind, .string("\(entry.count)")) }
            let words: String
            switch entry.state {
            case .blocked where entry.count > limit: words = "over the limit: the data stays, adding more is blocked"
            case .blocked: words = "at the limit: adding more needs pro"
            case .warning:
                let left = limit - entry.count
                words = (left == 1 ? "one more" : "\(left) more") + " before the paywall"
            case .ok: words = "\(limit - entry.count) left"
            }
            return (kind, .string("\(entry.count) of \(limit): \(words)"))
        }
        return ViewCard(headline: headline, rows: rows)
    }
}

/// SPEC §4's limit rules, as pure functions.
package enum LimitsRules {
    static func view(of state: LimitsModel.State, facts: SubjectFacts, at t: Timestamp, policy: Policy, limits: Policy.Limits) -> LimitsView {
        let plan = Plan.decide(facts, at: t, policy: policy.subscription).planState
        let paid = plan == .trial || plan == .pro || plan == .proGrace
        let graceEnds = limits.effectiveAt.adding(days: limits.existingUserGraceDays)
        // The first account.created by t, or with none, the first event by t.
        let inGrace = facts.activity.first(at: t).map { $0 < limits.effectiveAt } == true && t < graceEnds
        let unlimited: LimitsView.Unlimited? = paid ? .planState : inGrace ? .existingUserGrace : nil
        let kinds = limits.free.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { kind -> (kind: String, entry: LimitsView.Entry) in
            let count = state.count(of: kind)
            guard unlimited == nil, let limit = limits.free[kind] else { return (kind, .init(count: count, limit: nil, state: .ok)) }
            return (kind, .init(count: count, limit: limit, state: limitState(count: count, limit: limit, ratio: limits.softLimitRatio)))
        }
        return LimitsView(kinds: kinds, unlimited: unlimited, planState: plan, graceEnds: inGrace ? graceEnds : nil)
    }

    /// `blocked` at or over the limit, `warning` from ⌈ratio × limit⌉, else `ok`.
    package static func limitState(count: Int64, limit: Int64, ratio: Double) -> LimitState {
        if count >= limit { return .blocked }
        if count >= warningThreshold(limit: limit, ratio: ratio) { return .warning }
        return .ok
    }

    /// ⌈ratio × limit⌉ in exact decimal arithmetic on the ratio as written (its shortest
    /// decimal form): in binary floating point ⌈0.07 × 100⌉ comes out 8.
    package static func warningThreshold(limit: Int64, ratio: Double) -> Int64 {
        guard let (digits, scale) = decimal(ratio) else { return Int64((ratio * Double(limit)).rounded(.up)) }
        let product = Int128(digits) * Int128(limit)
        var power: Int128 = 1
        for _ in 0 ..< scale { power *= 10 }
        let quotient = product / power
        return Int64(product % power == 0 ? quotient : quotient + 1)
    }

    /// A positive ratio's shortest decimal form as digits × 10^-scale (scale ≤ 30).
    static func decimal(_ value: Double) -> (digits: Int64, scale: Int)? {
        let text = String(value)   // shortest round-tripping: "0.07", "0.8", "1.0", "1e-05"
        // By UTF-8 byte: every status asks this per kind, and a Character's
        // `wholeNumberValue` looks up Unicode properties.
        var mantissa = Substring(text), exponent = 0
        if let e = text.utf8.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            guard let parsed = Int(text[text.index(after: e)...]) else { return nil }
            (mantissa, exponent) = (text[..<e], parsed)
        }
        var digits: Int64 = 0, scale = 0, seenPoint = false
        for byte in mantissa.utf8 {
            if byte == UInt8(ascii: ".") {
                seenPoint = true
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < Int64.max / 10 else { return nil }
            digits = digits * 10 + Int64(byte - UInt8(ascii: "0"))
            if seenPoint { scale += 1 }
        }
        scale -= exponent
        while scale < 0 {
            digits *= 10
            scale += 1
        }
        return scale <= 30 ? (digits, scale) : nil
    }
}

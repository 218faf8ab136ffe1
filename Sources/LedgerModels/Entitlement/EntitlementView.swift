@_spi(Storage) import LedgerCore

/// The entitlement of one subject at a time (SPEC §4–§5).
public struct EntitlementView: ModelView, Hashable {
    public typealias Reason = Plan.Reason

    public var planState: PlanState
    public var trialEligible: Bool
    public var expiresAt: Timestamp?
    public var renewsAt: Timestamp?
    public var autoRenew: Bool?
    public var billingIssue: Bool
    public var purchasePending: Bool
    public var productId: String?
    /// `billingIssue`, `cantVerify`, `checkingStatus`.
    public var banners: [String]
    public var reason: Reason

    public init(planState: PlanState, trialEligible: Bool, expiresAt: Timestamp?, renewsAt: Timestamp?, autoRenew: Bool?,
                billingIssue: Bool, purchasePending: Bool, productId: String?, banners: [String], reason: Reason) {
        self.planState = planState
        self.trialEligible = trialEligible
        self.expiresAt = expiresAt
        self.renewsAt = renewsAt
        self.autoRenew = autoRenew
        self.billingIssue = billingIssue
        self.purchasePending = purchasePending
        self.productId = productId
        self.banners = banners
        self.reason = reason
    }

    /// "pro (rule storeCoverage, event #17)", then every other field.
    public var card: ViewCard {
        var why = " (rule \(reason.rule)"
        if let position = reason.position { why += ", event #\(position)" }
        return ViewCard(headline: [.value(.string(planState.rawValue)), .text(why + ")")],
                        rows: json.members.filter { $0.key != "planState" && $0.key != "reason" }.map { ($0.key, $0.value) })
    }

    public func rule(for field: String) -> String? {
        switch field {
        case "billingIssue": "billingIssue"
        case "trialEligible": "trialEligible"
        case "autoRenew": "autoRenew"
        case "purchasePending": "purchasePending"
        default: reason.rule
        }
    }

    /// A plan given by a rule of higher precedence and now decided by a lower one was lost:
    /// the change cites the rule that gave it (the period a refund cut short, the trial or the
    /// billing grace that ran out), not the fallback that decides now. The billing-issue
    /// banner's changes cite `billingIssue`.
    public func rule(for field: String, since previous: EntitlementView) -> String? {
        if field == "banners" && previous.billingIssue != billingIssue { return "billingIssue" }
        let own = rule(for: field)
        guard own == reason.rule, Self.precedence(reason.rule) > Self.precedence(previous.reason.rule) else { return own }
        return previous.reason.rule
    }

    public func timeChange(since previous: EntitlementView) -> String? {
        if planState != previous.planState {
            let what = switch previous.reason.rule {
            case "storeCoverage": previous.planState == .trial ? "the trial ran out" : "the paid period ended"
            case "billingGrace": "billing grace ended"
            case "supportGrant": "the support grant ended"
            case "deviceVerified": "the device's verification is due again"
            case "offlineGrace": "the offline grace ended"
            default: "the plan changed"
            }
            return "\(what): \(previous.planState.rawValue) → \(planState.rawValue)"
        }
        if previous.billingIssue && !billingIssue { return "the billing retry window closed" }
        return nil
    }

    /// SPEC §4's step number of a rule.
    static func precedence(_ rule: String) -> Int {
        switch rule {
        case "deleted": 1
        case "storeCoverage": 2
        case "billingGrace": 3
        case "supportGrant": 4
        case "deviceVerified", "offlineGrace": 5
        default: 6
        }
    }

    public static var restatedFields: Set<String> { ["reason.rule", "reason.policyKey", "reason.position"] }
}

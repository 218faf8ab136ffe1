import LedgerCore

/// A subject's App Store subscription facts, as every read model that needs store coverage or
/// billing state keeps them (entitlement, retention, badge each hold their own copy: no model
/// reads another's state). The rules over them — coverage, billing grace, billing issue — are
/// written once, here, and SPEC §4 states them.
public struct SubscriptionFacts: Sendable, Equatable {
    /// A transaction: a purchase, a renewal, or the new transaction of an immediate product change.
    public struct Transaction: Sendable, Equatable {
        public enum Kind: UInt8, Sendable { case purchase = 0, renewal = 1, productChange = 2 }
        public var kind: Kind
        public var id: String
        public var originalId: String
        public var productId: String
        public var purchasedAt: Timestamp
        public var expiresAt: Timestamp
        public var isTrial: Bool

        /// The bit of a stored transaction's kind byte that says it is a trial.
        static let trialFlag: UInt8 = 4
    }

    /// A refund, its reversal, or a revocation of one transaction.
    public struct Mark: Sendable, Equatable {
        public enum Kind: UInt8, Sendable { case refund = 0, reversal = 1, revoke = 2 }
        public var kind: Kind
        public var transactionId: String
    }

    /// A renewal date extension of one transaction: its new expiresAt.
    public struct Extension: Sendable, Equatable {
        public var transactionId: String
        public var expiresAt: Timestamp
    }

    /// A failed renewal.
    public struct Failure: Sendable, Equatable {
        public var originalId: String
        public var graceExpiresAt: Timestamp?
    }

    /// The store ending a subscription or its grace (`subscription.expired`, `.grace_expired`).
    public struct End: Sendable, Equatable {
        public var originalId: String
        public var graceOnly: Bool
    }

    /// An immediate product change: the upgraded transaction's coverage ends when the new one starts.
    public struct Upgrade: Sendable, Equatable {
        public var originalId: String
        public var newTransactionId: String
        public var startsAt: Timestamp
    }

    public var transactions: [Dated<Transaction>] = []
    /// Renewal date extensions (`subscription.renewal_extended`).
    public var extensions: [Dated<Extension>] = []
    public var marks: [Dated<Mark>] = []
    public var failures: [Dated<Failure>] = []
    public var ends: [Dated<End>] = []
    /// Auto-renew turned on or off, per originalTransactionId.
    public var autoRenew: [Dated<AutoRenew>] = []
    public var upgrades: [Dated<Upgrade>] = []

    public struct AutoRenew: Sendable, Equatable {
        public var originalId: String
        public var enabled: Bool
    }

    public init() {}

    /// Folds a subscription event; `false` for an event that is not about subscriptions.
    @discardableResult
    public mutating func apply(_ event: RecordedEvent) -> Bool {
        let at = event.occurredAt, position = event.position
        switch event.data {
        case .subscriptionPurchased(let p):
            transactions.insertDated(Dated(at: at, position: position, value: Transaction(
                kind: .purchase, id: p.transactionId, originalId: p.originalTransactionId, productId: p.productId,
                purchasedAt: p.purchasedAt, expiresAt: p.expiresAt, isTrial: p.offer == .freeTrial)))
        case .subscriptionRenewed(let r):
            transactions.insertDated(Dated(at: at, position: position, value: Transaction(
                kind: .renewal, id: r.transactionId, originalId: r.originalTransactionId, productId: r.productId,
                purchasedAt: r.purchasedAt, expiresAt: r.expiresAt, isTrial: false)))
        case .subscriptionProductChanged(let c):
            guard c.effective == .immediate, let id = c.transactionId, let purchasedAt = c.purchasedAt, let expiresAt = c.expiresAt else { return true }
            transactions.insertDated(Dated(at: at, position: position, value: Transaction(
                kind: .productChange, id: id, originalId: c.originalTransactionId, productId: c.toProductId,
                purchasedAt: purchasedAt, expiresAt: expiresAt, isTrial: false)))
            upgrades.insertDated(Dated(at: at, position: position, value: Upgrade(originalId: c.originalTransactionId, newTransactionId: id, startsAt: purchasedAt)))
        case .subscriptionRenewalExtended(let e):
            extensions.insertDated(Dated(at: at, position: position, value: Extension(transactionId: e.transactionId, expiresAt: e.expiresAt)))
        case .subscriptionRefunded(let r):
            marks.insertDated(Dated(at: at, position: position, value: Mark(kind: .refund, transactionId: r.transactionId)))
        case .subscriptionRefundReversed(let r):
            marks.insertDated(Dated(at: at, position: position, value: Mark(kind: .reversal, transactionId: r.transactionId)))
        case .subscriptionRevoked(let r):
            marks.insertDated(Dated(at: at, position: position, value: Mark(kind: .revoke, transactionId: r.transactionId)))
        case .subscriptionRenewalFailed(let f):
            failures.insertDated(Dated(at: at, position: position, value: Failure(originalId: f.originalTransactionId, graceExpiresAt: f.gracePeriodExpiresAt)))
        case .subscriptionExpired(let e):
            ends.insertDated(Dated(at: at, position: position, value: End(originalId: e.originalTransactionId, graceOnly: false)))
        case .subscriptionGraceExpired(let e):
            ends.insertDated(Dated(at: at, position: position, value: End(originalId: e.originalTransactionId, graceOnly: true)))
        case .subscriptionAutoRenewChanged(let c):
            autoRenew.insertDated(Dated(at: at, position: position, value: AutoRenew(originalId: c.originalTransactionId, enabled: c.enabled)))
        default:
            return false
        }
        return true
    }

    /// The event types `apply` reads.
    public static let eventTypes: Set<String> = [
        "subscription.purchased", "subscription.renewed", "subscription.product_changed", "subscription.renewal_extended",
        "subscription.refunded", "subscription.refund_reversed", "subscription.revoked", "subscription.renewal_failed",
        "subscription.expired", "subscription.grace_expired", "subscription.auto_renew_changed",
    ]
}


// MARK: Rules (SPEC §4)

/// A transaction that covers a time, with why.
public struct Coverage: Sendable, Equatable {
    public var transaction: Dated<SubscriptionFacts.Transaction>
    /// Its end as extended, upgraded, refunded or revoked.
    public var end: Timestamp
}

/// The billing-failure episode in force at a time.
public struct BillingEpisode: Sendable, Equatable {
    public var failure: Dated<SubscriptionFacts.Failure>
    /// The failure's last covered period end.
    public var coveredUntil: Timestamp
    /// When the billing grace ends (`pro` until then): the store's or the policy's end, or a
    /// `subscription.expired` or `.grace_expired` after the failure.
    public var graceEnd: Timestamp
    /// Whether the grace end is the store's gracePeriodExpiresAt rather than billingGraceDays.
    public var graceFromStore: Bool
    /// When the billing issue ends, if no renewal recovers it first: the retry window's end,
    /// or a `subscription.expired` after the failure (a `.grace_expired` ends the grace only).
    public var issueEnd: Timestamp
    /// A transaction of the failure's subscription purchased after it, by the time asked,
    /// recovered it.
    public var recovered: Bool
}

/// The rules below are asked at a time `t` over the facts known at `known` (by default `t`
/// itself: a view at t). Retention asks about other times of the history the facts known at
/// its own t describe (where the latest stretch of access ended, what comes next), so it
/// passes its t as `known`. Two kinds of facts differ then:
/// - store transactions, extensions and immediate product changes carry their own times
///   (purchasedAt, expiresAt): once known they describe the whole history, so a purchase
///   reported late covers from its purchasedAt;
/// - every other fact (a refund, a failure, an expiry, a grant, a snapshot, a sign-in) takes
///   effect at its occurredAt, so at `t` only those known that happened by `t` count.
extension SubscriptionFacts {
    /// The end of a transaction's coverage as known at `t`: its expiresAt as extended, cut at
    /// an immediate upgrade's start, at a refund not reversed, at a revocation.
    public func end(of transaction: Transaction, at t: Timestamp) -> Timestamp {
        endWithCause(of: transaction, at: t).at
    }

    /// Why a transaction's coverage ends when it does.
    public enum EndCause: String, Sendable {
        /// Its expiresAt (as extended).
        case expiry
        /// An immediate product change started a new transaction.
        case upgrade
        case refund
        case revocation
    }

    /// The end of a transaction's coverage as known at `t`, with its cause.
    public func endWithCause(of transaction: Transaction, at t: Timestamp, known: Timestamp? = nil) -> (at: Timestamp, cause: EndCause) {
        endWithCause(id: transaction.id, originalId: transaction.originalId, purchasedAt: transaction.purchasedAt,
                     expiresAt: transaction.expiresAt, at: t, known: known ?? t)
    }

    /// `endWithCause(of:at:)` of the transaction at `index` of `described` (these facts'
    /// transactions known at some time), its fields read where they lie: the rules' loops ask
    /// this several times a query, and passing the transaction copied it out of its array with
    /// its three strings.
    func endWithCause(ofTransactionAt index: Int, in described: ArraySlice<Dated<Transaction>>,
                      at t: Timestamp, known: Timestamp) -> (at: Timestamp, cause: EndCause) {
        endWithCause(id: described[index].value.id, originalId: described[index].value.originalId, purchasedAt: described[index].value.purchasedAt,
                     expiresAt: described[index].value.expiresAt, at: t, known: known)
    }

    /// `endWithCause(of:at:)` from the fields it reads. Extensions and upgrades known at
    /// `known` move the end; a refund or revocation that happened by `t` cuts it at its own
    /// time (SPEC §4), unless a reversal that happened by `t` undid the refund.
    private func endWithCause(id: String, originalId: String, purchasedAt: Timestamp, expiresAt: Timestamp,
                              at t: Timestamp, known: Timestamp) -> (at: Timestamp, cause: EndCause) {
        var end = expiresAt
        var cause = EndCause.expiry
        for e in extensions.known(at: known) where e.value.transactionId == id { end = e.value.expiresAt }
        for u in upgrades.known(at: known) where u.value.originalId == originalId && u.value.newTransactionId != id
            && u.value.startsAt > purchasedAt && u.value.startsAt < end {
            end = u.value.startsAt
            cause = .upgrade
        }
        var refundedAt: Timestamp?
        for m in marks.known(at: min(t, known)) where m.value.transactionId == id {
            switch m.value.kind {
            case .refund: refundedAt = refundedAt ?? m.at
            case .reversal: refundedAt = nil
            case .revoke where m.at < end: (end, cause) = (m.at, .revocation)
            case .revoke: break
            }
        }
        if let refundedAt, refundedAt < end { (end, cause) = (refundedAt, .refund) }
        return (end, cause)
    }

    /// The latest expiresAt an extension known at `known` gives any transaction (`nil`: none).
    func latestExtension(known: Timestamp) -> Timestamp? {
        extensions.known(at: known).lazy.map(\.value.expiresAt).max()
    }

    /// A time a transaction's end cannot be later than: the later of its expiresAt and
    /// `latestExtension` (upgrades, refunds and revocations only cut an end short). The rules
    /// below pass over a transaction this bound rules out without working out its end: the
    /// retention look back asks them at every change time of a long subscription. It takes the
    /// expiresAt alone, since a transaction passed whole is copied out of its array with its
    /// three strings retained.
    @inline(__always)
    func endBound(expiresAt: Timestamp, latestExtension: Timestamp?) -> Timestamp {
        max(expiresAt, latestExtension ?? expiresAt)
    }

    /// The transaction covering `t` (the latest purchased, if several), or `nil`: SPEC §4's
    /// "covered", a transaction with purchasedAt ≤ t < its end.
    public func coverage(at t: Timestamp, known: Timestamp? = nil) -> Coverage? {
        let known = known ?? t
        // By index, so that only the transaction that wins is copied whole (each holds three strings).
        let described = transactions.known(at: known)
        let extended = latestExtension(known: known)
        var best: (index: Int, end: Timestamp)?
        for i in described.indices where described[i].value.purchasedAt <= t {
            if t >= endBound(expiresAt: described[i].value.expiresAt, latestExtension: extended) { continue }
            let end = endWithCause(ofTransactionAt: i, in: described, at: t, known: known).at
            guard t < end else { continue }
            if let current = best, (described[current.index].value.purchasedAt, described[current.index].position) > (described[i].value.purchasedAt, described[i].position) { continue }
            best = (i, end)
        }
        return best.map { Coverage(transaction: described[$0.index], end: $0.end) }
    }

    /// The latest transaction known at `t` (by purchase time), covering or not.
    public func latestTransaction(at t: Timestamp) -> Dated<Transaction>? {
        // By index, copying only the one found (`max(by:)` copies each candidate out).
        let known = transactions.known(at: t)
        var latest: Int?
        for i in known.indices {
            if let current = latest, (known[current].value.purchasedAt, known[current].position) >= (known[i].value.purchasedAt, known[i].position) { continue }
            latest = i
        }
        return latest.map { known[$0] }
    }

    /// Whether any transaction is known at `t`.
    public func hasTransactions(at t: Timestamp) -> Bool { !transactions.known(at: t).isEmpty }

    /// The end of the current or latest covered period known at `t`.
    public func latestEnd(at t: Timestamp) -> Timestamp? {
        // The latest first, as they usually end latest: the others' bounds then rule them out.
        let known = transactions.known(at: t)
        let extended = latestExtension(known: t)
        var latest: Timestamp?
        for i in known.indices.reversed() {
            if let latest, endBound(expiresAt: known[i].value.expiresAt, latestExtension: extended) <= latest { continue }
            let end = endWithCause(ofTransactionAt: i, in: known, at: t, known: t).at
            latest = max(latest ?? end, end)
        }
        return latest
    }

    /// The latest billing failure that happened by `t`, with its grace and issue windows
    /// (SPEC §4 rule 3 and `billingIssue`).
    public func billingEpisode(at t: Timestamp, known: Timestamp? = nil, policy: Policy.Subscription) -> BillingEpisode? {
        let known = known ?? t
        let happened = min(t, known)
        guard let failure = failures.known(at: happened).last else { return nil }
        return episode(of: failure, at: t, known: known, policy: policy)
    }

    /// The windows of one failure, asked at `t` over the facts known at `known`.
    func episode(of failure: Dated<Failure>, at t: Timestamp, known: Timestamp, policy: Policy.Subscription) -> BillingEpisode {
        let original = failure.value.originalId
        var coveredUntil: Timestamp?
        var recovered = false
        let described = transactions.known(at: known)
        for i in described.indices where described[i].value.originalId == original {
            if described[i].value.purchasedAt <= failure.at {
                let end = endWithCause(ofTransactionAt: i, in: described, at: t, known: known).at
                coveredUntil = max(coveredUntil ?? end, end)
            } else if described[i].value.purchasedAt <= t {
                recovered = true
            }
        }
        let until = coveredUntil ?? failure.at
        // The store's ends after the failure, in (occurredAt, position) order: the first of
        // either kind ends the grace, the first `subscription.expired` the issue too.
        var graceCut: Timestamp?
        var issueCut: Timestamp?
        for end in ends.known(at: min(t, known)) where end.value.originalId == original && (end.at, end.position) > (failure.at, failure.position) {
            graceCut = graceCut ?? end.at
            if !end.value.graceOnly {
                issueCut = end.at
                break
            }
        }
        let storeGrace = policy.billingGraceSource == .store ? failure.value.graceExpiresAt : nil
        var graceEnd = storeGrace ?? until.adding(seconds: policy.billingGraceDays * 86_400)
        var issueEnd = until.adding(seconds: policy.billingRetryDays * 86_400)
        if let graceCut { graceEnd = min(graceEnd, graceCut) }
        if let issueCut { issueEnd = min(issueEnd, issueCut) }
        return BillingEpisode(failure: failure, coveredUntil: until, graceEnd: graceEnd, graceFromStore: storeGrace != nil,
                              issueEnd: issueEnd, recovered: recovered)
    }

    /// SPEC §4's `billingIssue`, the one definition entitlement and badge share: from a failed
    /// renewal until a transaction purchased after it, a `subscription.expired`, or the
    /// failure's last covered period end + billingRetryDays, whichever comes first. A
    /// `subscription.grace_expired` does not end it: the store keeps retrying.
    public func billingIssue(at t: Timestamp, policy: Policy.Subscription) -> Bool {
        guard let episode = billingEpisode(at: t, policy: policy) else { return false }
        return !episode.recovered && t < episode.issueEnd
    }

    /// Auto-renew at `t`: `nil` with no transaction; otherwise the latest, in (occurredAt,
    /// position) order, of a purchase (on) and an `auto_renew_changed`.
    public func autoRenewing(at t: Timestamp) -> Bool? {
        guard hasTransactions(at: t) else { return nil }
        let known = transactions.known(at: t)
        var purchase: Int?
        for i in known.indices.reversed() where known[i].value.kind == .purchase {
            purchase = i
            break
        }
        let change = autoRenew.known(at: t).last
        guard let change else { return true }
        guard let purchase else { return change.value.enabled }
        return (known[purchase].at, known[purchase].position) > (change.at, change.position) ? true : change.value.enabled
    }

    /// Every time at which coverage, billing grace or the billing issue may change with no new
    /// event, whatever the facts known (a superset; see `Projection.changeTimes`): the facts'
    /// own times, every period start and end, and, once a renewal has failed, each time a
    /// covered period can end (an expiry, an extension, an upgrade, a refund or revocation, a
    /// failure with none) plus billingGraceDays and plus billingRetryDays, and each store
    /// grace end: a failure's windows count from one of those.
    public func changeTimes(policy: Policy.Subscription) -> [Timestamp] {
        // Appended one by one: an array literal or a mapped array per fact is an allocation.
        var times: [Timestamp] = []
        let periodEnds = transactions.count + extensions.count + upgrades.count + marks.count + failures.count
        times.reserveCapacity(3 * transactions.count + 2 * (extensions.count + upgrades.count)
                              + marks.count + ends.count + autoRenew.count + 2 * failures.count
                              + (failures.isEmpty ? 0 : 2 * periodEnds))
        for i in transactions.indices {   // by index: a transaction copied out retains its three strings
            times.append(transactions[i].at)
            times.append(transactions[i].value.purchasedAt)
            times.append(transactions[i].value.expiresAt)
        }
        for e in extensions {
            times.append(e.at)
            times.append(e.value.expiresAt)
        }
        for u in upgrades {
            times.append(u.at)
            times.append(u.value.startsAt)
        }
        for m in marks { times.append(m.at) }
        for e in ends { times.append(e.at) }
        for a in autoRenew { times.append(a.at) }
        for f in failures {
            times.append(f.at)
            if let end = f.value.graceExpiresAt { times.append(end) }
        }
        guard !failures.isEmpty else { return times }
        func windows(from end: Timestamp) {
            times.append(end.adding(seconds: policy.billingGraceDays * 86_400))
            times.append(end.adding(seconds: policy.billingRetryDays * 86_400))
        }
        for i in transactions.indices { windows(from: transactions[i].value.expiresAt) }
        for e in extensions { windows(from: e.value.expiresAt) }
        for u in upgrades { windows(from: u.value.startsAt) }
        for m in marks { windows(from: m.at) }
        for f in failures { windows(from: f.at) }
        return times
    }

    // MARK: Encoding

    /// A transaction is stored with its kind and, in bit 2 of the same byte, whether it is a trial.
    func encode(to writer: inout StateWriter) {
        writer.write(transactions) { w, t in
            w.write(t.kind.rawValue | (t.isTrial ? Transaction.trialFlag : 0)); w.write(t.id); w.write(t.originalId); w.write(t.productId)
            w.write(t.purchasedAt); w.write(t.expiresAt)
        }
        writer.write(extensions) { w, e in w.write(e.transactionId); w.write(e.expiresAt) }
        writer.write(marks) { w, m in w.write(m.kind.rawValue); w.write(m.transactionId) }
        writer.write(failures) { w, f in w.write(f.originalId); w.write(f.graceExpiresAt) { $0.write($1) } }
        writer.write(ends) { w, e in w.write(e.originalId); w.write(e.graceOnly) }
        writer.write(autoRenew) { w, a in w.write(a.originalId); w.write(a.enabled) }
        writer.write(upgrades) { w, u in w.write(u.originalId); w.write(u.newTransactionId); w.write(u.startsAt) }
    }

    init(from reader: inout StateReader) throws(StateReader.Damaged) {
        transactions = try reader.dated { r throws(StateReader.Damaged) in
            let head = try r.byte()
            guard let kind = Transaction.Kind(rawValue: head & ~Transaction.trialFlag) else { throw StateReader.Damaged(what: "bad transaction kind") }
            return Transaction(kind: kind, id: try r.string(), originalId: try r.string(), productId: try r.string(),
                               purchasedAt: try r.timestamp(), expiresAt: try r.timestamp(), isTrial: head & Transaction.trialFlag != 0)
        }
        extensions = try reader.dated { r throws(StateReader.Damaged) in Extension(transactionId: try r.string(), expiresAt: try r.timestamp()) }
        marks = try reader.dated { r throws(StateReader.Damaged) in
            guard let kind = Mark.Kind(rawValue: try r.byte()) else { throw StateReader.Damaged(what: "bad mark kind") }
            return Mark(kind: kind, transactionId: try r.string())
        }
        failures = try reader.dated { r throws(StateReader.Damaged) in
            Failure(originalId: try r.string(), graceExpiresAt: try r.optional { r throws(StateReader.Damaged) in try r.timestamp() })
        }
        ends = try reader.dated { r throws(StateReader.Damaged) in End(originalId: try r.string(), graceOnly: try r.bool()) }
        autoRenew = try reader.dated { r throws(StateReader.Damaged) in AutoRenew(originalId: try r.string(), enabled: try r.bool()) }
        upgrades = try reader.dated { r throws(StateReader.Damaged) in
            Upgrade(originalId: try r.string(), newTransactionId: try r.string(), startsAt: try r.timestamp())
        }
    }
}

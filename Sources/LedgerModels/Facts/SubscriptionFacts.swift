@_spi(Storage) import LedgerCore

/// A subject's App Store subscription facts (part of `SubjectFacts`, which every model's view
/// receives). The rules over them — coverage, billing grace, billing issue — are written once,
/// here, and SPEC §4 states them.
public struct SubscriptionFacts: StateRecord, Equatable {
    /// A transaction: a purchase, a renewal, or the new transaction of an immediate product change.
    public struct Transaction: StateRecord, Equatable {
        public enum Kind: UInt8, StateValue { case purchase = 0, renewal = 1, productChange = 2 }
        public var kind = Kind.purchase
        public var id = ""
        public var originalId = ""
        public var productId = ""
        public var purchasedAt = Timestamp(milliseconds: 0)
        public var expiresAt = Timestamp(milliseconds: 0)
        public var isTrial = false

        public init() {}

        public init(kind: Kind, id: String, originalId: String, productId: String, purchasedAt: Timestamp, expiresAt: Timestamp, isTrial: Bool) {
            (self.kind, self.id, self.originalId, self.productId) = (kind, id, originalId, productId)
            (self.purchasedAt, self.expiresAt, self.isTrial) = (purchasedAt, expiresAt, isTrial)
        }

        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&kind)
            try coder.code(&isTrial)
            try coder.code(&id)
            try coder.code(&originalId)
            try coder.code(&productId)
            try coder.code(&purchasedAt)
            try coder.code(&expiresAt)
        }
    }

    /// A refund, its reversal, or a revocation of one transaction.
    public struct Mark: StateRecord, Equatable {
        public enum Kind: UInt8, StateValue { case refund = 0, reversal = 1, revoke = 2 }
        public var kind = Kind.refund
        public var transactionId = ""

        public init() {}
        public init(kind: Kind, transactionId: String) { (self.kind, self.transactionId) = (kind, transactionId) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&kind); try coder.code(&transactionId) }
    }

    /// A renewal date extension of one transaction: its new expiresAt.
    public struct Extension: StateRecord, Equatable {
        public var transactionId = ""
        public var expiresAt = Timestamp(milliseconds: 0)

        public init() {}
        public init(transactionId: String, expiresAt: Timestamp) { (self.transactionId, self.expiresAt) = (transactionId, expiresAt) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&transactionId)
            try coder.code(&expiresAt)
        }
    }

    /// A failed renewal.
    public struct Failure: StateRecord, Equatable {
        public var originalId = ""
        public var graceExpiresAt: Timestamp?

        public init() {}
        public init(originalId: String, graceExpiresAt: Timestamp?) { (self.originalId, self.graceExpiresAt) = (originalId, graceExpiresAt) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&originalId)
            try coder.code(&graceExpiresAt)
        }
    }

    /// The store ending a subscription or its grace (`subscription.expired`, `.grace_expired`).
    public struct End: StateRecord, Equatable {
        public var originalId = ""
        public var graceOnly = false

        public init() {}
        public init(originalId: String, graceOnly: Bool) { (self.originalId, self.graceOnly) = (originalId, graceOnly) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&originalId); try coder.code(&graceOnly) }
    }

    /// An immediate product change: the upgraded transaction's coverage ends when the new one starts.
    public struct Upgrade: StateRecord, Equatable {
        public var originalId = ""
        public var newTransactionId = ""
        public var startsAt = Timestamp(milliseconds: 0)

        public init() {}
        public init(originalId: String, newTransactionId: String, startsAt: Timestamp) {
            (self.originalId, self.newTransactionId, self.startsAt) = (originalId, newTransactionId, startsAt)
        }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&originalId)
            try coder.code(&newTransactionId)
            try coder.code(&startsAt)
        }
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
    /// The latest store grace end of any failure (`gracePeriodExpiresAt`) and how many failures
    /// it counts, kept as failures are folded (`SubjectFacts.applyPlan`): a look for an open
    /// grace under billingGraceSource `store` stops at the long-shut failures once the end is
    /// past, instead of asking every failure for a store end — when it counts every failure.
    var latestStoreGraceEnd: Timestamp?
    var failuresFolded: Int64 = 0
    /// How many transactions were purchased at or before their own time (their event's
    /// occurredAt), as the store's are, kept as they are folded: when all were, a look for the
    /// latest purchased covering a time stops at the first transaction that happened before
    /// the best so far was purchased.
    var purchasedByTheirTime: Int64 = 0
    /// How many marks of each kind were folded: a transaction's cuts (`cuts(of:in:happened:)`)
    /// look for no kind there is none of, and walk from the side that ends soonest — when the
    /// counts add up to every mark.
    var refundsFolded: Int64 = 0
    var reversalsFolded: Int64 = 0
    var revocationsFolded: Int64 = 0
    /// The latest expiresAt of any extension and how many extensions it counts, kept as they
    /// are folded: `latestExtension`'s bound without a walk over them all, when it counts
    /// every extension.
    var latestExtensionEnd: Timestamp?
    var extensionsFolded: Int64 = 0
    /// The transactions with a mark, and those with an extension: a transaction with none is
    /// not looked for among them (a subject refunding one transaction a thousand times has a
    /// thousand marks, and every other transaction's end walked over them all). Derived from
    /// `marks` and `extensions`, never stored: kept as they are folded, built again when facts
    /// are decoded.
    var marked = TransactionIds()
    var extended = TransactionIds()
    /// What bounds the transactions' ends (`EndReach`): derived from `transactions` and
    /// `extensions`, never stored, kept as they are folded.
    var reach = EndReach()

    /// Whether every transaction was purchased by its own time (`purchasedByTheirTime`).
    var eachPurchasedByItsTime: Bool { !transactions.isEmpty && purchasedByTheirTime == Int64(transactions.count) }

    public struct AutoRenew: StateRecord, Equatable {
        public var originalId = ""
        public var enabled = false

        public init() {}
        public init(originalId: String, enabled: Bool) { (self.originalId, self.enabled) = (originalId, enabled) }
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) { try coder.code(&originalId); try coder.code(&enabled) }
    }

    /// The ids of the transactions some list of facts names (`marked`, `extended`), and how
    /// many of its entries they count. Ignored by `==`: derived from the list.
    struct TransactionIds: Equatable {
        private var ids: Set<String> = []
        private var counted = 0

        init() {}

        init(_ ids: some Sequence<String>) {
            for id in ids { add(id) }
        }

        /// Counts one more entry, naming `id`; whether it is the first to.
        @discardableResult
        mutating func add(_ id: String) -> Bool {
            counted += 1
            return ids.insert(id).inserted
        }

        /// Whether an entry of a list of `count` may name `id` (`false`: none does). Facts
        /// made other than by folding (their lists set directly) are not counted: then any may.
        func mayName(_ id: String, among count: Int) -> Bool {
            counted != count || ids.contains(id)
        }

        static func == (_: Self, _: Self) -> Bool { true }
    }

    /// What bounds the ends of a subscription's transactions, derived from `transactions` and
    /// `extensions`: for each index, the greatest expiresAt of the transactions up to it, and
    /// the indices of the transactions an extension names — the only ones whose end can lie
    /// after their expiresAt (an upgrade, refund or revocation only cuts an end short). A
    /// billing episode asks the extended ones, then walks the rest down from its failure and
    /// stops where no earlier one can end after the period it has found: a subject renewing
    /// monthly for years, one transaction extended and refunded again and again, has each
    /// failure's covered period read in a few steps instead of a walk over every transaction,
    /// at every change time of its look back. Ignored by `==`.
    struct EndReach: Equatable {
        private var ends: [Timestamp] = []
        /// The indices of the transactions an extension names, ascending.
        private var extendedAt: [Int] = []
        /// How many extensions it counts.
        private var extensions = 0
        /// Whether each transaction was purchased no earlier than the one before it, and the
        /// latest purchase time.
        private var purchasedInOrder = true
        private var latestPurchase: Timestamp?

        init() {}

        /// Worked out from the lists, `extended` counting every extension of them.
        init(_ transactions: [Dated<Transaction>], _ extensions: [Dated<Extension>], extended: TransactionIds) {
            ends.reserveCapacity(transactions.count)
            for i in transactions.indices {
                push(transactions[i].value)
                if extended.mayName(transactions[i].value.id, among: extensions.count) { extendedAt.append(i) }
            }
            self.extensions = extensions.count
        }

        private mutating func push(_ transaction: Transaction) {
            ends.append(max(ends.last ?? transaction.expiresAt, transaction.expiresAt))
            if let latestPurchase, transaction.purchasedAt < latestPurchase { purchasedInOrder = false }
            latestPurchase = max(latestPurchase ?? transaction.purchasedAt, transaction.purchasedAt)
        }

        /// Counts a transaction added at `added` of `transactions` (its lists, the transaction
        /// in them): appended after the others, or, when inserted before some, all worked out
        /// again.
        mutating func add(_ added: Int, of transactions: [Dated<Transaction>], _ extensions: [Dated<Extension>], extended: TransactionIds) {
            guard added == ends.count, added == transactions.count - 1 else {
                self = EndReach(transactions, extensions, extended: extended)
                return
            }
            push(transactions[added].value)
            if extended.mayName(transactions[added].value.id, among: extensions.count) { extendedAt.append(added) }
        }

        /// Counts an extension (already in its list) of the transaction `id` of
        /// `transactions`, the first to name it when `first`.
        mutating func extend(_ id: String, first: Bool, of transactions: [Dated<Transaction>]) {
            extensions += 1
            guard first else { return }
            let named = transactions.indices.filter { $0 < ends.count && transactions[$0].value.id == id }
            if !named.isEmpty { extendedAt = (extendedAt + named).sorted() }
        }

        /// When the lists are counted (`false`: facts made other than by folding), the
        /// greatest expiresAt of the transactions up to `index` of `facts`.
        func expiry(through index: Int, of facts: SubscriptionFacts) -> Timestamp? {
            guard counts(facts), ends.indices.contains(index) else { return nil }
            return ends[index]
        }

        /// When the lists are counted, the indices of the transactions an extension names
        /// among the first `count`.
        func extended(among count: Int, of facts: SubscriptionFacts) -> ArraySlice<Int>? {
            guard counts(facts) else { return nil }
            return extendedAt[..<(extendedAt.firstIndex { $0 >= count } ?? extendedAt.endIndex)]
        }

        /// When the lists are counted and the transactions were purchased in order, the end
        /// of those of `described` (a start of `facts.transactions`) purchased by `t`.
        func purchased(by t: Timestamp, in described: ArraySlice<Dated<Transaction>>, of facts: SubscriptionFacts) -> Int? {
            guard counts(facts), purchasedInOrder else { return nil }
            var (low, high) = (described.startIndex, described.endIndex)
            while low < high {
                let middle = low + (high - low) / 2
                if described[middle].value.purchasedAt <= t { low = middle + 1 } else { high = middle }
            }
            return low
        }

        private func counts(_ facts: SubscriptionFacts) -> Bool {
            ends.count == facts.transactions.count && extensions == facts.extensions.count
        }

        static func == (_: Self, _: Self) -> Bool { true }
    }

    public init() {}

    /// Counts, in the facts derived from the lists (`reach`), a transaction just added at `index`.
    mutating func counted(transactionAt index: Int) {
        reach.add(index, of: transactions, extensions, extended: extended)
    }

    /// Counts, in the facts derived from the lists (`extended`, `reach`), an extension just added.
    mutating func counted(_ extension: Extension) {
        let first = extended.add(`extension`.transactionId)
        reach.extend(`extension`.transactionId, first: first, of: transactions)
    }

    public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
        try coder.code(&transactions)
        try coder.code(&extensions)
        try coder.code(&marks)
        try coder.code(&failures)
        try coder.code(&ends)
        try coder.code(&autoRenew)
        try coder.code(&upgrades)
        try coder.code(&latestStoreGraceEnd)
        try coder.code(&failuresFolded)
        try coder.code(&purchasedByTheirTime)
        try coder.code(&refundsFolded)
        try coder.code(&reversalsFolded)
        try coder.code(&revocationsFolded)
        try coder.code(&latestExtensionEnd)
        try coder.code(&extensionsFolded)
        if coder.isDecoding {
            marked = TransactionIds(marks.lazy.map(\.value.transactionId))
            extended = TransactionIds(extensions.lazy.map(\.value.transactionId))
            reach = EndReach(transactions, extensions, extended: extended)
        }
    }
}


// MARK: Rules (SPEC §4)

/// A transaction that covers a time, with why.
public struct Coverage: Sendable, Equatable {
    public var transaction: Dated<SubscriptionFacts.Transaction>
    /// Its end as extended, upgraded, refunded or revoked.
    public var end: Timestamp
}

/// One billing failure's windows, asked at a time.
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
    /// time (SPEC §4), unless a reversal known at `known` undid the refund: a refund reversed
    /// by then never ended the coverage in any stretch a view at `known` looks back on, even
    /// when the reversal came after `t`.
    private func endWithCause(id: String, originalId: String, purchasedAt: Timestamp, expiresAt: Timestamp,
                              at t: Timestamp, known: Timestamp) -> (at: Timestamp, cause: EndCause) {
        var end = expiresAt
        var cause = EndCause.expiry
        // The latest extension of it: walked from the latest down.
        if extended.mayName(id, among: extensions.count), let e = extensions.known(at: known).last(where: { $0.value.transactionId == id }) {
            end = e.value.expiresAt
        }
        for u in upgrades.known(at: known) where u.value.originalId == originalId && u.value.newTransactionId != id
            && u.value.startsAt > purchasedAt && u.value.startsAt < end {
            end = u.value.startsAt
            cause = .upgrade
        }
        let cut = cuts(of: id, in: marks.known(at: known), happened: min(t, known))
        if let revokedAt = cut.revocation, revokedAt < end { (end, cause) = (revokedAt, .revocation) }
        let refundedAt = cut.refund
        if let refundedAt, refundedAt < end { (end, cause) = (refundedAt, .refund) }
        return (end, cause)
    }

    /// Of `known` (these facts' marks known at some time), the transaction `id`'s first
    /// revocation and its first refund since its latest reversal, each when it happened by
    /// `happened` (a later one of either kind happened no earlier). Walked from the side
    /// where each ends soonest: a refund from the latest mark down to the latest reversal when
    /// there are reversals, else from the first up, as a revocation is; a kind there is none of
    /// is not looked for (`refundsFolded`…, when they count every mark), nor any for a
    /// transaction with none (`marked`). A transaction refunded, revoked or reversed a thousand
    /// times is then read in a few steps, not a thousand — unless other transactions' marks lie
    /// between (the walk passes over them).
    func cuts(of id: String, in known: ArraySlice<Dated<Mark>>, happened: Timestamp) -> (refund: Timestamp?, revocation: Timestamp?) {
        guard marked.mayName(id, among: marks.count) else { return (nil, nil) }
        let counted = refundsFolded + reversalsFolded + revocationsFolded == Int64(marks.count)
        let (refunds, revocations) = (!counted || refundsFolded > 0, !counted || revocationsFolded > 0)
        var refund: Timestamp?
        var revocation: Timestamp?
        var refundFound = !refunds
        if refunds && (!counted || reversalsFolded > 0) {
            for i in known.indices.reversed() where known[i].value.transactionId == id {
                if known[i].value.kind == .reversal { break }
                if known[i].value.kind == .refund { refund = known[i].at }
            }
            refundFound = true
        }
        var revocationFound = !revocations
        for i in known.indices {
            guard !(refundFound && revocationFound), known[i].at <= happened else { break }
            guard known[i].value.transactionId == id else { continue }
            switch known[i].value.kind {
            case .refund where !refundFound: (refund, refundFound) = (known[i].at, true)
            case .revoke where !revocationFound: (revocation, revocationFound) = (known[i].at, true)
            case .refund, .revoke, .reversal: break
            }
        }
        return (refund.flatMap { $0 <= happened ? $0 : nil }, revocation)
    }

    /// A time no extension known at `known` gives any transaction an end after (`nil`: there
    /// is none): the latest expiresAt of every extension folded (`latestExtensionEnd`), else of
    /// those known then. A bound, as the rules read it: a subject extended thousands of times
    /// is not walked over at every ask.
    func latestExtension(known: Timestamp) -> Timestamp? {
        if extensionsFolded == Int64(extensions.count) { return latestExtensionEnd }
        return extensions.known(at: known).lazy.map(\.value.expiresAt).max()
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
        // The latest first, as they are usually purchased latest: a transaction purchased
        // before the best so far is then passed over without working out its end.
        let byTheirTime = eachPurchasedByItsTime
        for i in described.indices.reversed() {
            if let current = best {
                // Every earlier one was purchased by its time, before the best's purchase.
                if byTheirTime && described[i].at < described[current.index].value.purchasedAt { break }
                if (described[current.index].value.purchasedAt, described[current.index].position) > (described[i].value.purchasedAt, described[i].position) { continue }
            }
            guard let end = coveringEnd(ofTransactionAt: i, in: described, at: t, known: known, latestExtension: extended) else { continue }
            best = (i, end)
        }
        return best.map { Coverage(transaction: described[$0.index], end: $0.end) }
    }

    /// The end of the transaction at `index` of `described` when it covers `t` (purchasedAt ≤
    /// t < its end), else `nil`: `coverage`'s test of each transaction.
    @inline(__always)
    private func coveringEnd(ofTransactionAt i: Int, in described: ArraySlice<Dated<Transaction>>, at t: Timestamp,
                             known: Timestamp, latestExtension extended: Timestamp?) -> Timestamp? {
        guard described[i].value.purchasedAt <= t,
              t < endBound(expiresAt: described[i].value.expiresAt, latestExtension: extended) else { return nil }
        let end = endWithCause(ofTransactionAt: i, in: described, at: t, known: known).at
        return t < end ? end : nil
    }

    /// The transactions known at a time, with the bound on their extensions then
    /// (`latestExtension`): what `covering`
    /// reads at every time of a look back, worked out once.
    struct KnownTransactions {
        let known: Timestamp
        let described: ArraySlice<Dated<Transaction>>
        let extended: Timestamp?
    }

    /// Whether a fact known by `known` but not by `through` may change an answer at or before
    /// `through`: an extension or upgrade, a reversal (it undoes an earlier refund), or a
    /// transaction purchased by then. Refunds, revocations, store ends, failures and auto-renew
    /// changes count from their own time on.
    func reachesBack(to through: Timestamp, knownAt known: Timestamp) -> Bool {
        func added<V>(_ list: [Dated<V>]) -> ArraySlice<Dated<V>> { list.known(at: known)[list.known(at: through).endIndex...] }
        if !added(extensions).isEmpty || !added(upgrades).isEmpty || added(marks).contains(where: { $0.value.kind == .reversal }) { return true }
        return added(transactions).contains { $0.value.purchasedAt <= through }
    }

    func knownTransactions(at known: Timestamp) -> KnownTransactions {
        KnownTransactions(known: known, described: transactions.known(at: known), extended: latestExtension(known: known))
    }

    /// Whether a transaction of `known` covers `t` (`coverage(at:known:)` is not `nil`), and if
    /// so one that does, by its index in `transactions` and its purchasedAt. The transactions
    /// are tried from `near` down, then the rest: a look back walking down a long subscription
    /// finds each period beside the one after it, where `coverage`, which needs the latest
    /// purchased, tries every one.
    func covering(_ t: Timestamp, in known: KnownTransactions, near: Int?) -> (index: Int, purchasedAt: Timestamp)? {
        let described = known.described
        guard !described.isEmpty else { return nil }
        let first = min(max(near ?? described.endIndex - 1, described.startIndex), described.endIndex - 1)
        for i in stride(from: first, through: described.startIndex, by: -1)
        where coveringEnd(ofTransactionAt: i, in: described, at: t, known: known.known, latestExtension: known.extended) != nil {
            return (i, described[i].value.purchasedAt)
        }
        for i in (first + 1) ..< described.endIndex
        where coveringEnd(ofTransactionAt: i, in: described, at: t, known: known.known, latestExtension: known.extended) != nil {
            return (i, described[i].value.purchasedAt)
        }
        return nil
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

    /// The billing failure whose grace holds at `t` (SPEC §4 rule 3), with its windows: of the
    /// failures that happened by `t`, not recovered and with `t` before their grace end, the
    /// latest. Each failure keeps its own window: a later failure, or another subscription's
    /// recovery, neither shortens nor ends an earlier one's. `nil` when no grace holds.
    public func billingGrace(at t: Timestamp, known: Timestamp? = nil, policy: Policy.Subscription) -> BillingEpisode? {
        let known = known ?? t
        let happened = failures.known(at: min(t, known))
        let storeGraces = policy.billingGraceSource == .store
        // With no store grace end after t, none keeps a failure open: the walk may stop early.
        let storeEndsOpen = storeGraces && (failuresFolded != Int64(failures.count) || latestStoreGraceEnd.map { t < $0 } ?? false)
        var bound = WindowBound(facts: self, known: known, at: t, days: policy.billingGraceDays, storeGraces: storeGraces,
                                storeEndsOpen: storeEndsOpen)
        var asked = LatestFailures()
        for i in happened.indices.reversed() {
            guard bound.mayBeOpen(failedAt: happened[i].at, graceExpiresAt: happened[i].value.graceExpiresAt) else {
                if bound.shutBelow(failedAt: happened[i].at) { break }
                continue
            }
            // The store's grace ends are each failure's own: then every failure is asked.
            guard storeGraces || asked.isLatest(happened[i].value.originalId) else { continue }
            let episode = episode(of: happened[i], at: t, known: known, policy: policy)
            if !episode.recovered && t < episode.graceEnd { return episode }
        }
        return nil
    }

    /// The subscriptions whose latest failure has been asked about, walking the failures from
    /// the latest down. Of one subscription's failures, only the latest can be open when any
    /// is: an earlier one was recovered by any purchase after it (so by any after the latest),
    /// or else has the same covered periods as the latest, and the store ends after it are
    /// those after the latest and more, so each of its windows (billingGraceDays and
    /// billingRetryDays from the same period end, or from its own earlier time) ends no later.
    /// A subject failing to renew every hour has a thousand failures in a retry window, and
    /// the rules ask at every change time.
    struct LatestFailures {
        private var asked: [String] = []

        /// Whether a failure of `original` met walking down is its latest (the first met).
        mutating func isLatest(_ original: String) -> Bool {
            guard !asked.contains(original) else { return false }
            asked.append(original)
            return true
        }
    }

    /// A bound on a failure's window — its grace (`days` = billingGraceDays, and the store's
    /// grace end when `storeGraces`) or its billing issue (billingRetryDays) — that needs no
    /// episode: the window ends by the later of the failure and the latest any transaction's
    /// coverage can end, plus `days`. A subject failing to renew a thousand times has a
    /// thousand failures, and a look back asks about each at every change time; this passes
    /// over the long-closed ones without working out their windows.
    struct WindowBound {
        let facts: SubscriptionFacts
        let known: Timestamp
        /// The time asked about, `days` before it: a window that ends by then plus `days` is shut.
        let t: Timestamp, since: Timestamp
        let storeGraces: Bool
        /// Whether a store grace end after `t` may keep a failure open (`latestStoreGraceEnd`).
        let storeEndsOpen: Bool
        /// The latest any transaction known at `known` can cover until, worked out when first needed.
        private var latestEnd: Timestamp??

        init(facts: SubscriptionFacts, known: Timestamp, at t: Timestamp, days: Int64, storeGraces: Bool, storeEndsOpen: Bool) {
            (self.facts, self.known, self.t, self.since, self.storeGraces) = (facts, known, t, t.adding(days: -days), storeGraces)
            self.storeEndsOpen = storeEndsOpen
        }

        /// Whether the window of a failure at `failedAt` (with the store's grace end, if any)
        /// may be open at `t` (`false`: it surely is not). Given the fields, not the failure: a
        /// failure passed whole is copied with its string retained.
        mutating func mayBeOpen(failedAt: Timestamp, graceExpiresAt: Timestamp?) -> Bool {
            if storeGraces, let end = graceExpiresAt { return t < end }
            return failedAt > since || periodEndsReach()
        }

        /// Whether the latest end any transaction can cover until lies after `since`.
        private mutating func periodEndsReach() -> Bool {
            if latestEnd == nil {
                let extended = facts.latestExtension(known: known)
                let described = facts.transactions.known(at: known)
                var latest: Timestamp?
                // Kept as the facts were folded (`EndReach`), else walked.
                if let expiry = facts.reach.expiry(through: described.endIndex - 1, of: facts) {
                    latest = facts.endBound(expiresAt: expiry, latestExtension: extended)
                } else {
                    for i in described.indices {
                        let end = facts.endBound(expiresAt: described[i].value.expiresAt, latestExtension: extended)
                        latest = max(latest ?? end, end)
                    }
                }
                latestEnd = latest
            }
            guard let end = latestEnd ?? nil else { return false }
            return end > since
        }

        /// After `mayBeOpen` said a failure at `failedAt` is shut: whether every earlier one
        /// is too — it is older than the window, so is every period's end, and no store grace
        /// end after `t` (`storeEndsOpen`) can keep one open. Failures are walked from the
        /// latest down, so the walk can stop.
        mutating func shutBelow(failedAt: Timestamp) -> Bool {
            !storeEndsOpen && failedAt <= since && !periodEndsReach()
        }
    }

    /// The windows of one failure, asked at `t` over the facts known at `known`.
    func episode(of failure: Dated<Failure>, at t: Timestamp, known: Timestamp, policy: Policy.Subscription) -> BillingEpisode {
        let original = failure.value.originalId
        var coveredUntil: Timestamp?
        var recovered = false
        let described = transactions.known(at: known)
        func ask(_ i: Int) {
            guard described[i].value.originalId == original else { return }
            if described[i].value.purchasedAt <= failure.at {
                let end = endWithCause(ofTransactionAt: i, in: described, at: t, known: known).at
                coveredUntil = max(coveredUntil ?? end, end)
            } else if described[i].value.purchasedAt <= t {
                recovered = true
            }
        }
        if let byFailure = reach.purchased(by: failure.at, in: described, of: self), let byT = reach.purchased(by: t, in: described, of: self) {
            // Purchased in order: those purchased by the failure lie below `byFailure`, those
            // that may recover it from there to `byT`. The extended ones are asked first; the
            // others end by their expiresAt, so the walk down stops where none below can end
            // after the period found.
            recovered = (byFailure ..< byT).contains { described[$0].value.originalId == original }
            for i in reach.extended(among: byFailure, of: self) ?? [] { ask(i) }
            for i in (described.startIndex ..< byFailure).reversed() {
                if let coveredUntil, let expiry = reach.expiry(through: i, of: self), expiry <= coveredUntil { break }
                ask(i)
            }
        } else {
            for i in described.indices { ask(i) }
        }
        let until = coveredUntil ?? failure.at
        // The store's ends after the failure, in (occurredAt, position) order: the first of
        // either kind ends the grace, the first `subscription.expired` the issue too.
        var graceCut: Timestamp?
        var issueCut: Timestamp?
        let happenedEnds = ends.known(at: min(t, known))
        for end in happenedEnds[happenedEnds.firstIndex(after: failure.at, position: failure.position)...] where end.value.originalId == original {
            graceCut = graceCut ?? end.at
            if !end.value.graceOnly {
                issueCut = end.at
                break
            }
        }
        let storeGrace = policy.billingGraceSource == .store ? failure.value.graceExpiresAt : nil
        var graceEnd = storeGrace ?? until.adding(days: policy.billingGraceDays)
        var issueEnd = until.adding(days: policy.billingRetryDays)
        if let graceCut { graceEnd = min(graceEnd, graceCut) }
        if let issueCut { issueEnd = min(issueEnd, issueCut) }
        return BillingEpisode(failure: failure, coveredUntil: until, graceEnd: graceEnd, graceFromStore: storeGrace != nil,
                              issueEnd: issueEnd, recovered: recovered)
    }

    /// SPEC §4's `billingIssue`, the one definition entitlement and badge share: from a failed
    /// renewal until a transaction purchased after it, a `subscription.expired`, or the
    /// failure's last covered period end + billingRetryDays, whichever comes first — true
    /// while any failure's window is open (recovering one subscription does not close
    /// another's). A `subscription.grace_expired` does not end it: the store keeps retrying.
    public func billingIssue(at t: Timestamp, policy: Policy.Subscription) -> Bool {
        var bound = WindowBound(facts: self, known: t, at: t, days: policy.billingRetryDays, storeGraces: false, storeEndsOpen: false)
        var asked = LatestFailures()
        for failure in failures.known(at: t).reversed() {
            guard bound.mayBeOpen(failedAt: failure.at, graceExpiresAt: nil) else {
                if bound.shutBelow(failedAt: failure.at) { return false }
                continue
            }
            guard asked.isLatest(failure.value.originalId) else { continue }
            let episode = episode(of: failure, at: t, known: t, policy: policy)
            if !episode.recovered && t < episode.issueEnd { return true }
        }
        return false
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
}

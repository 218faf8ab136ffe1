@_spi(Storage) import LedgerCore

/// When the subscription rules' answers may change with no new event (SPEC §4): the times a
/// view or the audit asks again at (`changeTimes`), and the fewer at which paid access may
/// end (`endTimes`), where a look back for the latest stretch of access asks.
extension SubscriptionFacts {
    /// Every time at which coverage, billing grace or the billing issue may change with no new
    /// event, whatever the facts known (a superset; see `ReadModel.changeTimes`): the facts'
    /// own times — a view at t knows what arrived by t — and `endTimes`.
    public func changeTimes(policy: Policy.Subscription) -> [Timestamp] {
        var times = endTimes(policy: policy)
        times.reserveCapacity(times.count + transactions.count + extensions.count + upgrades.count + marks.count + autoRenew.count + failures.count)
        for i in transactions.indices { times.append(transactions[i].at) }   // by index: a transaction copied out retains its three strings
        for e in extensions { times.append(e.at) }
        for u in upgrades { times.append(u.at) }
        // Every mark's arrival: a view at t knows a reversal from then on.
        for m in marks { times.append(m.at) }
        // Every store end: a `subscription.expired` ends a billing issue, which gives no access.
        for e in ends { times.append(e.at) }
        for a in autoRenew { times.append(a.at) }
        for f in failures { times.append(f.at) }
        return times
    }

    /// The times of the marks that may cut a transaction's coverage short: its first
    /// revocation, and its first refund and the first after each reversal (a transaction
    /// revoked or refunded a thousand times ends once, `endWithCause`).
    func cuttingMarks() -> [Timestamp] {
        var times: [Timestamp] = []
        // Whether each transaction is revoked, and refunded since its latest reversal; the one
        // the latest mark named kept aside (a transaction's marks mostly come together, and
        // hashing its id for each is most of the work here).
        var settled: [String: (revoked: Bool, refunded: Bool)] = [:]
        var current: (id: String, revoked: Bool, refunded: Bool)?
        for m in marks {
            if current?.id != m.value.transactionId {
                if let current { settled[current.id] = (current.revoked, current.refunded) }
                let known = settled[m.value.transactionId] ?? (false, false)
                current = (m.value.transactionId, known.revoked, known.refunded)
            }
            guard var mark = current else { continue }
            switch m.value.kind {
            case .revoke where !mark.revoked:
                mark.revoked = true
                times.append(m.at)
            case .refund where !mark.refunded:
                mark.refunded = true
                times.append(m.at)
            case .reversal: mark.refunded = false
            case .revoke, .refund: break
            }
            current = mark
        }
        return times
    }

    /// The times of the store's ends that may cut a billing grace short: each subscription's
    /// first end after a failure of it (`episode`: the first end after the failure ends its
    /// grace). A store ending a subscription a thousand times with no failure between cuts
    /// nothing after the first.
    func graceCuttingEnds() -> [Timestamp] {
        var times: [Timestamp] = []
        guard !failures.isEmpty, !ends.isEmpty else { return times }
        // Whether each subscription failed since its latest end, in (occurredAt, position)
        // order of both lists, the one just named kept aside as in `cuttingMarks`.
        var settled: [String: Bool] = [:]
        var current: (original: String, failed: Bool)?
        func open(_ original: String) -> Bool {
            if current?.original != original {
                if let current { settled[current.original] = current.failed }
                current = (original, settled[original] ?? false)
            }
            return current?.failed ?? false
        }
        var f = failures.startIndex
        for e in ends.indices {
            while f < failures.endIndex && (failures[f].at, failures[f].position) < (ends[e].at, ends[e].position) {
                _ = open(failures[f].value.originalId)
                current?.failed = true
                f += 1
            }
            if open(ends[e].value.originalId) {
                times.append(ends[e].at)
                current?.failed = false
            }
        }
        return times
    }

    /// The times at which coverage or a billing grace may end with no new event (a superset,
    /// and a subset of `changeTimes`): every period start and end, and, once a renewal has
    /// failed, each time a covered period can end (an expiry, an extension, an upgrade, a
    /// refund or revocation) plus billingGraceDays and plus billingRetryDays, each store grace
    /// end, and the store's ends after a failure (`cuttingMarks` of the refunds and
    /// revocations, `graceCuttingEnds` of the ends). A failure's windows count from the latest
    /// end of its subscription's periods purchased by then, or from the failure itself when
    /// there is none: only then does its own time open a window (a subscription failing to renew
    /// every hour adds no window per failure). Over the facts known at a given time, a
    /// failure, an auto-renew change or a reversal ends nothing, and neither does a fact's
    /// arrival: a look back for where access ended visits only these.
    public func endTimes(policy: Policy.Subscription) -> [Timestamp] {
        // Appended one by one: an array literal or a mapped array per fact is an allocation.
        var times: [Timestamp] = []
        let periodEnds = transactions.count + extensions.count + upgrades.count + marks.count + failures.count
        times.reserveCapacity(2 * transactions.count + extensions.count + upgrades.count + marks.count + ends.count + failures.count
                              + (failures.isEmpty ? 0 : 2 * periodEnds))
        // List by list, each mostly in order already: the sort after takes each as one run
        // (a period's purchase and end appended together would make runs of two).
        for i in transactions.indices { times.append(transactions[i].value.purchasedAt) }
        for i in transactions.indices { times.append(transactions[i].value.expiresAt) }
        for e in extensions { times.append(e.value.expiresAt) }
        for u in upgrades { times.append(u.value.startsAt) }
        let cuts = cuttingMarks()
        times += cuts
        times += graceCuttingEnds()
        for f in failures {
            if let end = f.value.graceExpiresAt { times.append(end) }
        }
        guard !failures.isEmpty else { return times }
        // The ends the windows count from, then each window's end from each of them.
        var origins: [Timestamp] = []
        origins.reserveCapacity(periodEnds)
        func windows(from end: Timestamp) { origins.append(end) }
        for i in transactions.indices { windows(from: transactions[i].value.expiresAt) }
        for e in extensions { windows(from: e.value.expiresAt) }
        for u in upgrades { windows(from: u.value.startsAt) }
        for cut in cuts { windows(from: cut) }
        // The earliest time each subscription has a period purchased and known: a failure at
        // or after it is known only with that period, whose end its windows count from.
        // By subscription, the one just asked about kept aside: a subject's transactions and
        // failures are mostly of one, and hashing its id for each is most of the work here.
        var periodFrom: [String: Timestamp] = [:]
        var run: (original: String, from: Timestamp)?
        func settle() { if let run { periodFrom[run.original] = min(periodFrom[run.original] ?? run.from, run.from) } }
        for i in transactions.indices {
            let from = Self.periodKnown(from: transactions[i])
            if let current = run, current.original == transactions[i].value.originalId {
                run = (current.original, min(current.from, from))
            } else {
                settle()
                run = (transactions[i].value.originalId, from)
            }
        }
        settle()
        var last: (original: String, from: Timestamp?)?
        for f in failures {
            let from: Timestamp?
            if let last, last.original == f.value.originalId {
                from = last.from
            } else {
                from = periodFrom[f.value.originalId]
                last = (f.value.originalId, from)
            }
            if Self.opensWindows(failedAt: f.at, periodFrom: from) { windows(from: f.at) }
        }
        for end in origins { times.append(end.adding(days: policy.billingGraceDays)) }
        for end in origins { times.append(end.adding(days: policy.billingRetryDays)) }
        return times
    }

    /// When a transaction's period is both purchased and known: a failure at or after it counts
    /// its windows from the period's end.
    @inline(__always)
    static func periodKnown(from transaction: borrowing Dated<Transaction>) -> Timestamp {
        max(transaction.value.purchasedAt, transaction.at)
    }

    /// Whether a failure's windows count from its own time: none of its subscription's periods
    /// was purchased and known before it (`periodFrom`, the earliest time one was).
    static func opensWindows(failedAt: Timestamp, periodFrom: Timestamp?) -> Bool {
        periodFrom.map { failedAt < $0 } ?? true
    }

    /// The times `endTimes` gains from `transaction` alone, one of `transactions`: its period's
    /// start and end, and once any renewal failed, the windows counted from its end. `nil` when
    /// a failure of its subscription follows it: that failure's windows may count from its
    /// period now instead of from the failure's own time. `PlanTimes` adds them in place of
    /// working every time out again.
    func endTimes(addedBy transaction: Dated<Transaction>, policy: Policy.Subscription) -> [Timestamp]? {
        let from = Self.periodKnown(from: transaction)
        let original = transaction.value.originalId
        for failure in failures[failures.known(at: from.adding(milliseconds: -1)).endIndex...] where failure.value.originalId == original {
            return nil
        }
        let end = transaction.value.expiresAt
        var times = [transaction.value.purchasedAt, end]
        if !failures.isEmpty { times += [end.adding(days: policy.billingGraceDays), end.adding(days: policy.billingRetryDays)] }
        return times
    }

    /// The times `endTimes` gains from `failure` alone, one of `failures`: its store grace end,
    /// and its windows when they count from its own time. `nil` when it may move times of
    /// others: as the first failure (every period's end then opens windows), or with a store end
    /// of its subscription after it (which it may make cut a grace short). `PlanTimes` adds them
    /// in place of working every time out again.
    func endTimes(addedBy failure: Dated<Failure>, policy: Policy.Subscription) -> [Timestamp]? {
        guard failures.count > 1 else { return nil }
        let original = failure.value.originalId
        let from = ends.known(at: failure.at.adding(milliseconds: -1)).endIndex
        for end in ends[from...] where end.value.originalId == original && (end.at, end.position) > (failure.at, failure.position) {
            return nil
        }
        var times: [Timestamp] = []
        if let end = failure.value.graceExpiresAt { times.append(end) }
        var periodFrom: Timestamp?
        for i in transactions.indices where transactions[i].value.originalId == original {
            let known = Self.periodKnown(from: transactions[i])
            periodFrom = min(periodFrom ?? known, known)
        }
        if Self.opensWindows(failedAt: failure.at, periodFrom: periodFrom) {
            times.append(failure.at.adding(days: policy.billingGraceDays))
            times.append(failure.at.adding(days: policy.billingRetryDays))
        }
        return times
    }

    /// The times `endTimes` gains from `extension` alone, one of `extensions`: its expiresAt,
    /// and once any renewal failed, the windows counted from it. Another transaction's end or
    /// window is listed whatever the extension, so it moves none.
    func endTimes(addedBy extension: Dated<Extension>, policy: Policy.Subscription) -> [Timestamp] {
        windowed(from: `extension`.value.expiresAt, policy: policy)
    }

    /// The times `endTimes` gains from the latest of `marks`: its time when it cuts a
    /// transaction's coverage short (`cuttingMarks`), with the windows counted from it once any
    /// renewal failed. Only the latest: an earlier one may change which of those after it cut.
    func endTimesAddedByLatestMark(policy: Policy.Subscription) -> [Timestamp] {
        guard let mark = marks.last, latestMarkCuts() else { return [] }
        return windowed(from: mark.at, policy: policy)
    }

    /// Whether the latest of `marks` is among `cuttingMarks`: its transaction's first
    /// revocation, or a refund with none since the latest reversal of it. Walked from the
    /// latest down: a transaction's marks mostly come together.
    func latestMarkCuts() -> Bool {
        guard let mark = marks.last else { return false }
        let id = mark.value.transactionId
        let earlier = marks.dropLast().reversed()
        switch mark.value.kind {
        case .reversal:
            return false
        case .revoke:
            return !earlier.contains { $0.value.transactionId == id && $0.value.kind == .revoke }
        case .refund:
            let previous = earlier.first { $0.value.transactionId == id && $0.value.kind != .revoke }
            return previous.map { $0.value.kind == .reversal } ?? true
        }
    }

    /// Whether the latest of `ends` cuts a billing grace short (`graceCuttingEnds`): a failure
    /// of its subscription came after the end of it before and before it.
    func latestEndCutsGrace() -> Bool {
        guard let end = ends.last, !failures.isEmpty else { return false }
        let original = end.value.originalId
        let previous = ends.dropLast().last { $0.value.originalId == original }
        let from = previous.map { failures.firstIndex(after: $0.at, position: $0.position) } ?? failures.startIndex
        let to = failures.firstIndex(after: end.at, position: end.position)
        return from < to && failures[from..<to].contains { $0.value.originalId == original }
    }

    /// `end`, and once any renewal failed, billingGraceDays and billingRetryDays after it.
    private func windowed(from end: Timestamp, policy: Policy.Subscription) -> [Timestamp] {
        failures.isEmpty ? [end] : [end, end.adding(days: policy.billingGraceDays), end.adding(days: policy.billingRetryDays)]
    }
}

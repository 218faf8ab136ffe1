@_spi(Storage) import LedgerCore

extension AccessModel {
    /// The subscribe-cancel signal's cycles, derived from a state's `purchases` and
    /// `cancellations` and never stored (worked out again when a state is decoded): for each
    /// purchase, the first turning off of its subscription's auto-renew after it, counted
    /// when it came before the purchase expired. A view at `t` counts the cycles complete by
    /// then by halving: a history of thousands of purchases or cancellations is not walked at
    /// every view (`AccessRules.cancelledPeriods`, which walks them, is the rule it keeps to).
    /// Ignored by `==`.
    struct SubscribeCancelCycles: Sendable, Equatable {
        /// When each counted cycle's cancellation happened, ascending.
        private var completed: [Timestamp] = []
        /// The expiresAt of the purchases no cancellation followed yet, by original
        /// transaction id.
        private var open: [String: [Timestamp]] = [:]
        /// How many purchases and cancellations it counts, and the latest of them in
        /// (occurredAt, position) order.
        private var purchases = 0, cancellations = 0
        private var latest: (at: Timestamp, position: UInt64)?

        init() {}

        /// Worked out from the lists, each in (occurredAt, position) order.
        init(_ purchases: [Dated<Purchase>], _ cancellations: [Dated<String>]) {
            var (p, c) = (purchases.startIndex, cancellations.startIndex)
            while p < purchases.endIndex || c < cancellations.endIndex {
                if c == cancellations.endIndex
                    || (p < purchases.endIndex && (purchases[p].at, purchases[p].position) < (cancellations[c].at, cancellations[c].position)) {
                    count(purchases[p])
                    p += 1
                } else {
                    count(cancellations[c])
                    c += 1
                }
            }
        }

        /// Counts a purchase just inserted in `state`'s list: the latest of all, or else
        /// everything is worked out again.
        mutating func purchased(_ purchase: Dated<Purchase>, in state: State) {
            guard isLatest(purchase.at, purchase.position) else {
                self = Self(state.purchases, state.cancellations)
                return
            }
            count(purchase)
        }

        /// Counts a cancellation (of the original transaction id) just inserted in `state`'s
        /// list: the latest of all, or else everything is worked out again.
        mutating func cancelled(_ cancellation: Dated<String>, in state: State) {
            guard isLatest(cancellation.at, cancellation.position) else {
                self = Self(state.purchases, state.cancellations)
                return
            }
            count(cancellation)
        }

        /// How many cycles were complete by `t` (their cancellation happened at or before it),
        /// when it counts `state`'s lists (`nil`: lists set other than by folding).
        func count(by t: Timestamp, of state: State) -> Int? {
            guard purchases == state.purchases.count, cancellations == state.cancellations.count else { return nil }
            var (low, high) = (completed.startIndex, completed.endIndex)
            while low < high {
                let middle = low + (high - low) / 2
                if completed[middle] <= t { low = middle + 1 } else { high = middle }
            }
            return low
        }

        private func isLatest(_ at: Timestamp, _ position: UInt64) -> Bool {
            latest.map { ($0.at, $0.position) < (at, position) } ?? true
        }

        private mutating func count(_ purchase: Dated<Purchase>) {
            open[purchase.value.originalTransactionId, default: []].append(purchase.value.expiresAt)
            purchases += 1
            latest = (purchase.at, purchase.position)
        }

        private mutating func count(_ cancellation: Dated<String>) {
            cancellations += 1
            latest = (cancellation.at, cancellation.position)
            guard let expiring = open.removeValue(forKey: cancellation.value) else { return }
            for expiresAt in expiring where cancellation.at < expiresAt { completed.append(cancellation.at) }
        }

        static func == (_: Self, _: Self) -> Bool { true }
    }
}

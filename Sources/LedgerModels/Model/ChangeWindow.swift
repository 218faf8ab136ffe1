@_spi(Storage) import LedgerCore

/// The stretch of time the audit asks a model's change times for: after `after` (from the
/// beginning with `nil`) through `through`. The audit asks from the step just taken to the
/// next event (further while the model's state and facts stay as they are), so that a long
/// history's past, and the far future its periods and day counts reach into, are not listed
/// again at every step.
public struct ChangeWindow: Sendable, Hashable {
    public var after: Timestamp?
    public var through: Timestamp

    public init(after: Timestamp?, through: Timestamp) {
        (self.after, self.through) = (after, through)
    }

    public func contains(_ t: Timestamp) -> Bool {
        t <= through && after.map { t > $0 } ?? true
    }

    /// Appends `zero + days` (days of 24 hours) for each of `zeros` that lands in the window:
    /// found by halving, so a long list costs only what lands. `zeros` must be ascending (a
    /// list of dated facts is, by time), or times are missed.
    public func appendShifted<Zeros: RandomAccessCollection>(_ zeros: Zeros, byDays days: Int64, to times: inout [Timestamp])
    where Zeros.Element == Timestamp {
        let lower = after.map { bound in Self.firstIndex(in: zeros) { $0.adding(days: days) > bound } } ?? zeros.startIndex
        let upper = Self.firstIndex(in: zeros) { $0.adding(days: days) > through }
        var index = lower
        while index < upper {
            times.append(zeros[index].adding(days: days))
            zeros.formIndex(after: &index)
        }
    }

    /// The first index of `sorted` whose time satisfies `predicate`, which holds from some
    /// index on (the audit's lists of change times are searched with it too).
    static func firstIndex<Zeros: RandomAccessCollection>(in sorted: Zeros, where predicate: (Timestamp) -> Bool) -> Zeros.Index
    where Zeros.Element == Timestamp {
        var (low, count) = (sorted.startIndex, sorted.count)
        while count > 0 {
            let half = count / 2
            let middle = sorted.index(low, offsetBy: half)
            if predicate(sorted[middle]) {
                count = half
            } else {
                low = sorted.index(after: middle)
                count -= half + 1
            }
        }
        return low
    }
}

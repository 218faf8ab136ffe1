import Foundation

extension Timestamp {
    /// The moment as a Foundation `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// The moment of `date`, to the millisecond (rounded down: the ledger keeps milliseconds).
    /// A date beyond what 64-bit milliseconds hold is clamped to the nearest end, never a trap;
    /// the years 0000–9999 an event may carry are checked where an event is.
    public init(_ date: Date) {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
        if milliseconds.isNaN {
            self.init(milliseconds: 0)
        } else if milliseconds >= Double(Int64.max) {   // 2^63: the first value past Int64
            self.init(milliseconds: .max)
        } else if milliseconds <= Double(Int64.min) {
            self.init(milliseconds: .min)
        } else {
            self.init(milliseconds: Int64(milliseconds))
        }
    }
}

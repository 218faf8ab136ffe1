@_spi(Storage) import LedgerCore

/// A fact with its business time and the position of the event that stated it.
///
/// Lists of facts are kept sorted by (time, position), so the same events give the same list
/// whatever order they were appended in (positions only break ties between facts of the same
/// millisecond).
public struct Dated<Value: Sendable & Equatable>: Sendable, Equatable {
    /// The event's occurredAt.
    public var at: Timestamp
    /// The event's position (the audit and `reason` cite it).
    public var position: UInt64
    public var value: Value

    public init(at: Timestamp, position: UInt64, value: Value) {
        self.at = at
        self.position = position
        self.value = value
    }
}

extension Array {
    /// Inserts a dated fact at its place in (time, position) order. Taken, not copied: a copy
    /// retains its strings. Most facts come last, and are appended (`insert` copies the fact
    /// once more on its way in).
    public mutating func insertDated<V>(_ fact: consuming Dated<V>) where Element == Dated<V> {
        var index = endIndex
        while index > startIndex, (self[index - 1].at, self[index - 1].position) > (fact.at, fact.position) { index -= 1 }
        if index == endIndex {
            append(fact)
        } else {
            insert(fact, at: index)
        }
    }

    /// The facts known at `t`: those whose time is at or before it. Found by halving, as the
    /// look backs ask at times far before the latest fact (a walk from the end would make
    /// each ask as long as the history after it).
    public func known<V>(at t: Timestamp) -> ArraySlice<Element> where Element == Dated<V> {
        guard let last, last.at > t else { return self[startIndex..<endIndex] }
        var (low, high) = (startIndex, endIndex - 1)
        while low < high {
            let middle = low + (high - low) / 2
            if self[middle].at > t { high = middle } else { low = middle + 1 }
        }
        return self[startIndex..<low]
    }
}

extension RandomAccessCollection where Index == Int {
    /// The index of the first fact after the one at (`at`, `position`) in (time, position)
    /// order, found by halving: a look for what followed a fact starts there.
    func firstIndex<V>(after at: Timestamp, position: UInt64) -> Int where Element == Dated<V> {
        var (low, high) = (startIndex, endIndex)
        while low < high {
            let middle = low + (high - low) / 2
            if (self[middle].at, self[middle].position) > (at, position) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

extension Dated: StateValue where Value: StateValue {
    public static func encode(_ fact: Self, to encoder: inout StateEncoder) {
        encoder.write(fact.at)
        encoder.write(fact.position)
        Value.encode(fact.value, to: &encoder)
    }

    public static func decode(from decoder: inout StateDecoder) throws(StateDecoder.Damaged) -> Self {
        let at = try decoder.timestamp()
        let position = try decoder.uint()
        return Dated(at: at, position: position, value: try Value.decode(from: &decoder))
    }
}

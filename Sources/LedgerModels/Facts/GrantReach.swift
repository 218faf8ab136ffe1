@_spi(Storage) import LedgerCore

extension SubjectFacts {
    /// The greatest end of the support grants up to each of `grants`, derived and never stored
    /// (worked out again when the facts are decoded): a look for the grant running at a time
    /// walks from the latest down and stops where no earlier one runs past it, where it walked
    /// every grant whenever none ran — at every change time an audit visits after a subject's
    /// grants ended. Ignored by `==`.
    struct GrantReach: Sendable, Equatable {
        private var ends: [Timestamp] = []

        init() {}

        init(_ grants: [Dated<Timestamp>]) {
            ends.reserveCapacity(grants.count)
            for grant in grants { ends.append(max(ends.last ?? grant.value, grant.value)) }
        }

        /// Counts `grant`, just inserted in `grants`: appended after the others, or, when
        /// inserted before some, all worked out again.
        mutating func add(_ grant: Dated<Timestamp>, to grants: [Dated<Timestamp>]) {
            guard ends.count == grants.count - 1, let last = grants.last, last.at == grant.at, last.position == grant.position else {
                self = Self(grants)
                return
            }
            ends.append(max(ends.last ?? grant.value, grant.value))
        }

        /// The latest of `known` (a start of `grants`) still running at `t`.
        func running(at t: Timestamp, in known: ArraySlice<Dated<Timestamp>>, of grants: [Dated<Timestamp>]) -> Dated<Timestamp>? {
            // Lists set other than by folding are not counted: then every grant is asked.
            let counted = ends.count == grants.count
            var index = known.endIndex
            while index > known.startIndex {
                index -= 1
                if t < known[index].value { return known[index] }
                if counted, ends[index] <= t { return nil }
            }
            return nil
        }

        static func == (_: Self, _: Self) -> Bool { true }
    }
}

@_spi(Storage) import LedgerCore

/// Where the next page of a paged audit starts: the moment and the knowledge the first page
/// was read with (a log position, so that events appended meanwhile move no entry), and how
/// many entries the pages before it showed. Written as text for a URL's query and `--cursor`.
public struct AuditCursor: Sendable, Hashable, CustomStringConvertible {
    public var at: Timestamp
    public var knownAt: KnownAt
    /// Entries the earlier pages showed.
    public var offset: Int

    public init(at: Timestamp, knownAt: KnownAt, offset: Int) {
        (self.at, self.knownAt, self.offset) = (at, knownAt, offset)
    }

    /// The most entries a cursor may skip: more than any timeline holds, far from overflow.
    package static let maximumOffset = 1_000_000_000

    /// `AT.KNOWN.OFFSET`: `at` in milliseconds, the knowledge as `p` and a position or `t`
    /// and milliseconds, the offset (`1772668800000.p1234.200`).
    public var description: String {
        let known = switch knownAt {
        case .position(let p): "p\(p)"
        case .time(let t): "t\(t.milliseconds)"
        }
        return "\(at.milliseconds).\(known).\(offset)"
    }

    /// The cursor `text` writes, `nil` for anything else.
    public init?(parsing text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let at = Int64(parts[0]), let offset = Int(parts[2]), (0 ... Self.maximumOffset).contains(offset),
              let kind = parts[1].first, let value = Int64(parts[1].dropFirst()), value >= 0 else { return nil }
        switch kind {
        case "p": knownAt = .position(UInt64(value))
        case "t": knownAt = .time(Timestamp(milliseconds: value))
        default: return nil
        }
        guard Timestamp.fourDigitYears.contains(Timestamp(milliseconds: at)) else { return nil }
        (self.at, self.offset) = (Timestamp(milliseconds: at), offset)
    }
}

/// A page of an audit: the entries from `offset`, at most `limit` of them.
package struct AuditPaging: Sendable, Hashable {
    package var limit: Int
    package var offset: Int

    package init(limit: Int, offset: Int = 0) {
        (self.limit, self.offset) = (min(max(1, limit), Self.maximumLimit), min(max(0, offset), AuditCursor.maximumOffset))
    }

    /// The most entries a page may ask for.
    package static let maximumLimit = 10_000
}

import Glibc
import LedgerCore

/// The peers whose proxy headers say who the client is (``ClientAddress``): loopback always,
/// and the addresses and CIDR ranges `ledger serve --trusted-proxy` names — a proxy on
/// another machine, such as a load balancer in front of several servers. A request from any
/// other peer is that peer's, whatever headers it carries, since anyone can write them.
///
/// ```swift
/// let trusted = try TrustedProxies(["10.0.0.0/8", "2001:db8::7"])
/// trusted.contains("10.1.2.3")   // true
/// trusted.contains("192.0.2.1")  // false
/// ```
public struct TrustedProxies: Sendable, Hashable {
    /// One range: its address's bytes (4 or 16) and how many leading bits must match.
    struct Range: Sendable, Hashable {
        let bytes: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var bits = prefix
            for (a, b) in zip(address, bytes) where bits > 0 {
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if a & mask != b & mask { return false }
                bits -= 8
            }
            return true
        }
    }

    let ranges: [Range]

    /// Loopback alone (`127.0.0.0/8`, `::1`): a proxy on this machine.
    public static let loopback = TrustedProxies(ranges: [])

    private init(ranges: [Range]) {
        self.ranges = [Range(bytes: [127, 0, 0, 0], prefix: 8), Range(bytes: Array(repeating: 0, count: 15) + [1], prefix: 128)] + ranges
    }

    /// Loopback and `ranges`, each an IPv4 or IPv6 address (`192.0.2.7`, `2001:db8::7`) or a
    /// range in CIDR form (`10.0.0.0/8`, `2001:db8::/32`).
    /// - Throws: `LedgerError` (`invalidArgument`) naming the first that is neither.
    public init(_ ranges: [String]) throws(LedgerError) {
        var parsed: [Range] = []
        for text in ranges {
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = Self.bytes(of: String(parts[0])) else {
                throw LedgerError(.invalidArgument, "\(text) is not an IP address or a CIDR range (10.0.0.0/8, 2001:db8::/32)")
            }
            var prefix = bytes.count * 8
            if parts.count == 2 {
                guard let bits = Int(parts[1]), (0 ... bytes.count * 8).contains(bits), parts[1].allSatisfy({ $0.isASCII && $0.isNumber }) else {
                    throw LedgerError(.invalidArgument, "\(text): the prefix after / must be 0 to \(bytes.count * 8)")
                }
                prefix = bits
            }
            // An IPv4-mapped range (`::ffff:10.0.0.0/104`) is the IPv4 range it maps: peers
            // are read as IPv4.
            if bytes.count == 16, bytes[0 ..< 10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF, prefix >= 96 {
                parsed.append(Range(bytes: Array(bytes[12...]), prefix: prefix - 96))
            } else {
                parsed.append(Range(bytes: bytes, prefix: prefix))
            }
        }
        self.init(ranges: parsed)
    }

    /// Whether `address` (an IP address as text; `::ffff:` IPv4 on an IPv6 socket taken as
    /// IPv4) lies in one of the ranges.
    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.bytes(of: ClientAddress.unmapped(address)) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// An IPv4 address's 4 bytes or an IPv6 address's 16, as `inet_pton` reads them.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }
}

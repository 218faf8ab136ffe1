import HTTPTypes
import Hummingbird
import NIOCore

/// Who sent a request: the address the server throttles sign-ins by, and whether it came
/// through a proxy, which `/metrics` needs to know.
///
/// The socket's peer is the client unless the request carries a proxy header (any form
/// ``ProxyHeaders`` reads). With one, a peer on loopback or among the ``TrustedProxies`` is
/// taken to be the proxy, and the client is the one that proxy names (the right-most value:
/// the hop it added), or, when that is a trusted proxy too, the one before it, and so on; any
/// other peer stays the client, since anyone can write those headers.
struct ClientAddress: Sendable, Equatable {
    /// The client's address as text (`203.0.113.9`, `2001:db8::17`); `unknown` when neither
    /// the socket nor a trusted proxy says.
    let address: String
    /// Whether the request carries a proxy header of any form.
    let proxied: Bool
    /// Whether the socket's peer is on this machine.
    let peerIsLoopback: Bool

    /// Whether the request came straight from this machine: a loopback peer and no proxy
    /// header, so not a proxy on this machine forwarding someone else.
    var isDirectLoopback: Bool { peerIsLoopback && !proxied }

    /// The client of a request with `headers` from `peer` (its IP address as text, `nil` when
    /// the socket has none, as in tests through the router), believing the proxies `trusted`.
    init(_ headers: HTTPFields, peer: String?, trusted: TrustedProxies = .loopback) {
        let said = ProxyHeaders(headers)
        let peer = peer.map(Self.unmapped)
        peerIsLoopback = peer.map(Self.isLoopback) ?? false
        proxied = said.present
        let peerIsProxy = peer.map(trusted.contains) ?? false
        address = (proxied && peerIsProxy ? Self.client(of: said.hops, trusted: trusted) : nil) ?? peer ?? "unknown"
    }

    /// Walking `hops` from the nearest, the first that is not a trusted proxy (or the first
    /// hop, when all are); a hop no proxy could read (`unknown`) leaves the trusted proxy
    /// after it as the client.
    static func client(of hops: [String?], trusted: TrustedProxies) -> String? {
        var nearest: String?
        for hop in hops.reversed() {
            guard let hop else { return nearest }
            nearest = hop
            if !trusted.contains(hop) { return hop }
        }
        return nearest
    }

    /// The client of `request` from `peer`, the socket's remote address.
    init(_ request: Request, peer: SocketAddress?, trusted: TrustedProxies) {
        self.init(request.headers, peer: peer?.ipAddress, trusted: trusted)
    }

    /// `::ffff:192.0.2.1` (an IPv4 address on an IPv6 socket) as `192.0.2.1`.
    static func unmapped(_ address: String) -> String {
        let lowered = address.lowercased()
        return lowered.hasPrefix("::ffff:") && lowered.contains(".") ? String(lowered.dropFirst("::ffff:".count)) : lowered
    }

    static func isLoopback(_ address: String) -> Bool {
        address == "::1" || address.hasPrefix("127.")
    }
}

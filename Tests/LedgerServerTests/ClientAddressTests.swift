import HTTPTypes
import LedgerCore
@testable import LedgerServer
import Testing

/// Who a request is from, read from the socket's peer and every form of proxy header alike.
@Suite struct ClientAddressTests {
    static func headers(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) } }
        return fields
    }

    /// Without a proxy header the peer is the client, and a loopback peer is direct.
    @Test func withoutAProxyHeaderThePeerIsTheClient() {
        let direct = ClientAddress(HTTPFields(), peer: "127.0.0.1")
        #expect(direct == ClientAddress(Self.headers([]), peer: "127.0.0.1"))
        #expect(direct.address == "127.0.0.1" && !direct.proxied && direct.isDirectLoopback)
        let remote = ClientAddress(HTTPFields(), peer: "203.0.113.9")
        #expect(remote.address == "203.0.113.9" && !remote.isDirectLoopback)
        #expect(ClientAddress(HTTPFields(), peer: "::ffff:127.0.0.1").isDirectLoopback)
        #expect(ClientAddress(HTTPFields(), peer: "::1").isDirectLoopback)
        #expect(ClientAddress(HTTPFields(), peer: nil).address == "unknown")
    }

    /// Behind a proxy on loopback, the client is the right-most hop, whatever the form.
    @Test func behindALoopbackProxyTheLastHopIsTheClient() {
        let forms: [([(String, String)], String)] = [
            ([("X-Forwarded-For", "198.51.100.1, 203.0.113.7")], "203.0.113.7"),
            ([("X-Forwarded-For", "198.51.100.1"), ("X-Forwarded-For", "203.0.113.7:5000")], "203.0.113.7"),
            ([("Forwarded", #"for=198.51.100.1;proto=https, for="[2001:DB8:cafe::17]:4711""#)], "2001:db8:cafe::17"),
            ([("Forwarded", "for=198.51.100.1"), ("X-Forwarded-For", "203.0.113.8")], "198.51.100.1"),
            ([("X-Real-IP", "203.0.113.9")], "203.0.113.9"),
            ([("Forwarded", "for=unknown"), ("X-Real-IP", "203.0.113.9")], "203.0.113.9"),
            ([("X-Forwarded-Proto", "https")], "127.0.0.1"),
        ]
        for (pairs, client) in forms {
            let address = ClientAddress(Self.headers(pairs), peer: "127.0.0.1")
            #expect(address.address == client, "\(pairs)")
            #expect(address.proxied && !address.isDirectLoopback, "\(pairs)")
        }
    }

    /// A peer elsewhere may write any proxy header it likes: it stays the client.
    @Test func aRemotePeersProxyHeadersAreNotBelieved() {
        let spoofed = ClientAddress(Self.headers([("X-Forwarded-For", "127.0.0.1"), ("Forwarded", "for=127.0.0.1")]), peer: "203.0.113.9")
        #expect(spoofed.address == "203.0.113.9")
        #expect(spoofed.proxied && !spoofed.isDirectLoopback)
    }

    /// A proxy elsewhere that `--trusted-proxy` names (an address or a CIDR range) is believed
    /// as one on loopback is; a peer outside every range is not.
    @Test func aTrustedProxyElsewhereNamesTheClient() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8", "2001:db8::7"])
        let forwarded = Self.headers([("X-Forwarded-For", "198.51.100.1, 203.0.113.7")])
        for peer in ["10.1.2.3", "10.255.255.255", "10.0.0.0", "::ffff:10.1.2.3", "2001:db8::7", "2001:DB8:0::7", "127.0.0.1", "::1"] {
            #expect(ClientAddress(forwarded, peer: peer, trusted: trusted).address == "203.0.113.7", "\(peer)")
        }
        for peer in ["11.0.0.0", "9.255.255.255", "2001:db8::8", "192.0.2.1"] {
            #expect(ClientAddress(forwarded, peer: peer, trusted: trusted).address == peer.lowercased(), "\(peer)")
        }
        // Without the option, only loopback is a proxy.
        #expect(ClientAddress(forwarded, peer: "10.1.2.3").address == "10.1.2.3")
        // A trusted proxy's request without a proxy header is its own.
        #expect(ClientAddress(HTTPFields(), peer: "10.1.2.3", trusted: trusted).address == "10.1.2.3")
    }

    /// Behind a chain of trusted proxies (a load balancer, then a proxy on loopback), the
    /// client is the right-most hop that is not one of them; a hop no proxy could read leaves
    /// the trusted proxy after it; a chain of trusted proxies alone, its first.
    @Test func behindAChainOfTrustedProxiesTheFirstUntrustedHopIsTheClient() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8"])
        let chains: [(String, String)] = [
            ("198.51.100.1, 203.0.113.9, 10.0.0.7", "203.0.113.9"),
            ("203.0.113.9, 10.0.0.7, 127.0.0.1", "203.0.113.9"),
            ("unknown, 10.0.0.7", "10.0.0.7"),
            ("10.0.0.1, 10.0.0.2", "10.0.0.1"),
            ("203.0.113.9", "203.0.113.9"),
        ]
        for (chain, client) in chains {
            #expect(ClientAddress(Self.headers([("X-Forwarded-For", chain)]), peer: "127.0.0.1", trusted: trusted).address == client, "\(chain)")
        }
        // Without the range, the load balancer is the client.
        #expect(ClientAddress(Self.headers([("X-Forwarded-For", "203.0.113.9, 10.0.0.7")]), peer: "127.0.0.1").address == "10.0.0.7")
        let forwarded = Self.headers([("Forwarded", #"for=203.0.113.9, for="[2001:db8::7]:80""#)])
        #expect(ClientAddress(forwarded, peer: "::1", trusted: try TrustedProxies(["2001:db8::/32"])).address == "203.0.113.9")
    }

    /// A range holds the addresses whose first `prefix` bits are its own: at and on both
    /// sides of each boundary, IPv4 and IPv6.
    @Test func aRangeHoldsTheAddressesSharingItsPrefix() throws {
        let cases: [(String, [String], [String])] = [
            ("192.0.2.128/25", ["192.0.2.128", "192.0.2.255"], ["192.0.2.127", "192.0.3.0"]),
            ("192.0.2.7", ["192.0.2.7"], ["192.0.2.6", "192.0.2.8"]),
            ("192.0.2.7/32", ["192.0.2.7"], ["192.0.2.6"]),
            ("0.0.0.0/0", ["203.0.113.9", "0.0.0.0"], ["2001:db8::1"]),
            ("2001:db8::/32", ["2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"], ["2001:db7:ffff::1", "2001:db9::", "32.1.13.184"]),
            ("2001:db8::/33", ["2001:db8:7fff::1"], ["2001:db8:8000::"]),
        ]
        for (range, inside, outside) in cases {
            let trusted = try TrustedProxies([range])
            for address in inside { #expect(trusted.contains(address), "\(range) holds \(address)") }
            for address in outside { #expect(!trusted.contains(address), "\(range) does not hold \(address)") }
        }
        // An IPv4-mapped range is the IPv4 range it maps.
        let mapped = try TrustedProxies(["::ffff:10.0.0.0/104"])
        #expect(mapped.contains("10.1.2.3") && mapped.contains("::ffff:10.1.2.3") && !mapped.contains("11.0.0.0"))
        #expect(TrustedProxies.loopback.contains("127.8.9.10") && TrustedProxies.loopback.contains("::1"))
        #expect(!TrustedProxies.loopback.contains("10.0.0.1") && !TrustedProxies.loopback.contains("not an address"))
    }

    /// What is neither an address nor a CIDR range is refused, naming it.
    @Test func aRangeThatIsNotOneIsRefusedByName() {
        let refused: [(String, String)] = [
            ("proxy.example.com", "proxy.example.com is not an IP address or a CIDR range"),
            ("10.0.0.0/33", "10.0.0.0/33: the prefix after / must be 0 to 32"),
            ("2001:db8::/129", "2001:db8::/129: the prefix after / must be 0 to 128"),
            ("10.0.0.0/", "10.0.0.0/: the prefix after / must be 0 to 32"),
            ("10.0.0.0/+8", "10.0.0.0/+8: the prefix after / must be 0 to 32"),
            ("10.0.0/8", "10.0.0/8 is not an IP address or a CIDR range"),
            ("", " is not an IP address or a CIDR range"),
        ]
        for (text, message) in refused {
            #expect(throws: LedgerError.self, "\(text)") { try TrustedProxies(["10.0.0.0/8", text]) }
            do {
                _ = try TrustedProxies([text])
            } catch {
                #expect(error.code == .invalidArgument && error.message.hasPrefix(message), "\(text): \(error.message)")
            }
        }
    }

    @Test func protoAndHostInEveryForm() {
        #expect(ProxyHeaders(Self.headers([("Forwarded", "proto=https")])).isHTTPS)
        #expect(ProxyHeaders(Self.headers([("Forwarded", #"for=a;Proto="HTTPS""#)])).isHTTPS)
        #expect(ProxyHeaders(Self.headers([("X-Forwarded-Proto", "https")])).isHTTPS)
        #expect(!ProxyHeaders(Self.headers([("Forwarded", "proto=http")])).isHTTPS)
        #expect(!ProxyHeaders(HTTPFields()).present)
        #expect(ProxyHeaders(Self.headers([("Forwarded", #"host="Ledger.Example.com:8443""#)])).host == "ledger.example.com:8443")
        #expect(ProxyHeaders(Self.headers([("X-Forwarded-Host", "ledger.example.com")])).host == "ledger.example.com")
    }
}

import HTTPTypes
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

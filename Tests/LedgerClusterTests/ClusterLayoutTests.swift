import Testing
@_spi(Cluster) @testable import LedgerCluster

@Suite("A cluster's layout: partitions and NATS subjects")
struct ClusterLayoutTests {
    @Test("letters, digits, - and _ stay; every other byte is ~XX")
    func tokens() {
        #expect(ClusterLayout.token(of: "customer-42_a") == "customer-42_a")
        #expect(ClusterLayout.token(of: "appstore:1000") == "appstore~3A1000")
        #expect(ClusterLayout.token(of: "a.b*c>d e~") == "a~2Eb~2Ac~3Ed~20e~7E")
        #expect(ClusterLayout.token(of: "é") == "~C3~A9")
    }

    @Test("a token reads back as its subject", arguments: ["customer-42", "appstore:1000", "a.b*c>d e~", "é日本", "~", "~7E"])
    func roundTrip(subject: String) {
        #expect(ClusterLayout.subject(ofToken: ClusterLayout.token(of: subject)) == subject)
    }

    @Test("only the one spelling token(of:) makes is read back")
    func strictTokens() {
        #expect(ClusterLayout.subject(ofToken: "~61") == nil)       // "a" needs no escape
        #expect(ClusterLayout.subject(ofToken: "~3a") == nil)       // lower-case hex
        #expect(ClusterLayout.subject(ofToken: "~3") == nil)        // cut short
        #expect(ClusterLayout.subject(ofToken: "~C3") == nil)       // not UTF-8
        #expect(ClusterLayout.subject(ofToken: "") == nil)
        #expect(ClusterLayout.subject(ofToken: "a.b") == nil)       // a dot is never in a token
    }

    @Test("a subject's partition is the first 8 bytes of its SHA-256, modulo the count")
    func partitions() {
        let layout = ClusterLayout(partitions: 64)
        // SHA-256("customer-42") starts a0 45 eb 33 f8 79 7f 35: fixed for ever, since a change
        // would move every customer of a running cluster.
        #expect(layout.partition(of: "customer-42") == Int(0xa045eb33f8797f35 % UInt64(64)))
        #expect(ClusterLayout(partitions: 1000).partition(of: "customer-42") == Int(0xa045eb33f8797f35 % UInt64(1000)))
        let counts = Dictionary(grouping: (0..<6_400).map { layout.partition(of: "customer-\($0)") }, by: { $0 }).mapValues(\.count)
        #expect(counts.count == 64)
        #expect(counts.values.allSatisfy { $0 > 50 && $0 < 160 })
    }

    @Test("a message's NATS subject reads back as its partition and subject, and nothing else does")
    func parse() {
        let layout = ClusterLayout(partitions: 16)
        let subject = "appstore:77"
        let nats = layout.natsSubject(of: subject)
        #expect(layout.parse(natsSubject: nats)?.subject == subject)
        #expect(layout.parse(natsSubject: nats)?.partition == layout.partition(of: subject))
        let wrong = (layout.partition(of: subject) + 1) % 16
        #expect(layout.parse(natsSubject: "ledger.\(wrong).appstore~3A77") == nil)
        #expect(layout.parse(natsSubject: "ledger.99.x") == nil)
        #expect(layout.parse(natsSubject: "other.1.x") == nil)
    }
}

import CNATS
import Testing
@_spi(Storage) import LedgerCore
@_spi(Cluster) @testable import LedgerCluster

/// What a failure of the NATS C client becomes: a retry may mend it, or it is a fault to report.
@Suite("NATS failures: retried or reported")
struct NATSErrorTests {
    @Test func noLeaderNoServerOrATimeoutIsUnavailable() {
        for status in [NATS_TIMEOUT, NATS_NO_SERVER, NATS_CONNECTION_CLOSED, NATS_NO_RESPONDERS] {
            #expect(NATSConnection.code(status, jsErrCode(0), detail: "") == .unavailable)
        }
        #expect(NATSConnection.code(NATS_ERR, JSClusterNoPeersErr, detail: "") == .unavailable)
        #expect(NATSConnection.code(NATS_ERR, jsErrCode(10008), detail: "") == .unavailable)
    }

    /// A three-replica bucket asked for while the servers gather their peers: nats.c's
    /// key-value calls give the server's text and no error code.
    @Test func noSuitablePeersGivenAsTextIsUnavailable() {
        let detail = "Error: (jsm.c:1033): no suitable peers for placement"
        #expect(NATSConnection.code(NATS_ERR, jsErrCode(0), detail: detail) == .unavailable)
    }

    @Test func anyOtherRefusalIsReported() {
        #expect(NATSConnection.code(NATS_ERR, jsErrCode(0), detail: "Error: insufficient storage resources available") == .storage)
        #expect(NATSConnection.code(NATS_ERR, jsErrCode(10074), detail: "replicas > 1 not supported in non-clustered mode") == .storage)
    }
}

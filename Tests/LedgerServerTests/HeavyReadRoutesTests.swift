import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections
@testable import LedgerServer
@_spi(Storage) import LedgerTestSupport
import Synchronization
import Testing

/// Audits, a subject's events and a customer's page are heavy reads: they wait for a slot
/// among the server's `heavyReads`, while `/healthz` and status answer at once.
@Suite struct HeavyReadRoutesTests {
    @Test func auditsWaitForAHeavySlotWhileHealthAndStatusAnswer() async throws {
        try await withSlotHeld { server, token, release in
            let answered = Answered()
            try await server.application(port: 0).test(.router) { client in
                let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for uri in ["/v1/subjects/user-42/audit?at=\(Served.at)", "/v1/subjects/user-42/events", "/ui/subjects/user-42"] {
                        group.addTask {
                            let response = try await client.execute(uri: uri, method: .get, headers: bearer)
                            answered.list.withLock { $0.append("\(uri) \(response.status.code)") }
                        }
                    }
                    let health = try await client.execute(uri: "/healthz", method: .get)
                    #expect(health.status == .ok)
                    let status = try await client.execute(uri: "/v1/subjects/user-42/status?at=\(Served.at)", method: .get, headers: bearer)
                    #expect(status.status == .ok)
                    // The page, with no session, is sent to sign in; the audit and the events wait for the slot.
                    for _ in 0 ..< 600 where answered.list.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(50)) }
                    try await Task.sleep(for: .milliseconds(100))
                    #expect(answered.list.withLock { $0 } == ["/ui/subjects/user-42 303"])
                    release.signal()
                    try await group.waitForAll()
                }
            }
            #expect(Set(answered.list.withLock { $0 }) == ["/v1/subjects/user-42/audit?at=\(Served.at) 200", "/v1/subjects/user-42/events 200",
                                                      "/ui/subjects/user-42 303"])
        }
    }
}

extension HeavyReadRoutesTests {
    /// An audit whose client closes its connection while it waits its turn is dropped when the
    /// turn comes: nothing is read for it, `/metrics` counts it as `499`, and the one waiting
    /// behind it, still connected, is answered. The gauges show the reads waiting.
    @Test func aWaitingReadWhoseClientLeftIsDroppedAtItsTurn() async throws {
        try await withSlotHeld { server, token, release in
            try await server.application(port: 0).test(.live) { client in
                let audit = "/v1/subjects/user-42/audit?at=\(Served.at)"
                func waiting(_ count: Int) async throws {
                    for _ in 0 ..< 600 where server.heavyReads.load.waiting < count { try await Task.sleep(for: .milliseconds(20)) }
                    #expect(server.heavyReads.load.waiting == count)
                }
                let port = try #require(client.port)
                let leaving = try #require(RawClient(port: port))
                leaving.send("GET \(audit) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\n\r\n")
                try await waiting(1)
                leaving.close()
                let staying = Task { try await client.execute(uri: audit, method: .get, headers: [.authorization: "Bearer \(token)"]).status }
                try await waiting(2)
                // On a connection of its own: the test client's waits for the audit's answer.
                func metrics() throws -> String {
                    let asking = try #require(RawClient(port: port))
                    asking.send("GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    return asking.readUntilClosed(seconds: 60).0
                }
                let gauges = try metrics()
                #expect(gauges.contains("ledger_heavy_reads_running 1") && gauges.contains("ledger_heavy_reads_waiting 2"), "\(gauges)")
                release.signal()
                #expect(try await staying.value == .ok)
                let counted = try metrics()
                let route = #"ledger_http_requests_total{route="/v1/subjects/{subject}/audit",status="#
                #expect(counted.contains(route + #""499"} 1"#) && counted.contains(route + #""200"} 1"#), "\(counted)")
                #expect(counted.contains("ledger_heavy_reads_running 0") && counted.contains("ledger_heavy_reads_waiting 0"))
            }
        }
    }
}

extension HeavyReadRoutesTests {
    /// `body` with a server over a store of `Served.customer` allowing one heavy read and eight
    /// waiting, a support token, and the one slot held by a read until `release` is signalled.
    func withSlotHeld(_ body: (LedgerServer, String, DispatchSemaphore) async throws -> Void) async throws {
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try await ledger.append(Served.customer)
            let token = try AccessTokens(ledger).create(name: "alice", role: .support)
            let server = try LedgerServer(ledger: ledger, limits: ServerLimits(heavyReads: 1, heavyReadsWaiting: 8))
            let (entered, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            try server.heavyReads.start({ () throws(LedgerError) in
                entered.signal()
                release.wait()
            }, completion: { _ in })
            #expect(entered.wait(timeout: .now() + 60) == .success)
            try await body(server, token, release)
        }
    }
}

/// What the requests of a test answered, as they answer.
final class Answered: Sendable {
    let list = Mutex<[String]>([])
}

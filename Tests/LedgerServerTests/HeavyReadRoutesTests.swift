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
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try await ledger.append(Served.customer)
            let token = try AccessTokens(ledger).create(name: "alice", role: .support)
            let server = try LedgerServer(ledger: ledger, limits: ServerLimits(heavyReads: 1, heavyReadsWaiting: 8))
            // A heavy read holds the only slot until released.
            let (entered, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            try server.heavyReads.start({ () throws(LedgerError) in
                entered.signal()
                release.wait()
            }, completion: { _ in })
            #expect(entered.wait(timeout: .now() + 60) == .success)
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

/// What the requests of a test answered, as they answer.
final class Answered: Sendable {
    let list = Mutex<[String]>([])
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections
import LedgerServer
@_spi(Storage) import LedgerTestSupport
import Logging
import Synchronization
import Testing

/// What the server's log keeps of a request: its method and path, never its query, which may
/// hold a search, a subject's name or a token put there by mistake.
@Suite struct RequestLogTests {
    /// Every line logged, its message and metadata as text.
    final class Lines: Sendable {
        private let lines = Mutex<[String]>([])

        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    /// A log handler that keeps what it is given, for the test to read.
    struct Capture: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            lines.append("\(event.message) " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
        }
    }

    @Test func aRequestIsLoggedWithoutItsQuery() async throws {
        let lines = Lines()
        try await withStorePath { path in
            let ledger = try Ledger(path: path)
            defer { ledger.close() }
            try await ledger.append(Served.customer)
            let token = try AccessTokens(ledger).create(name: "alice", role: .support)
            let app = try LedgerServer(ledger: ledger, logger: Logger(label: "test") { _ in Capture(lines: lines) }).application(port: 0)
            try await app.test(.router) { client in
                let status = try await client.execute(uri: "/v1/subjects/user-42/status?at=2026-03-05T00:00:00Z&token=ledger_secret", method: .get,
                                                      headers: [.authorization: "Bearer \(token)"])
                #expect(status.status == .ok)
                _ = try await client.execute(uri: "/?q=jane.doe%40example.com&by=subject", method: .get)
            }
        }
        let requests = lines.all.filter { $0.hasPrefix("Request ") }
        #expect(requests.count == 2, "\(lines.all)")
        #expect(requests.contains { $0.contains("hb.request.path=/v1/subjects/user-42/status") }, "\(requests)")
        #expect(requests.contains { $0.contains("hb.request.path=/ ") || $0.hasSuffix("hb.request.path=/") }, "\(requests)")
        for line in lines.all {
            #expect(!line.contains("?"), "\(line)")
            #expect(!line.contains("ledger_secret"), "\(line)")
            #expect(!line.contains("jane.doe"), "\(line)")
            #expect(!line.contains("2026-03-05"), "\(line)")
        }
    }
}

import Foundation
@_spi(Storage) import LedgerCore
import Synchronization

/// The support pages' sign-ins, in memory (a restart signs everyone out): a random session id
/// in an `HttpOnly`, `SameSite=Strict` cookie, standing for a token — checked again on every
/// request, so revoking the token ends its sessions — until it expires. Failed sign-ins are
/// limited across all clients (`failureLimit` a minute), which makes guessing a token, already
/// 256 random bits, slower still.
final class Sessions: Sendable {
    struct Session: Sendable {
        var name: String
        var digest: String
        var expires: Timestamp
    }

    static let cookie = "ledger_session"
    /// How long a sign-in lasts.
    static let lifetimeSeconds: Int64 = 12 * 3600
    /// Failed sign-ins allowed in `windowSeconds`, all clients together.
    static let failureLimit = 10
    static let windowSeconds: Int64 = 60

    private let state = Mutex(State())

    private struct State {
        var sessions: [String: Session] = [:]
        var failures: [Timestamp] = []
    }

    /// A new session for `token`; returns its id.
    func open(for token: AccessToken, at now: Timestamp = .now()) -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
        let id = bytes.map { String(format: "%02x", $0) }.joined()
        let session = Session(name: token.name, digest: token.digest, expires: now.adding(seconds: Self.lifetimeSeconds))
        state.withLock { state in
            state.sessions = state.sessions.filter { $0.value.expires > now }
            state.sessions[id] = session
        }
        return id
    }

    /// The live session `id` names, if any.
    func session(_ id: String, at now: Timestamp = .now()) -> Session? {
        state.withLock { state in
            guard let session = state.sessions[id] else { return nil }
            guard session.expires > now else {
                state.sessions[id] = nil
                return nil
            }
            return session
        }
    }

    func close(_ id: String) {
        _ = state.withLock { $0.sessions.removeValue(forKey: id) }
    }

    /// Whether a sign-in may be tried now: fewer than `failureLimit` failed in the last minute.
    func mayTry(at now: Timestamp = .now()) -> Bool {
        state.withLock { state in
            state.failures = state.failures.filter { now.milliseconds - $0.milliseconds < Self.windowSeconds * 1000 }
            return state.failures.count < Self.failureLimit
        }
    }

    /// A sign-in failed.
    func failed(at now: Timestamp = .now()) {
        state.withLock { $0.failures.append(now) }
    }
}

import Foundation
@_spi(Storage) import LedgerCore
import Synchronization

/// The support pages' sign-ins, in memory (a restart signs everyone out): a random session id
/// in an `HttpOnly`, `SameSite=Strict` cookie, standing for a token — checked again on every
/// request, so revoking the token ends its sessions — until it has gone unused for
/// `idleSeconds` or `lifetimeSeconds` have passed since signing in, whichever is first. At
/// most `capacity` sessions live at once: signing in beyond drops the least recently used.
///
/// Failed sign-ins are counted per client (``SignInThrottle``): `failureLimit` a minute and
/// that client's next wrong tokens are refused (`429`), without one client locking others
/// out. A valid token is checked first and always signs in, so the throttle keeps a client
/// from flooding the log, not from guessing: what makes guessing hopeless is a token's 256
/// random bits.
final class Sessions: Sendable {
    struct Session: Sendable {
        var name: String
        var digest: String
        var expires: Timestamp
        /// The last request that used it (or its opening).
        var used: Timestamp
    }

    static let cookie = "ledger_session"
    /// How long a sign-in lasts at most, used or not.
    static let lifetimeSeconds: Int64 = 12 * 3600
    /// How long a sign-in lasts without a request.
    static let idleSeconds: Int64 = 30 * 60
    /// The most sessions kept at once.
    static let capacity = 1000
    /// Failed sign-ins a client may make in `windowSeconds`.
    static let failureLimit = 10
    static let windowSeconds: Int64 = 60
    /// The most clients whose failures are kept.
    static let trackedClients = 10_000

    private let sessions = Mutex<[String: Session]>([:])
    /// Failed sign-ins by client.
    let throttle = SignInThrottle(limit: failureLimit, windowSeconds: windowSeconds, capacity: trackedClients)

    /// A new session for `token`; returns its id.
    func open(for token: AccessToken, at now: Timestamp = .now()) -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
        let id = bytes.map { String(format: "%02x", $0) }.joined()
        let session = Session(name: token.name, digest: token.digest, expires: now.adding(seconds: Self.lifetimeSeconds), used: now)
        sessions.withLock { sessions in
            sessions = sessions.filter { Self.isLive($0.value, at: now) }
            while sessions.count >= Self.capacity, let leastRecent = sessions.min(by: { $0.value.used < $1.value.used }) {
                sessions[leastRecent.key] = nil
            }
            sessions[id] = session
        }
        return id
    }

    /// The live session `id` names, if any; a request that finds it keeps it alive another
    /// `idleSeconds`.
    func session(_ id: String, at now: Timestamp = .now()) -> Session? {
        sessions.withLock { sessions in
            guard var session = sessions[id] else { return nil }
            guard Self.isLive(session, at: now) else {
                sessions[id] = nil
                return nil
            }
            session.used = max(session.used, now)
            sessions[id] = session
            return session
        }
    }

    func close(_ id: String) {
        _ = sessions.withLock { $0.removeValue(forKey: id) }
    }

    /// How many sessions are kept, live or not yet found expired.
    var count: Int { sessions.withLock { $0.count } }

    static func isLive(_ session: Session, at now: Timestamp) -> Bool {
        session.expires > now && now.milliseconds(since: session.used) < idleSeconds * 1000
    }

    /// Whether `client` may try a wrong token now: fewer than `failureLimit` failed in the
    /// last `windowSeconds`.
    func mayFail(_ client: String, at now: Timestamp = .now()) -> Bool {
        throttle.allows(client, at: now)
    }

    /// A sign-in by `client` failed.
    func failed(_ client: String, at now: Timestamp = .now()) {
        throttle.failed(client, at: now)
    }
}

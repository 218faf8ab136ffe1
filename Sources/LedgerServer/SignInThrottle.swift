@_spi(Storage) import LedgerCore
import Synchronization

/// Failed sign-ins, counted per client address (``ClientAddress``): a client with `limit`
/// failures in the last `windowSeconds` has its next wrong tokens refused outright, while
/// every other client, and a valid token from that one, are not held up by it.
///
/// The memory stays bounded: at most `limit` times per client, and at most `capacity`
/// clients; past that, those with no failure left in the window go first, then those whose
/// latest failure is oldest.
final class SignInThrottle: Sendable {
    let limit: Int
    let windowSeconds: Int64
    let capacity: Int

    /// Each client's failures in the window, oldest first.
    private let failures = Mutex<[String: [Timestamp]]>([:])

    init(limit: Int, windowSeconds: Int64, capacity: Int) {
        self.limit = max(limit, 1)
        self.windowSeconds = windowSeconds
        self.capacity = max(capacity, 1)
    }

    /// Whether `client` may still fail a sign-in: fewer than `limit` failures in the window.
    func allows(_ client: String, at now: Timestamp = .now()) -> Bool {
        failures.withLock { failures in
            guard let times = failures[client] else { return true }
            let recent = times.filter { within($0, of: now) }
            failures[client] = recent.isEmpty ? nil : recent
            return recent.count < limit
        }
    }

    /// A sign-in by `client` failed.
    func failed(_ client: String, at now: Timestamp = .now()) {
        failures.withLock { failures in
            var times = (failures[client] ?? []).filter { within($0, of: now) }
            times.append(now)
            failures[client] = Array(times.suffix(limit))
            if failures.count > capacity { evict(&failures, at: now) }
        }
    }

    /// How many clients are tracked.
    var tracked: Int { failures.withLock { $0.count } }

    private func within(_ time: Timestamp, of now: Timestamp) -> Bool {
        now.milliseconds(since: time) < windowSeconds * 1000
    }

    /// Forgets clients down to nine tenths of `capacity` (so that a flood of new addresses
    /// sorts now and then, not on every failure): first those with nothing in the window, then
    /// those whose latest failure is oldest.
    private func evict(_ failures: inout [String: [Timestamp]], at now: Timestamp) {
        failures = failures.filter { $0.value.last.map { within($0, of: now) } ?? false }
        let keep = max(capacity * 9 / 10, 1)
        guard failures.count > keep else { return }
        let oldest = failures.map { (client: $0.key, latest: $0.value.last ?? now) }.sorted { $0.latest < $1.latest }
        for entry in oldest.prefix(failures.count - keep) { failures[entry.client] = nil }
    }
}

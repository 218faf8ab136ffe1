import Foundation
import Glibc

/// What one client may take of the server (`ledger serve`'s options of the same names): how
/// long it may take to send a request's head and body, how long it may leave an answer unread,
/// how long a connection may sit idle, how many connections are open at once, and how many
/// heavy reads (audits, a subject's events, the due list) run at once and wait their turn.
public struct ServerLimits: Sendable, Hashable {
    /// From a request's first byte to the end of its head (`408`, then closed).
    public var headerTimeout: Duration
    /// From a request's head to the end of its body (closed).
    public var bodyTimeout: Duration
    /// Between requests on one connection, and before the first (closed).
    public var idleTimeout: Duration
    /// While more of an answer waits to be sent than the connection buffers, for the client to
    /// read 32 KiB of it (closed): a client reading slower than that, or not at all.
    public var writeTimeout: Duration
    /// Connections open at once; a client beyond them waits in the kernel's queue for one to
    /// close. At most the open-file limit less room for the store's own files.
    public var connections: Int
    /// Heavy reads running at once, each on a thread of its own at a lower priority, so that
    /// the requests the event loop answers (status, `/healthz`) are not kept waiting.
    public var heavyReads: Int
    /// Heavy reads waiting for one to finish; beyond them a request gets `503` and
    /// `Retry-After`. One whose client left before its turn is dropped then (`499`).
    public var heavyReadsWaiting: Int

    public init(headerTimeout: Duration = .seconds(10), bodyTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(60),
                writeTimeout: Duration = .seconds(30), connections: Int = 1024, heavyReads: Int = max(1, ProcessInfo.processInfo.activeProcessorCount),
                heavyReadsWaiting: Int = 64) {
        (self.headerTimeout, self.bodyTimeout, self.idleTimeout, self.writeTimeout) = (headerTimeout, bodyTimeout, idleTimeout, writeTimeout)
        (self.connections, self.heavyReads, self.heavyReadsWaiting) = (connections, heavyReads, heavyReadsWaiting)
    }

    /// Files the process keeps for itself beside its connections: the store's, standard
    /// streams, the event loops' own descriptors.
    static let reservedFiles = 64

    /// Raises the process's open-file limit to its hard limit and returns the limit now (the
    /// soft limit as it stands when it cannot be raised).
    package static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// These limits with `connections` cut to what `openFiles` allows.
    package func fitted(toOpenFiles openFiles: Int) -> ServerLimits {
        var fitted = self
        fitted.connections = max(1, min(connections, openFiles - Self.reservedFiles))
        return fitted
    }
}

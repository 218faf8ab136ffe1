import Foundation
@_spi(Storage) import LedgerCore
@testable import LedgerServer
import Testing

/// How long a support page's sign-in lasts and how many the server keeps: a session ends
/// after `Sessions.idleSeconds` without a request or `Sessions.lifetimeSeconds` after it
/// began, whichever comes first, and past `Sessions.capacity` live ones the least recently
/// used goes.
@Suite struct SessionLimitsTests {
    static let token = AccessToken(name: "alice", role: .support, digest: "00", createdAt: Timestamp(milliseconds: 0))
    static let start = Timestamp(rfc3339: "2026-03-05T09:00:00Z") ?? .now()

    @Test func aSessionIdlePastItsLimitIsRefused() {
        let sessions = Sessions()
        let id = sessions.open(for: Self.token, at: Self.start)
        #expect(sessions.session(id, at: Self.start.adding(seconds: Sessions.idleSeconds - 1)) != nil)
        // That request refreshed it: as long again from there.
        #expect(sessions.session(id, at: Self.start.adding(seconds: 2 * Sessions.idleSeconds - 2)) != nil)
        #expect(sessions.session(id, at: Self.start.adding(seconds: 3 * Sessions.idleSeconds)) == nil)
        // Gone for good, not only for that moment.
        #expect(sessions.session(id, at: Self.start.adding(seconds: 1)) == nil)
    }

    /// A session used all the time still ends `lifetimeSeconds` after it began.
    @Test func aSessionInUseEndsAtItsLifetime() {
        let sessions = Sessions()
        let id = sessions.open(for: Self.token, at: Self.start)
        var now = Self.start
        let step = Sessions.idleSeconds / 2
        while now.milliseconds(since: Self.start) + step * 1000 < Sessions.lifetimeSeconds * 1000 {
            now = now.adding(seconds: step)
            #expect(sessions.session(id, at: now) != nil, "\(now)")
        }
        #expect(sessions.session(id, at: Self.start.adding(seconds: Sessions.lifetimeSeconds)) == nil)
    }

    /// Opening a session beyond the cap drops the least recently used, not the oldest.
    @Test func theCapDropsTheLeastRecentlyUsed() {
        let sessions = Sessions()
        var ids: [String] = []
        for i in 0 ..< Sessions.capacity {
            ids.append(sessions.open(for: Self.token, at: Self.start.adding(milliseconds: Int64(i))))
        }
        let later = Self.start.adding(seconds: 60)
        // The first opened is used again; the second is now the least recently used.
        #expect(sessions.session(ids[0], at: later) != nil)
        let newest = sessions.open(for: Self.token, at: later.adding(seconds: 1))
        let now = later.adding(seconds: 2)
        #expect(sessions.session(ids[1], at: now) == nil)
        #expect(sessions.session(ids[0], at: now) != nil)
        #expect(sessions.session(ids[2], at: now) != nil)
        #expect(sessions.session(newest, at: now) != nil)
        #expect(sessions.count == Sessions.capacity)
    }
}

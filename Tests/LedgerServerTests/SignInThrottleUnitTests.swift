@_spi(Storage) import LedgerCore
@testable import LedgerServer
import Testing

/// Failed sign-ins, per client, in bounded memory.
@Suite struct SignInThrottleUnitTests {
    static let start = Timestamp(rfc3339: "2026-03-05T09:00:00Z") ?? .now()

    @Test func aClientsFailuresHoldUpThatClientAloneForTheWindow() {
        let throttle = SignInThrottle(limit: 3, windowSeconds: 60, capacity: 100)
        for i in 0 ..< 3 {
            #expect(throttle.allows("a", at: Self.start.adding(seconds: Int64(i))))
            throttle.failed("a", at: Self.start.adding(seconds: Int64(i)))
        }
        #expect(!throttle.allows("a", at: Self.start.adding(seconds: 10)))
        #expect(throttle.allows("b", at: Self.start.adding(seconds: 10)))
        // The first failure leaves the window a minute on.
        #expect(throttle.allows("a", at: Self.start.adding(seconds: 60)))
    }

    /// Past `capacity` clients, the one whose latest failure is oldest is forgotten first.
    @Test func theTrackedClientsAreCapped() {
        let throttle = SignInThrottle(limit: 1, windowSeconds: 3600, capacity: 10)
        for i in 0 ..< 10 { throttle.failed("client-\(i)", at: Self.start.adding(seconds: Int64(i))) }
        throttle.failed("client-0", at: Self.start.adding(seconds: 20))
        #expect(throttle.tracked == 10)
        throttle.failed("client-10", at: Self.start.adding(seconds: 30))
        #expect(throttle.tracked <= 10)
        let now = Self.start.adding(seconds: 40)
        #expect(throttle.allows("client-1", at: now), "the oldest is forgotten")
        #expect(!throttle.allows("client-0", at: now), "a client that failed again is kept")
        #expect(!throttle.allows("client-10", at: now))
        for i in 0 ..< 1000 { throttle.failed("flood-\(i)", at: now) }
        #expect(throttle.tracked <= 10)
    }
}

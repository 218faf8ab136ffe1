import Testing
import LedgerTestSupport

/// `.onOwnThread`, which the cluster suites carry, runs each test, synchronous or not, on a
/// thread of its own (off the cooperative pool), still as that test: its checks count for it.
@Suite(.serialized, .onOwnThread) struct OwnThreadTests {
    @Test func aSynchronousTestRunsOnAThreadOfItsOwn() {
        #expect(isOnOwnThread())
    }

    @Test func anAsynchronousTestStaysThereAcrossSuspensions() async {
        await Task.yield()
        #expect(isOnOwnThread())
    }

    @Test func aTestWithoutTheTraitRunsOnThePool() async throws {
        #expect(try await Task.detached { isOnOwnThread() }.value == false)
    }
}

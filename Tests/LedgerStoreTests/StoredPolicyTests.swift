@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerTestSupport
import Testing

@Suite struct StoredPolicyTests {
    @Test func aStoreKeepsItsPolicyAcrossReopening() throws {
        try withStorePath { path in
            var policy = Policy.reference
            policy.name = "longer-grace"
            policy.subscription.billingGraceDays = 7
            do {
                let log = try EventLog(path: path)
                #expect(try log.policy() == nil)
                try log.setPolicy(policy)
                log.close()
            }
            let reopened = try EventLog(path: path, options: { var o = EventLog.Options(); o.readOnly = true; return o }())
            #expect(try reopened.policy() == policy)
            #expect(try reopened.policy()?.hash == policy.hash)
        }
    }
}

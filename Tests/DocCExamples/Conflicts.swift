import LedgerProjections

/// Appends `event` only if its subject is still at `version`; a conflict is an answer, not an
/// error. `append` throws `LedgerError` alone, so `error` is one in each `catch`.
func appendUnlessMoved(_ ledger: Ledger, _ event: LedgerEvent, expecting version: UInt64) async throws(LedgerError) -> Bool {
    do {
        try await ledger.append([event], expecting: [event.subject: .exact(version)])
        return true
    } catch where error.code == .wrongExpectedVersion {
        return false
    }
}

/// In a closure — a `Task`, a task group — the thrown type is not inferred: `error` is
/// `any Error` there, so match the type first.
func appendInBackground(_ ledger: Ledger, _ event: LedgerEvent) -> Task<Bool, any Error> {
    Task {
        do {
            try await ledger.append([event], expecting: [event.subject: .noStream])
            return true
        } catch let error as LedgerError where error.code == .wrongExpectedVersion {
            return false
        }
    }
}

@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// Code that runs inside every append's write transaction: the projection engine, which keeps
/// its read models in the same store and must commit their changes with the events that caused
/// them (exactly once, read-your-writes).
///
/// For each write transaction the log calls `begin`, then the session's `written` once per new
/// event in position order, then `finish` before the commit. A throw from any of them aborts
/// the whole transaction: no event and no read-model change is written. After each event,
/// the log writes what the session `derived` from it. `committed` runs after
/// a successful commit, outside any transaction.
package protocol CommitObserver: Sendable {
    /// Starts watching one write transaction; `head` is the last position before it.
    func begin(_ txn: borrowing Transaction, head: UInt64) throws -> any CommitSession
    /// A write transaction committed; `head` is now the last position.
    func committed(head: UInt64)
}

/// What a `CommitObserver` does within one write transaction.
package protocol CommitSession: AnyObject {
    /// An event was just written in `txn`; `data` is its payload, decoded and upcast when the
    /// append checked it.
    func written(_ event: StoredEvent, data: EventData, _ txn: borrowing Transaction) throws
    /// The events the observer derives from the event just `written`, which the log writes
    /// right after it in the same transaction (and hands to `written` in turn): the
    /// `appstore.subject_bound` of a subscription a subject now holds. Asked after every
    /// event; a restore writes none (its file holds them).
    func derived() -> [EventDraft]
    /// Every event of the transaction is written; write what is left before it commits, and
    /// everything kept back in memory if the store is `closing`.
    func finish(_ txn: borrowing Transaction, closing: Bool) throws
}

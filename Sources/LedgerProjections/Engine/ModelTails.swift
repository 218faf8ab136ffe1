@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore
import Synchronization

/// The model tail of one store, handed between its writer and its readers as a value.
///
/// A transaction takes the tail as it stands before it opens (so the copy is never ahead of
/// what it sees) and checks it against the store (`ProjectionEngine.overlay`): a tail of
/// another generation, or behind what is stored, starts over from the stored models; a tail
/// behind the log (a commit came between, or another process appended) has the events between
/// folded into the transaction's copy. An append's session leaves its copy here once it has
/// committed (`committed`); a reader offers back a copy it brought forward. The lock guards
/// only the handing over of the value.
final class ModelTails: Sendable {
    private let current = Mutex(ModelTail(generation: 0, through: 0))
    /// What the last write transaction left, until it commits.
    private let unpublished = Mutex<Left?>(nil)
    /// The events the tail gathers before an append stores it (0: every append stores its writes).
    let limit: Atomic<Int>

    /// What a write transaction leaves for the shared tail.
    enum Left {
        /// Its writes, to join the tail it read through (if that is still the shared one).
        case writes(TailWrites, onto: ModelTail.Identity)
        /// A tail of its own (after storing the tail, or starting over).
        case tail(ModelTail)
    }

    init(limit: Int) {
        self.limit = Atomic(limit)
    }

    var snapshot: ModelTail { current.withLock { $0 } }

    /// Makes `tail` the shared tail unless a later one is there.
    func publish(_ tail: ModelTail) {
        let replaced = current.withLock { shared -> ModelTail? in
            guard shared.identity < tail.identity else { return nil }
            defer { shared = tail }
            return shared
        }
        releaseAside(replaced)
    }

    /// What a write transaction leaves, published if it commits.
    func leave(_ left: Left) { unpublished.withLock { $0 = left } }

    /// The write transaction committed: its writes join the shared tail in place — no reader
    /// holding a copy, nothing is copied — if it still ends where the transaction began (it
    /// may have been stored meanwhile: the writes hold on the stored models as on the tail);
    /// otherwise they are dropped, and whoever reads next folds their events from the log.
    func committed() {
        switch unpublished.withLock({ $0.take() }) {
        case .writes(let writes, let onto):
            current.withLock { shared in
                if shared.generation == onto.generation && shared.head == onto.head { shared.absorb(writes) }
            }
        case .tail(let tail):
            publish(tail)
        case nil:
            break
        }
    }
}

extension ProjectionEngine {
    /// The tail `txn` reads through: `snapshot` (taken before `txn` began) if it fits the
    /// stored models, else a new one over them; in a read transaction, with the events after it
    /// folded in when the log is ahead (at most `readerFoldLimit` of them: further behind, the
    /// models are stale).
    func overlay(_ snapshot: ModelTail, _ txn: borrowing Transaction, reading: Bool) throws -> Overlay {
        let found: Generation?
        do {
            found = try store.storedServed(txn)
        } catch let error as LedgerError where error.code == .corruptRecord && !reading {
            found = nil   // a writer replaces it (`servedForWriting`)
        }
        guard let stored = found else { return .none }
        let head = try store.log.head(txn)
        let storedHigh = stored.folds.map(\.checkpoint).max() ?? 0
        // The tail fits when it writes into the served generation and each of its folds holds
        // at least what is stored of it (another process may have stored further since).
        var fits = snapshot.generation == stored.id && snapshot.head <= head
        if fits, let served = snapshot.served {
            fits = stored.folds.allSatisfy { record in (served.record(record.name)?.checkpoint ?? 0) >= record.checkpoint }
        }
        // A tail another process has stored past (its base behind what is stored) starts over,
        // when what is left to fold is little: it would otherwise keep every key since it began.
        if fits, storedHigh > snapshot.base, head - storedHigh <= (reading ? readerFoldLimit : inlineCatchUpLimit) { fits = false }
        let overlay = fits ? Overlay(snapshot, startedOver: false) : Overlay(ModelTail(generation: stored.id, through: storedHigh))
        guard reading else { return overlay }
        // A reader folds what its copy lacks of each fold that is close enough behind.
        var served = overlay.served ?? stored
        var folded = false
        for index in catchUpOrder {
            let fold = folds[index]
            guard let record = served.record(fold.name), record.version == UInt64(fold.version), record.checkpoint < head,
                  head - record.checkpoint <= readerFoldLimit else { continue }
            _ = try catchUp(index, of: &served, through: head, txn, overlay)
            folded = true
        }
        guard folded else { return overlay }
        overlay.head = head
        tails.publish(overlay.combined)
        return overlay
    }

    /// A reader folds at most this many events the tail lacks; a writer merges its tail well
    /// before it holds so many.
    var readerFoldLimit: UInt64 { UInt64(min(max(tails.limit.load(ordering: .relaxed), 0), 1 << 40)) * 2 + inlineCatchUpLimit }

    /// Runs a read transaction with the models as it sees them.
    func read<R>(_ body: (borrowing Transaction, Overlay) throws -> R) throws -> R {
        let snapshot = tails.snapshot
        return try store.env.read { txn in try body(txn, try overlay(snapshot, txn, reading: true)) }
    }

    /// Runs a write transaction that stores its model writes, with the tail's, before it
    /// commits; the tail then starts over from the stored models.
    func writeThrough<R>(_ body: (borrowing Transaction, Overlay) throws -> R) throws -> R {
        let snapshot = tails.snapshot
        let (result, left) = try store.env.write { txn -> (R, ModelTail) in
            let overlay = try overlay(snapshot, txn, reading: false)
            let result = try body(txn, overlay)
            return (result, try storeTail(overlay, txn))
        }
        tails.publish(left)
        return result
    }

    /// Stores the tail now, in a write transaction of its own.
    func storeTail() throws(LedgerError) {
        do {
            try writeThrough { _, _ in }
        } catch {
            throw LedgerError.wrapping(error, doing: "storing the read models")
        }
    }

    /// Stores `overlay`'s tail in `txn`; returns the empty tail that follows it.
    func storeTail(_ overlay: Overlay, _ txn: borrowing Transaction) throws -> ModelTail {
        try overlay.store(into: store, txn)
        let stored = try store.storedServed(txn)
        let through = max(overlay.head, stored?.folds.map(\.checkpoint).max() ?? 0)
        return ModelTail(generation: stored?.id ?? overlay.generation, through: through)
    }
}

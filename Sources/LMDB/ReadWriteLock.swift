import Glibc

/// A read–write lock over `pthread_rwlock_t`.
///
/// glibc's default prefers readers: a thread that already holds it shared may take it again (a
/// read inside a read) without deadlocking, but while readers keep overlapping a thread that
/// wants it exclusively waits for ever. `preferringWriters` makes new readers wait behind a
/// waiting writer (`PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`), which bounds the writer's
/// wait; such a lock must never be taken shared twice on one thread.
///
/// An environment keeps the map from being resized under a live transaction with one
/// (`mdb_env_set_mapsize` remaps the file: every pointer a live transaction holds would
/// dangle, and LMDB does not check for it): transactions hold it shared, a resize exclusively.
/// That one prefers readers, since a transaction may begin inside another.
@_spi(Storage) public final class ReadWriteLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread lock is the synchronisation; its storage is allocated
    // once, never moved, and freed only in deinit when no thread can hold a reference.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    public init(preferringWriters: Bool = false) {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        if preferringWriters { pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)) }
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    public func withShared<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    /// Takes it shared until `unlockShared()`: for a hold that a closure cannot scope.
    package func lockShared() { pthread_rwlock_rdlock(lock) }
    package func unlockShared() { pthread_rwlock_unlock(lock) }

    public func withExclusive<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

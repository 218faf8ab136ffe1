import Glibc

/// A read–write lock over `pthread_rwlock_t`, as glibc makes it by default.
///
/// An environment keeps the map from being resized under a live transaction with one
/// (`mdb_env_set_mapsize` remaps the file: every pointer a live transaction holds would
/// dangle, and LMDB does not check for it): transactions hold it shared, a resize exclusively.
/// glibc's default prefers readers, which a transaction begun inside another needs: a thread
/// that already holds it shared may take it again without deadlocking behind a waiting resize.
final class ReadWriteLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread lock is the synchronisation; its storage is allocated
    // once, never moved, and freed only in deinit when no thread can hold a reference.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withShared<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    /// Takes it shared until `unlockShared()`: for `releaseSharedTemporarily`.
    func lockShared() { pthread_rwlock_rdlock(lock) }
    func unlockShared() { pthread_rwlock_unlock(lock) }

    func withExclusive<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

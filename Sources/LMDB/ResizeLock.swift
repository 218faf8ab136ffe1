import Glibc

/// Keeps the map from being resized while any transaction of this process is live.
///
/// `mdb_env_set_mapsize` remaps the file: every pointer a live transaction holds would dangle,
/// and LMDB does not check for it. Transactions hold this lock shared; a resize holds it
/// exclusively. glibc's default read–write lock prefers readers, so a thread that already holds
/// it shared may take it again (a read inside a read) without deadlocking.
final class ResizeLock: @unchecked Sendable {
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

    func lockShared() { pthread_rwlock_rdlock(lock) }
    func unlockShared() { pthread_rwlock_unlock(lock) }

    func withExclusive<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

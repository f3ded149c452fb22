#if canImport(Glibc)
    import Glibc
#endif

/// A mutex and a condition to wait on under it (pthread's), as Foundation's `NSCondition` is, for the
/// modules that build on FoundationEssentials alone. Waiters must check what they wait for in a loop:
/// a wait can end without a broadcast.
public final class ConditionLock: @unchecked Sendable {
    // Allocated once and never moved: pthread objects must keep their address.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }

    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Releases the lock until another thread broadcasts (or the wait ends by itself), then takes it again.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(condition) }
}

import Foundation
import Synchronization

/// Memory for large frames (those over the read buffer), reserved when a frame's header arrives and
/// returned once it is handled. Each uid has pools of its own, so that no user's connections, however
/// many and however slow, can take the memory another user's requests need: one pool for the
/// registered apps of that uid's keychain, and a small one for its other processes (whose item
/// requests are refused anyway, and whose frames are limited to 1 MiB); and a total over all of them.
final class FrameBudget: Sendable {
    /// What a registered app of one keychain may hold at once: four of the largest requests.
    static let registeredBytes = 256 << 20
    /// What the unregistered processes of one uid may hold at once.
    static let unregisteredBytes = 16 << 20
    /// What all of them together may hold: a bound on the daemon's memory for large frames, which
    /// only several users' registered apps at once can reach.
    static let totalBytes = 1 << 30

    private struct Pool: Hashable {
        let uid: uid_t
        let registered: Bool
    }

    private let held = Mutex<(pools: [Pool: Int], total: Int)>(([:], 0))

    /// Reserves `size` bytes for a frame of a process of `uid`; false when its pool is full.
    func reserve(_ size: Int, uid: uid_t, registered: Bool) -> Bool {
        let pool = Pool(uid: uid, registered: registered)
        let limit = registered ? Self.registeredBytes : Self.unregisteredBytes
        return held.withLock { held in
            let now = held.pools[pool, default: 0]
            guard size <= limit - now, size <= Self.totalBytes - held.total else { return false }
            held.pools[pool] = now + size
            held.total += size
            return true
        }
    }

    func release(_ size: Int, uid: uid_t, registered: Bool) {
        let pool = Pool(uid: uid, registered: registered)
        held.withLock { held in
            let left = held.pools[pool, default: 0] - size
            held.pools[pool] = left > 0 ? left : nil
            held.total = max(held.total - size, 0)
        }
    }
}

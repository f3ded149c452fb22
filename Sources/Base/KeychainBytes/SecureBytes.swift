#if canImport(Glibc)
    import Glibc
#endif

/// Key material in memory that is wiped when released.
///
/// Swift's `Data` and `[UInt8]` may be copied or moved by the runtime without a chance to clear the old
/// storage, so every key the keychain holds lives in one of these instead: a single heap buffer that is
/// never reallocated and is overwritten (`explicit_bzero`, which the optimiser keeps) before it is freed.
///
/// Keys held for long (class keys, root keys) are *pinned*: their pages are locked in memory where
/// `RLIMIT_MEMLOCK` allows (never written to swap) and left out of core dumps. Short-lived keys are not,
/// since locking costs two system calls per buffer.
public final class SecureBytes: @unchecked Sendable {
    // Immutable after init, so sharing between threads is safe.
    private let storage: UnsafeMutableRawBufferPointer
    public let count: Int
    /// Whether `storage` is a whole number of pages of its own, locked (as far as the limit allowed).
    private let pinned: Bool

    /// Fills a new buffer of `count` bytes through `body`, which writes into raw memory.
    public convenience init(
        count: Int, pinned: Bool = false, filling body: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws {
        let buffer = Self.allocate(count, pinned: pinned)
        do {
            try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
        } catch {
            Self.release(buffer, pinned: pinned)
            throw error
        }
        self.init(adopting: buffer, count: count, pinned: pinned)
    }

    private init(adopting buffer: UnsafeMutableRawBufferPointer, count: Int, pinned: Bool) {
        self.storage = buffer
        self.count = count
        self.pinned = pinned
    }

    /// Copies `bytes` into a wiped-on-release buffer. The caller should clear its own copy if it can.
    public convenience init<Bytes: Collection>(copying bytes: Bytes, pinned: Bool = false)
    where Bytes.Element == UInt8 {
        let count = bytes.count
        let buffer = Self.allocate(count, pinned: pinned)
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
        // One copy of contiguous bytes (Data, arrays, buffers) rather than a byte-at-a-time walk of the
        // collection, which every secret read from a row or a frame would pay.
        let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
            target.copyMemory(from: UnsafeRawBufferPointer(source))
        }
        if copied == nil { _ = target.initializeMemory(as: UInt8.self, from: bytes) }
        self.init(adopting: buffer, count: count, pinned: pinned)
    }

    /// The same bytes in a pinned buffer, for a key that will be held for long.
    public func pinnedCopy() -> SecureBytes {
        if pinned { return self }
        return withUnsafeBytes { SecureBytes(copying: $0, pinned: true) }
    }

    deinit { Self.release(storage, pinned: pinned) }

    /// Read access to the bytes; the pointer must not escape `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// Constant-time equality, for comparing secrets.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { mine in other.withUnsafeBytes { theirs in ConstantTime.equal(mine, theirs) } }
    }

    private static let pageSize = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)

    /// A zeroed buffer; pinned ones take whole pages, so unlocking one never unlocks another's page.
    private static func allocate(_ count: Int, pinned: Bool) -> UnsafeMutableRawBufferPointer {
        let size = pinned ? (max(count, 1) + pageSize - 1) / pageSize * pageSize : max(count, 1)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: pinned ? pageSize : 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        if pinned, let base = buffer.baseAddress {
            // Best effort: beyond RLIMIT_MEMLOCK the key is still wiped, only not kept out of swap.
            _ = mlock(base, size)
            _ = madvise(base, size, MADV_DONTDUMP)
        }
        return buffer
    }

    private static func release(_ buffer: UnsafeMutableRawBufferPointer, pinned: Bool) {
        SecureMemory.wipe(buffer)
        if pinned, let base = buffer.baseAddress {
            _ = madvise(base, buffer.count, MADV_DODUMP)
            _ = munlock(base, buffer.count)
        }
        buffer.deallocate()
    }
}

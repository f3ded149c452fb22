#if canImport(Glibc)
    import Glibc
#endif

/// A file descriptor received with a message, duplicated (close-on-exec) out of the message so that
/// it outlives it; closed when released. Only a connection made to accept descriptors receives any.
public final class DBusDescriptor: Sendable, Equatable {
    public let descriptor: Int32

    /// Takes ownership of `descriptor`.
    init(owning descriptor: Int32) { self.descriptor = descriptor }

    /// A duplicate of `descriptor` (which stays the caller's); nil when it cannot be duplicated.
    public convenience init?(duplicating descriptor: Int32) {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
        guard duplicate >= 0 else { return nil }
        self.init(owning: duplicate)
    }

    deinit { close(descriptor) }

    public static func == (lhs: DBusDescriptor, rhs: DBusDescriptor) -> Bool { lhs === rhs }
}

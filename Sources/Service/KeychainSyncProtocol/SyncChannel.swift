import Foundation
import KeychainBytes
import KeychainTLS

#if canImport(Glibc)
    import Glibc
#endif

/// Length-prefixed frames over a connected stream socket (a Unix socket, or TCP on loopback), for
/// both ends of the sync protocol:
///
///     length (4, little-endian) ‖ payload
///
/// The length is checked before memory is set aside for the payload, and every wait is bounded by
/// the socket's timeouts, so a peer that stalls costs a bounded wait. Used by one thread at a time.
public final class SyncChannel {
    public static let maximumFrame = 32 << 20
    public let descriptor: Int32
    private var closed = false
    /// The TLS session over the socket, when the address asked for one.
    private var tls: TLSSession?

    /// Takes over a connected socket (closed by `close` or when this is released).
    public init(descriptor: Int32, timeout: Duration = .seconds(30)) {
        self.descriptor = descriptor
        let seconds = timeout.components.seconds
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    /// Runs TLS over the socket from now on (after the handshake `start` makes).
    public func startTLS(_ start: (Int32) throws(TLSError) -> TLSSession) throws(SyncError) {
        do { tls = try start(descriptor) } catch {
            throw SyncError(.unavailable, "TLS with the sync server failed: \(error.reason)")
        }
    }

    public func close() {
        guard !closed else { return }
        closed = true
        tls?.shutdown()
        tls = nil
        Glibc.close(descriptor)
    }

    /// Shuts the connection down for both directions now (another thread's blocked read returns).
    public func shutDown() { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }

    public func write(_ payload: Data) throws(SyncError) {
        guard payload.count <= Self.maximumFrame else {
            throw SyncError(.invalid, "a message of \(payload.count) bytes is over the limit of \(Self.maximumFrame)")
        }
        var frame = ByteWriter(capacity: payload.count + 4)
        frame.write(UInt32(payload.count))
        frame.writeRaw(payload)
        let bytes = frame.data
        let ok = bytes.withUnsafeBytes { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let rest = UnsafeRawBufferPointer(start: base + offset, count: buffer.count - offset)
                let sent =
                    tls.map { $0.write(rest) } ?? send(descriptor, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL))
                if sent < 0, errno == EINTR { continue }
                guard sent > 0 else { return false }
                offset += sent
            }
            return true
        }
        guard ok else { throw SyncError(.unavailable, "the connection dropped while sending (errno \(errno))") }
    }

    /// Reads one message of at most `maximum` bytes (a server allows a few KiB before a device has
    /// proved its key).
    public func read(maximum: Int = SyncChannel.maximumFrame) throws(SyncError) -> Data {
        let header = try readExactly(4)
        let length = header.reversed().reduce(0) { ($0 << 8) | Int($1) }
        guard length <= min(maximum, Self.maximumFrame) else {
            throw SyncError(
                .malformed, "a message of \(length) bytes is over the limit of \(min(maximum, Self.maximumFrame))")
        }
        return try readExactly(length)
    }

    private func readExactly(_ count: Int) throws(SyncError) -> Data {
        var data = Data(count: count)
        var offset = 0
        var failure: Int32 = 0
        data.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            while offset < count {
                let rest = UnsafeMutableRawBufferPointer(start: base + offset, count: count - offset)
                let received = tls.map { $0.read(rest) } ?? recv(descriptor, rest.baseAddress, rest.count, 0)
                if received < 0, errno == EINTR { continue }
                guard received > 0 else {
                    failure = received == 0 ? -1 : errno
                    return
                }
                offset += received
            }
        }
        if failure == EAGAIN || failure == EWOULDBLOCK {
            throw SyncError(.unavailable, "the other end sent nothing for too long")
        }
        guard failure == 0 else { throw SyncError(.unavailable, "the connection closed") }
        return data
    }
}

import CProcessControl
import Foundation
import KeychainSyncProtocol
import KeychainSyncStore
import KeychainTLS
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `keychain-syncd`: accepts devices on a Unix socket or on loopback TCP and serves each connection
/// on a thread of its own. Stateless beyond its database, so several may serve one at once.
public final class SyncServer: @unchecked Sendable {
    public let address: SyncAddress
    private let store: SyncStore
    private let listener: Int32
    /// Connections served now; past `maximumConnections`, a new one is closed at once (each holds a
    /// thread, and a long poll a database connection).
    private let connections = Atomic<Int>(0)
    public static let maximumConnections = 512

    private let tls: TLSContext?

    /// Connects to the database (migrating its schema) and starts listening. A `tls://` address needs
    /// `tls`, the server's certificate and key; no other address takes one.
    public init(
        database: String, listen address: SyncAddress, tls: TLSContext? = nil, limits: SyncLimits = SyncLimits()
    ) throws {
        if case .tls = address {
            guard tls != nil else {
                throw SyncError(.invalid, "a tls:// address needs --tls-certificate and --tls-key")
            }
        } else if tls != nil {
            throw SyncError(.invalid, "--tls-certificate and --tls-key go with a tls://HOST:PORT address")
        }
        store = try SyncStore(conninfo: database, limits: limits)
        self.address = address
        self.tls = tls
        listener = try Self.listen(address)
    }

    /// Accepts connections until the process ends.
    public func run() -> Never {
        while true {
            let connection = process_control_accept(listener)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE {
                    if errno == EMFILE || errno == ENFILE { usleep(100_000) }
                    continue
                }
                SyncLog.error("accept failed (errno \(errno)); keychain-syncd stops")
                exit(1)
            }
            guard connections.add(1, ordering: .relaxed).newValue <= Self.maximumConnections else {
                connections.subtract(1, ordering: .relaxed)
                close(connection)
                continue
            }
            let store = store
            let tls = tls
            let thread = Thread { [self] in
                defer { connections.subtract(1, ordering: .relaxed) }
                let channel = SyncChannel(descriptor: connection, timeout: .seconds(60))
                if let tls {
                    // A client that does not finish the handshake in time, or speaks no TLS, is dropped.
                    do { try channel.startTLS { (descriptor) throws(TLSError) in try tls.accept(descriptor) } } catch {
                        channel.close()
                        return
                    }
                }
                SyncSession(channel: channel, store: store).run()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    private static func listen(_ address: SyncAddress) throws -> Int32 {
        switch address {
        case .unix(let path):
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socket >= 0 else { throw SyncError(.unavailable, "cannot make a socket (errno \(errno))") }
            // A socket left by an earlier server is replaced; anything else at the path is not.
            var info = stat()
            if lstat(path, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFSOCK else {
                    close(socket)
                    throw SyncError(.invalid, "\(path) exists and is not a socket")
                }
                unlink(path)
            }
            guard SyncAddress.bind(socket, path: path) == 0, Glibc.listen(socket, 128) == 0 else {
                let code = errno
                close(socket)
                throw SyncError(.unavailable, "cannot listen on \(path) (errno \(code))")
            }
            // Every device authenticates by its key, so anyone who can reach the path may connect.
            chmod(path, 0o666)
            return socket
        case .tcp(let host, let port), .tls(let host, let port):
            let family = host.contains(":") ? AF_INET6 : AF_INET
            let socket = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socket >= 0 else { throw SyncError(.unavailable, "cannot make a socket (errno \(errno))") }
            var one: Int32 = 1
            _ = setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            let bound = SyncAddress.bind(socket, host: host, port: port)
            guard bound == 0, Glibc.listen(socket, 128) == 0 else {
                let code = errno
                close(socket)
                throw SyncError(.unavailable, "cannot listen on \(address) (errno \(code))")
            }
            return socket
        }
    }
}

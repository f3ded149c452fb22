import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainTLS

#if canImport(Glibc)
    import Glibc
#endif

/// Where a sync server listens: a Unix socket path, `HOST:PORT` on loopback, or `tls://HOST:PORT`
/// anywhere (TLS 1.3, the server's certificate checked against the host).
public enum SyncAddress: Sendable, Equatable, CustomStringConvertible {
    case unix(String)
    case tcp(host: String, port: UInt16)
    case tls(host: String, port: UInt16)

    /// Parses an address as `keychain-syncd --listen` and `security sync enroll --server` take it. TCP is
    /// on loopback only (127.0.0.1, ::1, localhost): the protocol has no TLS of its own (docs/sync.md).
    public init(parsing text: String) throws(SyncError) {
        if text.hasPrefix("tls://") {
            let rest = text.dropFirst("tls://".count)
            guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]), port > 0
            else { throw SyncError(.invalid, "a TLS address is tls://HOST:PORT, not \(text)") }
            var host = String(rest[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty, host.utf8.count <= 253, !host.contains("/") else {
                throw SyncError(.invalid, "a TLS address is tls://HOST:PORT, not \(text)")
            }
            self = .tls(host: host, port: port)
            return
        }
        if text.hasPrefix("/") {
            guard text.utf8.count < 108 else { throw SyncError(.invalid, "a Unix socket path is under 108 bytes") }
            self = .unix(text)
            return
        }
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0
        else {
            throw SyncError(.invalid, "an address is a Unix socket path (/…) or HOST:PORT, not \(text)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard ["127.0.0.1", "::1", "localhost"].contains(host) else {
            throw SyncError(
                .invalid,
                "\(host) is not loopback: plain TCP is served on 127.0.0.1 or ::1 only (use tls://\(host):\(port) to expose it)"
            )
        }
        self = .tcp(host: host == "localhost" ? "127.0.0.1" : host, port: port)
    }

    public var description: String {
        switch self {
        case .unix(let path): path
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .tls(let host, let port): host.contains(":") ? "tls://[\(host)]:\(port)" : "tls://\(host):\(port)"
        }
    }

    /// A connected socket to this address.
    public func connect() throws(SyncError) -> Int32 {
        switch self {
        case .unix(let path):
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socket >= 0 else { throw SyncError(.unavailable, "cannot make a socket (errno \(errno))") }
            guard Self.withUnixAddress(path, { Glibc.connect(socket, $0, $1) }) == 0 else {
                let code = errno
                Glibc.close(socket)
                throw SyncError(.unavailable, "cannot reach the sync server at \(path) (errno \(code))")
            }
            return socket
        case .tcp(let host, let port), .tls(let host, let port):
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var found: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, String(port), &hints, &found) == 0, let first = found else {
                throw SyncError(.unavailable, "cannot resolve \(host)")
            }
            defer { freeaddrinfo(found) }
            var entry: UnsafeMutablePointer<addrinfo>? = first
            var lastError: Int32 = 0
            while let current = entry {
                let socket = Glibc.socket(
                    current.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                if socket >= 0 {
                    var one: Int32 = 1
                    _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    // Linux bounds a blocking connect by the send timeout: a server that does not answer
                    // costs 10 seconds, not the system's minutes.
                    var limit = timeval(tv_sec: 10, tv_usec: 0)
                    _ = setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
                    if Glibc.connect(socket, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 { return socket }
                    lastError = errno
                    Glibc.close(socket)
                }
                entry = current.pointee.ai_next
            }
            throw SyncError(.unavailable, "cannot reach the sync server at \(description) (errno \(lastError))")
        }
    }

    /// Binds a Unix socket to `path` (for the server).
    public static func bind(_ socket: Int32, path: String) -> Int32 {
        withUnixAddress(path) { Glibc.bind(socket, $0, $1) }
    }

    private static func withUnixAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32
    {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8).prefix(raw.count - 1))
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Binds a TCP socket to an address of this machine (for the server).
    public static func bind(_ socket: Int32, host: String, port: UInt16) -> Int32 {
        withSocketAddress(host: host, port: port) { Glibc.bind(socket, $0, $1) }
    }

    static func withSocketAddress(
        host: String, port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32
    ) -> Int32 {
        if host.contains(":") {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            _ = inet_pton(AF_INET6, host, &address.sin6_addr)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}

/// A device's authenticated connection to a sync server: the server's nonce signed with the device's
/// key opens it, so the server knows which device of which account every request comes from.
public final class SyncConnection {
    public let account: Data
    public let keys: SyncDeviceKeys
    /// Where the server says this device stands, as of the handshake.
    public private(set) var status: SyncDeviceStatus = .unknown
    private let channel: SyncChannel

    /// - Parameter authorities: for a `tls://` address, a PEM file of the CA certificates to trust
    ///   (nil: the system's).
    public init(
        address: SyncAddress, account: Data, keys: SyncDeviceKeys, timeout: Duration = .seconds(30),
        authorities: String? = nil
    ) throws(SyncError) {
        self.account = account
        self.keys = keys
        channel = SyncChannel(descriptor: try address.connect(), timeout: timeout)
        if case .tls(let host, _) = address {
            let context: TLSContext
            do { context = try TLSContext.client(authorities: authorities) } catch {
                throw SyncError(.invalid, error.reason)
            }
            try channel.startTLS { (descriptor) throws(TLSError) in try context.connect(descriptor, host: host) }
        }
        var hello = SyncReader(try channel.read(), "the server's hello")
        guard try hello.byte() == SyncProtocol.version else {
            throw SyncError(.malformed, "the server speaks another version of the sync protocol")
        }
        let nonce = try hello.fixed(32)
        try hello.end()
        var request = ByteWriter()
        request.writeBytes(account)
        keys.device.encode(into: &request)
        request.writeBytes(
            try keys.sign(SyncProtocol.authenticationInput(nonce: nonce, account: account, device: keys.device)))
        let body = try call(.authenticate, request.data)
        guard body.count == 1, let status = SyncDeviceStatus(rawValue: body[body.startIndex]) else {
            throw SyncError(.malformed, "the server's answer to the handshake is damaged")
        }
        self.status = status
    }

    public func close() { channel.close() }

    /// Sends a request and returns the body of its answer; a failure answer is thrown as its error.
    public func call(_ operation: SyncOperation, _ body: Data = Data()) throws(SyncError) -> Data {
        do { return try callDetailed(operation, body) } catch { throw error.error }
    }

    /// As `call`, with a failure's details.
    public func callDetailed(_ operation: SyncOperation, _ body: Data = Data()) throws(SyncFailure) -> Data {
        do {
            try channel.write(Data([operation.rawValue]) + body)
            return try SyncAnswer.body(of: try channel.read())
        } catch let error as SyncError {
            throw SyncFailure(error)
        } catch let failure as SyncFailure {
            throw failure
        } catch {
            throw SyncFailure(SyncError(.server, "\(error)"))
        }
    }

    public func accountState() throws(SyncError) -> SyncAccountState {
        try SyncAccountState.decode(try call(.account))
    }

    /// Writes a batch; on a conflict, throws `.conflict` with the records' current versions.
    public func push(_ push: SyncPush) throws(SyncFailure) -> Int64 {
        let body = try callDetailed(.push, push.encoded())
        var reader = SyncReader(body, "a push's answer")
        do throws(SyncError) {
            let first = try reader.signed()
            try reader.end()
            guard first > 0, UInt64(first) < TrustView.bound else {
                throw SyncError(.malformed, "the server's answer to a push is out of bounds")
            }
            return first
        } catch { throw SyncFailure(error) }
    }

    /// Waits (at most `timeout`, under 50 seconds) until the account's log passes `seq`; returns the
    /// log's last sequence number.
    public func waitForChange(after seq: Int64, timeout: Duration) throws(SyncError) -> Int64 {
        var writer = ByteWriter()
        writer.write(seq)
        writer.write(UInt32(clamping: timeout.components.seconds * 1000))
        var reader = SyncReader(try call(.wait, writer.data), "a wait's answer")
        let last = try reader.signed()
        try reader.end()
        return last
    }

    public func pull(after seq: Int64, limit: Int = 1_000) throws(SyncError) -> SyncPullPage {
        var writer = ByteWriter()
        writer.write(seq)
        writer.writeCount(limit)
        return try SyncPullPage.decode(try call(.pull, writer.data))
    }
}

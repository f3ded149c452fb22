import CProcessControl
import FoundationEssentials
import KeychainCore
import KeychainWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The keychain daemon as a `KeychainService`: each request is a frame to `securityd` over its Unix
/// socket and the answer a frame back, with exactly the values and errors the embedded engine gives.
///
/// Connections are kept open between calls and shared by threads one at a time (a few idle ones are
/// kept). A daemon that is not there is `.notAvailable` at once; one that does not accept within a
/// second, or stalls in the middle of an answer, is `.notAvailable` too. The client never falls back
/// to opening the store itself.
public final class DaemonKeychainService: KeychainService {
    public let socketPath: String
    private let idle = Mutex<[DaemonConnection]>([])
    private let nextID = Atomic<UInt32>(1)
    /// How long the daemon may take to answer: unlock runs a deliberately slow key derivation, and a
    /// delay after failed passcodes is answered at once, so this only bounds a daemon that hangs.
    private let answerTimeout: Duration

    public init(socketPath: String, answerTimeout: Duration = .seconds(60)) {
        self.socketPath = socketPath
        self.answerTimeout = answerTimeout
    }

    public func perform(_ request: KeychainRequest) throws -> KeychainAnswer { try send(.keychain(request)) }

    public func administer(_ request: KeychainAdminRequest) throws -> KeychainAnswer { try send(.admin(request)) }

    /// A backup or a restore sends progress frames before its answer: each is handed to `progress`.
    public func administer(_ request: KeychainAdminRequest, progress: @escaping (_ done: Int, _ total: Int) -> Void)
        throws -> KeychainAnswer
    {
        try send(.admin(request), progress: progress)
    }

    private func send(_ request: WireRequest, progress: ((Int, Int) -> Void)? = nil) throws -> KeychainAnswer {
        var connection = try takeConnection()
        let id = nextID.add(1, ordering: .relaxed).oldValue
        var answer: Data
        // Wiped once sent: a request may carry a passcode or a secret.
        var frame = WireCodec.frame(request, id: id)
        defer { frame.resetBytes(in: 0..<frame.count) }
        var sent = false
        if connection.wasKept {
            do {
                try connection.stream.writeFrame(frame, passing: request.passedDescriptor, stall: .seconds(1))
                sent = true
            } catch .closed {
                // A kept connection the daemon has closed since (it restarted, or timed the connection
                // out): nothing of the request was delivered, so it goes once more on a new connection.
                connection.close()
                connection = try DaemonConnection(path: socketPath)
            } catch {
                connection.close()
                throw KeychainError.notAvailable("the keychain daemon at \(socketPath) \(Self.explain(error))")
            }
        }
        do {
            if !sent { try connection.stream.writeFrame(frame, passing: request.passedDescriptor, stall: .seconds(1)) }
            // A backup or a restore takes as long as the keychain is large: no deadline for its answer
            // (the daemon is there; it took the request).
            while true {
                answer = try connection.stream.readFrame(
                    idle: request.passedDescriptor == nil ? answerTimeout : nil, stall: .seconds(1))
                // Nothing a daemon passes back is used.
                for descriptor in connection.stream.takePassedDescriptors() { DescriptorReaper.close(descriptor) }
                guard WireCodec.isProgress(answer) else { break }
                // How far this request has come, before its answer: shown if asked for, never taken for it.
                // Only a backup or a restore has any: for another request it is a daemon to stop listening to.
                guard request.reportsProgress else { throw WireError("progress for a request that has none") }
                let told = try WireCodec.progress(from: answer)
                guard told.id == id else { throw WireError("progress of another request") }
                progress?(told.done, told.total)
            }
        } catch let error as WireError {
            connection.close()
            throw KeychainError.notAvailable("the keychain daemon sent a bad frame: \(error.reason)")
        } catch {
            connection.close()
            throw KeychainError.notAvailable("the keychain daemon at \(socketPath) \(Self.explain(error))")
        }
        let decoded: (id: UInt32, answer: Result<KeychainAnswer, KeychainError>)
        defer { answer.resetBytes(in: 0..<answer.count) }
        do {
            decoded = try WireCodec.answer(from: answer)
        } catch {
            connection.close()
            throw KeychainError.notAvailable("the keychain daemon sent a bad answer: \(error.reason)")
        }
        guard decoded.id == id else {
            connection.close()
            // Id 0 carries the daemon's refusal of a frame it could not read.
            if case .failure(let error) = decoded.answer { throw error }
            throw KeychainError.notAvailable("the keychain daemon answered another request")
        }
        connection.answered()
        giveBack(connection)
        return try decoded.answer.get()
    }

    /// Closes the idle connections (a process about to exit need not; the daemon sees them close).
    public func closeIdleConnections() {
        let closing = idle.withLock { connections in
            defer { connections = [] }
            return connections
        }
        for connection in closing { connection.close() }
    }

    private func takeConnection() throws -> DaemonConnection {
        if let kept = idle.withLock({ $0.popLast() }) {
            kept.wasKept = true
            return kept
        }
        return try DaemonConnection(path: socketPath)
    }

    private func giveBack(_ connection: DaemonConnection) {
        let kept = idle.withLock { connections in
            guard connections.count < 4 else { return false }
            connections.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    private static func explain(_ error: any Error) -> String {
        switch error as? FrameStream.Failure {
        case .closed?, .broken?: "closed the connection (it stopped, or refused this process)"
        case .timedOut?: "did not answer in time"
        case .malformed(let reason)?: "sent a bad frame: \(reason.reason)"
        case .refused?: "refused a frame"
        case nil: "failed: \(error)"
        }
    }
}

/// One connection to the daemon, used by one thread at a time.
final class DaemonConnection: @unchecked Sendable {
    // The stream is set once, and the connection used by one thread at a time (the service's pool hands
    // it over under its lock); `close` is called once, by the thread holding it.
    let stream: FrameStream
    /// Whether it was used before and kept: then a send the daemon refuses as closed was never delivered.
    var wasKept = false

    /// Connects without blocking for more than a second (a daemon whose backlog is full, or that is
    /// stopped, does not accept).
    ///
    /// A daemon of another user (the system daemon) identifies only a process that made itself
    /// non-dumpable: otherwise another process of its user could attach to it, read its memory or take
    /// this connection's descriptor (`pidfd_getfd`), and speak to the daemon as this program. So the
    /// process is made non-dumpable before it connects to one. A daemon running as this same user (a
    /// per-user daemon, not root) cannot look into a non-dumpable process at all, so for it the process
    /// stays as it is: that daemon does not protect against other processes of the user anyway. No
    /// socket, no daemon to connect to: the process stays as it is too, so that a try made before a
    /// per-user daemon has started leaves it one that daemon can identify.
    init(path: String) throws {
        var socket = stat()
        if lstat(path, &socket) == 0, !DaemonOwner.runsAsThisUser(socketAt: path) { _ = process_control_forbid_dumps() }
        var descriptor = try Self.connect(path: path)
        let server = try Self.checkServer(descriptor, path: path)
        if !DaemonOwner.isThisUser(server), process_control_is_dumpable() != 0 {
            // The socket's owner is not the daemon's user (a socket made by another program): connect
            // again, non-dumpable, so that the daemon can identify this process.
            Glibc.close(descriptor)
            _ = process_control_forbid_dumps()
            descriptor = try Self.connect(path: path)
            _ = try Self.checkServer(descriptor, path: path)
        }
        stream = FrameStream(descriptor: descriptor)
    }

    /// Most answers (a lookup) come within tens of microseconds: polling for them is cheaper than
    /// being woken. Not on a connection's first request: the daemon identifies the process before it
    /// answers, which takes longer than a poll, and a command that makes one request and exits would
    /// only pay for finding how many processors it may poll on.
    func answered() {
        stream.pollBeforeSleeping = .microseconds(100)
    }

    private static func connect(path: String) throws -> Int32 {
        var address = sockaddr_un()
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw KeychainError.notAvailable("the socket path \(path) is too long")
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let descriptor = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw KeychainError.notAvailable("cannot make a socket (errno \(errno))") }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result == 0 { return descriptor }
        let error = errno
        if error == EINPROGRESS || error == EAGAIN {
            var entry = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            var pending: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if poll(&entry, 1, 1000) == 1, getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &pending, &length) == 0,
                pending == 0
            {
                return descriptor
            }
            Glibc.close(descriptor)
            throw KeychainError.notAvailable("the keychain daemon at \(path) did not accept within a second")
        }
        Glibc.close(descriptor)
        throw KeychainError.notAvailable(
            "the keychain daemon at \(path) is not running (\(String(cString: strerror(error))))")
    }

    /// The uid of the process serving the connection. The system daemon's socket must be served by
    /// root or by a user of its own: a server of the client's own uid there is one of the client's
    /// processes standing in for it (it would collect passcodes and secrets).
    private static func checkServer(_ descriptor: Int32, path: String) throws -> uid_t {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard process_control_peer_credentials(descriptor, &pid, &uid, &gid) == 0 else {
            Glibc.close(descriptor)
            throw KeychainError.notAvailable("cannot tell who serves \(path)")
        }
        if path == KeychainLocations.systemSocket, uid != 0, uid == getuid() {
            Glibc.close(descriptor)
            throw KeychainError.notAvailable(
                "\(path) is served by a process of this user, not by the system daemon; refused")
        }
        return uid
    }

    func close() { Glibc.close(stream.descriptor) }
}

/// Whose daemon a socket leads to, for deciding whether this process must be non-dumpable to be
/// identified (see `DaemonConnection.init`).
public enum DaemonOwner {
    /// Whether `uid` is this process's own user, other than root (root may look into any process).
    static func isThisUser(_ uid: uid_t) -> Bool {
        uid == getuid() && uid != 0
    }

    /// Whether the socket at `path` belongs to this process's own user (not root): a socket file is
    /// made by the daemon that listens on it, or by the user's own service manager for it. False
    /// for the system daemon's socket whoever owns it.
    public static func runsAsThisUser(socketAt path: String) -> Bool {
        guard path != KeychainLocations.systemSocket else { return false }
        var info = stat()
        return lstat(path, &info) == 0 && isThisUser(info.st_uid)
    }
}

import CProcessControl
import Foundation
import KeychainCore
import KeychainKeybag
import KeychainWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's socket: accepts connections, identifies each peer, and serves each on a thread of its
/// own (`ConnectionThreads`), so a client that is slow, stalls mid-frame or never sends anything holds
/// up only itself.
public final class DaemonServer: Sendable {
    public let daemon: KeychainDaemon
    private let listener: Int32
    /// Whether systemd passed the listener: then it is systemd's too, and stays open and listening
    /// when this daemon stops (connections queue there until systemd starts the daemon again).
    private let listenerIsInherited: Bool
    /// A pipe whose read end wakes the accept loop when `stop` writes to it.
    private let wake: (read: Int32, write: Int32)
    private let stopping = Atomic<Bool>(false)
    /// How many connections are handling a request now.
    private let handling = Atomic<Int>(0)
    private let sessionFollower = Mutex<SessionLockFollower?>(nil)
    /// Open connections (their descriptors), so that a stop can end their waits, and how many each uid
    /// has open, so that no one user can take every slot.
    private let open = Mutex<(connections: Set<Int32>, perUID: [uid_t: Int])>(([], [:]))
    private let drained = Condition()
    /// Bytes of large frames held at once, per uid.
    private let largeFrames = FrameBudget()
    /// A thread for each connection, kept a while for the next when its connection ends.
    private let connectionThreads = ConnectionThreads(stackSize: 1 << 20)

    /// Connections one uid may hold: all of them for a user's own daemon; an eighth for each user of the
    /// system daemon.
    private var perUIDLimit: Int {
        daemon.configuration.mode == .user
            ? daemon.configuration.maximumConnections : max(daemon.configuration.maximumConnections / 8, 1)
    }

    /// Takes the socket systemd passed (socket activation), else binds the configured path (see
    /// `SocketFile.listen`); fails when another daemon already serves it.
    public init(daemon: KeychainDaemon) throws {
        self.daemon = daemon
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw KeychainError.notAvailable("cannot make a pipe (errno \(errno))") }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        wake = (ends[0], ends[1])
        do {
            if let inherited = try SocketFile.inherited() {
                listener = inherited
                listenerIsInherited = true
                DaemonLog.info("using the socket systemd passed")
            } else {
                listener = try SocketFile.listen(
                    at: daemon.configuration.socketPath, forEveryone: daemon.configuration.mode == .system)
                listenerIsInherited = false
            }
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
    }

    deinit {
        close(wake.read)
        close(wake.write)
    }

    /// Accepts connections until `stop` is called, then closes this daemon's descriptor of the listening
    /// socket. Returns false when it stopped because accepting failed for good (the daemon should then
    /// exit with an error, so that its supervisor restarts it), true after `stop`.
    @discardableResult
    public func run() -> Bool {
        DaemonLog.info(
            "listening on \(daemon.configuration.socketPath) (\(daemon.configuration.mode.rawValue) mode\(daemon.configuration.development ? ", development: entries trusted by path are honoured" : ""))"
        )
        if daemon.configuration.idleLock != nil { startIdleLockTimer() }
        if let bus = daemon.configuration.sessionBus {
            let follower = SessionLockFollower(address: bus) { [daemon] uid, reason in
                daemon.sessionLocked(uid: uid, reason: reason)
            }
            follower.start()
            sessionFollower.withLock { $0 = follower }
        }
        var refusedSinceLog = 0
        defer { close(listener) }
        while !stopping.load(ordering: .acquiring) {
            var waits = [
                pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&waits, 2, -1) < 0 {
                if errno == EINTR { continue }
                DaemonLog.error("waiting for connections failed (errno \(errno)); the daemon stops listening")
                return false
            }
            if waits[1].revents != 0 || stopping.load(ordering: .acquiring) { break }
            guard waits[0].revents & Int16(POLLIN) != 0 else {
                DaemonLog.error(
                    "the listening socket failed (poll events \(waits[0].revents)); the daemon stops listening")
                return false
            }
            let connection = process_control_accept(listener)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if stopping.load(ordering: .acquiring) { break }
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    DaemonLog.warning("cannot accept a connection (errno \(errno)); waiting")
                    usleep(100_000)
                    continue
                }
                if errno == EAGAIN { continue }
                DaemonLog.error("accept failed (errno \(errno)); the daemon stops listening")
                return false
            }
            let acceptedAt = BootClock.now
            var pid: Int32 = 0
            var uid: UInt32 = 0
            var gid: UInt32 = 0
            guard process_control_peer_credentials(connection, &pid, &uid, &gid) == 0 else {
                close(connection)
                continue
            }
            let limit = perUIDLimit
            let admitted = open.withLock { open in
                guard open.connections.count < daemon.configuration.maximumConnections,
                    open.perUID[uid, default: 0] < limit
                else { return false }
                open.connections.insert(connection)
                open.perUID[uid, default: 0] += 1
                return true
            }
            guard admitted else {
                close(connection)
                refusedSinceLog += 1
                if refusedSinceLog == 1 || refusedSinceLog % 1000 == 0 {
                    DaemonLog.warning(
                        "connection limit reached (uid \(uid): \(limit) at most, \(daemon.configuration.maximumConnections) in all); closed \(refusedSinceLog) so far"
                    )
                }
                continue
            }
            refusedSinceLog = 0
            let peerUID = uid
            let started = connectionThreads.run { [self] in serve(connection, uid: peerUID, acceptedAt: acceptedAt) }
            if !started {
                // Out of threads (or memory for one): the connection is given up, its slot freed.
                DaemonLog.warning("cannot start a thread for a connection of uid \(uid); closed")
                release(connection, uid: peerUID)
            }
        }
        return true
    }

    /// Stops accepting, lets every request already read finish and be answered, and returns when all
    /// connections are closed (or after `deadline`). The databases are closed last.
    public func stop(deadline: Duration = .seconds(10)) {
        stopping.store(true, ordering: .releasing)
        sessionFollower.withLock { $0?.stop() }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        // Ends the wait of every connection between requests; a request already read is still answered.
        // Under the lock, where connections are also closed, so no descriptor shut down here can have
        // been reused for another file meanwhile.
        open.withLock { open in
            for connection in open.connections { shutdown(connection, Int32(SHUT_RD)) }
        }
        let finished = drained.wait(until: deadline) { open.withLock { $0.connections.isEmpty } }
        if !finished { DaemonLog.warning("connections still open at the stop deadline; stopping anyway") }
        daemon.close()
    }

    /// Closes a connection and frees its slot.
    private func release(_ connection: Int32, uid: uid_t) {
        open.withLock { open in
            close(connection)
            _ = open.connections.remove(connection)
            open.perUID[uid, default: 1] -= 1
            if open.perUID[uid] == 0 { open.perUID[uid] = nil }
        }
        drained.signal()
    }

    private func serve(_ connection: Int32, uid: uid_t, acceptedAt: UInt64) {
        defer { release(connection, uid: uid) }
        let peer: PeerProcess
        do {
            peer = try PeerProcess(socket: connection, acceptedAt: acceptedAt)
        } catch {
            DaemonLog.warning("connection closed: \(error)")
            return
        }
        guard daemon.admits(uid: peer.uid) else {
            DaemonLog.warning(
                "connection from pid \(peer.pid) uid \(peer.uid) refused: this daemon serves uid \(getuid()) only")
            return
        }
        let caller = CallerIdentity(
            peer: peer, connection: connection, requiringUndumpable: daemon.configuration.mode == .system)
        serveFrames(on: connection, as: caller)
    }

    /// Requests from one identified connection, answered until it closes, times out, sends a bad frame
    /// or changes its executable. Tests call this over a socket pair with an identity of their own.
    func serveFrames(on connection: Int32, as caller: any PeerIdentity) {
        let stream = FrameStream(descriptor: connection)
        let configuration = daemon.configuration
        while true {
            // A client's next request often follows its answer at once (an app reading several items):
            // it is polled for while no other connection has a request in hand, so that polling never
            // takes a core from another client's work.
            stream.pollBeforeSleeping = handling.load(ordering: .relaxed) == 0 ? .microseconds(100) : .zero
            var frame: Data
            var held = 0
            let registered = daemon.isRegisteredApp(caller)
            defer { if held > 0 { largeFrames.release(held, uid: caller.uid, registered: registered) } }
            do {
                frame = try stream.readFrame(
                    idle: configuration.idleTimeout, stall: configuration.stallTimeout,
                    maximumPayload: registered ? WireFormat.maximumPayload : KeychainDaemon.unregisteredFrameLimit
                ) { size in
                    guard largeFrames.reserve(size, uid: caller.uid, registered: registered) else { return false }
                    held = size
                    return true
                }
            } catch {
                switch error {
                case .closed: break
                case .timedOut: DaemonLog.info("pid \(caller.pid): connection timed out; closed")
                case .broken: DaemonLog.info("pid \(caller.pid): connection ended in the middle of a frame; closed")
                case .malformed(let reason): refuse(caller, stream, reason)
                case .refused:
                    DaemonLog.warning("pid \(caller.pid): large requests over the daemon's budget; connection closed")
                    let busy = KeychainError.notAvailable(
                        "the daemon holds too many large requests at once; try again")
                    try? stream.writeFrame(WireCodec.frame(.failure(busy), id: 0), stall: .milliseconds(100))
                }
                return
            }
            // The frame may carry a passcode or a secret: wiped once decoded or refused.
            defer { frame.resetBytes(in: 0..<frame.count) }
            // A descriptor passed beside the frame is the caller's file for this request (a backup or a
            // restore): put in where the request names one, closed in every other case.
            // Closed by the reaper thread: a close can wait as long as the sender likes.
            let passed = stream.takePassedDescriptors()
            var opened: Int32?
            defer { if let opened { DescriptorReaper.close(opened) } }
            var decoded: (id: UInt32, request: WireRequest)
            do {
                decoded = try WireCodec.request(from: frame)
            } catch {
                for descriptor in passed { DescriptorReaper.close(descriptor) }
                refuse(caller, stream, error)
                return
            }
            // Exactly one descriptor for a request that names one, none for any other: our client never
            // does otherwise, so anything else is a client to stop listening to.
            guard (decoded.request.passedDescriptor != nil) == (passed.count == 1), passed.count <= 1 else {
                for descriptor in passed { DescriptorReaper.close(descriptor) }
                refuse(caller, stream, WireError("a request came with descriptors it does not name"))
                return
            }
            var checkedFile: Result<Void, KeychainError> = .success(())
            if let descriptor = passed.first {
                decoded.request = decoded.request.receiving(descriptor)
                opened = descriptor
                checkedFile = PassedFile.check(descriptor, for: decoded.request, from: caller)
            }
            if caller.hasChangedExecutable {
                DaemonLog.warning(
                    "pid \(caller.pid) uid \(caller.uid) runs another executable than when it connected; connection closed"
                )
                return
            }
            handling.add(1, ordering: .relaxed)
            // A passed file that will not do is refused before any policy runs (a passcode is not asked for
            // a request that cannot be served).
            let answer: Result<KeychainAnswer, KeychainError>
            let progress = ProgressFrames(stream: stream, id: decoded.id, stall: configuration.stallTimeout)
            switch checkedFile {
            case .success: answer = daemon.handle(decoded.request, from: caller, progress: progress.report)
            case .failure(let error): answer = .failure(error)
            }
            handling.subtract(1, ordering: .relaxed)
            if progress.broken {
                DaemonLog.info("pid \(caller.pid): its progress could not be delivered; closed without an answer")
                return
            }
            var reply = Self.deliverable(WireCodec.frame(answer, id: decoded.id), id: decoded.id)
            defer { reply.resetBytes(in: 0..<reply.count) }
            do {
                try stream.writeFrame(reply, stall: configuration.stallTimeout)
            } catch {
                DaemonLog.info("pid \(caller.pid): the answer could not be delivered; closed")
                return
            }
            if stopping.load(ordering: .acquiring) { return }
        }
    }

    /// The reply, or, when it holds more than the protocol lets a client decode (more values or entries
    /// than its limits: a search of thousands of items at once), a failure that says so. The client would
    /// otherwise refuse the answer and take the daemon for broken. Only large replies are checked.
    static func deliverable(_ reply: Data, id: UInt32) -> Data {
        guard reply.count > 64 << 10 else { return reply }
        do {
            _ = try WireCodec.answer(from: reply)
            return reply
        } catch {
            var refused = reply
            refused.resetBytes(in: 0..<refused.count)
            return WireCodec.frame(
                .failure(
                    .invalidParameter(
                        "the answer is more than the daemon's protocol carries (\(error.reason)): ask for fewer items (kSecMatchLimit)"
                    )), id: id)
        }
    }

    /// Answers a frame that cannot be trusted with a failure, then the connection is closed.
    private func refuse(_ peer: any PeerIdentity, _ stream: FrameStream, _ error: WireError) {
        DaemonLog.warning("pid \(peer.pid) uid \(peer.uid): \(error); connection closed")
        let failure = KeychainError.invalidParameter("the daemon could not read the request: \(error.reason)")
        try? stream.writeFrame(WireCodec.frame(.failure(failure), id: 0), stall: .milliseconds(100))
    }

    private func startIdleLockTimer() {
        let thread = Thread { [self] in
            while !stopping.load(ordering: .acquiring) {
                sleep(1)
                daemon.lockIfIdle()
            }
        }
        thread.start()
    }
}

import CProcessControl
import Foundation
import KeychainCore
import KeychainKeybag
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's listening socket file.
enum SocketFile {
    /// The listening socket systemd passed (socket activation: `LISTEN_PID` is this process and
    /// `LISTEN_FDS` is 1, the socket being descriptor 3), or nil. The variables are removed, so that
    /// no child takes the socket for its own.
    static func inherited() throws -> Int32? {
        guard let pid = getenv("LISTEN_PID").flatMap({ pid_t(String(cString: $0)) }), pid == getpid(),
            let count = getenv("LISTEN_FDS").flatMap({ Int(String(cString: $0)) })
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard count == 1 else { throw KeychainError.notAvailable("systemd passed \(count) sockets; one is expected") }
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue) else {
            throw KeychainError.notAvailable("the socket systemd passed is not a stream socket")
        }
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return 3
    }

    /// Binds and listens at `path`. The directory is made if missing: 0700 for a user's daemon, 0755 for
    /// the system's (every user's clients reach in); the socket is 0600, or 0666 for the system, where
    /// the daemon tells users apart by their uid. A socket file left by a daemon that ended is replaced;
    /// one that a live daemon answers on is not, and anything else at the path is refused.
    static func listen(at path: String, forEveryone: Bool) throws -> Int32 {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw KeychainError.invalidParameter("the socket path \(path) is too long for a Unix socket")
        }
        let directory = (path as NSString).deletingLastPathComponent
        try prepareDirectory(directory.isEmpty ? "." : directory, forEveryone: forEveryone)
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw KeychainError.notAvailable("\(path) exists and is not a socket")
            }
            guard info.st_uid == geteuid() else {
                throw KeychainError.notAvailable("\(path) belongs to uid \(info.st_uid), not to this daemon")
            }
            if answers(path) {
                throw KeychainError.notAvailable("another daemon already listens on \(path)")
            }
            unlink(path)
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw KeychainError.notAvailable("cannot make a socket (errno \(errno))") }
        var address = self.address(path)
        // The socket file is made 0600 from the start: no moment where another user could connect.
        let previousMask = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(previousMask)
        guard bound == 0 else {
            let error = errno
            close(descriptor)
            throw KeychainError.notAvailable("cannot bind \(path) (errno \(error))")
        }
        if forEveryone, chmod(path, 0o666) != 0 {
            let error = errno
            close(descriptor)
            throw KeychainError.notAvailable("cannot open \(path) to every user (errno \(error))")
        }
        guard Glibc.listen(descriptor, 512) == 0 else {
            let error = errno
            close(descriptor)
            throw KeychainError.notAvailable("cannot listen on \(path) (errno \(error))")
        }
        return descriptor
    }

    /// A directory that exists is used only if it is this daemon's user's and no one else can write to
    /// it, and it is never changed (it may be shared, like /tmp, or made by systemd); a missing one is
    /// made 0700, then opened to 0755 for the system daemon, whose clients of every user reach in.
    private static func prepareDirectory(_ directory: String, forEveryone: Bool) throws {
        var info = stat()
        if lstat(directory, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid(), info.st_mode & 0o022 == 0 else {
                throw KeychainError.notAvailable(
                    "the socket's directory \(directory) must be a directory of this daemon's user that no one else can write to (it was left as it is)"
                )
            }
            do {
                _ = try SecureFiles.trustedPath(directory)
            } catch {
                throw KeychainError.notAvailable("cannot use the socket's directory: \(error)")
            }
            return
        }
        do {
            let made = try SecureFiles.ensureDirectory(directory)
            if forEveryone, chmod(made, 0o755) != 0 {
                throw KeychainError.notAvailable(
                    "cannot open the socket's directory \(made) to every user (errno \(errno))")
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError.notAvailable("cannot use the socket's directory: \(error)")
        }
    }

    static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        return address
    }

    /// Whether a daemon accepts connections at `path` now.
    private static func answers(_ path: String) -> Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        var address = address(path)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}

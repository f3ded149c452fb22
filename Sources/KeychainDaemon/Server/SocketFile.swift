import CProcessControl
import Foundation
import KeychainCore
import KeychainKeybag

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's listening socket file.
enum SocketFile {
    /// Binds and listens at `path`. The directory is made if missing: 0700 for a user's daemon, 0755 for
    /// the system's (every user's clients reach in); the socket is 0600, or 0666 for the system, where
    /// the daemon tells users apart by their uid. A socket file left by a daemon that ended is replaced;
    /// one that a live daemon answers on is not, and anything else at the path is refused.
    static func listen(at path: String, forEveryone: Bool) throws -> Int32 {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw KeychainError.invalidParameter("the socket path \(path) is too long for a Unix socket")
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            let made = try SecureFiles.ensureDirectory(directory.isEmpty ? "." : directory)
            if forEveryone { chmod(made, 0o755) }
        } catch {
            throw KeychainError.notAvailable("cannot use the socket's directory: \(error)")
        }
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
        if forEveryone { chmod(path, 0o666) }
        guard Glibc.listen(descriptor, 512) == 0 else {
            let error = errno
            close(descriptor)
            throw KeychainError.notAvailable("cannot listen on \(path) (errno \(error))")
        }
        return descriptor
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

import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// File operations with the keychain's rules: directories 0700, files 0600, replaced atomically and
/// fsync'd so a crash leaves either the old file or the new one, never a torn one.
public enum SecureFiles {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let operation: String
        public let path: String
        public let errno: Int32

        public init(operation: String, path: String, errno: Int32) {
            self.operation = operation
            self.path = path
            self.errno = errno
        }

        public var description: String { "\(operation) \(path): \(String(cString: strerror(errno)))" }
    }

    /// Creates `path` (and missing parents) as a 0700 directory; an existing directory of ours is
    /// narrowed to 0700. Fails if `path` exists and is not a directory.
    public static func ensureDirectory(_ path: String) throws(Failure) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw Failure(operation: "not a directory:", path: path, errno: ENOTDIR)
            }
            if info.st_uid == geteuid(), info.st_mode & 0o077 != 0 { _ = chmod(path, 0o700) }
            guard access(path, R_OK | W_OK | X_OK) == 0 else {
                throw Failure(operation: "access", path: path, errno: errno)
            }
            return
        }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path, stat(parent, &info) != 0 {
            try ensureParent(parent)
        }
        if mkdir(path, 0o700) != 0, errno != EEXIST { throw Failure(operation: "mkdir", path: path, errno: errno) }
        _ = chmod(path, 0o700)
    }

    /// Parents of the keychain directory get ordinary permissions: only the keychain directory is private.
    private static func ensureParent(_ path: String) throws(Failure) {
        var info = stat()
        if stat(path, &info) == 0 { return }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { try ensureParent(parent) }
        if mkdir(path, 0o755) != 0, errno != EEXIST { throw Failure(operation: "mkdir", path: path, errno: errno) }
    }

    /// The whole file, or nil if it does not exist.
    public static func read(_ path: String) throws(Failure) -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw Failure(operation: "open", path: path, errno: errno)
        }
        defer { close(descriptor) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = Glibc.read(descriptor, &buffer, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(operation: "read", path: path, errno: errno)
            }
            if count == 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }

    /// Replaces `path` with `data`: write a 0600 temporary, fsync it, rename it over, fsync the directory.
    public static func writeAtomically(_ data: Data, to path: String) throws(Failure) {
        let temporary = path + ".tmp-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(operation: "create", path: temporary, errno: errno) }
        var failure: Failure?
        data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, base + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = Failure(operation: "write", path: temporary, errno: errno)
                    return
                }
                offset += written
            }
        }
        if failure == nil, fsync(descriptor) != 0 {
            failure = Failure(operation: "fsync", path: temporary, errno: errno)
        }
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw failure
        }
        guard rename(temporary, path) == 0 else {
            let error = Failure(operation: "rename", path: path, errno: errno)
            unlink(temporary)
            throw error
        }
        syncDirectory(of: path)
    }

    /// Makes a rename or create in the directory durable.
    public static func syncDirectory(of path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// Runs `body` holding an exclusive advisory lock on `path` (created 0600), which orders
    /// read-modify-write cycles on the keybag between processes.
    public static func withExclusiveLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(operation: "open", path: path, errno: errno) }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Failure(operation: "flock", path: path, errno: errno) }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    /// Identity of the file's current contents (inode, size, modification time), or nil if missing.
    /// A cheap way to notice that another process replaced it.
    public static func identity(of path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileIdentity(
            inode: UInt64(info.st_ino), size: Int64(info.st_size), seconds: Int64(info.st_mtim.tv_sec),
            nanoseconds: Int64(info.st_mtim.tv_nsec))
    }

    /// Permission bits of `path`, for checks and tests.
    public static func permissions(of path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_mode & 0o7777)
    }
}

public struct FileIdentity: Equatable, Sendable {
    let inode: UInt64
    let size: Int64
    let seconds: Int64
    let nanoseconds: Int64
}

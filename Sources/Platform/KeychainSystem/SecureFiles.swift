import FoundationEssentials
import KeychainBytes
import KeychainCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// File operations with the keychain's rules: directories 0700 and files 0600, owned by the caller and
/// never reached through a symbolic link; files replaced atomically and fsync'd, so a crash leaves
/// either the old file or the new one, never a torn one.
///
/// The ownership checks stop another local user who prepared the keychain's place in advance (a
/// directory they own or can write, a file or symbolic link planted where the keychain will write).
/// They do not stop a process of the same user, which may change these files at will.
public enum SecureFiles {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let operation: String
        public let path: String
        public let errno: Int32
        /// Why the file is refused, when no system call failed.
        public let reason: String?

        public init(operation: String, path: String, errno: Int32, reason: String? = nil) {
            self.operation = operation
            self.path = path
            self.errno = errno
            self.reason = reason
        }

        static func unsafe(_ path: String, _ reason: String) -> Failure {
            Failure(operation: "unsafe", path: path, errno: EPERM, reason: reason)
        }

        public var description: String {
            if let reason { return "\(operation) \(path): \(reason)" }
            return "\(operation) \(path): \(String(cString: strerror(errno)))"
        }
    }

    // MARK: Directories

    /// Makes `path` a private directory of the caller: created 0700 (with missing parents 0755) when it
    /// does not exist, narrowed to 0700 when it does. Refused when it is not a directory, belongs to
    /// someone else, or is reached through a directory or symbolic link that someone other than the
    /// caller or root could change (see `trustedPath`). Returns the path with every link resolved: use
    /// it, not `given`, so that nothing is looked up through a link again.
    @discardableResult
    public static func ensureDirectory(_ given: String) throws(Failure) -> String {
        let path = try trustedPath(given)
        var info = stat()
        if lstat(path, &info) != 0 {
            let parent = PathText.parent(path)
            if !parent.isEmpty, parent != path, stat(parent, &info) != 0 {
                try ensureParent(parent)
            }
            if mkdir(path, 0o700) != 0, errno != EEXIST {
                throw Failure(operation: "mkdir", path: given, errno: errno)
            }
            // Parents that another user created meanwhile (in a sticky directory such as /tmp) would let
            // them rename the new directory away: the walk is checked again now that every name exists.
            _ = try trustedPath(path)
        }
        guard lstat(path, &info) == 0 else { throw Failure(operation: "stat", path: given, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw Failure(operation: "not a directory:", path: given, errno: ENOTDIR)
        }
        guard info.st_uid == geteuid() else {
            throw .unsafe(given, "the directory belongs to user \(info.st_uid), not to this user (\(geteuid()))")
        }
        if info.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
            throw Failure(operation: "chmod", path: given, errno: errno)
        }
        guard access(path, R_OK | W_OK | X_OK) == 0 else {
            throw Failure(operation: "access", path: given, errno: errno)
        }
        return path
    }

    /// `path` made absolute with every symbolic link in it resolved, checked on the way: every
    /// directory a name is looked up in must belong to the caller or to root and be writable by no one
    /// else unless it is sticky (as /tmp is), and every symbolic link must belong to the caller or root.
    /// Otherwise someone else could rename an entry, swap a link, or point one elsewhere between the
    /// check and the use (a link planted in /tmp under the name a keychain will use). The part of the
    /// path that does not exist yet is kept as given.
    public static func trustedPath(_ path: String) throws(Failure) -> String {
        var absolute = path
        if !path.hasPrefix("/") {
            guard let directory = getcwd(nil, 0) else { throw Failure(operation: "getcwd", path: path, errno: errno) }
            absolute = String(cString: directory) + "/" + path
            free(directory)
        }
        var pending = Array(absolute.split(separator: "/").map(String.init).reversed())
        var resolved: [String] = []
        var links = 0
        var missing = false
        var trusted: Set<String> = []
        let me = geteuid()
        while let component = pending.popLast() {
            if component == "." { continue }
            if component == ".." {
                _ = resolved.popLast()
                continue
            }
            if missing {
                resolved.append(component)
                continue
            }
            let directory = "/" + resolved.joined(separator: "/")
            if !trusted.contains(directory) {
                try checkTrusted(directory: directory, owner: me)
                trusted.insert(directory)
            }
            let candidate = directory == "/" ? "/" + component : directory + "/" + component
            var info = stat()
            if lstat(candidate, &info) != 0 {
                guard errno == ENOENT else { throw Failure(operation: "stat", path: candidate, errno: errno) }
                missing = true
                resolved.append(component)
                continue
            }
            guard info.st_mode & S_IFMT == S_IFLNK else {
                resolved.append(component)
                continue
            }
            guard info.st_uid == me || info.st_uid == 0 else {
                throw .unsafe(candidate, "a symbolic link on the way belongs to user \(info.st_uid)")
            }
            links += 1
            guard links <= 40 else { throw Failure(operation: "resolve", path: path, errno: ELOOP) }
            var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = buffer.withUnsafeMutableBytes { bytes in
                guard let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self) else { return -1 }
                return readlink(candidate, base, bytes.count - 1)
            }
            guard count >= 0 else { throw Failure(operation: "readlink", path: candidate, errno: errno) }
            let target = String(decoding: buffer[0..<count], as: UTF8.self)
            if target.hasPrefix("/") { resolved = [] }
            pending += target.split(separator: "/").map(String.init).reversed()
        }
        return "/" + resolved.joined(separator: "/")
    }

    /// A directory names are looked up in: the caller's or root's, and writable by no one else unless
    /// sticky.
    private static func checkTrusted(directory: String, owner me: uid_t) throws(Failure) {
        var info = stat()
        guard stat(directory, &info) == 0 else { throw Failure(operation: "stat", path: directory, errno: errno) }
        guard info.st_uid == me || info.st_uid == 0 else {
            throw .unsafe(directory, "a directory on the way belongs to user \(info.st_uid)")
        }
        if info.st_mode & 0o022 != 0, info.st_mode & S_ISVTX == 0 {
            throw .unsafe(directory, "a directory on the way is writable by other users")
        }
    }

    /// Parents of the keychain directory get ordinary permissions: only the keychain directory is private.
    private static func ensureParent(_ path: String) throws(Failure) {
        var info = stat()
        if stat(path, &info) == 0 { return }
        let parent = PathText.parent(path)
        if !parent.isEmpty, parent != path { try ensureParent(parent) }
        if mkdir(path, 0o755) != 0, errno != EEXIST { throw Failure(operation: "mkdir", path: path, errno: errno) }
    }

    // MARK: Files

    /// Checks a file the keychain keeps without opening it: a regular file of the caller's, not a
    /// symbolic link; permissions wider than 0600 are narrowed. Returns false when it does not exist.
    ///
    /// For files another library opens (SQLite's database, log and shared memory): opening and closing
    /// one of those here would drop that library's locks on it.
    @discardableResult
    public static func checkPrivateFile(_ path: String) throws(Failure) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return false }
            throw Failure(operation: "stat", path: path, errno: errno)
        }
        try checkPrivate(info, path: path)
        if info.st_mode & 0o077 != 0, chmod(path, 0o600) != 0 {
            throw Failure(operation: "chmod", path: path, errno: errno)
        }
        return true
    }

    private static func checkPrivate(_ info: stat, path: String) throws(Failure) {
        guard info.st_mode & S_IFMT != S_IFLNK else {
            throw .unsafe(path, "a symbolic link stands where a file should be")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .unsafe(path, "not a regular file") }
        guard info.st_uid == geteuid() else {
            throw .unsafe(path, "the file belongs to user \(info.st_uid), not to this user (\(geteuid()))")
        }
    }

    /// Creates an empty 0600 file if none exists (never through a symbolic link); an existing one is
    /// checked as `checkPrivateFile` does, without being opened.
    public static func createPrivateFile(_ path: String) throws(Failure) {
        if try checkPrivateFile(path) { return }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            // Created by someone else meanwhile: judge theirs.
            if errno == EEXIST {
                try checkPrivateFile(path)
                return
            }
            throw Failure(operation: "create", path: path, errno: errno)
        }
        close(descriptor)
        syncDirectory(of: path)
    }

    /// The whole file, or nil if it does not exist. A symbolic link, someone else's file or a
    /// non-regular file is refused; a file of ours readable by others is narrowed to 0600.
    public static func read(_ path: String) throws(Failure) -> Data? {
        let descriptor = try openPrivate(path)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        defer { buffer.withUnsafeMutableBytes { SecureMemory.wipe($0) } }
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

    /// Opens a file of the keychain's for reading: -1 if it does not exist; refused when it is a symbolic
    /// link, not a regular file, or someone else's; narrowed to 0600 when others could read it.
    private static func openPrivate(_ path: String) throws(Failure) -> Int32 {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return -1 }
            if errno == ELOOP { throw .unsafe(path, "a symbolic link stands where a file should be") }
            throw Failure(operation: "open", path: path, errno: errno)
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let error = Failure(operation: "stat", path: path, errno: errno)
            close(descriptor)
            throw error
        }
        do {
            try checkPrivate(info, path: path)
        } catch {
            close(descriptor)
            throw error
        }
        if info.st_mode & 0o077 != 0, fchmod(descriptor, 0o600) != 0 {
            let error = Failure(operation: "chmod", path: path, errno: errno)
            close(descriptor)
            throw error
        }
        return descriptor
    }

    /// Replaces `path` with `data`: a new 0600 temporary (exclusive, never through a link), fsync'd,
    /// renamed over `path`, then the directory fsync'd.
    public static func writeAtomically(_ data: Data, to path: String) throws(Failure) {
        let temporary = try data.withUnsafeBytes { bytes in
            Result { () throws(Failure) in try writeTemporary(bytes, beside: path) }
        }.get()
        guard rename(temporary, path) == 0 else {
            let error = Failure(operation: "rename", path: path, errno: errno)
            unlink(temporary)
            throw error
        }
        syncDirectory(of: path)
    }

    /// Writes `bytes` to `path` only if nothing is there: the file appears whole or not at all, and when
    /// two processes race, one wins and the other gets false (and should read the winner's file).
    public static func createExclusively(_ bytes: SecureBytes, at path: String) throws(Failure) -> Bool {
        let temporary = try bytes.withUnsafeBytes { bytes in
            Result { () throws(Failure) in try writeTemporary(bytes, beside: path) }
        }.get()
        defer { unlink(temporary) }
        if link(temporary, path) != 0 {
            // EEXIST: another process created it first. ENOENT: that process, having read its root,
            // already swept this temporary away as a leftover.
            if errno == EEXIST || errno == ENOENT { return false }
            throw Failure(operation: "link", path: path, errno: errno)
        }
        syncDirectory(of: path)
        return true
    }

    /// The whole of a small file of secrets (at most `limit` bytes) read straight into wiped memory, or
    /// nil if it does not exist; checked as `read` checks.
    public static func readSecret(_ path: String, limit: Int = 4096) throws(Failure) -> SecureBytes? {
        let descriptor = try openPrivate(path)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Failure(operation: "stat", path: path, errno: errno) }
        guard info.st_size <= limit else { throw .unsafe(path, "larger than a key file can be") }
        do {
            return try SecureBytes(count: Int(info.st_size)) { out in
                guard let base = out.baseAddress else { return }
                var offset = 0
                while offset < out.count {
                    let count = Glibc.read(descriptor, base + offset, out.count - offset)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else {
                        throw Failure(operation: "read", path: path, errno: count < 0 ? errno : EIO)
                    }
                    offset += count
                }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(operation: "read", path: path, errno: EIO)
        }
    }

    /// A new fsync'd 0600 file with `bytes`, named `path.tmp-<random>`, created exclusively so that
    /// nothing planted under that name (a link to another file) is ever written through.
    private static func writeTemporary(_ bytes: UnsafeRawBufferPointer, beside path: String) throws(Failure) -> String {
        var temporary = ""
        var descriptor: Int32 = -1
        for _ in 0..<8 {
            // Unpredictable, not secret: the system generator (the kernel's getrandom) does.
            var generator = SystemRandomNumberGenerator()
            temporary = path + ".tmp-" + Hex.encode(withUnsafeBytes(of: generator.next() as UInt64) { Array($0) })
            descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 || errno != EEXIST { break }
        }
        guard descriptor >= 0 else { throw Failure(operation: "create", path: temporary, errno: errno) }
        var failure: Failure?
        if let base = bytes.baseAddress {
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, base + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = Failure(operation: "write", path: temporary, errno: errno)
                    break
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
        return temporary
    }

    /// Removes temporaries of `path` left by processes killed while writing (their names are random, so
    /// nothing else would). Only where no write in progress can be hurt: under the lock that orders the
    /// writes (the keybag), or once the file exists for good (the device root).
    public static func removeStaleTemporaries(of path: String) {
        // A bare name is in the working directory.
        let parent = PathText.parent(path)
        let directory = parent.isEmpty ? "." : parent
        let prefix = PathText.lastComponent(path) + ".tmp-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(prefix)
        {
            unlink(PathText.join(directory, name))
        }
    }

    /// Makes a rename or create in the directory durable.
    public static func syncDirectory(of path: String) {
        let directory = PathText.parent(path)
        let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    // MARK: Locking

    /// Runs `body` holding an exclusive advisory lock on the directory `path` itself, which orders
    /// read-modify-write cycles on the keybag between processes.
    ///
    /// A lock file could be deleted while held, letting the next process lock a new file beside the
    /// holder; a directory cannot vanish while it holds the keychain's files. After locking, the path
    /// must still name the directory that was locked, or the lock is taken again.
    public static func withDirectoryLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        while true {
            let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { throw Failure(operation: "open", path: path, errno: errno) }
            defer { close(descriptor) }
            while flock(descriptor, LOCK_EX) != 0 {
                guard errno == EINTR else { throw Failure(operation: "flock", path: path, errno: errno) }
            }
            defer { flock(descriptor, LOCK_UN) }
            var held = stat()
            var named = stat()
            guard fstat(descriptor, &held) == 0 else { throw Failure(operation: "stat", path: path, errno: errno) }
            guard stat(path, &named) == 0, named.st_dev == held.st_dev, named.st_ino == held.st_ino else { continue }
            return try body()
        }
    }

    // MARK: Inspection

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

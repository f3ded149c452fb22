import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Where a backup is written: a new file (0600) beside `path` under a temporary name, renamed onto
/// `path` once complete and synced. Nothing is ever written through a link or into a directory at
/// `path`: the rename replaces a link itself, and fails on a directory; in a sticky directory such as
/// /tmp it fails on another user's file or link, which stays as it was.
public final class BackupTarget {
    public let path: String
    let temporary: String
    /// The new file, open for writing (0600, created exclusively, never through a link).
    public let descriptor: Int32
    private var done = false

    /// Creates the temporary file beside `path`.
    public init(path given: String) throws {
        guard !given.isEmpty else { throw KeychainError.invalidParameter("no backup file was named") }
        path = given
        var info = stat()
        if lstat(given, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            throw KeychainError.invalidParameter("\(given) is a directory: name the backup file")
        }
        let directory = PathText.parent(given)
        // The name's start only (a name may be up to 255 bytes, and the suffix needs room), then random
        // bytes that nobody can guess to plant a file in the way.
        let name = String(decoding: Array(PathText.lastComponent(given).utf8.prefix(200)), as: UTF8.self)
        let random = Hex.encode(try Random.bytes(8))
        temporary = (directory.isEmpty ? "" : directory + "/") + ".\(name).partial-\(random)"
        descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw KeychainError.ioError(
                "cannot create the backup file beside \(given): \(String(cString: strerror(errno)))")
        }
    }

    /// Puts the complete file at `path`.
    public func commit() throws {
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            done = true
            throw KeychainError.ioError("cannot put the backup at \(path): \(reason)")
        }
        done = true
        SecureFiles.syncDirectory(of: path)
    }

    /// Removes the partial file.
    public func abandon() {
        guard !done else { return }
        close(descriptor)
        unlink(temporary)
        done = true
    }

    deinit { abandon() }
}

/// A backup file opened for reading: a regular file, read from one descriptor throughout, so that the
/// file checked is the file restored.
final class BackupSource {
    let descriptor: Int32
    let size: Int

    convenience init(path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw errno == ENOENT
                ? KeychainError.invalidParameter("\(path) does not exist")
                : KeychainError.ioError("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        try self.init(owning: descriptor, name: path)
    }

    /// A copy of a descriptor someone else opened (and keeps).
    convenience init(duplicating given: Int32) throws {
        let descriptor = fcntl(given, F_DUPFD_CLOEXEC, 0)
        guard descriptor >= 0 else { throw KeychainError.invalidParameter("the backup file's descriptor is not open") }
        try self.init(owning: descriptor, name: "the backup file")
    }

    private init(owning descriptor: Int32, name path: String) throws {
        self.descriptor = descriptor
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(descriptor)
            throw KeychainError.invalidParameter("\(path) is not a regular file")
        }
        size = Int(info.st_size)
        guard size > 0 else {
            Glibc.close(descriptor)
            throw KeychainError.decode("\(path) is empty: not a keychain backup file")
        }
    }

    /// A reader from the start of the file.
    func input() -> BackupInput {
        lseek(descriptor, 0, SEEK_SET)
        return BackupInput(descriptor: descriptor, size: size)
    }

    /// `count` bytes at `offset`, for the summary at the end.
    func readAt(_ offset: Int, count: Int) throws -> Data {
        var data = Data(count: count)
        let read = data.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
        guard read == count else { throw KeychainError.decode("the backup file is truncated") }
        return data
    }

    func close() { Glibc.close(descriptor) }
}

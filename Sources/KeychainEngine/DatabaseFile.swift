import Foundation
import KeychainKeybag

#if canImport(Glibc)
    import Glibc
#endif

/// Checks on the database file made before SQLite opens it, so that a damaged file is reported and
/// left exactly as it is rather than "repaired" by a new header or journal.
enum DatabaseFile {
    struct Damaged: Error, CustomStringConvertible {
        let description: String
    }

    /// Fails if the file exists but is not an SQLite database, or is shorter than its header says.
    static func checkHeader(_ path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 100)) ?? Data()
        let size = (try? handle.seekToEnd()) ?? 0
        if size == 0 { return }
        guard header.count == 100, header.prefix(16) == Data("SQLite format 3\0".utf8) else {
            throw Damaged(description: "not an SQLite database (bad header)")
        }
        func bigEndian(_ offset: Int, _ count: Int) -> UInt64 {
            header[offset..<offset + count].reduce(0) { $0 << 8 | UInt64($1) }
        }
        var pageSize = bigEndian(16, 2)
        if pageSize == 1 { pageSize = 65536 }
        let pages = bigEndian(28, 4)
        // The in-header size is valid only when the change counter matches "version valid for".
        if bigEndian(24, 4) == bigEndian(92, 4), pages > 0, pageSize * pages > size {
            throw Damaged(description: "truncated: \(size) bytes, the header says \(pageSize * pages)")
        }
    }

    /// Creates an empty 0600 database file so SQLite never creates it with the umask's permissions
    /// (its -wal and -shm files copy the database's mode).
    static func createPrivately(_ path: String) throws {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SecureFiles.Failure(operation: "create", path: path, errno: errno)
        }
        fchmod(descriptor, 0o600)
        close(descriptor)
    }
}

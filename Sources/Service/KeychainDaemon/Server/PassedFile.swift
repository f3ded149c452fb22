import Foundation
import KeychainCore
import KeychainWire

#if canImport(Glibc)
    import Glibc
#endif

/// The checks on a file a client passed with a backup or a restore, made before the daemon touches it:
/// on a file system of the kernel's own that cannot stall the daemon (no FUSE mount, no pseudo-file
/// system), a regular file of the caller's, open the way the request needs it. The file system is read
/// from the kernel's tables (`/proc/self/fdinfo`, `/proc/self/mountinfo`), which asks nothing of the
/// file system itself, since a FUSE server can make even `fstat` wait.
enum PassedFile {
    /// Kernel file systems a backup may be on.
    static let fileSystems: Set<String> = [
        "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "jfs", "tmpfs", "overlay", "nfs", "nfs4", "vfat",
        "exfat", "ntfs3",
    ]

    static func check(_ descriptor: Int32, for request: WireRequest, from caller: any PeerIdentity) -> Result<
        Void, KeychainError
    > {
        let writing: Bool
        switch request {
        case .admin(.createBackup): writing = true
        case .admin(.restoreBackup): writing = false
        default: return .failure(.invalidParameter("this request takes no file"))
        }
        guard let fileSystem = fileSystem(of: descriptor), fileSystems.contains(fileSystem) else {
            return .failure(
                .invalidParameter(
                    "the backup file is on a file system the daemon does not use (\(fileSystem(of: descriptor) ?? "unknown")): put it on a local disk"
                ))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            return .failure(.invalidParameter("the backup file is not a regular file"))
        }
        guard caller.uid == 0 || info.st_uid == caller.uid else {
            return .failure(.invalidParameter("the backup file is not the caller's"))
        }
        let mode = fcntl(descriptor, F_GETFL) & O_ACCMODE
        guard mode == O_RDWR || mode == (writing ? O_WRONLY : O_RDONLY) else {
            return .failure(
                .invalidParameter(
                    writing ? "the backup file is not open for writing" : "the backup file is not open for reading"))
        }
        if writing, info.st_size != 0 || info.st_nlink != 1 {
            return .failure(.invalidParameter("a backup is written into a new, empty file"))
        }
        return .success(())
    }

    /// The type of the file system holding the open file, from the kernel's mount table.
    static func fileSystem(of descriptor: Int32) -> String? {
        guard let fdinfo = try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8),
            let mountLine = fdinfo.split(separator: "\n").first(where: { $0.hasPrefix("mnt_id:") }),
            let mountID = mountLine.split(whereSeparator: { $0 == "\t" || $0 == " " }).last,
            let mountinfo = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        else { return nil }
        for line in mountinfo.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.first == mountID, let separator = fields.firstIndex(of: "-"), separator + 1 < fields.count
            else { continue }
            return String(fields[separator + 1])
        }
        return nil
    }
}

#if canImport(Glibc)
    import Glibc
#endif

/// A file's identity for caching its digest: any change of contents changes the inode, size, or
/// change time (which no unprivileged process can set back).
///
/// Times are kept as seconds and nanoseconds apart: a file's owner may set its modification time to
/// any year, and a sum in nanoseconds would overflow.
struct ExecutableKey: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int
    let modifiedNanoseconds: Int
    let changedSeconds: Int
    let changedNanoseconds: Int

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedSeconds = info.st_mtim.tv_sec
        modifiedNanoseconds = info.st_mtim.tv_nsec
        changedSeconds = info.st_ctim.tv_sec
        changedNanoseconds = info.st_ctim.tv_nsec
    }
}

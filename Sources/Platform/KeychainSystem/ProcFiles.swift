import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// Files of `/proc`, which report no size and come a page at a time: read to their end, or a process
/// with many mappings shows only its first page of them.
public enum ProcFiles {
    /// The whole file at `path`, resolved against the directory `directory` (`AT_FDCWD`: the working
    /// directory, or an absolute path); nil when it cannot be opened or read.
    public static func read(_ path: String, in directory: Int32 = AT_FDCWD) -> Data? {
        let descriptor = openat(directory, path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var contents = Data()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return contents }
            contents.append(contentsOf: buffer[..<count])
        }
    }
}

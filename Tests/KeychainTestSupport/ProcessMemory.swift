import Foundation
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Looks through another process's writable memory (`/proc/<pid>/mem`; the test runs as root, which
/// may read a non-dumpable process) for a byte string: a secret or a passcode that should be gone.
public enum ProcessMemory {
    /// How many times `pattern` occurs in the writable mappings of `pid`; nil when they cannot be read.
    public static func occurrences(of pattern: [UInt8], in pid: Int32) -> Int? {
        occurrences(ofNeedle: pattern, spanning: pattern.count, in: pid) { _ in true }
    }

    /// How many places in the writable mappings of `pid` begin with `needle` and, over `length` bytes in
    /// all, satisfy `confirm` (given the place). A process looking through its own memory for a key it
    /// must not hold whole gives the key's first bytes as the needle and checks the rest itself.
    public static func occurrences(
        ofNeedle needle: [UInt8], spanning length: Int, in pid: Int32, confirm: (UnsafeRawPointer) -> Bool
    ) -> Int? {
        guard !needle.isEmpty, length >= needle.count,
            let maps = ProcFiles.read("/proc/\(pid)/maps").map({ String(decoding: $0, as: UTF8.self) })
        else { return nil }
        let memory = open("/proc/\(pid)/mem", O_RDONLY)
        guard memory >= 0 else { return nil }
        defer { close(memory) }
        let chunkSize = 4 << 20
        let pageSize = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { chunk.deallocate() }
        var found = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
            if fields.count >= 6, fields[5].hasPrefix("[v") { continue }  // [vvar], [vsyscall]
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt64(String(bounds[0]), radix: 16),
                let end = UInt64(String(bounds[1]), radix: 16)
            else { continue }
            var offset = start
            while offset < end {
                let wanted = Int(min(UInt64(chunkSize), end - offset))
                let count = pread(memory, chunk, wanted, off_t(Int64(bitPattern: offset)))
                // A page that cannot be read (a guard page inside the mapping, or one unmapped since the
                // map was read) ends the read short: the search goes on past it, not to the next mapping.
                guard count > 0 else {
                    offset += UInt64(pageSize)
                    continue
                }
                found += needle.withUnsafeBytes { bytes in
                    places(of: bytes, length: length, in: UnsafeRawBufferPointer(start: chunk, count: count), confirm)
                }
                // Chunks overlap by the length less one, so that nothing across a boundary is missed.
                offset += UInt64(count > length ? count - (length - 1) : count)
            }
        }
        return found
    }

    private static func places(
        of needle: UnsafeRawBufferPointer, length: Int, in haystack: UnsafeRawBufferPointer,
        _ confirm: (UnsafeRawPointer) -> Bool
    ) -> Int {
        guard let base = haystack.baseAddress, let pattern = needle.baseAddress, let first = needle.first else {
            return 0
        }
        var found = 0
        var position = 0
        while position + length <= haystack.count,
            let hit = memchr(base + position, Int32(first), haystack.count - position - length + 1)
        {
            if memcmp(hit, pattern, needle.count) == 0, confirm(UnsafeRawPointer(hit)) { found += 1 }
            position = base.distance(to: UnsafeRawPointer(hit)) + 1
        }
        return found
    }
}

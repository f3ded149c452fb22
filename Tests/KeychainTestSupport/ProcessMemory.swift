import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Looks through another process's writable memory (`/proc/<pid>/mem`; the test runs as root, which
/// may read a non-dumpable process) for a byte string: a secret or a passcode that should be gone.
public enum ProcessMemory {
    /// How many times `pattern` occurs in the writable mappings of `pid`; nil when they cannot be read.
    public static func occurrences(of pattern: [UInt8], in pid: Int32) -> Int? {
        guard !pattern.isEmpty, let maps = try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8) else {
            return nil
        }
        let memory = open("/proc/\(pid)/mem", O_RDONLY)
        guard memory >= 0 else { return nil }
        defer { close(memory) }
        let chunkSize = 4 << 20
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { chunk.deallocate() }
        var found = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
            if fields.count >= 6, fields[5].hasPrefix("[v") { continue }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt64(String(bounds[0]), radix: 16),
                let end = UInt64(String(bounds[1]), radix: 16)
            else { continue }
            var offset = start
            while offset < end {
                let length = Int(min(UInt64(chunkSize), end - offset))
                let count = pread(memory, chunk, length, off_t(Int64(bitPattern: offset)))
                guard count > 0 else { break }
                found += pattern.withUnsafeBytes { needle in
                    occurrences(of: needle, in: UnsafeRawBufferPointer(start: chunk, count: count))
                }
                // Chunks overlap by the pattern's length less one, so that nothing across a boundary is missed.
                let step = count > pattern.count ? count - (pattern.count - 1) : count
                offset += UInt64(step)
                if count < length { break }
            }
        }
        return found
    }

    private static func occurrences(of needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> Int {
        guard let base = haystack.baseAddress, let pattern = needle.baseAddress, let first = needle.first else {
            return 0
        }
        var found = 0
        var position = 0
        while position + needle.count <= haystack.count,
            let hit = memchr(base + position, Int32(first), haystack.count - position - needle.count + 1)
        {
            let index = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(hit, pattern, needle.count) == 0 { found += 1 }
            position = index + 1
        }
        return found
    }
}

import Foundation
import XCTest

@testable import KeychainDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's look at a caller's code, on this test process: a file mapped as code counts as the
/// system's only when the path the kernel shows names it unambiguously.
final class ForeignCodeTests: XCTestCase {
    func testCodeMappedFromAPathShowingABackslashIsForeign() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root: the mapped file must be root's to pass otherwise") }
        let peer = try PeerProcess(busPeer: getpid(), uid: geteuid())
        let executable = try XCTUnwrap(peer.executableKey())
        XCTAssertNil(peer.foreignCode(executable: executable), "this test process runs the system's code only")

        // A root-owned file no one else can write, in root's directories: the system's, but for its name.
        // The kernel would show a directory named "a<newline>" as "a\012", which is a name of its own.
        let base = FileManager.default.temporaryDirectory.path + "/foreign-code-\(getpid())"
        let directory = base + "/a\\012"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        chmod(base, 0o755)
        chmod(directory, 0o755)
        let file = directory + "/code.so"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data(repeating: 0xc3, count: 4096)))
        chmod(file, 0o644)

        let descriptor = open(file, O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        let mapping = mmap(nil, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, descriptor, 0)
        XCTAssertNotEqual(mapping, MAP_FAILED, "errno \(errno)")
        defer { munmap(mapping, 4096) }

        XCTAssertEqual(peer.foreignCode(executable: executable), file)
    }
}

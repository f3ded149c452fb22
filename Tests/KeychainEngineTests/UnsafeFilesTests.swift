import Foundation
import KeychainEngine
import KeychainKeybag
import KeychainSystem
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Another local user prepares the keychain's place before its owner first uses it: a directory they
/// own or can write, files or symbolic links where the keychain will write. Each is refused with
/// errSecNotAvailable and the cause logged; nothing is written through it.
final class UnsafeFilesTests: EngineTestCase {
    private var lines: LogCollector!

    override func setUpWithError() throws {
        try super.setUpWithError()
        keychain = nil
        try FileManager.default.removeItem(atPath: directory)
        lines = LogCollector()
        KeychainLog.setSink { [lines] in lines?.append($0) }
    }

    private var nobody: uid_t { 65534 }

    func testDirectoryOwnedBySomeoneElseIsRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to give a directory to another user")
        XCTAssertEqual(mkdir(directory, 0o777), 0)
        XCTAssertEqual(chown(directory, nobody, nobody), 0)
        assertError(.notAvailable("")) { _ = try open() }
        XCTAssertTrue(lines.all.contains { $0.contains("belongs to user 65534") }, "\(lines.all)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [], "nothing written there")
    }

    func testFilesOwnedBySomeoneElseAreRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to give a file to another user")
        for name in ["device-root", "keybag", "keychain.db", "keychain.db-wal"] {
            keychain = try open()
            keychain = nil
            let path = directory + "/" + name
            if !FileManager.default.fileExists(atPath: path) {
                _ = FileManager.default.createFile(atPath: path, contents: nil)
            }
            XCTAssertEqual(chown(path, nobody, nobody), 0)
            assertError(.notAvailable("")) { _ = try open() }
            XCTAssertTrue(lines.all.last?.contains("belongs to user 65534") ?? false, "\(name): \(lines.all)")
            XCTAssertEqual(chown(path, geteuid(), getegid()), 0)
        }
    }

    func testParentWritableByOthersIsRefused() throws {
        let parent = directory + "-shared"
        defer { try? FileManager.default.removeItem(atPath: parent) }
        XCTAssertEqual(mkdir(parent, 0o777), 0)
        XCTAssertEqual(chmod(parent, 0o777), 0)
        assertError(.notAvailable("")) { _ = try open(directory: parent + "/keychain") }
        XCTAssertTrue(lines.all.contains { $0.contains("writable by other users") }, "\(lines.all)")
        // Sticky, as /tmp is: others can no longer move our directory away.
        XCTAssertEqual(chmod(parent, 0o1777), 0)
        XCTAssertNoThrow(try open(directory: parent + "/keychain"))
    }

    func testSymbolicLinksPlantedForTheKeychainFilesAreNeverFollowed() throws {
        let victim = directory + "-victim"
        defer { try? FileManager.default.removeItem(atPath: victim) }
        let original = Data("the victim's own file".utf8)
        for name in ["device-root", "keybag", "keychain.db", "keychain.db-wal", "keychain.db-shm"] {
            try? FileManager.default.removeItem(atPath: directory)
            try original.write(to: URL(fileURLWithPath: victim))
            if name != "device-root" {
                keychain = try open()
                keychain = nil
                try? FileManager.default.removeItem(atPath: directory + "/" + name)
            } else {
                XCTAssertEqual(mkdir(directory, 0o700), 0)
            }
            XCTAssertEqual(symlink(victim, directory + "/" + name), 0)
            assertError(.notAvailable("")) { _ = try open() }
            XCTAssertTrue(lines.all.last?.contains("symbolic link") ?? false, "\(name): \(lines.all)")
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), original, name)
        }
    }

    func testPermissionsInsideTheDirectoryAreNarrowed() throws {
        keychain = try open()
        _ = try keychain.add(password("modes", "a"), client: client)
        keychain = nil
        XCTAssertEqual(chmod(directory, 0o755), 0)
        for name in ["device-root", "keybag", "keychain.db"] { XCTAssertEqual(chmod(directory + "/" + name, 0o644), 0) }
        keychain = try open()
        XCTAssertEqual(try readSecret("modes", "a"), "secret")
        XCTAssertEqual(SecureFiles.permissions(of: directory), 0o700)
        for name in ["device-root", "keybag", "keychain.db"] {
            XCTAssertEqual(SecureFiles.permissions(of: directory + "/" + name), 0o600, name)
        }
    }

    /// A process killed while creating the root leaves a temporary holding a root key: the next one to
    /// open the keychain removes it.
    func testALeftoverRootTemporaryIsRemoved() throws {
        keychain = try open()
        keychain = nil
        let leftover = directory + "/device-root.tmp-0123456789abcdef"
        XCTAssertTrue(FileManager.default.createFile(atPath: leftover, contents: Data(count: 53)))
        keychain = try open()
        XCTAssertFalse(FileManager.default.fileExists(atPath: leftover))
    }

    func testTemporaryFilesAreCreatedExclusively() throws {
        // Names an attacker could predict (the old `.tmp-<pid>`) hold a link to a victim's file: the
        // keychain must never write through it.
        let victim = directory + "-victim"
        defer { try? FileManager.default.removeItem(atPath: victim) }
        let original = Data("victim".utf8)
        try original.write(to: URL(fileURLWithPath: victim))
        XCTAssertEqual(mkdir(directory, 0o700), 0)
        for name in ["device-root", "keybag"] {
            XCTAssertEqual(symlink(victim, directory + "/\(name).tmp-\(getpid())"), 0)
        }
        keychain = try open()
        try keychain.setPasscode("1234", current: nil)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), original)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".tmp-") }
        // The keybag's stale temporaries are cleared under its lock; the root's planted link stays.
        XCTAssertEqual(leftovers, ["device-root.tmp-\(getpid())"])
    }
}

import Foundation
import KeychainEngine
import Security
import Synchronization
import XCTest

/// An outside review lost acknowledged writes: a second `Keychain` for the same directory opened and
/// closed the database file outside SQLite, which drops every SQLite lock this process held on it.
/// Another process then believed it was the last user, folded the log and deleted it, and this
/// process's later writes (status 0, readable here) went to an unlinked file no one else could see.
final class LostWriteTests: KeychainTestCase {
    func testAnotherSpellingOfTheDirectoryDoesNotLoseLaterWrites() throws {
        XCTAssertEqual(Item.add(Item.password(service: "lost", account: "first")), errSecSuccess)
        let first = try EmbeddedKeychain.current()

        // The same directory spelled with a trailing slash.
        setenv("KEYCHAIN_HOME", keychain.directory + "/", 1)
        XCTAssertEqual(Item.secret(Item.password(service: "lost", account: "first")), "secret")
        XCTAssertTrue(try EmbeddedKeychain.current() === first, "one keychain per directory per process")

        try assertLaterWritesReachOtherProcesses()
    }

    func testThreadsRacingOnFirstUseShareOneKeychain() throws {
        let opened = Mutex<Set<ObjectIdentifier>>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if let keychain = try? EmbeddedKeychain.current() {
                opened.withLock { _ = $0.insert(ObjectIdentifier(keychain)) }
            }
            _ = Item.add(Item.password(service: "race", account: UUID().uuidString))
        }
        XCTAssertEqual(opened.withLock { $0.count }, 1)
        XCTAssertEqual(Item.add(Item.password(service: "lost", account: "first")), errSecSuccess)
        try assertLaterWritesReachOtherProcesses()
    }

    /// Another process reads and closes its connection, as every `security` run does; then a write
    /// here must still be seen by a third process.
    private func assertLaterWritesReachOtherProcesses() throws {
        XCTAssertEqual(try helper("close", "lost", "first"), "secret\n")
        XCTAssertEqual(
            Item.add(Item.password(service: "lost", account: "second", secret: "after")), errSecSuccess)
        XCTAssertEqual(try helper("read", "lost", "second"), "after\n", "an acknowledged write must not be lost")
    }

    private func helper(_ arguments: String...) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("keychain-test-helper")
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_HOME"] = keychain.directory
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }
}

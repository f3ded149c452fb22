import Foundation
import KeychainCore
import KeychainEngine
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// One keychain, one owner, one lock state: a second daemon on a keychain another serves refuses to
/// start and names the first; an embedded process does not open a keychain a daemon owns; a daemon
/// does not take a keychain that processes have open themselves. (A daemon that starts when it should
/// not is ended after 5 s, and fails the test.)
final class OneOwnerTests: XCTestCase {
    func testASecondDaemonOnTheSameKeychainRefusesToStartAndNamesTheFirst() throws {
        let first = try TestDaemon()
        let pid = first.process.processIdentifier
        let result = try ClientPrograms.run(
            "/usr/bin/timeout",
            ["5", TestDaemon.binary, "--home", first.home, "--socket", first.directory + "/second.sock"],
            daemon: nil)
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(result.output.contains("another keychain daemon already serves"), result.output)
        XCTAssertTrue(result.output.contains("securityd pid \(pid)"), result.output)
        XCTAssertTrue(result.output.contains(first.socket), result.output)
        XCTAssertFalse(FileManager.default.fileExists(atPath: first.directory + "/second.sock"))
        // The first still serves.
        XCTAssertEqual(try first.service().status().lockState, .noPasscode)
    }

    func testASecondSystemDaemonOnTheSameDirectoryRefusesToStart() throws {
        let first = try TestDaemon(arguments: ["--system"])
        let result = try ClientPrograms.run(
            "/usr/bin/timeout",
            ["5", TestDaemon.binary, "--system", "--home", first.home, "--socket", first.directory + "/second.sock"],
            daemon: nil)
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(result.output.contains("another keychain daemon already serves"), result.output)
    }

    func testAnEmbeddedProcessDoesNotOpenAKeychainADaemonOwns() throws {
        let daemon = try TestDaemon()
        let security = ClientPrograms.built("security")
        let embedded = ["KEYCHAIN_HOME": daemon.home, "KEYCHAIN_LOG": "on"]
        var result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: nil, environment: embedded)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: errSecNotAvailableStatus) & 0xff), result.output)
        XCTAssertTrue(result.output.contains("owns the keychain"), result.output)
        XCTAssertTrue(result.output.contains("securityd pid \(daemon.process.processIdentifier)"), result.output)
        // Once the daemon has stopped, the files are anyone's (of this user) again.
        daemon.stop()
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: nil, environment: embedded)
        XCTAssertEqual(result.status, 0, result.output)
    }

    func testADaemonDoesNotTakeAKeychainThatAProcessHasOpen() throws {
        let directory = NSTemporaryDirectory() + "owner-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var keychain: Keychain? = try Keychain(directory: directory)
        XCTAssertNotNil(keychain)
        let result = try ClientPrograms.run(
            "/usr/bin/timeout", ["5", TestDaemon.binary, "--home", directory, "--socket", directory + ".sock"],
            daemon: nil)
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(result.output.contains("open in other processes without a daemon"), result.output)
        keychain = nil
        // Closed: now a daemon may own it.
        let daemon = try TestDaemon(home: directory)
        XCTAssertEqual(try daemon.service().status().lockState, .noPasscode)
    }
}

/// errSecNotAvailable, as the command's exit status takes its low byte.
private let errSecNotAvailableStatus: Int32 = -25291

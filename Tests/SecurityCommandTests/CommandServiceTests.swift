import Foundation
import KeychainEngine
import Security
import SecurityCommandLine
import Synchronization
import XCTest

/// The `security` command reaches a keychain only through `KeychainServices`, as the SecItem API does:
/// run in-process behind a recording service, every verb's work shows up there.
final class CommandServiceTests: XCTestCase {
    private var directory: String!

    override func setUp() {
        directory = NSTemporaryDirectory() + "command-service-" + UUID().uuidString
        setenv("KEYCHAIN_LOG", "off", 1)
        // The environment names no usable keychain: only the service can answer.
        setenv("KEYCHAIN_HOME", "/dev/null/keychain", 1)
    }

    override func tearDown() {
        KeychainServices.use(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testVerbsReachTheKeychainThroughTheService() throws {
        let recorder = Recorder(
            InProcessKeychainService(
                keychain: try Keychain(directory: directory), client: ClientIdentity(accessGroups: ["security"])))
        KeychainServices.use(recorder)
        XCTAssertEqual(SecurityCommandLine.run(["add-generic-password", "-a", "a", "-s", "seam", "-w", "pw"]), 0)
        XCTAssertEqual(recorder.take(), ["add"])
        XCTAssertEqual(SecurityCommandLine.run(["find-generic-password", "-s", "seam", "-w"]), 0)
        XCTAssertEqual(recorder.take(), ["copyMatching"])
        XCTAssertEqual(SecurityCommandLine.run(["delete-generic-password", "-s", "seam"]), 0)
        XCTAssertEqual(recorder.take(), ["copyMatching", "delete", "location"])
        XCTAssertEqual(SecurityCommandLine.run(["set-keychain-password", "-p", "2468"]), 0)
        XCTAssertEqual(recorder.take(), ["status", "setPasscode"])
        XCTAssertEqual(SecurityCommandLine.run(["lock-keychain"]), 0)
        XCTAssertEqual(recorder.take(), ["lock"])
        XCTAssertEqual(SecurityCommandLine.run(["unlock-keychain", "-p", "0000"]), 51)
        XCTAssertEqual(recorder.take(), ["status", "unlock"])
        XCTAssertEqual(SecurityCommandLine.run(["show-keychain-info"]), 0)
        XCTAssertEqual(recorder.take(), ["status", "location"])
        // Without the service, the environment's keychain is unusable: nothing else was reached.
        KeychainServices.use(nil)
        XCTAssertEqual(
            SecurityCommandLine.run(["show-keychain-info"]), Int32(UInt32(bitPattern: errSecNotAvailable) & 0xff))
    }
}

private final class Recorder: KeychainService, @unchecked Sendable {
    private let names = Mutex<[String]>([])
    private let inner: any KeychainService

    init(_ inner: any KeychainService) { self.inner = inner }

    func take() -> [String] {
        names.withLock { names in
            defer { names = [] }
            return names
        }
    }

    func perform(_ request: KeychainRequest) throws -> KeychainAnswer {
        names.withLock { $0.append(request.name) }
        return try inner.perform(request)
    }

    func administer(_ request: KeychainAdminRequest) throws -> KeychainAnswer {
        names.withLock { $0.append(request.name) }
        return try inner.administer(request)
    }
}

import Foundation
import KeychainAuthenticators
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainSystem
import KeychainTestSupport
import XCTest

@testable import KeychainEngine

/// An embedded keychain's unlock held for the login session: later processes (here, later `Keychain`
/// instances, each starting as a new process does) start unlocked until a lock, a passcode change or a
/// reboot; the token opens nothing elsewhere.
final class SessionUnlockTests: EngineTestCase {
    private var runtime: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        runtime = NSTemporaryDirectory() + "runtime-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        chmod(runtime, 0o700)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: runtime)
        super.tearDown()
    }

    private func process(clock: (any KeychainClock)? = nil, directory: String? = nil) throws -> Keychain {
        var options = KeychainOptions(
            clock: clock ?? self.clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1), authenticators: .standard())
        options.sessionDirectory = runtime
        return try Keychain(directory: directory ?? self.directory, options: options)
    }

    private var tokens: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: runtime + "/keychain")) ?? []).filter {
            $0.hasPrefix("session-")
        }
    }

    func testAnUnlockForTheSessionOpensLaterProcessesUntilALock() throws {
        let first = try process()
        try first.setPasscode("2468", current: nil)
        _ = try first.add(password("s", "a", protection: "ak"), client: client)
        first.restart()
        try first.unlockForSession(passcode: SecureBytes(copying: Array("2468".utf8)))
        XCTAssertEqual(tokens.count, 1)
        let file = runtime + "/keychain/" + tokens[0]
        XCTAssertEqual(SecureFiles.permissions(of: file), 0o600)
        XCTAssertEqual(SecureFiles.permissions(of: runtime + "/keychain"), 0o700)
        // The token holds no passcode and no class key in the clear.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertNil(bytes.range(of: Data("2468".utf8)))

        let second = try process()
        XCTAssertEqual(second.status.lockState, .unlocked)
        XCTAssertEqual(try readSecret("s", "a", in: second), "secret")
        XCTAssertEqual(second.status.failedAttempts, 0, "a token is no passcode attempt")

        // A lock ends it: processes that start afterwards start before their first unlock.
        second.lock()
        XCTAssertEqual(tokens.count, 0)
        let third = try process()
        XCTAssertEqual(third.status.lockState, .beforeFirstUnlock)
        XCTAssertThrowsError(try readSecret("s", "a", in: third))
        // Without --session an unlock is this process's alone.
        try third.unlock(passcode: "2468")
        XCTAssertEqual(try process().status.lockState, .beforeFirstUnlock)
    }

    func testATokenOpensNothingAfterAPasscodeChangeARebootOrInAnotherKeychain() throws {
        let first = try process()
        try first.setPasscode("2468", current: nil)
        try first.unlockForSession(passcode: SecureBytes(copying: Array("2468".utf8)))
        let held = try Data(contentsOf: URL(fileURLWithPath: runtime + "/keychain/" + tokens[0]))

        // Another boot: the kernel's boot id differs, and the token is dropped.
        let rebooted = BootedElsewhereClock()
        XCTAssertEqual(try process(clock: rebooted).status.lockState, .beforeFirstUnlock)
        XCTAssertEqual(tokens.count, 0, "a token of another boot is removed")

        // Put back, it still opens this boot; a passcode change ends it.
        try SecureFiles.writeAtomically(held, to: runtime + "/keychain/" + SessionTokenName.of(first))
        XCTAssertEqual(try process().status.lockState, .unlocked)
        try first.setPasscode("1357", current: "2468")
        try SecureFiles.writeAtomically(held, to: runtime + "/keychain/" + SessionTokenName.of(first))
        XCTAssertEqual(try process().status.lockState, .beforeFirstUnlock, "a token of the old passcode opened")

        // Another keychain (another device root) given this one's token name and token opens nothing.
        let other = directory + "-other"
        defer { try? FileManager.default.removeItem(atPath: other) }
        let stranger = try process(directory: other)
        try stranger.setPasscode("2468", current: nil)
        stranger.restart()
        try SecureFiles.writeAtomically(held, to: runtime + "/keychain/" + SessionTokenName.of(stranger))
        XCTAssertEqual(try process(directory: other).status.lockState, .beforeFirstUnlock)
    }

    func testWithoutARuntimeDirectoryAnUnlockCannotBeHeld() throws {
        let keychain = try open()
        try keychain.setPasscode("2468", current: nil)
        XCTAssertThrowsError(try keychain.unlockForSession(passcode: SecureBytes(copying: Array("2468".utf8)))) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .notAvailable)
        }
    }
}

/// The clock of a machine booted again: the same time, another boot id.
final class BootedElsewhereClock: KeychainClock, @unchecked Sendable {
    func now() -> Date { Date(timeIntervalSince1970: 1_800_000_000) }
    func sinceBoot() -> BootInstant { BootInstant(boot: Data(repeating: 9, count: 16), nanoseconds: 0) }
}

/// The name a keychain's session token has in the runtime directory.
enum SessionTokenName {
    static func of(_ keychain: Keychain) -> String {
        keychain.sessionUnlock.map { ($0.path as NSString).lastPathComponent } ?? ""
    }
}

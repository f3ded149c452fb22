import Foundation
import KeychainAuthenticators
import KeychainBytes
import KeychainEngine
import KeychainKeybag
import Synchronization
import XCTest

/// A clock the test moves by hand.
final class TestClock: KeychainClock, @unchecked Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    func now() -> Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
    /// Time since boot moves with the wall clock here, from a boot at the clock's start.
    func sinceBoot() -> BootInstant {
        let elapsed = current.withLock { $0.timeIntervalSince1970 } - 1_800_000_000
        return BootInstant(boot: Data(repeating: 7, count: 16), nanoseconds: UInt64(max(elapsed, 0) * 1e9))
    }
}

/// A keychain in a fresh temporary directory, removed afterwards; a cheap passcode KDF keeps tests fast.
class EngineTestCase: XCTestCase {
    var directory: String!
    var keychain: Keychain!
    let clock = TestClock()
    let client = ClientIdentity(accessGroups: ["TEAM.app"])

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "engine-test-" + UUID().uuidString
        keychain = try open()
        KeychainLog.setSink { _ in }
    }

    override func tearDown() {
        keychain = nil
        KeychainLog.setSink(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }

    func open(directory: String? = nil, rootPath: String? = nil) throws -> Keychain {
        try Keychain(
            directory: directory ?? self.directory,
            options: KeychainOptions(
                deviceRootPath: rootPath, clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1),
                authenticators: .standard()))
    }

    func password(_ service: String, _ account: String, secret: String? = "secret", protection: String? = nil)
        -> [String: ItemValue]
    {
        var query: [String: ItemValue] = ["class": .string("genp"), "svce": .string(service), "acct": .string(account)]
        if let secret { query["v_Data"] = .data(Data(secret.utf8)) }
        if let protection { query["pdmn"] = .string(protection) }
        return query
    }

    func readSecret(_ service: String, _ account: String, in keychain: Keychain? = nil) throws -> String? {
        var query = password(service, account, secret: nil)
        query["r_Data"] = .bool(true)
        guard let data = try (keychain ?? self.keychain).copyMatching(query, client: client)?.bytes else {
            return nil
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Asserts that `body` fails with `expected`'s code (errors compare by code; the reason is for people).
    func assertError(
        _ expected: KeychainError, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? KeychainError)?.code, expected.code, "\(error)", file: file, line: line)
        }
    }

    /// Every file the keychain wrote, as bytes.
    func filesOnDisk() throws -> [(String, Data)] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted().map {
            ($0, try Data(contentsOf: URL(fileURLWithPath: directory + "/" + $0)))
        }
    }

    /// The path of a built executable of this package (beside the test bundle).
    static func productPath(_ name: String) -> String {
        // The test binary lives in the build products directory, beside the package's executables.
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent(name).path
    }
}

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

/// Class keys leave memory on lock: a test that knows the class-A key's bytes finds them in this
/// process before the lock (so the search works) and nowhere after it.
final class ClassKeyMemoryTests: EngineTestCase {
    func testTheClassAKeyIsGoneFromMemoryAfterALock() throws {
        try keychain.setPasscode("2468", current: nil)
        _ = try keychain.add(password("mem", "a", protection: "ak"), client: client)
        XCTAssertEqual(try readSecret("mem", "a"), "secret")
        let key = try KeyPattern(keychain.keybag.classKey(for: .whenUnlocked))
        XCTAssertGreaterThan(try key.occurrencesInThisProcess(), 0, "the search does not find a key in use")
        keychain.lock()
        XCTAssertEqual(try key.occurrencesInThisProcess(), 0, "the class-A key is still in memory after a lock")
    }
}

/// A 32-byte key to look for in this process's memory without ever holding it whole: its first 8 bytes
/// as the needle, the other 24 masked, compared byte by byte.
struct KeyPattern {
    private let head: [UInt8]
    private let maskedTail: [UInt8]
    private static let mask: UInt8 = 0xa5

    init(_ key: SecureBytes) throws {
        var head: [UInt8] = []
        var tail: [UInt8] = []
        key.withUnsafeBytes { bytes in
            head = Array(bytes[0..<8])
            tail = bytes[8..<32].map { $0 ^ Self.mask }
        }
        self.head = head
        maskedTail = tail
    }

    /// How many places in this process's writable memory hold the whole key.
    func occurrencesInThisProcess() throws -> Int {
        let tail = maskedTail
        guard
            let found = ProcessMemory.occurrences(
                ofNeedle: head, spanning: 32, in: getpid(),
                confirm: { place in
                    (0..<24).allSatisfy { place.load(fromByteOffset: 8 + $0, as: UInt8.self) ^ Self.mask == tail[$0] }
                })
        else { throw XCTSkip("/proc/self/mem cannot be read") }
        return found
    }
}

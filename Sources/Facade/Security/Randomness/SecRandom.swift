import Foundation
import KeychainCrypto

/// Fills `bytes` with `count` cryptographically secure random bytes; 0 on success, -1 on failure
/// (Apple's documented return), with `errno` untouched.
@discardableResult
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return -1 }
    do {
        try Random.fill(UnsafeMutableRawBufferPointer(start: bytes, count: count))
        return 0
    } catch {
        return -1
    }
}

/// The random source handle of `SecRandomCopyBytes`; there is only the default one.
public final class SecRandom: @unchecked Sendable {
    private init() {}
}

public typealias SecRandomRef = SecRandom

public let kSecRandomDefault: SecRandomRef? = nil

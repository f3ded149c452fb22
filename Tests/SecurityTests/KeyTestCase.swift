import Foundation
import Security
import XCTest

/// What the key tests share: a scratch directory of their own for the `openssl` command's files
/// (removed afterwards), the command itself, and fresh keys.
class KeyTestCase: XCTestCase {
    var work: String!

    override func setUpWithError() throws {
        work = NSTemporaryDirectory() + "keys-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: work) }

    /// A new key pair's private key; the CFError as the thrown error.
    func randomKey(_ type: CFString, _ bits: Int) throws -> SecKey {
        var error: Unmanaged<CFError>?
        let parameters: [String: Any] = [kSecAttrKeyType as String: type, kSecAttrKeySizeInBits as String: bits]
        guard let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
            throw error.map { $0.takeRetainedValue() as Error } ?? NSError(domain: "KeyTestCase", code: -1)
        }
        return key
    }
}

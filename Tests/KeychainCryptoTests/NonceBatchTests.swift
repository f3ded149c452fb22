import Foundation
import KeychainBytes
import KeychainCrypto
import XCTest

/// Nonces drawn from batches: never one twice, across the batches they come from, and the boxes
/// sealed with them open.
final class NonceBatchTests: XCTestCase {
    func testNoNonceComesTwiceAcrossBatchesAndEveryBoxOpens() throws {
        var batch = NonceBatch(expected: 3)
        var seen = Set<Data>()
        for _ in 0..<100 {
            var nonce = Data(count: AESGCM.nonceSize)
            try nonce.withUnsafeMutableBytes { try batch.next(into: $0) }
            XCTAssertNotEqual(nonce, Data(count: AESGCM.nonceSize))
            XCTAssertTrue(seen.insert(nonce).inserted, "a nonce came twice")
        }
        var wrongSize = Data(count: 8)
        XCTAssertThrowsError(try wrongSize.withUnsafeMutableBytes { try batch.next(into: $0) })

        let key = try SecureBytes(randomCount: AESGCM.keySize)
        var boxes = NonceBatch(expected: 10)
        var nonces = Set<Data>()
        for index in 0..<10 {
            let plaintext = SecureBytes(copying: Array("item \(index)".utf8))
            let box = try AESGCM.seal(plaintext, key: key, authenticating: Data([UInt8(index)]), nonces: &boxes)
            XCTAssertTrue(nonces.insert(box.prefix(AESGCM.nonceSize)).inserted)
            XCTAssertEqual(
                try AESGCM.open(box, key: key, authenticating: Data([UInt8(index)])), Data("item \(index)".utf8))
            XCTAssertThrowsError(try AESGCM.open(box, key: key, authenticating: Data([UInt8(index + 1)])))
        }
    }
}

import CSQLite
import Foundation
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainStorage
import KeychainSystem
import XCTest

/// Queries find their rows through the digest indexes: rows that do not match are never decrypted.
final class IndexedQueryTests: EngineTestCase {
    func testNonMatchingRowsAreNeverDecrypted() throws {
        for index in 0..<40 {
            var item = password("indexed", "account-\(index)")
            item["labl"] = .string("label-\(index)")
            item["icmt"] = .string(index % 2 == 0 ? "even" : "odd")
            _ = try keychain.add(item, client: client)
        }
        // Damage every row except account-7's: decrypting any of them would be logged as corrupt.
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(directory + "/keychain.db", &handle), SQLITE_OK)
        let target = 8  // rows are numbered in insertion order: account-7 is the eighth
        XCTAssertEqual(
            sqlite3_exec(
                handle, "UPDATE items SET metadata = zeroblob(80), secret = zeroblob(80) WHERE rowid != \(target)", nil,
                nil, nil),
            SQLITE_OK)
        sqlite3_close(handle)
        keychain = try open()
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        let queries: [[String: ItemValue]] = [
            ["class": .string("genp"), "labl": .string("label-7")],
            ["class": .string("genp"), "acct": .string("account-7")],
            ["class": .string("genp"), "svce": .string("indexed"), "acct": .string("account-7")],
            ["class": .string("genp"), "icmt": .string("odd"), "labl": .string("label-7")],
            ["class": .string("genp"), "cdat": .date(clock.now()), "labl": .string("label-7")],
        ]
        for var query in queries {
            query["r_Data"] = .bool(true)
            XCTAssertEqual(try keychain.copyMatching(query, client: client), .data(Data("secret".utf8)), "\(query)")
        }
        XCTAssertEqual(lines.all, [], "no other row was decrypted")
        // A query on the damaged rows finds them unreadable, and says so.
        assertError(.itemNotFound) {
            _ = try keychain.copyMatching(["class": .string("genp"), "labl": .string("label-8")], client: client)
        }
        XCTAssertEqual(lines.all.count, 1)
    }
}

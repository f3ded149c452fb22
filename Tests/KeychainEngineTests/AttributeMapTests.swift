import CSQLite
import Foundation
import KeychainCore
import KeychainEngine
import XCTest

/// Secret Service attribute maps on generic passwords: stored sealed, searched pair by pair through the
/// keyed index, matched as subsets, and refused when malformed.
final class AttributeMapTests: EngineTestCase {
    private func map(_ pairs: [String: String]) throws -> ItemValue {
        .data(try SecretServiceAttributes(pairs).encoded)
    }

    private func item(_ id: String, _ pairs: [String: String], secret: String) throws -> [String: ItemValue] {
        [
            "class": .string("genp"), "svce": .string("app"), "acct": .string("user"), "ssid": .string(id),
            "ssat": try map(pairs), "v_Data": .data(Data(secret.utf8)),
        ]
    }

    private func secrets(matching pairs: [String: String]) throws -> [String] {
        let query: [String: ItemValue] = [
            "class": .string("genp"), "ssat": try map(pairs), "r_Data": .bool(true), "m_Limit": .string("m_LimitAll"),
        ]
        do {
            guard case .array(let results) = try keychain.copyMatching(query, client: client) else { return [] }
            return results.compactMap { $0.bytes.flatMap { String(data: $0, encoding: .utf8) } }.sorted()
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }

    func testItemsSharingEveryOtherAttributeAreTellApartByTheirMapAndFoundBySubsets() throws {
        // Same service, account and group: the object id keeps them apart.
        _ = try keychain.add(
            try item("1", ["xdg:schema": "org.example", "user": "ann"], secret: "one"), client: client)
        _ = try keychain.add(
            try item("2", ["xdg:schema": "org.example", "user": "bob"], secret: "two"), client: client)
        _ = try keychain.add(try item("3", ["user": "ann"], secret: "three"), client: client)
        XCTAssertEqual(try secrets(matching: ["user": "ann"]), ["one", "three"])
        XCTAssertEqual(try secrets(matching: ["xdg:schema": "org.example"]), ["one", "two"])
        XCTAssertEqual(try secrets(matching: ["xdg:schema": "org.example", "user": "bob"]), ["two"])
        XCTAssertEqual(try secrets(matching: ["user": "carol"]), [])
        // A key is not a value: "user" → "ann" does not match "ann" → "user".
        XCTAssertEqual(try secrets(matching: ["ann": "user"]), [])
        XCTAssertEqual(try secrets(matching: [:]), ["one", "three", "two"])
        // The same object id twice is a duplicate.
        XCTAssertThrowsError(try keychain.add(try item("2", [:], secret: "again"), client: client)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .duplicateItem)
        }
        // A change of map moves the item's index entries.
        _ = try keychain.update(
            ["class": .string("genp"), "ssid": .string("2")], attributes: ["ssat": try map(["user": "dan"])],
            client: client)
        XCTAssertEqual(try secrets(matching: ["user": "dan"]), ["two"])
        XCTAssertEqual(try secrets(matching: ["xdg:schema": "org.example"]), ["one"])
    }

    func testASearchByPairNeverDecryptsItemsWithoutThePair() throws {
        for index in 0..<30 {
            _ = try keychain.add(
                try item(
                    "\(index)", ["n": "\(index)", "parity": index % 2 == 0 ? "even" : "odd"], secret: "s\(index)"),
                client: client)
        }
        // Damage every row but the eighth: decrypting any other would be logged as corrupt.
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(directory + "/keychain.db", &handle), SQLITE_OK)
        XCTAssertEqual(
            sqlite3_exec(
                handle, "UPDATE items SET metadata = zeroblob(80), secret = zeroblob(80) WHERE rowid != 8", nil, nil,
                nil),
            SQLITE_OK)
        sqlite3_close(handle)
        keychain = try open()
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        XCTAssertEqual(try secrets(matching: ["n": "7"]), ["s7"])
        XCTAssertEqual(try secrets(matching: ["n": "7", "parity": "odd"]), ["s7"])
        XCTAssertEqual(lines.all, [], "no other row was decrypted")
    }

    func testMalformedMapsAreRefusedWithTheParameterError() throws {
        var bad = try item("1", [:], secret: "x")
        for bytes in [Data(), Data([1, 0, 0, 0]), Data([0, 0, 0, 0, 9])] {
            bad["ssat"] = .data(bytes)
            XCTAssertThrowsError(try keychain.add(bad, client: client)) { error in
                XCTAssertEqual((error as? KeychainError)?.code, .invalidParameter)
            }
        }
        // Out of order: "b" before "a".
        var writer = ValueWriter()
        writer.unsigned(2)
        for text in ["b", "1", "a", "2"] { writer.string(text) }
        bad["ssat"] = .data(writer.data)
        XCTAssertThrowsError(try keychain.add(bad, client: client))
        XCTAssertThrowsError(try SecretServiceAttributes(["k": String(repeating: "v", count: 4_097)]))
        XCTAssertThrowsError(try SecretServiceAttributes(["k\u{0}": "v"]))
        let many = Dictionary(uniqueKeysWithValues: (0...256).map { ("k\($0)", "v") })
        XCTAssertThrowsError(try SecretServiceAttributes(many))
        XCTAssertEqual(try secrets(matching: [:]), [], "nothing was half-written")
    }
}

import Security
import XCTest

/// Malformed queries get Apple's status codes, never a crash and never a partial write.
final class BadInputTests: KeychainTestCase {
    private let base: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bad",
        kSecAttrAccount as String: "input",
    ]

    private func assertNothingStored(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(
            Item.copy([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bad"]).0,
            errSecItemNotFound, "a refused add must not leave an item", file: file, line: line)
    }

    // The parser's cases are tested once, at the parser (ParserTests); here, that its codes reach the
    // caller as Apple's statuses and nothing is stored.
    func testParserErrorsReachTheCallerAsStatusCodes() {
        XCTAssertEqual(Item.add(base.merging([kSecValueData as String: "a string"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecClass as String: "nope"]) { $1 }), errSecNoSuchClass)
        XCTAssertEqual(Item.copy(base.merging(["zzzz": "x"]) { $1 }).0, errSecNoSuchAttr)
        XCTAssertEqual(Item.update(base, [kSecValueData as String: NSNull()]), errSecParam)
        assertNothingStored()
    }

    func testWhatOnlyAnAddRefuses() {
        XCTAssertEqual(Item.add(base.merging([kSecMatchLimit as String: kSecMatchLimitOne]) { $1 }), errSecParam)
        assertNothingStored()
    }

    func testNonStringKeys() {
        let dictionary: NSDictionary = [1: "x", kSecClass: kSecClassGenericPassword]
        XCTAssertEqual(SecItemAdd(dictionary, nil), errSecParam)
        XCTAssertEqual(SecItemCopyMatching(dictionary, nil), errSecParam)
    }

    func testReturnKeyWithoutResultPointer() {
        XCTAssertEqual(Item.add(base), errSecSuccess)
        XCTAssertEqual(
            SecItemCopyMatching(base.merging([kSecReturnData as String: true]) { $1 } as CFDictionary, nil), errSecParam
        )
        XCTAssertEqual(SecItemCopyMatching(base as CFDictionary, nil), errSecSuccess)
    }

    func testEmptyAndHugeSecrets() {
        XCTAssertEqual(Item.add(base.merging([kSecValueData as String: Data()]) { $1 }), errSecSuccess)
        XCTAssertEqual(Item.copy(base.merging([kSecReturnData as String: true]) { $1 }).1 as? Data, Data())
        let huge = Data((0..<(10 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        XCTAssertEqual(Item.update(base, [kSecValueData as String: huge]), errSecSuccess)
        XCTAssertEqual(Item.copy(base.merging([kSecReturnData as String: true]) { $1 }).1 as? Data, huge)
        // An item without any data is legal too.
        let noData: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "nodata",
        ]
        XCTAssertEqual(Item.add(noData), errSecSuccess)
        XCTAssertEqual(Item.copy(noData.merging([kSecReturnData as String: true]) { $1 }).1 as? Data, Data())
    }

    func testNonUTF8Values() {
        let invalid = Data([0xff, 0xfe, 0x80, 0x00, 0xc3])
        let binaryAccount: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bad",
            kSecAttrAccount as String: invalid,
            kSecValueData as String: invalid,
        ]
        XCTAssertEqual(Item.add(binaryAccount), errSecSuccess, "blob attributes take any bytes")
        let found =
            Item.copy([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: invalid,
                kSecReturnAttributes as String: true, kSecReturnData as String: true,
            ]).1 as? [String: Any]
        XCTAssertEqual(found?["acct"] as? Data, invalid)
        XCTAssertEqual(found?["v_Data"] as? Data, invalid)
        XCTAssertEqual(Item.add(base.merging([kSecAttrAccessGroup as String: invalid]) { $1 }), errSecParam)
    }

    func testValueRefOnPasswordIsRefused() {
        XCTAssertEqual(Item.add(base.merging([kSecValueRef as String: NSString(string: "x")]) { $1 }), errSecParam)
        assertNothingStored()
    }
}

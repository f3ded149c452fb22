import Security
import XCTest

/// Malformed queries get Apple's status codes, never a crash and never a partial write.
final class BadInputTests: KeychainTestCase {
    private let base: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bad", kSecAttrAccount as String: "input",
    ]

    private func assertNothingStored(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(
            Item.copy([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bad"]).0,
            errSecItemNotFound, "a refused add must not leave an item", file: file, line: line)
    }

    func testWrongValueTypes() {
        XCTAssertEqual(Item.add(base.merging([kSecValueData as String: "a string"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.copy(base.merging([kSecReturnData as String: "yes"]) { $1 }).0, errSecParam)
        XCTAssertEqual(Item.copy(base.merging([kSecReturnData as String: 1]) { $1 }).0, errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecAttrAccessGroup as String: 42]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecAttrAccessible as String: 7]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecAttrAccessible as String: "sometimes"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecAttrCreationDate as String: "yesterday"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecAttrSynchronizable as String: "maybe"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecAttrAccessControl as String: "not an ACL"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecClass as String: 3]) { $1 }), errSecParam)
        assertNothingStored()
    }

    func testClassProblems() {
        XCTAssertEqual(Item.add(base.merging([kSecClass as String: "nope"]) { $1 }), errSecNoSuchClass)
        XCTAssertEqual(Item.copy(base.merging([kSecClass as String: "nope"]) { $1 }).0, errSecNoSuchClass)
        var noClass = base
        noClass[kSecClass as String] = nil
        XCTAssertEqual(Item.add(noClass), errSecParam)
        XCTAssertEqual(Item.copy(noClass).0, errSecParam)
        XCTAssertEqual(Item.delete(noClass), errSecParam)
    }

    func testUnknownAttributesAndKeys() {
        XCTAssertEqual(Item.add(base.merging(["zzzz": "x"]) { $1 }), errSecNoSuchAttr)
        XCTAssertEqual(Item.copy(base.merging(["zzzz": "x"]) { $1 }).0, errSecNoSuchAttr)
        XCTAssertEqual(Item.delete(base.merging(["zzzz": "x"]) { $1 }), errSecNoSuchAttr)
        // An attribute of another class is unknown here too (application tag on a password).
        XCTAssertEqual(Item.add(base.merging([kSecAttrApplicationTag as String: "t"]) { $1 }), errSecNoSuchAttr)
        XCTAssertEqual(Item.add(base.merging(["not_a_key": "x"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging(["u_Bogus": "x"]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging(["r_Bogus": true]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecMatchLimit as String: kSecMatchLimitOne]) { $1 }), errSecParam)
        XCTAssertEqual(Item.add(base.merging([kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip]) { $1 }), errSecParam)
        XCTAssertEqual(Item.delete(base.merging([kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip]) { $1 }), errSecParam)
        XCTAssertEqual(
            Item.add(base.merging([kSecAttrAccessible as String: kSecAttrAccessibleAlways,
                kSecAttrAccessControl as String: SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAlways, [], nil) as Any]) { $1 }),
            errSecParam, "kSecAttrAccessible and kSecAttrAccessControl conflict")
        assertNothingStored()
    }

    func testNonStringKeys() {
        let dictionary: NSDictionary = [1: "x", kSecClass: kSecClassGenericPassword]
        XCTAssertEqual(SecItemAdd(dictionary, nil), errSecParam)
        XCTAssertEqual(SecItemCopyMatching(dictionary, nil), errSecParam)
    }

    func testTooManyKeys() {
        // Keys starting with "f" are ignored callbacks, so only the count can make these fail.
        var query = base
        for index in 0..<124 { query["f_callback\(index)"] = "x" }
        XCTAssertEqual(query.count, 127)
        XCTAssertEqual(Item.copy(query).0, errSecItemNotFound, "127 keys are allowed")
        query["f_callback_last"] = "x"
        query["f_callback_too_many"] = "x"
        XCTAssertEqual(Item.add(query), errSecParam)
        XCTAssertEqual(Item.copy(query).0, errSecParam)
        assertNothingStored()
    }

    func testNullValues() {
        XCTAssertEqual(Item.add(base.merging([kSecValueData as String: NSNull()]) { $1 }), errSecParam)
        XCTAssertEqual(Item.copy(base.merging([kSecAttrLabel as String: NSNull()]) { $1 }).0, errSecParam)
        XCTAssertEqual(Item.update(base, [kSecValueData as String: NSNull()]), errSecParam)
        assertNothingStored()
    }

    func testReturnKeyWithoutResultPointer() {
        XCTAssertEqual(Item.add(base), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(base.merging([kSecReturnData as String: true]) { $1 } as CFDictionary, nil), errSecParam)
        XCTAssertEqual(SecItemCopyMatching(base as CFDictionary, nil), errSecSuccess)
    }

    func testEmptyAndHugeSecrets() {
        XCTAssertEqual(Item.add(base.merging([kSecValueData as String: Data()]) { $1 }), errSecSuccess)
        XCTAssertEqual(Item.copy(base.merging([kSecReturnData as String: true]) { $1 }).1 as? Data, Data())
        let huge = Data((0..<(10 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        XCTAssertEqual(Item.update(base, [kSecValueData as String: huge]), errSecSuccess)
        XCTAssertEqual(Item.copy(base.merging([kSecReturnData as String: true]) { $1 }).1 as? Data, huge)
        // An item without any data is legal too.
        let noData: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "nodata"]
        XCTAssertEqual(Item.add(noData), errSecSuccess)
        XCTAssertEqual(Item.copy(noData.merging([kSecReturnData as String: true]) { $1 }).1 as? Data, Data())
    }

    func testNonUTF8Values() {
        let invalid = Data([0xff, 0xfe, 0x80, 0x00, 0xc3])
        let binaryAccount: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bad", kSecAttrAccount as String: invalid,
            kSecValueData as String: invalid,
        ]
        XCTAssertEqual(Item.add(binaryAccount), errSecSuccess, "blob attributes take any bytes")
        let found = Item.copy([
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

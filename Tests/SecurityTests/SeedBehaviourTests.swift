import KeychainCore
import Security
import XCTest

final class SeedBehaviourTests: KeychainTestCase {
    override func setUp() {
        keychain = TemporaryKeychain(
            accessGroups: ["com.example.app", "group.com.example.shared"], throughDaemon: Self.throughDaemon)
    }

    func testSaveAndReadTokenTwice() throws {
        try saveToken(token: "first", service: "api.example.com")
        XCTAssertEqual(try readToken(service: "api.example.com"), "first")
        try saveToken(token: "second", service: "api.example.com")
        XCTAssertEqual(try readToken(service: "api.example.com"), "second")
    }

    func testReadMissingTokenThrowsItemNotFound() {
        XCTAssertThrowsError(try readToken(service: "nothing.example.com")) { error in
            guard case KeychainError.unexpectedStatus(let status) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(status, errSecItemNotFound)
        }
    }

    func testSharedTokenLandsInSharedGroupAndOtherAppSeesIt() {
        saveSharedToken(token: Data("shared".utf8))
        keychain.setAccessGroups(["com.example.other", "group.com.example.shared"])
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrAccount as String: "shared_token",
            kSecReturnAttributes as String: true,
            kSecReturnData as String: true,
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let dictionary = result as? [String: Any]
        XCTAssertEqual(dictionary?[kSecValueData as String] as? Data, Data("shared".utf8))
        XCTAssertEqual(dictionary?["agrp"] as? String, "group.com.example.shared")
        XCTAssertEqual(dictionary?["pdmn"] as? String, "aku")
        keychain.setAccessGroups(["com.example.unrelated"])
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecItemNotFound)
    }

    func testBiometryItemNeedsAnEnrolledSetAndThenAMatch() throws {
        XCTAssertThrowsError(try saveWithBiometry(data: Data("x".utf8), key: "bio")) { error in
            guard case KeychainError.unexpectedStatus(let status) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(status, errSecAuthFailed)
        }
        _ = try KeychainServices.current().biometry(.enroll)
        try saveWithBiometry(data: Data("x".utf8), key: "bio")
        try saveWithBiometry(data: Data("y".utf8), key: "bio")  // the example deletes first: twice works
        _ = try KeychainServices.current().biometry(.answer(.match))
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bio",
            kSecReturnData as String: true,
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("y".utf8))
    }
}

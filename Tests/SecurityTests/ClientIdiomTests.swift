import LocalAuthentication
import Security
import XCTest

/// The client idioms of swift-api-compat.md §1–2, compiled and run.
final class ClientIdiomTests: KeychainTestCase {
    func testRawValuesOfConstants() {
        let expected: [(CFString, String)] = [
            (kSecClass, "class"), (kSecClassGenericPassword, "genp"), (kSecClassInternetPassword, "inet"),
            (kSecClassCertificate, "cert"), (kSecClassKey, "keys"), (kSecClassIdentity, "idnt"),
            (kSecAttrAccount, "acct"), (kSecAttrService, "svce"), (kSecAttrAccessible, "pdmn"),
            (kSecAttrAccessGroup, "agrp"), (kSecAttrSynchronizable, "sync"), (kSecAttrSynchronizableAny, "syna"),
            (kSecAttrAccessibleWhenUnlocked, "ak"), (kSecAttrAccessibleAfterFirstUnlock, "ck"),
            (kSecAttrAccessibleAlways, "dk"), (kSecAttrAccessibleWhenUnlockedThisDeviceOnly, "aku"),
            (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, "cku"), (kSecAttrAccessibleAlwaysThisDeviceOnly, "dku"),
            (kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, "akpu"), (kSecValueData, "v_Data"),
            (kSecReturnData, "r_Data"), (kSecReturnAttributes, "r_Attributes"), (kSecMatchLimit, "m_Limit"),
            (kSecMatchLimitOne, "m_LimitOne"), (kSecMatchLimitAll, "m_LimitAll"),
            (kSecUseDataProtectionKeychain, "nleg"),
            (kSecAttrProtocolFTP, "ftp "), (kSecAttrProtocolHTTPS, "htps"), (kSecAttrAuthenticationTypeDefault, "dflt"),
            (kSecAttrKeyTypeRSA, "42"), (kSecAttrKeyTypeECSECPrimeRandom, "73"), (kSecAttrKeyClassPrivate, "1"),
            (kSecUseAuthenticationContext, "u_AuthCtx"), (kSecAttrAccessGroupToken, "com.apple.token"),
            (kSecAttrTokenIDSecureEnclave, "com.apple.setoken"), (kSecUseTombstones, "u_Tomb"),
        ]
        for (constant, raw) in expected { XCTAssertEqual(constant as String, raw) }
    }

    func testStatusCodeValues() {
        XCTAssertEqual(errSecSuccess, 0)
        XCTAssertEqual(noErr, 0)
        XCTAssertEqual(errSecDuplicateItem, -25299)
        XCTAssertEqual(errSecItemNotFound, -25300)
        XCTAssertEqual(errSecInteractionNotAllowed, -25308)
        XCTAssertEqual(errSecMissingEntitlement, -34018)
        XCTAssertEqual(errSecNotAvailable, -25291)
        XCTAssertEqual(errSecNoSuchAttr, -25303)
        XCTAssertEqual(errSecNoSuchClass, -25306)
        XCTAssertEqual(errSecParam, -50)
        XCTAssertEqual(errSecDecode, -26275)
        XCTAssertEqual(errSecWrongSecVersion, -25310)
        XCTAssertEqual(errSecItemIllegalQuery, -34016)
        var status = errSecNotAvailable
        status = noErr
        XCTAssertEqual(status, errSecSuccess)
    }

    func testConstantsEqualPlainStringsInHashedCollections() {
        let mixed: [AnyHashable: Any] = [kSecAttrAccount: "me"]
        XCTAssertEqual(mixed["acct"] as? String, "me")
        let hashable: [String: AnyHashable] = ["class": kSecClassGenericPassword]
        XCTAssertEqual(hashable["class"], AnyHashable("genp"))
        XCTAssertTrue((["acct": "me"] as NSDictionary).isEqual(to: [kSecAttrAccount: "me"]))
        let mutable = NSMutableDictionary()
        mutable[kSecAttrService] = "svc"
        XCTAssertEqual(mutable["svce"] as? String, "svc")
        XCTAssertEqual(String(kSecAttrService), "svce")
        switch kSecAttrAccessibleAfterFirstUnlock {
        case kSecAttrAccessibleWhenUnlocked: XCTFail("wrong case")
        case kSecAttrAccessibleAfterFirstUnlock: break
        default: XCTFail("no case matched")
        }
        let asObject: AnyObject = kSecClassGenericPassword
        XCTAssertEqual(asObject as? String, "genp")
        let any: Any = kSecAttrLabel
        XCTAssertEqual((any as! CFString) as String, "labl")
        XCTAssertTrue(kCFBooleanTrue!.boolValue)
        XCTAssertFalse(kCFBooleanFalse!.boolValue)
    }

    func testDictionaryShapesAsQueries() {
        let cfKeys: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "shapes", kSecAttrAccount: "a",
            kSecValueData: Data("1".utf8),
        ]
        XCTAssertEqual(SecItemAdd(cfKeys as CFDictionary, nil), errSecSuccess)
        let anyObjects: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "shapes" as AnyObject,
            kSecReturnData as String: kCFBooleanTrue, kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(anyObjects as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? NSData, Data("1".utf8) as NSData)
        let hashables: [String: AnyHashable] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "shapes",
            kSecReturnAttributes as String: true,
        ]
        var attributes: AnyObject?
        let status = withUnsafeMutablePointer(to: &attributes) {
            SecItemCopyMatching(hashables as CFDictionary, UnsafeMutablePointer($0))
        }
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual((attributes as? [String: AnyObject])?["acct"] as? String, "a")
        XCTAssertEqual((attributes as? NSDictionary)?["svce"] as? String, "shapes")
        let mutable = NSMutableDictionary()
        mutable[kSecClass] = kSecClassGenericPassword
        mutable[kSecAttrService] = "shapes"
        XCTAssertEqual(SecItemDelete(mutable), errSecSuccess)
    }

    func testFunctionTypesMatchDarwin() {
        let copy: (CFDictionary, UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus = SecItemCopyMatching
        let add: (CFDictionary, UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus = SecItemAdd
        let update: (CFDictionary, CFDictionary) -> OSStatus = SecItemUpdate
        let delete: (CFDictionary) -> OSStatus = SecItemDelete
        let query = [kSecClass as String: kSecClassGenericPassword] as CFDictionary
        XCTAssertEqual(copy(query, nil), errSecItemNotFound)
        XCTAssertEqual(delete(query), errSecItemNotFound)
        XCTAssertEqual(update(query, [kSecAttrLabel as String: "x"] as CFDictionary), errSecItemNotFound)
        XCTAssertEqual(add(Item.password(service: "f", account: "a") as CFDictionary, nil), errSecSuccess)
    }

    func testErrorMessages() {
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecItemNotFound, nil) as String?,
            "The specified item could not be found in the keychain.")
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecDuplicateItem, nil) as String?,
            "The specified item already exists in the keychain.")
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecMissingEntitlement, nil) as String?, "A required entitlement isn't present."
        )
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecParam, nil) as String?,
            "One or more parameters passed to a function were not valid.")
        XCTAssertEqual(SecCopyErrorMessageString(-12345, nil) as String?, "OSStatus -12345")
    }

    func testRandomBytes() {
        var first = [UInt8](repeating: 0, count: 32)
        var second = [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, first.count, &first), errSecSuccess)
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, second.count, &second), 0)
        XCTAssertNotEqual(first, second)
        XCTAssertNotEqual(first, [UInt8](repeating: 0, count: 32))
    }

    func testAccessControlCreation() {
        let flags: [(SecAccessControlCreateFlags, UInt)] = [
            (.userPresence, 1), (.biometryAny, 2), (.biometryCurrentSet, 8), (.devicePasscode, 16), (.watch, 32),
            (.or, 1 << 14), (.and, 1 << 15), (.privateKeyUsage, 1 << 30), (.applicationPassword, 1 << 31),
        ]
        for (flag, raw) in flags { XCTAssertEqual(flag.rawValue, raw) }
        var error: Unmanaged<CFError>?
        XCTAssertNotNil(
            SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, .userPresence, &error))
        XCTAssertNotNil(
            SecAccessControlCreateWithFlags(nil, "ak" as CFTypeRef, [.biometryAny, .devicePasscode, .or], &error))
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, "bogus" as CFTypeRef, [], &error))
        XCTAssertEqual(error.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecParam))
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.or, .and], nil))
        XCTAssertNil(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlocked, [.biometryAny, .biometryCurrentSet], nil))
        XCTAssertNil(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence, .biometryAny], nil))
        let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlock, [], nil)
        XCTAssertEqual(CFGetTypeID(access), SecAccessControlGetTypeID())
        XCTAssertNotEqual(CFGetTypeID(access), SecKeyGetTypeID())
        // A protection-only access control stores the item in that class.
        var query = Item.password(service: "acl", account: "a")
        query[kSecAttrAccessControl as String] = access
        XCTAssertEqual(Item.add(query), errSecSuccess)
        XCTAssertEqual(Item.attributes(query)?["pdmn"] as? String, "ck")
    }

    func testLocalAuthenticationContextInQueries() {
        let context = LAContext()
        context.localizedReason = "test"
        context.interactionNotAllowed = true
        var error: NSError?
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.biometryNotEnrolled.rawValue)
        XCTAssertEqual(Item.add(Item.password(service: "la", account: "a")), errSecSuccess)
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "la",
            kSecUseAuthenticationContext as String: context, kSecReturnData as String: true,
        ]
        XCTAssertEqual(Item.copy(query).0, errSecSuccess)
        context.invalidate()
    }
}

import Security
import XCTest

/// Apple's data-protection keychain semantics (reference spec §1–4, §7) through the SecItem API.
final class SecItemSemanticsTests: KeychainTestCase {
    func testAddDefaults() throws {
        XCTAssertEqual(Item.add(Item.password(service: "svc", account: "acct")), errSecSuccess)
        let attributes = try XCTUnwrap(Item.attributes(Item.password(service: "svc", account: "acct")))
        XCTAssertEqual(attributes["pdmn"] as? String, "ak")
        XCTAssertEqual(attributes[kSecAttrAccessGroup as String] as? String, "TEAM.com.example.app")
        XCTAssertEqual(attributes["sync"] as? Int, 0)
        XCTAssertEqual(attributes["tomb"] as? Int, 0)
        XCTAssertEqual(attributes["svce"] as? String, "svc")
        XCTAssertEqual(attributes["acct"] as? String, "acct")
        XCTAssertNotNil(attributes["cdat"] as? Date)
        XCTAssertEqual(attributes["cdat"] as? Date, attributes["mdat"] as? Date)
        XCTAssertNil(attributes["v_Data"], "attributes alone never carry the secret")
        XCTAssertNil(attributes["class"])
        XCTAssertEqual((attributes["sha1"] as? Data)?.count, 20)
    }

    func testInternetPasswordDefaultsAndCertificateProtection() throws {
        let inet: [String: Any] = [
            kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
            kSecAttrAccount as String: "me", kSecValueData as String: Data("pw".utf8),
        ]
        XCTAssertEqual(Item.add(inet), errSecSuccess)
        let attributes = try XCTUnwrap(Item.attributes(inet))
        XCTAssertEqual(attributes["sdmn"] as? String, "")
        XCTAssertEqual(attributes["path"] as? String, "")
        XCTAssertEqual(attributes["atyp"] as? String, "")
        XCTAssertEqual(attributes["port"] as? Int, 0)
        XCTAssertEqual(attributes["ptcl"] as? Int, 0)

        let cert: [String: Any] = [
            kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: "my cert",
            kSecValueData as String: Data([0x30, 0x82, 0x01]),
        ]
        XCTAssertEqual(Item.add(cert), errSecSuccess)
        XCTAssertEqual(Item.attributes(cert)?["pdmn"] as? String, "dk")
        let key: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("tag".utf8),
            kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            kSecValueData as String: Data([1, 2, 3]),
        ]
        XCTAssertEqual(Item.add(key), errSecSuccess)
        let keyAttributes = try XCTUnwrap(Item.attributes(key))
        XCTAssertEqual(keyAttributes["type"] as? Int, 42, "numeric strings are stored as numbers")
        XCTAssertEqual(keyAttributes["kcls"] as? Int, 1)
        XCTAssertEqual(keyAttributes["pdmn"] as? String, "ak")
        XCTAssertEqual(Item.add(key), errSecDuplicateItem)
    }

    func testPrimaryKeyIncludesSyncButNotProtection() {
        XCTAssertEqual(Item.add(Item.password(service: "s", account: "a")), errSecSuccess)
        var other = Item.password(service: "s", account: "a")
        other[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
        XCTAssertEqual(Item.add(other), errSecDuplicateItem, "pdmn is not part of the primary key")
        var synced = Item.password(service: "s", account: "a", secret: "synced")
        synced[kSecAttrSynchronizable as String] = true
        XCTAssertEqual(Item.add(synced), errSecSuccess, "sync is part of the primary key")
        // Without sync, queries see only the non-synchronizable item.
        XCTAssertEqual(Item.secret(Item.password(service: "s", account: "a")), "secret")
        var any = Item.password(service: "s", account: "a")
        any[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
        any[kSecMatchLimit as String] = kSecMatchLimitAll
        any[kSecReturnData as String] = true
        XCTAssertEqual(
            Set((Item.copy(any).1 as? [Data] ?? []).map { String(decoding: $0, as: UTF8.self) }), ["secret", "synced"])
        var onlySynced = Item.password(service: "s", account: "a")
        onlySynced[kSecAttrSynchronizable as String] = kCFBooleanTrue!
        XCTAssertEqual(Item.secret(onlySynced), "synced")
    }

    func testMissingPrimaryKeyAttributesDefaultToEmpty() {
        let noAccount: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
            kSecValueData as String: Data(),
        ]
        XCTAssertEqual(Item.add(noAccount), errSecSuccess)
        var emptyAccount = noAccount
        emptyAccount[kSecAttrAccount as String] = ""
        XCTAssertEqual(Item.add(emptyAccount), errSecDuplicateItem, "absent and empty account collide, as on iOS")
    }

    func testStringAndDataValuesOfBlobAttributesMatchEachOther() {
        XCTAssertEqual(Item.add(Item.password(service: "svc", account: "user")), errSecSuccess)
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Data("svc".utf8),
            kSecAttrAccount as String: "user",
        ]
        XCTAssertEqual(Item.copy(query).0, errSecSuccess)
    }

    func testMatchLimits() {
        for index in 0..<5 {
            XCTAssertEqual(Item.add(Item.password(service: "multi", account: "a\(index)")), errSecSuccess)
        }
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "multi",
            kSecReturnAttributes as String: true,
        ]
        XCTAssertNotNil(Item.copy(query).1 as? [String: Any], "default limit is one: a single dictionary")
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        XCTAssertEqual((Item.copy(query).1 as? [[String: Any]])?.count, 5)
        query[kSecMatchLimit as String] = 3
        XCTAssertEqual((Item.copy(query).1 as? [[String: Any]])?.count, 3)
        query[kSecMatchLimit as String] = 1
        XCTAssertNotNil(Item.copy(query).1 as? [String: Any], "a limit of 1 gives a single object")
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        XCTAssertNotNil(Item.copy(query).1 as? [String: Any])
        query[kSecMatchLimit as String] = "lots"
        XCTAssertEqual(Item.copy(query).0, errSecParam)
        query[kSecMatchLimit as String] = 0
        XCTAssertEqual(Item.copy(query).0, errSecParam)
        query[kSecMatchLimit as String] = 1e300
        XCTAssertEqual(Item.copy(query).0, errSecParam, "a number too large for a count is refused, not a crash")
        query[kSecMatchLimit as String] = 2.5
        XCTAssertEqual(Item.copy(query).0, errSecParam)
        query[kSecMatchLimit as String] = 2.0
        XCTAssertEqual((Item.copy(query).1 as? [[String: Any]])?.count, 2)
    }

    func testReturnShapes() throws {
        XCTAssertEqual(Item.add(Item.password(service: "shape", account: "a", secret: "pw")), errSecSuccess)
        let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "shape"]
        func copy(_ extra: [String: Any]) -> (OSStatus, CFTypeRef?) { Item.copy(base.merging(extra) { $1 }) }

        let (noneStatus, none) = copy([:])
        XCTAssertEqual(noneStatus, errSecSuccess)
        XCTAssertNil(none, "no return key: nothing returned")
        XCTAssertEqual(copy([kSecReturnData as String: true]).1 as? Data, Data("pw".utf8))
        let reference = try XCTUnwrap(copy([kSecReturnPersistentRef as String: true]).1 as? Data)
        XCTAssertEqual(reference.count, 20)
        XCTAssertEqual(reference.prefix(4), Data("genp".utf8))
        let (refStatus, ref) = copy([kSecReturnRef as String: true])
        XCTAssertEqual(refStatus, errSecSuccess)
        XCTAssertNil(ref, "passwords have no object reference, as on iOS")

        let both = try XCTUnwrap(
            copy([kSecReturnData as String: true, kSecReturnPersistentRef as String: true]).1 as? [String: Any])
        XCTAssertEqual(both[kSecValueData as String] as? Data, Data("pw".utf8))
        XCTAssertEqual(both[kSecValuePersistentRef as String] as? Data, reference)
        XCTAssertNil(both["acct"], "attributes only when asked for")
        let all = try XCTUnwrap(
            copy([kSecReturnData as String: true, kSecReturnAttributes as String: true, kSecReturnRef as String: true])
                .1 as? [String: Any])
        XCTAssertEqual(all["acct"] as? String, "a")
        XCTAssertEqual(all["v_Data"] as? Data, Data("pw".utf8))
        XCTAssertEqual(all["class"] as? String, "genp", "asking for the ref adds the class")

        // An item stored without data: no v_Data key beside its attributes (Apple's si-80).
        XCTAssertEqual(
            Item.add([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "shape-empty",
                kSecAttrAccount as String: "a",
            ]), errSecSuccess)
        let empty =
            Item.copy([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "shape-empty",
                kSecReturnData as String: true, kSecReturnAttributes as String: true,
            ]).1 as? [String: Any]
        XCTAssertEqual(empty?["acct"] as? String, "a")
        XCTAssertNil(empty?[kSecValueData as String], "no data stored, no v_Data key")

        let array = copy([kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll]).1 as? [Data]
        XCTAssertEqual(array, [Data("pw".utf8)], "limit all + data gives an array of data, as on iOS")

        // Lookup by persistent reference, with or without the class; never combined with attributes.
        XCTAssertEqual(
            Item.copy([kSecValuePersistentRef as String: reference, kSecReturnData as String: true]).1 as? Data,
            Data("pw".utf8))
        XCTAssertEqual(
            Item.copy([
                kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: reference,
                kSecReturnAttributes as String: true,
            ]).0, errSecSuccess)
        XCTAssertEqual(
            Item.copy([
                kSecValuePersistentRef as String: reference, kSecClass as String: kSecClassGenericPassword,
                kSecAttrAccount as String: "a",
            ]).0,
            errSecParam)
        XCTAssertEqual(Item.delete([kSecValuePersistentRef as String: reference]), errSecSuccess)
        XCTAssertEqual(Item.copy([kSecValuePersistentRef as String: reference]).0, errSecItemNotFound)
    }

    func testAddReturnsWhatItWasAsked() throws {
        var result: CFTypeRef?
        var query = Item.password(service: "ret", account: "a")
        XCTAssertEqual(Item.add(query, result: &result), errSecSuccess)
        XCTAssertNil(result, "no return key: nothing")
        query[kSecAttrAccount as String] = "b"
        query[kSecReturnAttributes as String] = true
        XCTAssertEqual(Item.add(query, result: &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(attributes["acct"] as? String, "b")
        XCTAssertEqual(attributes["agrp"] as? String, "TEAM.com.example.app")
    }

    func testUpdateChangesEveryMatchInOneTransaction() throws {
        for account in ["a", "b", "c"] {
            XCTAssertEqual(Item.add(Item.password(service: "up", account: account)), errSecSuccess)
        }
        let before = try XCTUnwrap(Item.attributes(Item.password(service: "up", account: "a")))
        let service: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "up"]
        XCTAssertEqual(
            Item.update(service, [kSecValueData as String: Data("new".utf8), kSecAttrLabel as String: "L"]),
            errSecSuccess)
        for account in ["a", "b", "c"] {
            XCTAssertEqual(Item.secret(Item.password(service: "up", account: account)), "new")
            XCTAssertEqual(Item.attributes(Item.password(service: "up", account: account))?["labl"] as? String, "L")
        }
        let after = try XCTUnwrap(Item.attributes(Item.password(service: "up", account: "a")))
        XCTAssertGreaterThan(try XCTUnwrap(after["mdat"] as? Date), try XCTUnwrap(before["mdat"] as? Date))
        XCTAssertEqual(after["cdat"] as? Date, before["cdat"] as? Date)
        // Query by the new label goes through its index.
        XCTAssertEqual(
            (Item.copy([
                kSecClass as String: kSecClassGenericPassword, kSecAttrLabel as String: "L",
                kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
            ]).1 as? [Any])?.count, 3)

        // Renaming all three to the same account collides: nothing changes.
        XCTAssertEqual(Item.update(service, [kSecAttrAccount as String: "same"]), errSecDuplicateItem)
        XCTAssertEqual(Item.copy(Item.password(service: "up", account: "a")).0, errSecSuccess)
        XCTAssertEqual(Item.copy(Item.password(service: "up", account: "same")).0, errSecItemNotFound)
        // Renaming one onto another live item is a duplicate too.
        XCTAssertEqual(
            Item.update(
                Item.password(service: "up", account: "a").filter { $0.key != kSecValueData as String },
                [kSecAttrAccount as String: "b"]), errSecDuplicateItem)
        XCTAssertEqual(
            Item.update(Item.password(service: "none", account: "x"), [kSecAttrLabel as String: "x"]),
            errSecItemNotFound)
    }

    func testUpdateValidation() {
        XCTAssertEqual(Item.add(Item.password(service: "v", account: "a")), errSecSuccess)
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "v"]
        XCTAssertEqual(Item.update(query, [kSecClass as String: kSecClassGenericPassword]), errSecNoSuchAttr)
        XCTAssertEqual(Item.update(query, [kSecReturnData as String: true]), errSecNoSuchAttr)
        XCTAssertEqual(Item.update(query, ["zzzz": "x"]), errSecNoSuchAttr)
        XCTAssertEqual(Item.update(query, [kSecValueData as String: "a string"]), errSecParam)
        XCTAssertEqual(Item.update(query, [kSecAttrAccessGroup as String: "TEAM.not.mine"]), errSecMissingEntitlement)
        XCTAssertEqual(Item.update(query, [kSecAttrAccessible as String: "bogus"]), errSecParam)
        XCTAssertEqual(
            Item.update(
                query.merging([kSecMatchLimit as String: kSecMatchLimitOne]) { $1 }, [kSecAttrLabel as String: "x"]),
            errSecParam)
        // Return keys in the query are dropped, as macOS's SecItemUpdate does (Linux code takes macOS branches).
        XCTAssertEqual(
            Item.update(query.merging([kSecReturnData as String: true]) { $1 }, [kSecAttrLabel as String: "x"]),
            errSecSuccess)
        // Moving to another entitled group and changing the protection class.
        XCTAssertEqual(
            Item.update(
                query,
                [
                    kSecAttrAccessGroup as String: "TEAM.group.shared",
                    kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                ]),
            errSecSuccess)
        let attributes = Item.attributes(query)
        XCTAssertEqual(attributes?["agrp"] as? String, "TEAM.group.shared")
        XCTAssertEqual(attributes?["pdmn"] as? String, "ck")
        XCTAssertEqual(Item.secret(query), "secret", "re-encrypted under the new class, secret intact")
    }

    func testDeleteRemovesEveryMatch() {
        for account in ["a", "b"] {
            XCTAssertEqual(Item.add(Item.password(service: "del", account: account)), errSecSuccess)
        }
        XCTAssertEqual(Item.add(Item.password(service: "keep", account: "a")), errSecSuccess)
        let service: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "del"]
        XCTAssertEqual(Item.delete(service.merging([kSecMatchLimit as String: kSecMatchLimitOne]) { $1 }), errSecParam)
        XCTAssertEqual(
            Item.delete(service.merging([kSecMatchLimit as String: kSecMatchLimitAll]) { $1 }), errSecSuccess)
        XCTAssertEqual(Item.copy(service).0, errSecItemNotFound)
        XCTAssertEqual(Item.delete(service), errSecItemNotFound)
        XCTAssertEqual(Item.copy(Item.password(service: "keep", account: "a")).0, errSecSuccess)
    }

    func testTombstones() {
        var synced = Item.password(service: "tomb", account: "a")
        synced[kSecAttrSynchronizable as String] = true
        XCTAssertEqual(Item.add(synced), errSecSuccess)
        var query = synced
        query[kSecValueData as String] = nil
        XCTAssertEqual(Item.delete(query), errSecSuccess)
        XCTAssertEqual(Item.copy(query).0, errSecItemNotFound, "tombstones are invisible to ordinary queries")
        var tombQuery = query
        tombQuery[kSecAttrTombstone as String] = true
        tombQuery[kSecReturnAttributes as String] = true
        XCTAssertEqual((Item.copy(tombQuery).1 as? [String: Any])?["tomb"] as? Int, 1)
        XCTAssertEqual(Item.add(synced), errSecSuccess, "adding over a tombstone replaces it")
        XCTAssertEqual(Item.copy(tombQuery).0, errSecItemNotFound)

        var noTombstone = query
        noTombstone[kSecUseTombstones as String] = false
        XCTAssertEqual(Item.delete(noTombstone), errSecSuccess)
        XCTAssertEqual(Item.copy(tombQuery).0, errSecItemNotFound, "kSecUseTombstones = false leaves none")

        let plain = Item.password(service: "tomb", account: "plain")
        XCTAssertEqual(Item.add(plain), errSecSuccess)
        var withTombstone = plain
        withTombstone[kSecValueData as String] = nil
        withTombstone[kSecUseTombstones as String] = true
        XCTAssertEqual(Item.delete(withTombstone), errSecSuccess)
        var plainTomb = withTombstone
        plainTomb[kSecUseTombstones as String] = nil
        plainTomb[kSecAttrTombstone as String] = 1
        XCTAssertEqual(Item.copy(plainTomb).0, errSecSuccess, "a non-sync item leaves one when asked")
    }

    func testAccessGroups() {
        XCTAssertEqual(
            Item.add(
                Item.password(service: "g", account: "a").merging([kSecAttrAccessGroup as String: "TEAM.other"]) { $1 }),
            errSecMissingEntitlement)
        XCTAssertEqual(
            Item.copy([kSecClass as String: kSecClassGenericPassword, kSecAttrAccessGroup as String: "TEAM.other"]).0,
            errSecMissingEntitlement)
        XCTAssertEqual(
            Item.add(
                Item.password(service: "g", account: "a").merging([kSecAttrAccessGroup as String: "TEAM.group.shared"])
                { $1 }),
            errSecSuccess)
        XCTAssertEqual(Item.add(Item.password(service: "g", account: "a")), errSecSuccess, "same key, other group")
        keychain.setAccessGroups(["TEAM.com.example.app"])
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "g",
            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
        ]
        XCTAssertEqual(
            (Item.copy(query).1 as? [[String: Any]])?.map { $0["agrp"] as? String }, ["TEAM.com.example.app"])
        // A group the app lost: its items are simply not found (no -34018 without an explicit group).
        keychain.setAccessGroups(["TEAM.unrelated"])
        XCTAssertEqual(Item.copy(query).0, errSecItemNotFound)
        XCTAssertEqual(
            Item.delete(
                query.filter { $0.key != kSecMatchLimit as String && $0.key != kSecReturnAttributes as String }),
            errSecItemNotFound)
        // No entitlements at all.
        keychain.setAccessGroups([])
        XCTAssertEqual(Item.add(Item.password(service: "g", account: "z")), errSecMissingEntitlement)
        XCTAssertEqual(Item.copy(query).0, errSecMissingEntitlement)
        // The token group is readable when entitled but never writable.
        keychain.setAccessGroups(["com.apple.token", "TEAM.x"])
        query[kSecAttrAccessGroup as String] = "com.apple.token"
        XCTAssertEqual(Item.copy(query).0, errSecItemNotFound)
        XCTAssertEqual(
            Item.add(
                Item.password(service: "g", account: "t").merging([kSecAttrAccessGroup as String: "com.apple.token"]) {
                    $1
                }),
            errSecMissingEntitlement)
        XCTAssertEqual(Item.add(Item.password(service: "g", account: "t")), errSecSuccess)
        XCTAssertEqual(
            Item.attributes(Item.password(service: "g", account: "t"))?["agrp"] as? String, "TEAM.x",
            "the token group is never the default")
    }

    func testMacOSOnlyKeysAreAccepted() {
        var query = Item.password(service: "mac", account: "a")
        query[kSecUseDataProtectionKeychain as String] = true
        XCTAssertEqual(Item.add(query), errSecSuccess)
        query[kSecValueData as String] = nil
        query[kSecMatchCaseInsensitive as String] = true
        XCTAssertEqual(Item.copy(query).0, errSecSuccess)
        query[kSecMatchCaseInsensitive as String] = nil
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        XCTAssertEqual(Item.delete(query), errSecSuccess)
    }

    func testItemsOutliveTheirApp() {
        XCTAssertEqual(Item.add(Item.password(service: "reinstall", account: "a", secret: "kept")), errSecSuccess)
        keychain.setAccessGroups(["TEAM.some.other.app"])
        XCTAssertEqual(Item.copy(Item.password(service: "reinstall", account: "a")).0, errSecItemNotFound)
        keychain.setAccessGroups(["TEAM.com.example.app"])  // the app is back
        XCTAssertEqual(Item.secret(Item.password(service: "reinstall", account: "a")), "kept")
    }
}

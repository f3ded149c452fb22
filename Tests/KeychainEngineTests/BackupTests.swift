import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainKeybag
import XCTest

/// Backups with iOS's rules: which classes travel where, what never leaves the device, and a restore
/// that is all or nothing.
final class BackupTests: EngineTestCase {
    private let backupPassword = SecureBytes(copying: Array("correct horse".utf8))
    private var backupPath: String { directory + "-backup.skbk" }

    override func tearDown() {
        for suffix in ["-backup.skbk", "-other", "-same", "-root"] {
            try? FileManager.default.removeItem(atPath: directory + suffix)
        }
        super.tearDown()
    }

    /// One item of each class that travels, one that stays on the device, and the ones that never go.
    private func addEveryKind(to keychain: Keychain) throws {
        for (account, protection) in [
            ("ak", "ak"), ("ck", "ck"), ("dk", "dk"), ("aku", "aku"), ("cku", "cku"), ("dku", "dku"),
        ] {
            _ = try keychain.add(
                password("svc", account, secret: "secret-\(account)", protection: protection), client: client)
        }
        var internet: [String: ItemValue] = [
            "class": .string("inet"), "srvr": .string("example.com"), "acct": .string("web"),
            "v_Data": .data(Data("web-secret".utf8)),
        ]
        internet["pdmn"] = .string("ck")
        _ = try keychain.add(internet, client: client)
    }

    private func accounts(in keychain: Keychain) throws -> Set<String> {
        let query: [String: ItemValue] = [
            "class": .string("genp"), "r_Attributes": .bool(true), "m_Limit": .string("m_LimitAll"),
        ]
        guard case .array(let found)? = try? keychain.copyMatching(query, client: client) else { return [] }
        return Set(
            found.compactMap { result -> String? in
                guard case .dictionary(let attributes) = result, case .string(let account)? = attributes["acct"] else {
                    return nil
                }
                return account
            })
    }

    func testAPasswordBackupRestoresEveryClassHereAndOnlyTheMigratingOnesOnAnotherDevice() throws {
        try addEveryKind(to: keychain)
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword)
        XCTAssertEqual(summary.itemsPerClass["genp"], 6)
        XCTAssertEqual(summary.itemsPerClass["inet"], 1)
        XCTAssertEqual(summary.itemsPerProtection["aku"], 1)
        XCTAssertFalse(summary.deviceBound)
        XCTAssertEqual(try Keychain.backupSummary(of: backupPath), summary, "info reads what create wrote")

        // Another device: its own directory and its own root.
        let other = try open(directory: directory + "-other")
        let report = try other.restoreBackup(from: backupPath, password: backupPassword)
        XCTAssertEqual(report.restored, 4)
        XCTAssertEqual(report.notForThisDevice, 3, "ThisDeviceOnly items are absent on another device")
        XCTAssertEqual(report.skipped, 0)
        XCTAssertEqual(try accounts(in: other), ["ak", "ck", "dk"])
        XCTAssertEqual(try readSecret("svc", "ck", in: other), "secret-ck")

        // The same device (its root), a new keychain: every class comes back, with its data.
        let same = try open(directory: directory + "-same", rootPath: directory + "/device-root")
        XCTAssertEqual(try same.restoreBackup(from: backupPath, password: backupPassword).restored, 7)
        XCTAssertEqual(try accounts(in: same), ["ak", "ck", "dk", "aku", "cku", "dku"])
        XCTAssertEqual(try readSecret("svc", "dku", in: same), "secret-dku")
    }

    func testABackupWithoutAPasswordRestoresOnlyOnItsOwnDevice() throws {
        try addEveryKind(to: keychain)
        let summary = try keychain.createBackup(at: backupPath, password: nil)
        XCTAssertTrue(summary.deviceBound)
        let other = try open(directory: directory + "-other")
        assertError(.decode("")) { _ = try other.restoreBackup(from: backupPath, password: nil) }
        assertError(.decode("")) { _ = try other.restoreBackup(from: backupPath, password: backupPassword) }
        XCTAssertEqual(try accounts(in: other), [], "nothing was restored")
        let same = try open(directory: directory + "-same", rootPath: directory + "/device-root")
        XCTAssertEqual(try same.restoreBackup(from: backupPath, password: nil).restored, 7)
    }

    func testWhatNeverLeavesTheDeviceIsCountedAndStaysThroughARestore() throws {
        try keychain.setPasscode(SecureBytes(copying: Array("1234".utf8)), current: nil)
        _ = try keychain.add(password("svc", "akpu", secret: "device-only", protection: "akpu"), client: client)
        _ = try keychain.add(password("svc", "plain", secret: "travels"), client: client)
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword)
        XCTAssertEqual(summary.itemCount, 1)
        XCTAssertEqual(summary.skipped, [BackupSkip.passcodeOnly.rawValue: 1])

        // Restored into the same keychain: the local plain item is replaced by the backup's, the
        // device-only one stays where it is.
        _ = try keychain.add(password("svc", "made-after", secret: "gone"), client: client)
        let report = try keychain.restoreBackup(from: backupPath, password: backupPassword)
        XCTAssertEqual(report.restored, 1)
        XCTAssertEqual(try readSecret("svc", "plain"), "travels")
        XCTAssertEqual(try readSecret("svc", "akpu"), "device-only")
        XCTAssertNil(try? readSecret("svc", "made-after"), "a local non-synchronizable item is replaced")
    }

    func testPersistentReferencesSurviveARestore() throws {
        var item = password("svc", "ref", secret: "by-reference")
        item["r_PersistentRef"] = .bool(true)
        guard case .data(let reference)? = try keychain.add(item, client: client) else {
            return XCTFail("no persistent reference")
        }
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        let other = try open(directory: directory + "-other")
        _ = try other.restoreBackup(from: backupPath, password: backupPassword)
        let query: [String: ItemValue] = ["v_PersistentRef": .data(reference), "r_Data": .bool(true)]
        XCTAssertEqual(try other.copyMatching(query, client: client)?.bytes, Data("by-reference".utf8))
    }

    func testAWrongPasswordOrADamagedFileChangesNothing() throws {
        _ = try keychain.add(password("svc", "a", secret: "one"), client: client)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        let other = try open(directory: directory + "-other")
        _ = try other.add(password("svc", "local", secret: "mine"), client: client)
        assertError(.authenticationFailed("")) {
            _ = try other.restoreBackup(from: backupPath, password: SecureBytes(copying: Array("wrong".utf8)))
        }
        let good = try Data(contentsOf: URL(fileURLWithPath: backupPath))
        // One bit flipped anywhere in the file: refused, and the keychain is as it was.
        for offset in stride(from: 0, to: good.count, by: max(1, good.count / 23)) {
            var bad = good
            bad[offset] ^= 0x10
            try bad.write(to: URL(fileURLWithPath: backupPath))
            XCTAssertThrowsError(
                try other.restoreBackup(from: backupPath, password: backupPassword), "offset \(offset)")
            XCTAssertEqual(try readSecret("svc", "local", in: other), "mine", "offset \(offset)")
        }
        // Truncated anywhere, empty, or another format's version.
        for length in [0, 3, 10, good.count / 2, good.count - 1] {
            try good.prefix(length).write(to: URL(fileURLWithPath: backupPath))
            XCTAssertThrowsError(
                try other.restoreBackup(from: backupPath, password: backupPassword), "length \(length)")
        }
        var otherVersion = good
        otherVersion[4] = 9
        try otherVersion.write(to: URL(fileURLWithPath: backupPath))
        assertError(.decode("")) { _ = try other.restoreBackup(from: backupPath, password: backupPassword) }
        XCTAssertEqual(try accounts(in: other), ["local"])
    }

    func testTheBackupFileHoldsNoSecretAttributeOrGroupInTheClear() throws {
        _ = try keychain.add(
            password("plain-service-name", "plain-account-name", secret: "plain-secret-value"), client: client)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: backupPath))
        for needle in ["plain-service-name", "plain-account-name", "plain-secret-value", "TEAM.app"] {
            XCTAssertNil(bytes.range(of: Data(needle.utf8)), needle)
        }
        var info = stat()
        XCTAssertEqual(stat(backupPath, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
    }

    func testABackupIsNeverWrittenThroughALinkOrIntoADirectory() throws {
        _ = try keychain.add(password("svc", "a"), client: client)
        let victim = directory + "-other"
        try Data("keep".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: backupPath, withDestinationPath: victim)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), Data("keep".utf8), "the link's target")
        // The link itself was replaced by the backup.
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: backupPath))
        XCTAssertEqual(try Keychain.backupSummary(of: backupPath).itemCount, 1)
        try FileManager.default.removeItem(atPath: backupPath)
        try FileManager.default.createDirectory(atPath: backupPath, withIntermediateDirectories: false)
        assertError(.invalidParameter("")) {
            _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: backupPath), [])
    }

    func testALockedKeychainIsNeitherBackedUpNorRestored() throws {
        try keychain.setPasscode(SecureBytes(copying: Array("1234".utf8)), current: nil)
        _ = try keychain.add(password("svc", "a"), client: client)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        keychain.lock()
        assertError(.interactionNotAllowed("")) {
            _ = try keychain.createBackup(at: directory + "-other", password: backupPassword)
        }
        assertError(.interactionNotAllowed("")) {
            _ = try keychain.restoreBackup(from: backupPath, password: backupPassword)
        }
    }

    func testALockDuringABackupOrARestoreChangesNothingOfIt() throws {
        try keychain.setPasscode(SecureBytes(copying: Array("1234".utf8)), current: nil)
        for index in 0..<5 { _ = try keychain.add(password("svc", "a\(index)", secret: "s\(index)"), client: client) }
        // Another client locks the keychain while the backup is being written, then while it is restored.
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword) { done, _ in
            if done == 2 { self.keychain.lock() }
        }
        XCTAssertEqual(summary.itemCount, 5, "every item, none left out as unreadable")
        try keychain.unlock(passcode: SecureBytes(copying: Array("1234".utf8)))
        let report = try keychain.restoreBackup(from: backupPath, password: backupPassword) { done, _ in
            if done == 2 { self.keychain.lock() }
        }
        XCTAssertEqual(report.restored, 5)
        XCTAssertEqual(report.skipped, 0)
        try keychain.unlock(passcode: SecureBytes(copying: Array("1234".utf8)))
        XCTAssertEqual(try accounts(in: keychain), ["a0", "a1", "a2", "a3", "a4"])
    }

    func testAFileChangedBetweenItsCheckAndItsRestoreIsNotRestored() throws {
        // Larger than the reader's buffer, so that the second reading goes back to the file.
        let large = (0..<300).map { password("svc", "in-backup-\($0)", secret: String(repeating: "x", count: 400)) }
        try keychain.add(contentsOf: large, client: client)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        let other = try open(directory: directory + "-other")
        _ = try other.add(password("svc", "local", secret: "mine"), client: client)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: backupPath)[.size] as? Int)
        // The file is checked whole, then read again in the transaction: change its last byte in between.
        assertError(.decode("")) {
            _ = try other.restoreBackup(from: backupPath, password: backupPassword) { done, _ in
                guard done == 1, let handle = FileHandle(forUpdatingAtPath: self.backupPath) else { return }
                handle.seek(toFileOffset: UInt64(size - 1))
                handle.write(Data([0x5a]))
                handle.closeFile()
            }
        }
        XCTAssertEqual(try accounts(in: other), ["local"], "rolled back")
    }

    func testItemsThatNeverTravelAndNewerSynchronizableOnesAreKeptOverTheBackupsCopies() throws {
        func synced(_ account: String, _ secret: String?) -> [String: ItemValue] {
            var item = password("sync", account, secret: secret)
            item["sync"] = .bool(true)
            return item
        }
        // This keychain: a device-only item, and a synchronizable item older than the backup's copy.
        try keychain.setPasscode(SecureBytes(copying: Array("1234".utf8)), current: nil)
        _ = try keychain.add(password("svc", "clash", secret: "device-only", protection: "akpu"), client: client)
        _ = try keychain.add(synced("older-here", "loses"), client: client)
        clock.advance(60)
        // The backup, from another keychain, a minute later.
        let source = try open(directory: directory + "-other")
        for item in [
            password("svc", "clash", secret: "from-backup"), synced("older-here", "wins"),
            synced("newer-here", "loses"),
        ] {
            _ = try source.add(item, client: client)
        }
        _ = try source.createBackup(at: backupPath, password: backupPassword)
        clock.advance(60)
        // And here, a minute after the backup: a newer copy of a synchronizable item.
        _ = try keychain.add(synced("newer-here", "wins"), client: client)

        let report = try keychain.restoreBackup(from: backupPath, password: backupPassword)
        XCTAssertEqual(report.keptLocal, 2, "the device-only item and the newer synchronizable one")
        XCTAssertEqual(report.restored, 1)
        XCTAssertEqual(try readSecret("svc", "clash"), "device-only")
        for account in ["older-here", "newer-here"] {
            var query = synced(account, nil)
            query["r_Data"] = .bool(true)
            XCTAssertEqual(try keychain.copyMatching(query, client: client)?.bytes, Data("wins".utf8), account)
        }
    }

    func testEnclaveKeysNeverTravelAndStayThroughARestore() throws {
        let made = try keychain.generateEnclaveKey(
            ["tkid": .string(enclaveTokenID), "atag": .data(Data("device-key".utf8))], client: client)
        guard case .dictionary(let key)? = made, case .data(let reference)? = key["v_PersistentRef"] else {
            return XCTFail("no enclave key: \(String(describing: made))")
        }
        _ = try keychain.add(password("svc", "a"), client: client)
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword)
        XCTAssertEqual(summary.skipped[BackupSkip.tokenItem.rawValue], 1)
        XCTAssertEqual(summary.itemsPerClass["keys"], nil)
        _ = try keychain.restoreBackup(from: backupPath, password: backupPassword)
        let query: [String: ItemValue] = ["v_PersistentRef": .data(reference), "r_Attributes": .bool(true)]
        XCTAssertNotNil(try keychain.copyMatching(query, client: client), "the enclave key is still here")
    }

    func testAHeaderAskingForTooMuchMemoryOrTooLittleIsRefusedBeforeAnyDerivation() throws {
        _ = try keychain.add(password("svc", "a"), client: client)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        let good = try Data(contentsOf: URL(fileURLWithPath: backupPath))
        // logN sits after the magic, version, flags, UUID and date.
        let logN = 4 + 1 + 1 + 16 + 8
        XCTAssertEqual(good[logN], 17)
        for value: UInt8 in [22, 30, 16, 1] {
            var bad = good
            bad[logN] = value
            try bad.write(to: URL(fileURLWithPath: backupPath))
            assertError(.decode("")) { _ = try keychain.restoreBackup(from: backupPath, password: backupPassword) }
            assertError(.decode("")) { _ = try Keychain.backupSummary(of: backupPath) }
        }
        assertError(.invalidParameter("")) {
            _ = try keychain.createBackup(
                at: backupPath, password: backupPassword, passwordFunction: .scrypt(logN: 14, r: 1, p: 1))
        }
        assertError(.invalidParameter("")) {
            _ = try keychain.createBackup(at: backupPath, password: SecureBytes(copying: []))
        }
    }

    func testAnEraseMakesANewDeviceThatEarlierBackupsTreatAsAnother() throws {
        try addEveryKind(to: keychain)
        _ = try keychain.createBackup(at: backupPath, password: backupPassword)
        let deviceBound = directory + "-same"
        _ = try keychain.createBackup(at: deviceBound, password: nil)
        try keychain.eraseAllContentAndSettings()
        XCTAssertTrue(keychain.isRetired)
        assertError(.notAvailable("")) { _ = try readSecret("svc", "ak") }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/device-root"))

        let fresh = try open()
        XCTAssertEqual(try accounts(in: fresh), [], "every item went")
        // The erased object writes nothing over the new keychain's keybag (an unlock or a passcode
        // change still running on it when the erase landed).
        let keybagPath = directory + "/keybag"
        let newKeybag = try Data(contentsOf: URL(fileURLWithPath: keybagPath))
        XCTAssertThrowsError(try keychain.setPasscode(SecureBytes(copying: Array("1234".utf8)), current: nil))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: keybagPath)), newKeybag)
        XCTAssertFalse(fresh.status.passcodeSet)
        let report = try fresh.restoreBackup(from: backupPath, password: backupPassword)
        XCTAssertEqual(report.restored, 4, "the migrating classes")
        XCTAssertEqual(report.notForThisDevice, 3, "the root changed: ThisDeviceOnly items are another device's")
        assertError(.decode("")) { _ = try fresh.restoreBackup(from: deviceBound, password: nil) }
    }

    func testABackupIsTheKeychainAtOneMoment() throws {
        for index in 0..<3 { _ = try keychain.add(password("svc", "a\(index)"), client: client) }
        // Another client writes while the backup is being made: the backup holds the moment it began.
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword) { done, _ in
            guard done == 1 else { return }
            _ = try? self.keychain.add(self.password("svc", "late"), client: self.client)
            try? self.keychain.delete(self.password("svc", "a2", secret: nil), client: self.client)
        }
        XCTAssertEqual(summary.itemCount, 3)
        let other = try open(directory: directory + "-other")
        _ = try other.restoreBackup(from: backupPath, password: backupPassword)
        XCTAssertEqual(try accounts(in: other), ["a0", "a1", "a2"])
    }
}

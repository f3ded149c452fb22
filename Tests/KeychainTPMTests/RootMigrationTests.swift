import CSQLite
import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainTPM
import KeychainTPMRoot
import KeychainTestSupport
import Synchronization
import XCTest

/// A keychain made with the software root moved to a TPM root (`security device migrate-root tpm`):
/// every item kept, the old root's copies left with nothing new to open, a move cut short undone or
/// finished, and never the other way.
final class RootMigrationTests: KeychainOnSoftwareTPMTestCase {
    private let passcode = SecureBytes(copying: Data("1234".utf8))
    /// Every protection class an item can have once a passcode is set.
    private let classes = ["ak", "ck", "dk", "aku", "cku", "dku", "akpu"]

    /// The daemon's provider (a software root is opened as it is, a new keychain gets a TPM root), or
    /// the embedded one's (software only).
    private func open(_ directory: String? = nil, withTPM: Bool = true) throws -> Keychain {
        var options = KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        if withTPM { options.deviceRoots = TPMDeviceRootProvider(tpm: tpm, lockout: .init(maxTries: 32)) }
        return try Keychain(directory: directory ?? self.directory, options: options)
    }

    private func item(_ account: String, secret: String? = nil, protection: String) -> [String: ItemValue] {
        var query: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string("move"), "acct": .string(account), "pdmn": .string(protection),
        ]
        if let secret { query["v_Data"] = .data(Data(secret.utf8)) }
        return query
    }

    private func read(_ account: String, protection: String, in keychain: Keychain) throws -> String? {
        var query = item(account, protection: protection)
        query["r_Data"] = .bool(true)
        return try keychain.copyMatching(query, client: client)?.bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    /// A software-root keychain with a passcode, an item of every class and a software enclave key.
    private func makeSoftwareKeychain() throws -> (publicKey: Data, reference: Data) {
        let keychain = try open(withTPM: false)
        try keychain.setPasscode(passcode, current: nil)
        for protection in classes {
            _ = try keychain.add(
                item(protection, secret: "secret-\(protection)", protection: protection), client: client)
        }
        let made = try keychain.generateEnclaveKey(
            ["tkid": .string(enclaveTokenID), "atag": .data(Data("moved".utf8))], client: client)
        guard case .dictionary(let key)? = made, case .data(let reference)? = key["v_PersistentRef"],
            let publicKey = key["v_Data"]?.bytes
        else { throw TestDaemon.Failure(description: "no enclave key was made") }
        XCTAssertTrue(keychain.deviceRootSummary.hasPrefix("software"), keychain.deviceRootSummary)
        return (publicKey, reference)
    }

    private func copy(_ names: [String], from source: String, to target: String) throws {
        try FileManager.default.createDirectory(
            atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        addTeardownBlock { try? FileManager.default.removeItem(atPath: target) }
        // A database's log goes with it: a keychain still open may not have folded it in yet.
        let files = names.flatMap { $0 == "keychain.db" ? [$0, $0 + "-wal"] : [$0] }
        for name in files where FileManager.default.fileExists(atPath: source + "/" + name) {
            try? FileManager.default.removeItem(atPath: target + "/" + name)
            try FileManager.default.copyItem(atPath: source + "/" + name, toPath: target + "/" + name)
        }
    }

    private func fileMagic(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path)).prefix(4)
    }

    func testASoftwareKeychainMovesToTheTPMWithEveryItemAndTheOldRootOpensNothingNew() throws {
        let enclaveKey = try makeSoftwareKeychain()
        let before = directory + "-before"
        try copy(["device-root", "keybag", "keychain.db"], from: directory, to: before)

        let keychain = try open()
        XCTAssertTrue(keychain.deviceRootSummary.hasPrefix("software"))
        // A wrong passcode moves nothing, and is counted as a wrong guess.
        assertCode(
            .authenticationFailed,
            { _ = try keychain.migrateDeviceRoot(to: .tpm, passcode: SecureBytes(copying: Data("9".utf8))) })
        XCTAssertEqual(keychain.status.failedAttempts, 1)
        XCTAssertEqual(try fileMagic(directory + "/device-root"), Data("SKDR".utf8))
        assertCode(.authenticationFailed, { _ = try keychain.migrateDeviceRoot(to: .tpm, passcode: nil) })
        XCTAssertFalse(keychain.isRetired)

        let report = try keychain.migrateDeviceRoot(to: .tpm, passcode: passcode)
        XCTAssertEqual(report, .init(movedItems: classes.count + 1, unreadableItems: 0))
        XCTAssertTrue(keychain.isRetired)
        assertCode(.notAvailable, { _ = try read("ck", protection: "ck", in: keychain) }, containing: "open it again")
        XCTAssertEqual(try fileMagic(directory + "/device-root"), DeviceRootFile.tpmMagic)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasSuffix(".migrating")
        }
        XCTAssertEqual(leftovers, [])

        // Opened again (a new process): the TPM's root, locked until the passcode, every item there.
        let moved = try open()
        XCTAssertTrue(moved.deviceRootSummary.hasPrefix("TPM 2.0"), moved.deviceRootSummary)
        XCTAssertTrue(moved.deviceRootSummary.contains("moved from the software root"), moved.deviceRootSummary)
        XCTAssertEqual(moved.status.lockState, .beforeFirstUnlock)
        XCTAssertEqual(try read("dk", protection: "dk", in: moved), "secret-dk")
        assertCode(.interactionNotAllowed, { _ = try read("ak", protection: "ak", in: moved) })
        assertCode(.authenticationFailed, { try moved.unlock(passcode: SecureBytes(copying: Data("9".utf8))) })
        try moved.unlock(passcode: passcode)
        for protection in classes {
            XCTAssertEqual(try read(protection, protection: protection, in: moved), "secret-\(protection)", protection)
        }
        // The software enclave key still signs (its private half was wrapped by the root it inherited),
        // and a new one is made in the chip.
        let key: [String: ItemValue] = ["class": .string("keys"), "v_PersistentRef": .data(enclaveKey.reference)]
        let message = Data("signed after the move".utf8)
        let signature = try moved.useEnclaveKey(
            key, operation: .sign(hash: .sha256, input: .message, data: message), client: client)
        let verifier = try AsymmetricKey.importing(enclaveKey.publicKey, kind: .ec, isPrivate: false)
        XCTAssertTrue(
            try verifier.verify(signature.withUnsafeBytes { Data($0) }, of: message, .ecdsa(.sha256, .message)))
        _ = try moved.add(item("after", secret: "added-after", protection: "ck"), client: client)

        // The old root file and keybag (a copy made before the move) with today's database: the
        // passcode still opens that old keybag, and not one item, old or new.
        let attacker = directory + "-attacker"
        try copy(["device-root", "keybag"], from: before, to: attacker)
        try copy(["keychain.db"], from: directory, to: attacker)
        let old = try open(attacker, withTPM: false)
        try old.unlock(passcode: passcode)
        for protection in classes {
            assertCode(.itemNotFound, { _ = try read(protection, protection: protection, in: old) }, containing: nil)
        }
        assertCode(.itemNotFound, { _ = try read("after", protection: "ck", in: old) })
        // And the embedded keychain refuses the moved one with the reason, as any TPM root.
        assertCode(.notAvailable, { _ = try open(withTPM: false) }, containing: "TPM")
        // There is no way back.
        assertCode(
            .invalidParameter, { _ = try moved.migrateDeviceRoot(to: .software, passcode: passcode) },
            containing: "never moves back")
        assertCode(
            .invalidParameter, { _ = try moved.migrateDeviceRoot(to: .tpm, passcode: passcode) },
            containing: "a TPM already")
    }

    func testAnItemAddedWhileTheItemsMoveIsMovedOrRefusedNeverLost() throws {
        _ = try makeSoftwareKeychain()
        let keychain = try open()
        let added = Mutex<[String]>([])
        let unexpected = Mutex<[String]>([])
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) { [client] in
            for index in 0..<100_000 {
                let account = "during-\(index)"
                let query: [String: ItemValue] = [
                    "class": .string("genp"), "svce": .string("move"), "acct": .string(account),
                    "pdmn": .string("dk"), "v_Data": .data(Data(account.utf8)),
                ]
                do {
                    _ = try keychain.add(query, client: client)
                    added.withLock { $0.append(account) }
                } catch let error as KeychainError where error.code == .notAvailable {
                    return  // retired: from here the directory is to be opened again
                } catch {
                    unexpected.withLock { $0.append("\(error)") }
                    return
                }
            }
        }
        while added.withLock({ $0.count }) < 20, unexpected.withLock({ $0.isEmpty }) { usleep(1000) }
        _ = try keychain.migrateDeviceRoot(to: .tpm, passcode: passcode)
        group.wait()
        XCTAssertEqual(unexpected.withLock { $0 }, [])
        let moved = try open()
        let accounts = added.withLock { $0 }
        XCTAssertGreaterThanOrEqual(accounts.count, 20)
        for account in accounts {
            XCTAssertEqual(try read(account, protection: "dk", in: moved), account, "an add that succeeded was lost")
        }
    }

    func testAMoveThatFailsAfterItsNewKeybagIsWrittenLeavesTheKeychainAsItWas() throws {
        _ = try makeSoftwareKeychain()
        var options = KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        options.deviceRoots = FailingAfterTheKeybag(base: TPMDeviceRootProvider(tpm: tpm))
        let keychain = try Keychain(directory: directory, options: options)
        assertCode(.ioError, { _ = try keychain.migrateDeviceRoot(to: .tpm, passcode: passcode) }, containing: "cut")
        XCTAssertFalse(keychain.isRetired)
        XCTAssertEqual(try fileMagic(directory + "/device-root"), Data("SKDR".utf8))
        XCTAssertFalse(
            try FileManager.default.contentsOfDirectory(atPath: directory).contains { $0.hasSuffix(".migrating") })
        try keychain.unlock(passcode: passcode)
        for protection in classes {
            XCTAssertEqual(try read(protection, protection: protection, in: keychain), "secret-\(protection)")
        }
        // And the move, tried again with a root that works, goes through.
        XCTAssertEqual(try open().migrateDeviceRoot(to: .tpm, passcode: passcode).movedItems, classes.count + 1)
    }

    func testWithoutATPMOrWithOneThatFailsNothingMoves() throws {
        _ = try makeSoftwareKeychain()
        // The embedded provider has nowhere to move to.
        let embedded = try open(withTPM: false)
        assertCode(
            .notAvailable, { _ = try embedded.migrateDeviceRoot(to: .tpm, passcode: passcode) }, containing: "TPM")
        XCTAssertFalse(embedded.isRetired)
        // A TPM that goes away: the status and the reason; the keychain as it was, nothing left behind.
        let keychain = try open()
        softwareTPM.kill()
        assertCode(
            .notAvailable, { _ = try keychain.migrateDeviceRoot(to: .tpm, passcode: passcode) }, containing: "TPM")
        XCTAssertFalse(keychain.isRetired)
        try keychain.unlock(passcode: passcode)
        XCTAssertEqual(try read("ak", protection: "ak", in: keychain), "secret-ak")
        XCTAssertEqual(try fileMagic(directory + "/device-root"), Data("SKDR".utf8))
        XCTAssertFalse(
            try FileManager.default.contentsOfDirectory(atPath: directory).contains { $0.hasSuffix(".migrating") })
    }

    /// The files of a move killed at each step, rebuilt from a move that finished (a fresh one for each,
    /// since opening one moves its counters on): before the items' transaction it is undone; after it,
    /// finished.
    func testAMoveCutShortIsUndoneBeforeTheItemsMovedAndFinishedAfter() throws {
        enum Cut: CaseIterable { case beforeTheItems, beforeTheRenames, betweenTheRenames }
        for cut in Cut.allCases {
            directory = NSTemporaryDirectory() + "root-migration-\(cut)-" + UUID().uuidString
            let original = directory!
            addTeardownBlock { try? FileManager.default.removeItem(atPath: original) }
            _ = try makeSoftwareKeychain()
            let before = directory + "-before"
            try copy(["device-root", "keybag", "keychain.db"], from: directory, to: before)
            _ = try open().migrateDeviceRoot(to: .tpm, passcode: passcode)
            let after = directory + "-after"
            try copy(["device-root", "keybag", "keychain.db"], from: directory, to: after)

            // The directory as the killed process left it.
            let killed = directory + "-killed"
            try copy(["keybag"], from: before, to: killed)
            try copy(["keychain.db"], from: cut == .beforeTheItems ? before : after, to: killed)
            if cut != .beforeTheItems { try markItemsMigrated(killed + "/keychain.db") }
            try FileManager.default.copyItem(
                atPath: after + "/device-root",
                toPath: killed + (cut == .betweenTheRenames ? "/device-root" : "/device-root.migrating"))
            if cut != .betweenTheRenames {
                try FileManager.default.copyItem(atPath: before + "/device-root", toPath: killed + "/device-root")
            }
            try FileManager.default.copyItem(atPath: after + "/keybag", toPath: killed + "/keybag.migrating")

            let reopened = try open(killed)
            XCTAssertTrue(
                reopened.deviceRootSummary.hasPrefix(cut == .beforeTheItems ? "software" : "TPM 2.0"),
                "\(cut): \(reopened.deviceRootSummary)")
            try reopened.unlock(passcode: passcode)
            for protection in classes {
                XCTAssertEqual(
                    try read(protection, protection: protection, in: reopened), "secret-\(protection)", "\(cut)")
            }
            XCTAssertFalse(
                try FileManager.default.contentsOfDirectory(atPath: killed).contains { $0.hasSuffix(".migrating") })
            XCTAssertEqual(try markCount(killed + "/keychain.db"), 0, "\(cut): the mark is cleared")
            if cut == .beforeTheItems {
                // The undo at open leaves the new root's counters alone: the file it removed may be a
                // copy of one in use, as here, where the finished move's directory still opens.
                let finished = try open(after)
                try finished.unlock(passcode: passcode)
                XCTAssertEqual(try read("ak", protection: "ak", in: finished), "secret-ak")
            }
        }
    }

    private func markItemsMigrated(_ database: String) throws {
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(database, &handle), SQLITE_OK)
        defer { sqlite3_close(handle) }
        XCTAssertEqual(
            sqlite3_exec(
                handle, "INSERT OR REPLACE INTO keychain_info(name, value) VALUES ('items-migrated', 1)", nil, nil, nil),
            SQLITE_OK)
    }

    private func markCount(_ database: String) throws -> Int64 {
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(database, &handle), SQLITE_OK)
        defer { sqlite3_close(handle) }
        var statement: OpaquePointer?
        XCTAssertEqual(
            sqlite3_prepare_v2(
                handle, "SELECT count(*) FROM keychain_info WHERE name = 'items-migrated'", -1, &statement, nil),
            SQLITE_OK)
        defer { sqlite3_finalize(statement) }
        XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
        return sqlite3_column_int64(statement, 0)
    }

    /// Sync's state (device keys, zone keys) is sealed under the class keys a move replaces: it moves
    /// with the items, and a value that is not sealed stays as it was.
    func testSyncStateMovesWithTheKeychain() throws {
        _ = try makeSoftwareKeychain()
        let keychain = try open()
        try keychain.unlock(passcode: passcode)
        let cursor = Data([7, 0, 0, 0, 0, 0, 0, 0])
        try keychain.syncTransaction { local in
            try local.seal(
                SecureBytes(copying: Data("device key".utf8)), as: "device signing key",
                protection: .afterFirstUnlockThisDeviceOnly)
            try local.seal(
                SecureBytes(copying: Data("zone key".utf8)), as: "zone key 1", protection: .whenUnlockedThisDeviceOnly)
            try local.ledger.setValue("cursor", cursor)
        }
        _ = try keychain.migrateDeviceRoot(to: .tpm, passcode: passcode)
        let moved = try open()
        try moved.unlock(passcode: passcode)
        let opened = try moved.syncTransaction { local in
            (
                try local.open("device signing key")?.withUnsafeBytes { Data($0) },
                try local.open("zone key 1")?.withUnsafeBytes { Data($0) }, try local.ledger.value("cursor")
            )
        }
        XCTAssertEqual(opened.0, Data("device key".utf8))
        XCTAssertEqual(opened.1, Data("zone key".utf8))
        XCTAssertEqual(opened.2, cursor)
    }
}

/// A TPM provider whose migration target fails once the new keybag is written (its counters moved on),
/// before the items' transaction: the point where a move is undone by the process itself.
private struct FailingAfterTheKeybag: DeviceRootProvider {
    let base: TPMDeviceRootProvider

    func openRoot(path: String, create: Bool) throws -> any DeviceRoot { try base.openRoot(path: path, create: create) }

    func createMigrationTarget(path: String, inheriting: InheritedDeviceRoot) throws -> any DeviceRoot {
        FailingRoot(base: try base.createMigrationTarget(path: path, inheriting: inheriting))
    }

    private struct FailingRoot: DeviceRoot {
        let base: any DeviceRoot
        var deviceIdentifier: Data { base.deviceIdentifier }
        var summary: String { base.summary }
        var anchor: (any KeybagAnchor)? { base.anchor.map(FailingAnchor.init) }
        func wrap(_ key: SecureBytes, context: Data) throws -> Data { try base.wrap(key, context: context) }
        func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes {
            try base.unwrap(wrapped, context: context)
        }
        func authenticate(_ data: Data) throws -> Data { try base.authenticate(data) }
        func authenticateKeybag(_ data: Data) throws -> Data { try base.authenticateKeybag(data) }
        func sealKeybagSecret(_ secret: SecureBytes, generation: UInt64) throws -> Data {
            try base.sealKeybagSecret(secret, generation: generation)
        }
        func openKeybagSecret(_ sealed: Data, generation: UInt64) throws -> SecureBytes {
            try base.openKeybagSecret(sealed, generation: generation)
        }
        func bindPasscode(_ passcodeKey: SecureBytes, generation: UInt64) throws -> PasscodeBinding {
            try base.bindPasscode(passcodeKey, generation: generation)
        }
        func entangle(_ passcodeKey: SecureBytes, binding: Data, generation: UInt64) throws -> SecureBytes {
            try base.entangle(passcodeKey, binding: binding, generation: generation)
        }
        func retire() throws { try base.retire() }
        func release() { base.release() }
    }

    private struct FailingAnchor: KeybagAnchor {
        let base: any KeybagAnchor
        func generation() throws -> UInt64 { try base.generation() }
        func writes() throws -> UInt64 { try base.writes() }
        func advanceWrites(to value: UInt64) throws { try base.advanceWrites(to: value) }
        func advanceGeneration(to value: UInt64) throws {
            try base.advanceGeneration(to: value)
            throw KeychainError.ioError("cut short after the new keybag's counters moved on")
        }
    }
}

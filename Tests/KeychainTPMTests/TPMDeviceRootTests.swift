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

/// A keychain whose device root is a TPM (a swtpm of the test's own), and the attacks the software
/// root does not stop, replayed against it.
final class TPMDeviceRootTests: KeychainOnSoftwareTPMTestCase {
    /// Small numbers, so a test reaches the lockout and sees it lift.
    private let lockout = TPMLockoutPolicy(maxTries: 3, recoveryTime: 2, lockoutRecovery: 2)

    private func open(_ directory: String? = nil, tpm: TPM? = nil) throws -> Keychain {
        var options = KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        options.deviceRoots = TPMDeviceRootProvider(tpm: tpm ?? self.tpm, lockout: lockout)
        return try Keychain(directory: directory ?? self.directory, options: options)
    }

    private func item(_ account: String, secret: String? = nil, protection: String = "ak") -> [String: ItemValue] {
        var query: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string("tpm"), "acct": .string(account), "pdmn": .string(protection),
        ]
        if let secret { query["v_Data"] = .data(Data(secret.utf8)) }
        return query
    }

    private func read(_ account: String, in keychain: Keychain, protection: String = "ak") throws -> String? {
        var query = item(account, protection: protection)
        query["r_Data"] = .bool(true)
        return try keychain.copyMatching(query, client: client)?.bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    private func copyDirectory(to target: String) throws {
        try FileManager.default.copyItem(atPath: directory, toPath: target)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: target) }
    }

    private func replace(_ name: String, from saved: String) throws {
        let path = directory + "/" + name
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: saved + "/" + name, toPath: path)
    }

    func testTheRootIsSealedInTheTPMAndItemsWorkAsWithTheSoftwareRoot() throws {
        let keychain = try open()
        _ = try keychain.add(item("a", secret: "s3cret", protection: "ck"), client: client)
        XCTAssertEqual(try read("a", in: keychain, protection: "ck"), "s3cret")
        let rootFile = try Data(contentsOf: URL(fileURLWithPath: directory + "/device-root"))
        XCTAssertEqual(rootFile.prefix(4), Data("SKTR".utf8))
        XCTAssertTrue(keychain.deviceRootSummary.hasPrefix("TPM 2.0 (\(softwareTPM.tcti))"), keychain.deviceRootSummary)
        // A restart of the keychain (a new process) finds the same root in the same TPM.
        let again = try open()
        XCTAssertEqual(try read("a", in: again, protection: "ck"), "s3cret")
        // The embedded keychain's provider refuses a TPM root with the reason, never a silent fallback.
        assertCode(.notAvailable, { _ = try Keychain(directory: directory) }, containing: "TPM")
    }

    func testACopyOfTheDirectoryOpensNothingOnAnotherMachine() throws {
        let keychain = try open()
        _ = try keychain.add(item("a", secret: "s3cret", protection: "ck"), client: client)
        let copy = directory + "-copy"
        try copyDirectory(to: copy)
        let otherMachine = try SoftwareTPM()
        defer { otherMachine.stop() }
        let otherTPM = try TPM(tcti: otherMachine.tcti)
        assertCode(
            .notAvailable, { _ = try open(copy, tpm: otherTPM) }, containing: "not the one this keychain was made in")
        // Even with the storage key's name forged, the sealed root is the first TPM's alone.
        XCTAssertThrowsError(
            try TPMDeviceRoot.load(
                tpm: otherTPM,
                contents: forgedPrimaryName(
                    Data(contentsOf: URL(fileURLWithPath: copy + "/device-root")), otherTPM.primaryName),
                path: copy + "/device-root"))
    }

    /// The root file with another storage-key name, as someone editing the copy would write it.
    private func forgedPrimaryName(_ contents: Data, _ name: Data) -> Data {
        var reader = ByteReader(contents)
        guard let head = try? reader.readRaw(21), let old = try? reader.readBytes() else { return contents }
        var writer = ByteWriter()
        writer.writeRaw(head)
        writer.writeBytes(name)
        writer.writeRaw(contents.suffix(from: contents.startIndex + 21 + 4 + old.count))
        return writer.data
    }

    func testAKeybagPutBackAfterWrongGuessesIsRefused() throws {
        var keychain: Keychain? = try open()
        try keychain?.setPasscode("1234", current: nil)
        let saved = directory + "-saved"
        try copyDirectory(to: saved)
        for guess in ["0000", "1111"] {
            assertCode(.authenticationFailed, { try keychain?.unlock(passcode: guess) })
        }
        XCTAssertEqual(keychain?.status.failedAttempts, 2)
        keychain = nil
        try replace("keybag", from: saved)
        assertCode(.notAvailable, { _ = try open() }, containing: "an older copy was put back")
    }

    func testTheOldPasscodeOpensNothingAfterAChange() throws {
        let keychain = try open()
        try keychain.setPasscode("1111", current: nil)
        _ = try keychain.add(item("a", secret: "s3cret"), client: client)
        let before = try KeybagSnapshot(directory + "/keybag")
        try keychain.setPasscode("2222", current: "1111")
        // The old keybag's passcode binding, with the old passcode, straight to the root: the chip
        // refuses it, since the generation it was sealed for has passed.
        let root = try TPMDeviceRootProvider(tpm: tpm).openRoot(path: directory + "/device-root", create: false)
        let stretched = try PasscodeFunction.scrypt(logN: 4, r: 1, p: 1).derive(
            SecureBytes(copying: Array("1111".utf8)), salt: before.salt)
        XCTAssertThrowsError(try root.entangle(stretched, binding: before.binding, generation: before.generation)) {
            guard case KeybagError.rolledBack = $0 else { return XCTFail("\($0)") }
        }
        // And the old keybag's own secret is dead too: its class keys open nowhere.
        XCTAssertThrowsError(try root.openKeybagSecret(before.secret, generation: before.generation))
        // The new passcode works.
        let reopened = try open()
        try reopened.unlock(passcode: "2222")
        XCTAssertEqual(try read("a", in: reopened), "s3cret")
    }

    func testTheChipCountsWrongPasscodesAndLocksOutAtTheStatedRate() throws {
        let keychain = try open()
        try keychain.setPasscode("1234", current: nil)
        let snapshot = try KeybagSnapshot(directory + "/keybag")
        let root = try TPMDeviceRootProvider(tpm: tpm).openRoot(path: directory + "/device-root", create: false)
        // A guessing loop that goes around the keychain's own delays, straight to the chip.
        var checked = 0
        var refused = 0
        let start = Date()
        while Date().timeIntervalSince(start) < 5 {
            let guess = try SecureBytes(randomCount: 32)
            do {
                _ = try root.entangle(guess, binding: snapshot.binding, generation: snapshot.generation)
                XCTFail("a random key opened the passcode binding")
            } catch KeybagError.wrongPasscode {
                checked += 1
            } catch KeybagError.deviceRootLockedOut(let seconds) {
                refused += 1
                XCTAssertEqual(seconds, 2)
                usleep(100_000)
            }
        }
        // Three tries, then one more every two seconds: at most 3 + 5 / 2 + 1 in five seconds.
        XCTAssertGreaterThanOrEqual(checked, 3)
        XCTAssertLessThanOrEqual(checked, 3 + 3)
        XCTAssertGreaterThan(refused, 0)
        // Into the lockout again (a try may have been forgiven since the loop's last one).
        for attempt in 0... {
            guard attempt < 50 else { return XCTFail("the chip never locked out again") }
            do {
                _ = try root.entangle(
                    try SecureBytes(randomCount: 32), binding: snapshot.binding, generation: snapshot.generation)
            } catch KeybagError.wrongPasscode {
                continue
            } catch KeybagError.deviceRootLockedOut {
                break
            }
        }
        // In lockout even the right passcode is not checked: the keychain says so and counts nothing.
        let failures = keychain.status.failedAttempts
        assertCode(.authenticationFailed, { try keychain.unlock(passcode: "1234") }, containing: "lockout")
        XCTAssertEqual(keychain.status.failedAttempts, failures)
        sleep(3)
        try keychain.unlock(passcode: "1234")
    }

    func testTheFilesAloneGiveAnOfflineGuesserNothingToRunAgainst() throws {
        let keychain = try open()
        try keychain.setPasscode("1234", current: nil)
        let snapshot = try KeybagSnapshot(directory + "/keybag")
        // The right passcode, stretched as the keybag says: without the chip's secret it opens no class
        // key (the software root would entangle it with a key in its file; here that key is in the TPM).
        let stretched = try PasscodeFunction.scrypt(logN: 4, r: 1, p: 1).derive(
            SecureBytes(copying: Array("1234".utf8)), salt: snapshot.salt)
        XCTAssertThrowsError(
            try AESGCM.openSecure(snapshot.classABlob, key: stretched, authenticating: snapshot.classAContext))
        // A software root cannot be made to read the TPM root's file; the embedded keychain's provider,
        // which reads the file once, names the TPM as the reason.
        XCTAssertThrowsError(try SoftwareDeviceRoot.load(path: directory + "/device-root", create: false))
        XCTAssertThrowsError(try SoftwareDeviceRootProvider().openRoot(path: directory + "/device-root", create: true))
        {
            guard case .deviceRootUnavailable(let reason) = $0 as? KeybagError else {
                return XCTFail("not the TPM's refusal: \($0)")
            }
            XCTAssertTrue(reason.contains("TPM"), reason)
        }
    }

    func testAClearedTPMAndADeletedCounterAreNamedNotMistaken() throws {
        let keychain = try open()
        _ = try keychain.add(item("a", secret: "s3cret", protection: "dk"), client: client)
        let root = try TPMRootFileSnapshot(directory + "/device-root")
        // Another program cannot move a counter on (it needs the authorization the root derives)...
        for handle in [root.generationCounter, root.writesCounter] {
            let before = try tpm.readCounter(handle)
            for hierarchy in [[], ["-C", "o"]] {
                XCTAssertNotEqual(
                    try softwareTPM.tool("tpm2_nvincrement", hierarchy + [String(format: "0x%x", handle)]), 0)
            }
            XCTAssertEqual(try tpm.readCounter(handle), before)
        }
        XCTAssertEqual(try read("a", in: try open(), protection: "dk"), "s3cret")
        // ...nor put an index of its own in a counter's place: it is not taken for the counter.
        let generation = String(format: "0x%x", root.generationCounter)
        XCTAssertEqual(try softwareTPM.tool("tpm2_nvundefine", [generation]), 0)
        XCTAssertEqual(
            try softwareTPM.tool("tpm2_nvdefine", [generation, "-C", "o", "-s", "8", "-a", "ownerread|ownerwrite"]), 0)
        assertCode(.notAvailable, { _ = try open() }, containing: "not the keychain's counter")
        // ...but the owner can delete one, and the keychain names what happened.
        XCTAssertEqual(try softwareTPM.tool("tpm2_nvundefine", [String(format: "0x%x", root.writesCounter)]), 0)
        assertCode(.notAvailable, { _ = try open() }, containing: "NV counter of the keychain is gone")
        XCTAssertEqual(try softwareTPM.tool("tpm2_clear", []), 0)
        let afterClear = try TPM(tcti: softwareTPM.tcti)
        assertCode(.notAvailable, { _ = try open(tpm: afterClear) }, containing: "cleared")
    }

    func testAnEditedSealedObjectIsRefusedWithTheReason() throws {
        let keychain = try open()
        _ = try keychain.add(item("a", secret: "s3cret", protection: "dk"), client: client)
        let rootPath = directory + "/device-root"
        let original = try Data(contentsOf: URL(fileURLWithPath: rootPath))
        // A byte of the sealed root secret's private part (the file's last bytes) flipped: the chip's
        // integrity check refuses it.
        var edited = original
        edited[edited.count - 10] ^= 0x01
        try edited.write(to: URL(fileURLWithPath: rootPath))
        assertCode(.notAvailable, { _ = try open() }, containing: "was edited")
        try original.write(to: URL(fileURLWithPath: rootPath))
        XCTAssertEqual(try read("a", in: try open(), protection: "dk"), "s3cret")
        // A byte of the keybag (its sealed secret among them) flipped: the root's MAC refuses it.
        let keybagPath = directory + "/keybag"
        var keybag = try Data(contentsOf: URL(fileURLWithPath: keybagPath))
        keybag[60] ^= 0x01
        try keybag.write(to: URL(fileURLWithPath: keybagPath))
        assertCode(.notAvailable, { _ = try open() }, containing: "integrity")
    }

    func testATPMThatGoesAwayGivesAStatusAndComesBack() throws {
        let keychain = try open()
        try keychain.setPasscode("1234", current: nil)
        softwareTPM.kill()
        assertCode(.notAvailable, { try keychain.unlock(passcode: "1234") }, containing: "does not answer")
        XCTAssertEqual(keychain.status.failedAttempts, 0, "an attempt the TPM never saw is not counted")
        try softwareTPM.start()
        try keychain.unlock(passcode: "1234")
        XCTAssertEqual(keychain.status.lockState, .unlocked)
    }

    func testTheOwnersLockoutParametersAreLeftAloneWhenTheyHaveALockoutAuthorization() throws {
        let before = try tpm.lockoutState()
        XCTAssertEqual(try softwareTPM.tool("tpm2_changeauth", ["-c", "lockout", "owner-secret"]), 0)
        var options = KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        options.deviceRoots = TPMDeviceRootProvider(
            tpm: tpm, lockout: TPMLockoutPolicy(maxTries: before.maxTries + 4, recoveryTime: 7))
        let keychain = try Keychain(directory: directory, options: options)
        let after = try tpm.lockoutState()
        XCTAssertTrue(after.lockoutAuthorizationSet)
        XCTAssertEqual(after.maxTries, before.maxTries, "the owner's parameters were changed")
        XCTAssertEqual(after.recoveryTime, before.recoveryTime)
        XCTAssertFalse(keychain.deviceRootSummary.contains("no lockout authorization"), keychain.deviceRootSummary)
        // Without one (the default in these tests' other TPMs) the summary says what that means.
        let fresh = try SoftwareTPM()
        defer { fresh.stop() }
        let otherDirectory = directory + "-other"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: otherDirectory) }
        let other = try open(otherDirectory, tpm: try TPM(tcti: fresh.tcti))
        XCTAssertTrue(other.deviceRootSummary.contains("no lockout authorization"), other.deviceRootSummary)
        XCTAssertEqual(try TPM(tcti: fresh.tcti).lockoutState().maxTries, lockout.maxTries)
    }

    func testAGarbageTCTIIsRefusedWithAReason() {
        for tcti in ["", "garbage", "swtpm:path=/nonexistent/sock", "device:/dev/null-not-a-tpm"] {
            XCTAssertThrowsError(try TPM(tcti: tcti)) { error in
                XCTAssertEqual((error as? TPMError)?.code, .unreachable, "\(tcti): \(error)")
            }
        }
    }

    func testEnclaveKeysAreMadeAndUsedInTheChip() throws {
        let keychain = try open()
        let made = try keychain.generateEnclaveKey(
            ["tkid": .string(enclaveTokenID), "atag": .data(Data("tpm".utf8))], client: client)
        guard case .dictionary(let item)? = made, case .data(let reference)? = item["v_PersistentRef"],
            let publicKey = item["v_Data"]?.bytes
        else { return XCTFail("no enclave key was made: \(String(describing: made))") }
        let key: [String: ItemValue] = ["class": .string("keys"), "v_PersistentRef": .data(reference)]
        let verifier = try AsymmetricKey.importing(publicKey, kind: .ec, isPrivate: false)
        for (hash, input, data) in [
            (Hash.sha256, SignatureInput.message, Data("signed in the TPM".utf8)),
            (.sha384, .message, Data("another hash".utf8)),
            (.sha256, .digest, try Digest.hash(Data("a digest".utf8), .sha256)),
        ] {
            let signature = try keychain.useEnclaveKey(
                key, operation: .sign(hash: hash, input: input, data: data), client: client)
            XCTAssertTrue(
                try verifier.verify(signature.withUnsafeBytes { Data($0) }, of: data, .ecdsa(hash, input)),
                "\(hash) \(input)")
        }
        // The key exchange gives what the peer computes with the public key.
        let peer = try AsymmetricKey.generate(.ec(.p256))
        let shared = try keychain.useEnclaveKey(
            key, operation: .sharedSecret(peerPublicKey: try peer.publicRepresentation()), client: client)
        XCTAssertTrue(shared.constantTimeEquals(try peer.sharedSecret(with: verifier)))
        // A point off the curve is refused as in software.
        var bad = try peer.publicRepresentation()
        bad[bad.count - 1] ^= 1
        XCTAssertThrowsError(
            try keychain.useEnclaveKey(key, operation: .sharedSecret(peerPublicKey: bad), client: client)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter, "\($0)") }
        // The key works only with this TPM: the copy of the directory on another one opens nothing.
        let copy = directory + "-copy"
        try copyDirectory(to: copy)
        let otherMachine = try SoftwareTPM()
        defer { otherMachine.stop() }
        assertCode(.notAvailable, { _ = try open(copy, tpm: try TPM(tcti: otherMachine.tcti)) })
        // And it is the chip that signs: without it the keychain, unlocked and open, cannot (a software
        // key would sign from memory).
        softwareTPM.kill()
        assertCode(
            .notAvailable,
            {
                _ = try keychain.useEnclaveKey(
                    key, operation: .sign(hash: .sha256, input: .message, data: Data("x".utf8)), client: client)
            }, containing: "TPM")
    }

    func testRetiringTheRootKillsEveryCopyOfItsFile() throws {
        _ = try open()
        let path = directory + "/device-root"
        let saved = try Data(contentsOf: URL(fileURLWithPath: path))
        let root = try TPMDeviceRootProvider(tpm: tpm).openRoot(path: path, create: false)
        try root.retire()
        // The counters are still there (nothing deleted yet): it is the epoch's move that kills the root.
        let handles = try TPMRootFileSnapshot(path)
        XCTAssertNoThrow(try tpm.readCounter(handles.epochCounter))
        XCTAssertThrowsError(try TPMDeviceRoot.load(tpm: tpm, contents: saved, path: path)) { error in
            XCTAssertTrue("\(error)".contains("erased"), "\(error)")
        }
    }

    func testTheEraseAfterTenFailuresWorksOnTopOfTheChipsCount() throws {
        let clock = SteppedClock()
        var options = KeychainOptions(clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        // Room in the chip for ten wrong guesses: the keychain's own count and erase come first.
        options.deviceRoots = TPMDeviceRootProvider(tpm: tpm, lockout: TPMLockoutPolicy(maxTries: 32))
        let keychain = try Keychain(directory: directory, options: options)
        try keychain.setPasscode(SecureBytes(copying: Data("1234".utf8)), current: nil)
        try keychain.setEraseAfterFailedAttempts(true, passcode: SecureBytes(copying: Data("1234".utf8)))
        _ = try keychain.add(item("a", secret: "s3cret", protection: "dk"), client: client)
        let wrong = SecureBytes(copying: Data("0000".utf8))
        for attempt in 1...9 {
            assertCode(.authenticationFailed, { try keychain.unlock(passcode: wrong) }, containing: "wrong passcode")
            XCTAssertEqual(keychain.status.failedAttempts, attempt)
            clock.advance(3600)  // past the escalating delay
        }
        assertCode(.authenticationFailed, { try keychain.unlock(passcode: wrong) }, containing: "erased")
        XCTAssertEqual(keychain.status.lockState, .noPasscode)
        assertCode(.itemNotFound, { _ = try read("a", in: keychain, protection: "dk") })
        // The keychain goes on under the same TPM root, with a new keybag.
        _ = try keychain.add(item("b", secret: "after", protection: "dk"), client: client)
        XCTAssertEqual(try read("b", in: keychain, protection: "dk"), "after")
        XCTAssertTrue(keychain.deviceRootSummary.hasPrefix("TPM 2.0"))
    }

    func testAnEraseIsCryptographic() throws {
        let keychain = try open()
        _ = try keychain.add(item("a", secret: "s3cret", protection: "dk"), client: client)
        let saved = directory + "-saved"
        try copyDirectory(to: saved)
        try keychain.eraseAllContentAndSettings()
        // The whole old directory put back: its counters are gone from the TPM, so its keys are too.
        try FileManager.default.removeItem(atPath: directory)
        try FileManager.default.copyItem(atPath: saved, toPath: directory)
        assertCode(.notAvailable, { _ = try open() })
        // The old root file alone opens nothing either: its secret was sealed for an epoch that has
        // passed, so nothing it wrapped (a device-bound backup, say) opens again.
        XCTAssertThrowsError(
            try TPMDeviceRoot.load(
                tpm: tpm, contents: Data(contentsOf: URL(fileURLWithPath: saved + "/device-root")),
                path: saved + "/device-root")
        ) { error in XCTAssertTrue("\(error)".contains("erased"), "\(error)") }
        // And the new keychain in the directory works under a new root.
        try FileManager.default.removeItem(atPath: directory)
        _ = try open().add(item("b", secret: "new", protection: "dk"), client: client)
    }
}

/// The parts of a keybag file these tests hand to the root directly.
private struct KeybagSnapshot {
    var generation: UInt64
    var salt: Data
    var binding: Data
    var secret: Data
    var classABlob: Data
    var classAContext: Data

    /// Reads format 3 (see KeybagFile): the fields up to the class keys, skipping the MAC check.
    init(_ path: String) throws {
        var reader = ByteReader(try Data(contentsOf: URL(fileURLWithPath: path)))
        _ = try reader.readRaw(5)
        let identifier = try reader.readRaw(16)
        _ = try reader.readRaw(16)
        generation = try reader.read()
        _ = try reader.read() as UInt64
        secret = try reader.readBytes()
        guard try reader.read() as UInt8 == 1, try reader.read() as UInt8 == 2 else {
            throw TestDaemon.Failure(description: "no scrypt passcode in the keybag")
        }
        _ = try reader.read() as UInt8
        _ = try reader.read() as UInt32
        _ = try reader.read() as UInt32
        salt = try reader.readBytes()
        binding = try reader.readBytes()
        _ = try reader.read() as UInt32
        _ = try reader.read() as Double
        _ = try reader.readRaw(16)
        _ = try reader.read() as UInt64
        _ = try reader.read() as UInt8
        let count: UInt8 = try reader.read()
        var blob = Data()
        for _ in 0..<count {
            let number: UInt8 = try reader.read()
            _ = try reader.read() as UInt8
            let wrapped = try reader.readBytes()
            if number == 6 { blob = wrapped }
        }
        classABlob = blob
        var context = Data("class-key".utf8)
        context.append(identifier)
        context.append(6)
        context.append(1)
        classAContext = context
    }
}

/// The counters' handles from a TPM root file.
private struct TPMRootFileSnapshot {
    var generationCounter: UInt32
    var writesCounter: UInt32
    var epochCounter: UInt32

    init(_ path: String) throws {
        var reader = ByteReader(try Data(contentsOf: URL(fileURLWithPath: path)))
        _ = try reader.readRaw(21)
        _ = try reader.readBytes()
        generationCounter = try reader.read()
        writesCounter = try reader.read()
        epochCounter = try reader.read()
    }
}

/// A wall clock the test moves on (time since boot moves with it), to get past the escalating delays.
private final class SteppedClock: KeychainClock, @unchecked Sendable {
    private let start = Date(timeIntervalSince1970: 1_800_000_000)
    private let offset = Mutex<TimeInterval>(0)
    func now() -> Date { start + offset.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { offset.withLock { $0 += seconds } }
    func sinceBoot() -> BootInstant {
        BootInstant(boot: Data(repeating: 7, count: 16), nanoseconds: UInt64(offset.withLock { $0 } * 1e9))
    }
}

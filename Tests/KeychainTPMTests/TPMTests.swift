import KeychainBytes
import KeychainCrypto
import KeychainTPM
import KeychainTestSupport
import XCTest

final class TPMTests: XCTestCase {
    private var softwareTPM: SoftwareTPM!
    private var tpm: TPM!

    override func setUpWithError() throws {
        try XCTSkipUnless(SoftwareTPM.isAvailable, "swtpm is not installed (apt-get install swtpm swtpm-tools)")
        setenv("TSS2_LOG", "all+NONE", 1)
        softwareTPM = try SoftwareTPM()
        tpm = try TPM(tcti: softwareTPM.tcti)
    }

    override func tearDown() {
        tpm = nil
        softwareTPM?.stop()
    }

    func testASealedSecretComesBackOnlyWithItsAuthorization() throws {
        let secret = try SecureBytes(randomCount: 32)
        let passcode = SecureBytes(copying: Array("right".utf8))
        try tpm.setLockoutParameters(maxTries: 5, recoveryTime: 1, lockoutRecovery: 1)
        let sealed = try tpm.seal(
            secret, authorization: passcode, policy: TPMSealPolicy(authorizationValue: true),
            dictionaryAttackProtected: true)
        let opened = try tpm.unseal(sealed, authorization: passcode, policy: TPMSealPolicy(authorizationValue: true))
        XCTAssertTrue(opened.constantTimeEquals(secret))
        XCTAssertThrowsError(
            try tpm.unseal(
                sealed, authorization: SecureBytes(copying: Array("wrong".utf8)),
                policy: TPMSealPolicy(authorizationValue: true))
        ) { error in
            XCTAssertEqual((error as? TPMError)?.code, .authorizationFailed, "\(error)")
        }
        XCTAssertEqual(try tpm.lockoutState().failures, 1)
    }

    func testACounterPolicyDiesWhenTheCounterMovesOn() throws {
        let handle = TPM.counterHandles.lowerBound + 0x1234
        let authorization = try SecureBytes(randomCount: 32)
        let value = try tpm.defineCounter(at: handle, authorization: authorization)
        XCTAssertEqual(try tpm.readCounter(handle), value)
        let secret = try SecureBytes(randomCount: 32)
        let policy = TPMSealPolicy(counter: (handle, value))
        let sealed = try tpm.seal(secret, authorization: nil, policy: policy, dictionaryAttackProtected: false)
        XCTAssertTrue(try tpm.unseal(sealed, authorization: nil, policy: policy).constantTimeEquals(secret))
        // Moving it on needs its authorization; moving it to where it is already is no second increment.
        XCTAssertThrowsError(
            try tpm.advanceCounter(handle, to: value + 1, authorization: SecureBytes(randomCount: 32)))
        try tpm.advanceCounter(handle, to: value + 1, authorization: authorization)
        try tpm.advanceCounter(handle, to: value + 1, authorization: authorization)
        XCTAssertEqual(try tpm.readCounter(handle), value + 1)
        XCTAssertThrowsError(try tpm.advanceCounter(handle, to: value + 5, authorization: authorization)) { error in
            XCTAssertEqual((error as? TPMError)?.code, .policyFailed, "\(error)")
        }
        XCTAssertThrowsError(try tpm.unseal(sealed, authorization: nil, policy: policy)) { error in
            XCTAssertEqual((error as? TPMError)?.code, .policyFailed, "\(error)")
        }
        XCTAssertThrowsError(try tpm.defineCounter(at: handle, authorization: authorization)) { error in
            XCTAssertEqual((error as? TPMError)?.code, .alreadyDefined, "\(error)")
        }
        try tpm.undefineIndex(handle)
        XCTAssertThrowsError(try tpm.readCounter(handle)) { error in
            XCTAssertEqual((error as? TPMError)?.code, .missing, "\(error)")
        }
    }
}

/// A key made in the chip cannot be had outside it.
final class TPMKeyTests: XCTestCase {
    func testAKeyMadeInTheChipIsFixedToItAndUsableOnlyThere() throws {
        try XCTSkipUnless(SoftwareTPM.isAvailable, "swtpm is not installed (apt-get install swtpm swtpm-tools)")
        setenv("TSS2_LOG", "all+NONE", 1)
        let first = try SoftwareTPM()
        defer { first.stop() }
        let second = try SoftwareTPM()
        defer { second.stop() }
        let tpm = try TPM(tcti: first.tcti)
        let (publicKey, object) = try tpm.createKey()
        XCTAssertEqual(publicKey.count, 65)
        // The attributes the chip keeps with it: made by the chip, never duplicated, fixed to its parent.
        // TPM structures are big-endian: size (2), type (2), name algorithm (2), then the attributes (4).
        let attributes = object.publicArea.dropFirst(6).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        for (bit, name) in [(UInt32(0x2), "fixedTPM"), (0x10, "fixedParent"), (0x20, "sensitiveDataOrigin")] {
            XCTAssertNotEqual(attributes & bit, 0, name)
        }
        let digest = try Digest.sha256(Data("signed".utf8))
        let (r, s) = try tpm.sign(object, digest: digest)
        XCTAssertEqual(r.count + s.count, 64)
        // Another TPM refuses the object: its private part is encrypted under the first chip's primary.
        let other = try TPM(tcti: second.tcti)
        XCTAssertThrowsError(try other.sign(object, digest: digest)) { error in
            XCTAssertEqual((error as? TPMError)?.code, .foreignObject, "\(error)")
        }
    }
}

import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainStorage
import XCTest

@testable import KeychainEngine

/// How an enclave key is kept: its private key exists only wrapped by the device root, inside the
/// sealed item; no file holds it in the clear, no read answers with it, and the wrapping is tied to
/// the key's own public key.
final class EnclaveKeyStorageTests: EngineTestCase {
    private func makeKey(tag: String = "device") throws -> (reference: Data, publicKey: Data) {
        let result = try keychain.generateEnclaveKey(
            ["tkid": .string(enclaveTokenID), "atag": .data(Data(tag.utf8))], client: client)
        guard case .dictionary(let item)? = result, case .data(let reference)? = item["v_PersistentRef"],
            let publicKey = item["v_Data"]?.bytes
        else {
            // A wrong answer is a failure of the engine, not a reason to skip.
            XCTFail("no enclave key was made: \(String(describing: result))")
            throw KeychainError.internalError("no enclave key was made")
        }
        return (reference, publicKey)
    }

    /// The item's secret as the engine holds it: the wrapped private key.
    private func storedBlob(_ reference: Data) throws -> Data {
        let query = try Query.parse(
            ["class": .string("keys"), "v_PersistentRef": .data(reference)], for: .copyMatching)
        let matches = try keychain.pool.withConnection { connection in
            var search = try ItemSearch(
                store: ItemStore(connection: connection), keybag: keychain.keybag, digests: keychain.digests(),
                itemClass: .key, query: query, groups: ["TEAM.app"], access: nil)
            search.enclaveKey = .wrappedPrivateKey
            return try search.run(limit: 1, needSecret: true)
        }
        return try XCTUnwrap(matches.first?.record.secret).withUnsafeBytes { Data($0) }
    }

    func testThePrivateKeyIsOnlyEverStoredWrappedByTheDeviceRoot() throws {
        let (reference, publicKey) = try makeKey()
        XCTAssertEqual(publicKey.count, 65)
        let blob = try storedBlob(reference)
        let wrapped = try EnclaveKeyRules.wrappedKey(in: blob)
        let representation = try keychain.keybag.unwrapDeviceBound(wrapped, context: publicKey)
        let privateBytes = representation.withUnsafeBytes { Data($0) }
        XCTAssertEqual(privateBytes.prefix(65), publicKey, "the wrapped key is this key's private key")
        let scalar = privateBytes.suffix(32)
        // Checkpointed, every byte the keychain wrote is in its files: none holds the private key.
        keychain = nil
        keychain = try open()
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory)
        XCTAssertFalse(files.isEmpty)
        for name in files {
            guard let contents = FileManager.default.contents(atPath: directory + "/" + name) else { continue }
            XCTAssertNil(contents.range(of: scalar), "\(name) holds the private key")
            XCTAssertNil(contents.range(of: wrapped), "\(name) holds the wrapped key outside the sealed item")
        }
        // The wrapping is tied to the key's public key: it opens for no other.
        let (_, otherPublicKey) = try makeKey(tag: "other")
        XCTAssertThrowsError(try keychain.keybag.unwrapDeviceBound(wrapped, context: otherPublicKey))
    }

    func testReadsAnswerWithThePublicKeyAndUsesWithTheKey() throws {
        let (reference, publicKey) = try makeKey()
        let read = try keychain.copyMatching(
            ["class": .string("keys"), "v_PersistentRef": .data(reference), "r_Data": .bool(true)], client: client)
        XCTAssertEqual(read, .data(publicKey))
        let message = Data("made by the engine".utf8)
        let signature = try keychain.useEnclaveKey(
            ["class": .string("keys"), "v_PersistentRef": .data(reference)],
            operation: .sign(hash: .sha256, input: .message, data: message), client: client)
        let verifier = try AsymmetricKey.importing(publicKey, kind: .ec, isPrivate: false)
        XCTAssertTrue(
            try verifier.verify(
                signature.withUnsafeBytes { Data($0) }, of: message, .ecdsa(.sha256, .message)))
        // A software key's item is not an enclave key, and a password's reference names no key.
        let software = try AsymmetricKey.generate(.ec(.p256))
        let added = try keychain.add(
            [
                "class": .string("keys"), "kcls": .integer(1), "type": .integer(73), "bsiz": .integer(256),
                "klbl": .data(Data("soft".utf8)),
                "v_Data": .data(try software.externalRepresentation().withUnsafeBytes { Data($0) }),
                "r_PersistentRef": .bool(true),
            ], client: client)
        guard case .data(let softwareReference)? = added else { return XCTFail("\(String(describing: added))") }
        XCTAssertThrowsError(
            try keychain.useEnclaveKey(
                ["class": .string("keys"), "v_PersistentRef": .data(softwareReference)],
                operation: .sign(hash: .sha256, input: .message, data: message), client: client)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter) }
        XCTAssertThrowsError(
            try keychain.useEnclaveKey(
                ["class": .string("keys")], operation: .sign(hash: .sha256, input: .message, data: message),
                client: client)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter) }
        // Another client's groups do not reach it.
        let stranger = ClientIdentity(accessGroups: ["TEAM.other"])
        XCTAssertThrowsError(
            try keychain.useEnclaveKey(
                ["class": .string("keys"), "v_PersistentRef": .data(reference)],
                operation: .sharedSecret(peerPublicKey: publicKey), client: stranger)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .itemNotFound) }
        // A peer point that is not on the curve is refused.
        var offCurve = publicKey
        offCurve[64] ^= 1
        XCTAssertThrowsError(
            try keychain.useEnclaveKey(
                ["class": .string("keys"), "v_PersistentRef": .data(reference)],
                operation: .sharedSecret(peerPublicKey: offCurve), client: client)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter) }
    }

    func testAnEphemeralKeysTokenOpensOnlyHereAndOnlyWhole() throws {
        let made = try keychain.generateEnclaveKey(
            ["tkid": .string(enclaveTokenID), "perm": .bool(false)], client: client)
        guard case .dictionary(let answer)? = made, case .data(let token)? = answer["toid"],
            let publicKey = answer["v_Data"]?.bytes
        else { return XCTFail("\(String(describing: made))") }
        XCTAssertNil(answer["v_PersistentRef"], "no item holds it")
        let use: (Data) throws -> SecureBytes = { token in
            try self.keychain.useEnclaveKey(
                ["class": .string("keys"), "toid": .data(token)],
                operation: .sign(hash: .sha256, input: .message, data: Data("m".utf8)), client: self.client)
        }
        XCTAssertNoThrow(try use(token))
        // Any byte changed, the token is refused: its parts are bound together by the wrapping.
        for index in [0, 5, token.count / 2, token.count - 1] {
            var edited = token
            edited[index] ^= 0x01
            XCTAssertThrowsError(try use(edited), "byte \(index)") {
                XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter)
            }
        }
        XCTAssertThrowsError(try use(token.prefix(token.count - 1))) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter)
        }
        // Another device's keychain (another root) cannot open it.
        let elsewhere = directory + "-elsewhere"
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        let other = try open(directory: elsewhere)
        XCTAssertThrowsError(
            try other.useEnclaveKey(
                ["class": .string("keys"), "toid": .data(token)],
                operation: .sign(hash: .sha256, input: .message, data: Data("m".utf8)), client: client)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter) }
        // Nor can another keychain that shares this one's root: the token is sealed under this
        // keychain's class key too.
        let sharing = directory + "-sharing"
        defer { try? FileManager.default.removeItem(atPath: sharing) }
        let sibling = try open(directory: sharing, rootPath: directory + "/device-root")
        XCTAssertThrowsError(
            try sibling.useEnclaveKey(
                ["class": .string("keys"), "toid": .data(token)],
                operation: .sign(hash: .sha256, input: .message, data: Data("m".utf8)), client: client)
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .itemNotFound) }
        // The private key is not in the token in the clear.
        let stored = try keychain.add(
            [
                "class": .string("keys"), "tkid": .string(enclaveTokenID), "toid": .data(token),
                "r_PersistentRef": .bool(true),
            ],
            client: client)
        guard case .data(let reference)? = stored else { return XCTFail("\(String(describing: stored))") }
        let wrapped = try EnclaveKeyRules.wrappedKey(in: try storedBlob(reference))
        let privateBytes = try keychain.keybag.unwrapDeviceBound(wrapped, context: publicKey).withUnsafeBytes {
            Data($0)
        }
        XCTAssertNil(token.range(of: privateBytes.suffix(32)))
    }
}

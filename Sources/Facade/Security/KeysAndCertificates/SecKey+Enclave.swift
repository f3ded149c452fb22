import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// How an enclave key's `SecKey` reaches its private half: the query naming its item by persistent
/// reference (or, for an ephemeral key, carrying its token), with the authentication choices of the
/// call that made or found the key (`kSecUseAuthenticationContext`, `kSecUseOperationPrompt`, the UI
/// choice), which every use carries.
struct EnclaveKeyReference: Sendable {
    let useQuery: [String: ItemValue]

    /// The token of an ephemeral key (one no item holds), nil for a stored one.
    var token: Data? {
        guard case .data(let token)? = useQuery["toid"] else { return nil }
        return token
    }

    /// The keys of a query that a key found by it keeps for its uses.
    static let keptOptions = ["u_AuthCtx", "u_OpPrompt", "u_AuthUI", "u_NoAuthUI"]

    /// The options kept, but not `kSecUseAuthenticationUISkip`: it chose which items a search finds,
    /// and kept it would make every use that needs the user fail as if the key were gone.
    init(persistentReference: Data, options: [String: ItemValue]) {
        var query = Self.kept(options)
        query["v_PersistentRef"] = .data(persistentReference)
        useQuery = query
    }

    init(token: Data, options: [String: ItemValue]) {
        var query = Self.kept(options)
        query["toid"] = .data(token)
        useQuery = query
    }

    private static func kept(_ options: [String: ItemValue]) -> [String: ItemValue] {
        var query = options.filter { keptOptions.contains($0.key) }
        if query["u_AuthUI"] == .string("u_AuthUIS") { query["u_AuthUI"] = nil }
        query["class"] = .string("keys")
        return query
    }

    /// Performs the operation where the key is; failures become the CFError with the service's status.
    func perform(_ operation: EnclaveKeyOperation, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?)
        -> SecureBytes?
    {
        do {
            return try KeychainServices.current().useEnclaveKey(useQuery, operation)
        } catch let failure as KeychainError {
            fail(error, failure.osStatus, "the enclave key's \(operation.name) failed: \(failure.reason)")
        } catch _ {
            fail(error, errSecInternalComponent, "the enclave key's \(operation.name) failed")
        }
        return nil
    }

    /// ECIES decryption whose key agreement happens where the key is; the rest is done here.
    func eciesDecrypt(
        _ ciphertext: Data, _ scheme: ECIESScheme, publicKey: AsymmetricKey,
        _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
    ) -> CFData? {
        guard case .ec(let curve) = publicKey.kind else {
            fail(error, errSecParam, "ECIES needs an EC key")
            return nil
        }
        struct Reported: Error {}
        do {
            let plaintext = try AsymmetricKey.eciesDecrypt(ciphertext, curve: curve, scheme) { ephemeral in
                guard let shared = perform(.sharedSecret(peerPublicKey: try ephemeral.publicRepresentation()), error)
                else { throw Reported() }
                return shared
            }
            return plaintext.withUnsafeBytes { Data($0) } as NSData
        } catch let failure as AsymmetricKey.Failure {
            fail(error, failure)
        } catch _ {
            // Reported: the CFError is set already.
        }
        return nil
    }
}

/// `SecKeyCreateRandomKey` with `kSecAttrTokenID`: the only token is the device root's
/// (`kSecAttrTokenIDSecureEnclave`), which makes 256-bit EC keys that it keeps.
enum EnclaveKeys {
    static func create(
        type: String, bits: Int, privateAttributes: [String: Any], publicAttributes: [String: Any],
        _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
    ) -> SecKey? {
        guard (privateAttributes["tkid"] as? String) == enclaveTokenID else {
            fail(error, errSecParam, "the only kSecAttrTokenID is kSecAttrTokenIDSecureEnclave")
            return nil
        }
        guard type == "73", bits == 256 else {
            fail(error, errSecParam, "enclave keys are 256-bit elliptic-curve (P-256) keys")
            return nil
        }
        // Permanent unless the caller says otherwise (Apple's default for token keys).
        var attributes = privateAttributes
        attributes["perm"] = privateAttributes["perm"].map { isTrue($0) } ?? true
        attributes["class"] = "keys"
        let values: [String: ItemValue]
        do {
            values = try ValueBridging.dictionary(attributes as CFDictionary)
        } catch _ {
            fail(error, errSecParam, "the enclave key's attributes do not bridge")
            return nil
        }
        let answer: ItemResult?
        do {
            answer = try KeychainServices.current().generateEnclaveKey(values)
        } catch let failure as KeychainError {
            fail(error, failure.osStatus, failure.reason)
            return nil
        } catch _ {
            fail(error, errSecInternalComponent, "the enclave key could not be made")
            return nil
        }
        guard case .dictionary(let item)? = answer else {
            fail(error, errSecInternalComponent, "the keychain service answered the enclave key's creation oddly")
            return nil
        }
        // Whatever goes wrong from here takes the new key back out.
        func takeBack() {
            if case .data(let reference)? = item["v_PersistentRef"] {
                SecItemDelete(["class": "keys", "v_PersistentRef": reference] as CFDictionary)
            }
        }
        guard let publicKey = item["v_Data"]?.bytes,
            let key = try? KeyItems.makeKey(publicKey, attributes: item, options: values)
        else {
            takeBack()
            fail(error, errSecInternalComponent, "the keychain service answered the enclave key's creation oddly")
            return nil
        }
        // The public key is an ordinary key item, stored when its attributes say so (without the token).
        let publicItem = publicAttributes.filter { $0.key != "tkid" }
        guard let publicHalf = SecKeyCopyPublicKey(key), storePermanent([(publicHalf, publicItem)], error) else {
            takeBack()
            return nil
        }
        return key
    }
}

/// An enclave key's signature: ECDSA made where the key is. The digest forms without a named hash
/// (`ecdsaSignatureDigestX962`, `ecdsaSignatureRFC4754`) take digests of the five hashes' lengths;
/// RFC 4754's r ‖ s is made here from the DER the service gives.
func enclaveSignature(
    _ enclave: EnclaveKeyReference, _ scheme: SignatureScheme, _ input: Data,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Data? {
    let operation: EnclaveKeyOperation
    switch scheme {
    case .ecdsa(let hash, let form): operation = .sign(hash: hash, input: form, data: input)
    case .ecdsaDigest, .ecdsaRawRS:
        guard let hash = Hash.allCases.first(where: { $0.length == input.count }) else {
            fail(error, errSecParam, "an enclave key signs digests of 20, 28, 32, 48 or 64 bytes")
            return nil
        }
        operation = .sign(hash: hash, input: .digest, data: input)
    default:
        fail(error, errSecParam, "the algorithm is not supported by this key")
        return nil
    }
    guard let signature = enclave.perform(operation, error)?.withUnsafeBytes({ Data($0) }) else { return nil }
    guard scheme == .ecdsaRawRS else { return signature }
    guard let raw = ECDSASignatureEncoding.rawRS(fromDER: signature, coordinateSize: 32) else {
        fail(error, errSecInternalComponent, "the enclave key's signature is not DER")
        return nil
    }
    return raw
}

import COpenSSL
import Foundation
import Security

/// Signing and verifying through `SecKey` beside the same operation done directly with OpenSSL's EVP
/// calls on the same key (the floor), measured in turn sample by sample: ECDSA P-256 with SHA-256, and
/// RSA-2048 PKCS#1 v1.5 with SHA-256; and an enclave key's signature against OpenSSL's.
struct KeyBenchmark {
    let samples: Int

    func run() {
        var table = TimingTable()
        measure(
            "ECDSA P-256 SHA-256", algorithm: "EC", group: "P-256", secAlgorithm: .ecdsaSignatureMessageX962SHA256,
            into: &table)
        measure(
            "RSA-2048 PKCS#1 v1.5 SHA-256", algorithm: "RSA", group: nil,
            secAlgorithm: .rsaSignatureMessagePKCS1v15SHA256, into: &table)
        measureEnclave(into: &table)
        print("SecKey, \(samples) samples each; ratios are medians over doing the same with OpenSSL directly")
        table.print()
        print("")
    }

    /// An enclave key's signature in the embedded keychain (a lookup of its item, the root's unwrap,
    /// the import, the signature) beside OpenSSL signing with a P-256 key it holds.
    private func measureEnclave(into table: inout TimingTable) {
        let home = NSTemporaryDirectory() + "keychain-bench-enclave-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: home) }
        let previousHome = getenv("KEYCHAIN_HOME").map { String(cString: $0) }
        let previousSocket = getenv("KEYCHAIN_SOCKET").map { String(cString: $0) }
        setenv("KEYCHAIN_HOME", home, 1)
        setenv("KEYCHAIN_SOCKET", "", 1)
        defer {
            if let previousHome { setenv("KEYCHAIN_HOME", previousHome, 1) } else { unsetenv("KEYCHAIN_HOME") }
            if let previousSocket { setenv("KEYCHAIN_SOCKET", previousSocket, 1) } else { unsetenv("KEYCHAIN_SOCKET") }
        }
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
        ]
        guard let enclaveKey = SecKeyCreateRandomKey(parameters as CFDictionary, nil),
            let pkey = generate("EC", group: "P-256")
        else { fail("cannot make the enclave key") }
        defer { EVP_PKEY_free(pkey) }
        let message = Data("a message to sign, as an app signs a request".utf8)
        var floor = Latencies()
        var enclave = Latencies()
        for sample in 0..<samples {
            for step in 0..<2 {
                if (step == 0) == (sample % 2 == 0) {
                    floor.measure { _ = directSign(pkey, message) }
                } else {
                    var produced: CFData?
                    enclave.measure {
                        produced = SecKeyCreateSignature(
                            enclaveKey, .ecdsaSignatureMessageX962SHA256, message as CFData, nil)
                    }
                    if produced == nil { fail("the enclave key did not sign") }
                }
            }
        }
        for (label, latencies) in [
            ("sign, OpenSSL directly: ECDSA P-256 SHA-256", floor), ("sign, enclave key (embedded)", enclave),
        ] {
            table.add(label, latencies, ratios: [latencies.median / floor.median])
        }
    }

    private func measure(
        _ name: String, algorithm: String, group: String?, secAlgorithm: SecKeyAlgorithm, into table: inout TimingTable
    ) {
        guard let pkey = generate(algorithm, group: group), let secKey = secKey(from: pkey, isEC: group != nil) else {
            fail("cannot prepare the \(name) key")
        }
        defer { EVP_PKEY_free(pkey) }
        guard let publicKey = SecKeyCopyPublicKey(secKey) else { fail("no public key") }
        let message = Data("a message to sign, as an app signs a request".utf8)
        var floorSign = Latencies()
        var secSign = Latencies()
        var floorVerify = Latencies()
        var secVerify = Latencies()
        var signature = Data()
        for sample in 0..<samples {
            let order = sample % 2 == 0
            for step in 0..<2 {
                if (step == 0) == order {
                    floorSign.measure { signature = directSign(pkey, message) }
                    floorVerify.measure { _ = directVerify(pkey, message, signature) }
                } else {
                    var produced: CFData?
                    secSign.measure { produced = SecKeyCreateSignature(secKey, secAlgorithm, message as CFData, nil) }
                    guard let produced else { fail("SecKeyCreateSignature failed") }
                    secVerify.measure {
                        _ = SecKeyVerifySignature(publicKey, secAlgorithm, message as CFData, produced, nil)
                    }
                }
            }
        }
        for (label, latencies, floor) in [
            ("sign, OpenSSL directly: " + name, floorSign, floorSign), ("sign, SecKey: " + name, secSign, floorSign),
            ("verify, OpenSSL directly: " + name, floorVerify, floorVerify),
            ("verify, SecKey: " + name, secVerify, floorVerify),
        ] {
            table.add(label, latencies, ratios: [latencies.median / floor.median])
        }
    }

    private func generate(_ algorithm: String, group: String?) -> OpaquePointer? {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { return nil }
        if let group {
            guard EVP_PKEY_CTX_set_group_name(context, group) == 1 else { return nil }
        } else {
            guard EVP_PKEY_CTX_set_rsa_keygen_bits(context, 2048) == 1 else { return nil }
        }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1 else { return nil }
        return key
    }

    /// The same key as a `SecKey`, through Apple's external representation.
    private func secKey(from pkey: OpaquePointer, isEC: Bool) -> SecKey? {
        var bytes: Data
        if isEC {
            var length = 0
            var point = [UInt8](repeating: 0, count: 65)
            guard EVP_PKEY_get_octet_string_param(pkey, "encoded-pub-key", &point, 65, &length) == 1 else { return nil }
            var scalar: OpaquePointer?
            guard EVP_PKEY_get_bn_param(pkey, "priv", &scalar) == 1, let scalar else { return nil }
            defer { BN_clear_free(scalar) }
            var privateBytes = [UInt8](repeating: 0, count: 32)
            BN_bn2binpad(scalar, &privateBytes, 32)
            bytes = Data(point) + Data(privateBytes)
        } else {
            var buffer: UnsafeMutablePointer<UInt8>?
            let length = i2d_PrivateKey(pkey, &buffer)
            guard length > 0, let buffer else { return nil }
            bytes = Data(bytes: buffer, count: Int(length))
            CRYPTO_free(buffer, #fileID, #line)
        }
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: isEC ? kSecAttrKeyTypeECSECPrimeRandom : kSecAttrKeyTypeRSA,
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
        ]
        return SecKeyCreateWithData(bytes as CFData, attributes as CFDictionary, nil)
    }

    private func directSign(_ pkey: OpaquePointer, _ message: Data) -> Data {
        guard let context = EVP_MD_CTX_new() else { return Data() }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit_ex(context, nil, "SHA256", nil, nil, pkey, nil) == 1 else { return Data() }
        var length = 0
        var signature = [UInt8](repeating: 0, count: 512)
        length = signature.count
        let ok = message.withUnsafeBytes { raw in
            EVP_DigestSign(
                context, &signature, &length, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        return ok == 1 ? Data(signature[..<length]) : Data()
    }

    private func directVerify(_ pkey: OpaquePointer, _ message: Data, _ signature: Data) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit_ex(context, nil, "SHA256", nil, nil, pkey, nil) == 1 else { return false }
        return signature.withUnsafeBytes { signatureBytes in
            message.withUnsafeBytes { raw in
                EVP_DigestVerify(
                    context, signatureBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), signatureBytes.count,
                    raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count) == 1
            }
        }
    }
}

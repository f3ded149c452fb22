import COpenSSL
import FoundationEssentials
import KeychainBytes

/// An RSA or elliptic-curve key pair (or its public half) held by OpenSSL: generated, exported and
/// imported in the encodings Apple's `SecKey` uses (PKCS#1 for RSA; ANSI X9.63 `04‖X‖Y[‖K]` for EC),
/// and used to sign and verify. The private material stays inside OpenSSL's key object, which frees
/// and clears it; exported private bytes come back in wiped memory.
public final class AsymmetricKey: @unchecked Sendable {
    // The EVP_PKEY is never changed after init, and OpenSSL's key objects may be used from several
    // threads for signing and verifying at once.
    let key: OpaquePointer
    public let kind: Kind
    public let isPrivate: Bool

    public enum Kind: Sendable, Equatable {
        case rsa(bits: Int)
        case ec(Curve)
    }

    public enum Curve: Int, Sendable, CaseIterable {
        case p192 = 192
        case p224 = 224
        case p256 = 256
        case p384 = 384
        case p521 = 521

        var name: String {
            switch self {
            case .p192: "P-192"
            case .p224: "P-224"
            case .p256: "P-256"
            case .p384: "P-384"
            case .p521: "P-521"
            }
        }

        /// Bytes of one coordinate (and of the private scalar).
        public var coordinateSize: Int { (rawValue + 7) / 8 }

        init?(groupName: String) {
            guard let curve = Curve.allCases.first(where: { $0.name == groupName || $0.legacyName == groupName })
            else { return nil }
            self = curve
        }

        private var legacyName: String {
            switch self {
            case .p192: "prime192v1"
            case .p224: "secp224r1"
            case .p256: "prime256v1"
            case .p384: "secp384r1"
            case .p521: "secp521r1"
            }
        }
    }

    public enum Failure: Error, Equatable, Sendable {
        /// The encoding is malformed, or not a key of this kind.
        case invalidKey(String)
        case unsupported(String)
        case library(String)
    }

    /// Takes over a reference the caller already holds.
    convenience init(retained key: OpaquePointer, kind: Kind, isPrivate: Bool) {
        self.init(adopting: key, kind: kind, isPrivate: isPrivate)
    }

    private init(adopting key: OpaquePointer, kind: Kind, isPrivate: Bool) {
        self.key = key
        self.kind = kind
        self.isPrivate = isPrivate
    }

    deinit { libcrypto.EVP_PKEY_free(key) }

    // MARK: Generation

    public static func generate(_ kind: Kind) throws(Failure) -> AsymmetricKey {
        let algorithm: String
        switch kind {
        case .rsa: algorithm = "RSA"
        case .ec: algorithm = "EC"
        }
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw .library("no \(algorithm)")
        }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        guard libcrypto.EVP_PKEY_keygen_init(context) == 1 else { throw .library("keygen init") }
        switch kind {
        case .rsa(let bits):
            guard libcrypto.EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)) == 1 else {
                throw .library("RSA size")
            }
        case .ec(let curve):
            guard libcrypto.EVP_PKEY_CTX_set_group_name(context, curve.name) == 1 else { throw .library("EC group") }
        }
        var generated: OpaquePointer?
        guard libcrypto.EVP_PKEY_generate(context, &generated) == 1, let generated else {
            throw .library("key generation")
        }
        return AsymmetricKey(adopting: generated, kind: kind, isPrivate: true)
    }

    // MARK: The public half

    public func publicKey() throws(Failure) -> AsymmetricKey {
        guard isPrivate else { return self }
        return try Self.importing(publicRepresentation(), kind: kind, isPrivate: false)
    }

    // MARK: External representation

    /// Public keys: PKCS#1 RSAPublicKey, or `04‖X‖Y`. Private keys: PKCS#1 RSAPrivateKey, or `04‖X‖Y‖K`.
    public func externalRepresentation() throws(Failure) -> SecureBytes {
        isPrivate ? try privateRepresentation() : SecureBytes(copying: try publicRepresentation())
    }

    public func publicRepresentation() throws(Failure) -> Data {
        switch kind {
        case .rsa:
            return try Self.der { libcrypto.i2d_PublicKey(key, $0) }
        case .ec:
            var length = 0
            guard libcrypto.EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", nil, 0, &length) == 1, length > 0
            else {
                throw .library("EC public key length")
            }
            var bytes = Data(count: length)
            let ok = bytes.withUnsafeMutableBytes {
                libcrypto.EVP_PKEY_get_octet_string_param(
                    key, "encoded-pub-key", $0.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &length)
            }
            guard ok == 1 else { throw .library("EC public key") }
            return bytes
        }
    }

    private func privateRepresentation() throws(Failure) -> SecureBytes {
        switch kind {
        case .rsa:
            var buffer: UnsafeMutablePointer<UInt8>?
            let length = libcrypto.i2d_PrivateKey(key, &buffer)
            guard length > 0, let buffer else { throw .library("RSA private key encoding") }
            defer { libcrypto.CRYPTO_clear_free(buffer, Int(length), #fileID, #line) }
            return SecureBytes(copying: UnsafeRawBufferPointer(start: buffer, count: Int(length)))
        case .ec(let curve):
            let point = try publicRepresentation()
            var scalar: OpaquePointer?
            guard libcrypto.EVP_PKEY_get_bn_param(key, "priv", &scalar) == 1, let scalar else {
                throw .library("EC private scalar")
            }
            defer { libcrypto.BN_clear_free(scalar) }
            do {
                return try SecureBytes(count: point.count + curve.coordinateSize) { out in
                    point.withUnsafeBytes { out.copyMemory(from: $0) }
                    let tail = UnsafeMutableRawBufferPointer(rebasing: out[point.count...])
                    guard
                        libcrypto.BN_bn2binpad(
                            scalar, tail.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(tail.count))
                            == Int32(tail.count)
                    else { throw Failure.library("EC private scalar size") }
                }
            } catch let failure as Failure {
                throw failure
            } catch {
                throw .library("\(error)")
            }
        }
    }

    /// A key from its external representation (`isPrivate` chooses which form is expected). RSA public
    /// keys may also be X.509 SubjectPublicKeyInfo. For EC, the curve comes from the length.
    public static func importing(_ bytes: Data, kind hint: KindHint, isPrivate: Bool) throws(Failure)
        -> AsymmetricKey
    {
        switch hint {
        case .rsa: return try importRSA(bytes, isPrivate: isPrivate)
        case .ec: return try importEC(bytes, isPrivate: isPrivate)
        }
    }

    private static func importing(_ bytes: Data, kind: Kind, isPrivate: Bool) throws(Failure) -> AsymmetricKey {
        switch kind {
        case .rsa: try importRSA(bytes, isPrivate: isPrivate)
        case .ec: try importEC(bytes, isPrivate: isPrivate)
        }
    }

    public enum KindHint: Sendable { case rsa, ec }

    /// A key from a file as OpenSSL and most tools write them: PEM or DER; a PKCS#8, PKCS#1 or SEC1
    /// private key, or a SubjectPublicKeyInfo public key (not encrypted). OpenSSL's decoders find the
    /// structure; the key is then taken again from its external representation, through the same
    /// checks as `importing(_:kind:isPrivate:)`.
    public static func importingFile(_ bytes: Data) throws(Failure) -> AsymmetricKey {
        guard !bytes.isEmpty, bytes.count <= 65_536 else { throw .invalidKey("a key file of \(bytes.count) bytes") }
        for input: StaticString in ["PEM", "DER"] {
            for (selection, isPrivate) in [(Int32(0x87), true), (Int32(0x86), false)] {
                guard let parsed = decode(bytes, input: input, structure: nil, keyType: nil, selection: selection)
                else { continue }
                defer { libcrypto.EVP_PKEY_free(parsed) }
                return try importing(copyOf: parsed, isPrivate: isPrivate)
            }
        }
        libcrypto.ERR_clear_error()
        throw .invalidKey("not an RSA or EC key in PEM or DER (PKCS#8, PKCS#1, SEC1 or SubjectPublicKeyInfo)")
    }

    /// A key OpenSSL parsed elsewhere (a key file, a certificate), taken again from its external
    /// representation through the same checks as `importing(_:kind:isPrivate:)`, since OpenSSL's
    /// parsers bound no RSA key's size or exponent: any key is then one that could have been imported.
    static func importing(copyOf parsed: OpaquePointer, isPrivate: Bool) throws(Failure) -> AsymmetricKey {
        guard let found = adopting(copyOf: parsed, isPrivate: isPrivate) else {
            throw .invalidKey("a key of a type other than RSA or EC, or on a curve not supported")
        }
        let kind: KindHint
        switch found.kind {
        case .rsa: kind = .rsa
        case .ec: kind = .ec
        }
        if isPrivate {
            let external = try found.externalRepresentation()
            var copy = external.withUnsafeBytes { Data($0) }
            defer { copy.resetBytes(in: 0..<copy.count) }
            return try importing(copy, kind: kind, isPrivate: true)
        }
        return try importing(try found.publicRepresentation(), kind: kind, isPrivate: false)
    }

    /// The key as PEM, as OpenSSL writes it: a PKCS#8 private key (unencrypted), or a
    /// SubjectPublicKeyInfo public key. A private key's PEM is a secret, and comes in wiped memory.
    public func pem() throws(Failure) -> SecureBytes {
        let selection: Int32 = isPrivate ? 0x87 : 0x86
        let structure: StaticString = isPrivate ? "PrivateKeyInfo" : "SubjectPublicKeyInfo"
        guard
            let encoder = libcrypto.OSSL_ENCODER_CTX_new_for_pkey(
                key, selection, Self.name("PEM"), Self.name(structure), nil)
        else { throw .library("no PEM encoder for the key") }
        defer { libcrypto.OSSL_ENCODER_CTX_free(encoder) }
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        guard libcrypto.OSSL_ENCODER_to_data(encoder, &output, &length) == 1, let output else {
            libcrypto.ERR_clear_error()
            throw .library("the key could not be written as PEM")
        }
        defer {
            libcrypto.OPENSSL_cleanse(output, length)
            libcrypto.CRYPTO_free(output, #fileID, #line)
        }
        return SecureBytes(copying: UnsafeBufferPointer(start: output, count: length))
    }

    private static func importRSA(_ bytes: Data, isPrivate: Bool) throws(Failure) -> AsymmetricKey {
        guard !bytes.isEmpty, bytes.count <= 16_384 else { throw .invalidKey("an RSA key of \(bytes.count) bytes") }
        // Decoded by OpenSSL's provider decoders, so that the key is a provider key from the start
        // (a legacy key is converted again at every use).
        var parsed = decode(bytes, structure: "type-specific", keyType: "RSA", selection: isPrivate ? 0x87 : 0x86)
        if parsed == nil, !isPrivate {
            parsed = decode(bytes, structure: "SubjectPublicKeyInfo", keyType: "RSA", selection: 0x86)
        }
        libcrypto.ERR_clear_error()
        guard let parsed else { throw .invalidKey("not a PKCS#1 RSA \(isPrivate ? "private" : "public") key") }
        let bits = Int(libcrypto.EVP_PKEY_get_bits(parsed))
        let key = AsymmetricKey(adopting: parsed, kind: .rsa(bits: bits), isPrivate: isPrivate)
        // Bounded before any use: a huge exponent or prime would make every operation take minutes.
        guard (512...8192).contains(bits) else {
            throw .invalidKey("an RSA key of \(bits) bits (512 to 8192 are used)")
        }
        guard let exponent = key.bigNumberBits("e", odd: true), (2...64).contains(exponent) else {
            throw .invalidKey("an RSA public exponent must be odd, at least 3 and under 2^64")
        }
        if isPrivate {
            for factor in ["rsa-factor1", "rsa-factor2"] {
                guard let size = key.bigNumberBits(factor, odd: true), size <= bits / 2 + 1 else {
                    throw .invalidKey("an RSA private key whose primes do not fit its modulus")
                }
            }
            for (exponentName, factor) in [("rsa-exponent1", "rsa-factor1"), ("rsa-exponent2", "rsa-factor2")] {
                guard let size = key.bigNumberBits(exponentName, odd: nil),
                    let limit = key.bigNumberBits(factor, odd: nil),
                    size <= limit
                else { throw .invalidKey("an RSA private key whose CRT exponents do not fit its primes") }
            }
            guard key.passesCheck() else { throw .invalidKey("an RSA private key that does not match itself") }
        }
        return key
    }

    /// Whether `value`, read as a big-endian number, is below an RSA key's modulus: what a raw RSA
    /// operation takes.
    func isBelowModulus(_ value: Data) -> Bool {
        var modulus: OpaquePointer?
        guard libcrypto.EVP_PKEY_get_bn_param(key, "n", &modulus) == 1, let modulus else {
            libcrypto.ERR_clear_error()
            return false
        }
        defer { libcrypto.BN_free(modulus) }
        let number = value.withUnsafeBytes { raw in
            libcrypto.BN_bin2bn(raw.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(raw.count), nil)
        }
        guard let number else { return false }
        defer { libcrypto.BN_clear_free(number) }
        return libcrypto.BN_cmp(number, modulus) < 0
    }

    /// The size in bits of the key's big-number parameter `name` (nil when it has none, or it is not
    /// odd when `odd` asks it to be).
    private func bigNumberBits(_ name: String, odd: Bool?) -> Int? {
        var number: OpaquePointer?
        guard libcrypto.EVP_PKEY_get_bn_param(key, name, &number) == 1, let number else {
            libcrypto.ERR_clear_error()
            return nil
        }
        defer { libcrypto.BN_clear_free(number) }
        if let odd, (libcrypto.BN_is_odd(number) == 1) != odd { return nil }
        return Int(libcrypto.BN_num_bits(number))
    }

    /// One whole structure as a key (DER unless `input` says PEM; any structure or key type OpenSSL
    /// knows when nil); nil unless it decodes and nothing is left over (a PEM file may end in blank lines).
    private static func decode(
        _ bytes: Data, input: StaticString = "DER", structure: StaticString?, keyType: StaticString?, selection: Int32
    ) -> OpaquePointer? {
        // The decoder keeps the address it is given and writes the key through it later: a slot that
        // lives as long as the decoder, not a variable's address passed for one call. It keeps the
        // input type, structure and key type strings by pointer too (OpenSSL 3.0 does not copy them):
        // static strings, not the temporary C strings Swift makes for one call, which the decoder read
        // after they were freed (at random: an 8192-bit public key failed to decode now and then).
        let slot = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: 1)
        slot.initialize(to: nil)
        defer { slot.deallocate() }
        guard
            let decoder = libcrypto.OSSL_DECODER_CTX_new_for_pkey(
                slot, name(input), structure.map(name), keyType.map(name), selection, nil, nil)
        else {
            return nil
        }
        defer { libcrypto.OSSL_DECODER_CTX_free(decoder) }
        let decoded = bytes.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
            var cursor: UnsafePointer<UInt8>? = base
            var left = raw.count
            return libcrypto.OSSL_DECODER_from_data(decoder, &cursor, &left) == 1
                && (left == 0 || input.description == "PEM")
        }
        let key = slot.pointee
        guard decoded, let key else {
            if let key { libcrypto.EVP_PKEY_free(key) }
            return nil
        }
        return key
    }

    private static func importEC(_ bytes: Data, isPrivate: Bool) throws(Failure) -> AsymmetricKey {
        guard bytes.first == 4 else { throw .invalidKey("an EC key must start with 04 (uncompressed)") }
        guard
            let curve = Curve.allCases.first(where: {
                bytes.count == 1 + (isPrivate ? 3 : 2) * $0.coordinateSize
            })
        else { throw .invalidKey("\(bytes.count) bytes is no EC key's length") }
        let pointLength = 1 + 2 * curve.coordinateSize
        guard let builder = libcrypto.OSSL_PARAM_BLD_new() else { throw .library("param builder") }
        defer { libcrypto.OSSL_PARAM_BLD_free(builder) }
        var scalar: OpaquePointer?
        defer { if let scalar { libcrypto.BN_clear_free(scalar) } }
        // The builder keeps pointers to what is pushed until `to_param` copies it: both happen while
        // the group's name and the bytes are alive.
        let parameters: UnsafeMutablePointer<OSSL_PARAM>? = curve.name.withCString { group in
            bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
                guard libcrypto.OSSL_PARAM_BLD_push_utf8_string(builder, Self.name("group"), group, 0) == 1,
                    libcrypto.OSSL_PARAM_BLD_push_octet_string(builder, Self.name("pub"), base, pointLength) == 1
                else { return nil }
                if isPrivate {
                    // A secure BIGNUM: the builder then keeps the scalar where freeing it wipes it.
                    scalar = libcrypto.BN_bin2bn(
                        base + pointLength, Int32(curve.coordinateSize), libcrypto.BN_secure_new())
                    guard let scalar, libcrypto.OSSL_PARAM_BLD_push_BN(builder, Self.name("priv"), scalar) == 1 else {
                        return nil
                    }
                }
                return libcrypto.OSSL_PARAM_BLD_to_param(builder)
            }
        }
        guard let parameters else { throw .library("EC parameters") }
        defer { libcrypto.OSSL_PARAM_free(parameters) }
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .library("no EC") }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        // EVP_PKEY_KEYPAIR and EVP_PKEY_PUBLIC_KEY, which are macros Swift cannot import: the key's
        // parts (private 0x01, public 0x02) with all its parameters (0x84).
        let selection = isPrivate ? 0x87 : 0x86
        guard libcrypto.EVP_PKEY_fromdata_init(context) == 1,
            libcrypto.EVP_PKEY_fromdata(context, &key, Int32(selection), parameters) == 1, let key
        else {
            libcrypto.ERR_clear_error()
            throw .invalidKey("not a point of \(curve.name)")
        }
        let imported = AsymmetricKey(adopting: key, kind: .ec(curve), isPrivate: isPrivate)
        // fromdata does not check that the point is on the curve, nor that the scalar matches it.
        guard imported.passesCheck() else {
            throw .invalidKey("the point is not on \(curve.name), or the key does not match it")
        }
        return imported
    }

    /// A parameter's name as a pointer that lives as long as the program (the builder keeps it).
    private static func name(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    private func passesCheck() -> Bool {
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { return false }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        let result = isPrivate ? libcrypto.EVP_PKEY_pairwise_check(context) : libcrypto.EVP_PKEY_public_check(context)
        libcrypto.ERR_clear_error()
        return result == 1
    }

    // MARK: Sizes

    /// The key size in bits.
    public var bits: Int {
        switch kind {
        case .rsa(let bits): bits
        case .ec(let curve): curve.rawValue
        }
    }

    /// Apple's `SecKeyGetBlockSize`: the modulus in bytes for RSA; for EC, the largest DER signature
    /// is not it, Apple gives the coordinate size... answered as the key size in bytes.
    public var blockSize: Int { (bits + 7) / 8 }

    private static func der(_ encode: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) -> Int32) throws(Failure)
        -> Data
    {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = encode(&buffer)
        guard length > 0, let buffer else { throw .library("DER encoding") }
        defer { libcrypto.CRYPTO_free(buffer, #fileID, #line) }
        return Data(bytes: buffer, count: Int(length))
    }
}

import FoundationEssentials
import KeychainCore
import KeychainCrypto
import KeychainKeybag

/// An ephemeral enclave key (`kSecAttrIsPermanent` false): no item holds it, so its `SecKey` holds
/// this token instead, as Apple's holds the Secure Enclave's token object. The private key inside is
/// sealed as a guarded item's secret is — under its protection class's key and the factors its
/// access control binds it to (the enrolled biometry, the passcode's class) — and then wrapped by the
/// device root; both bound to everything else in the token (its public key, protection class,
/// access control, the biometry set it was made under, the salt). So the token opens only in this
/// keychain on this device, only while its class is available, never after the keychain was erased
/// or the binding died, and none of its parts can be changed.
///
/// Layout, in the vocabulary's encoding: version (3) ‖ public key ‖ protection ‖ optional access
/// control ‖ optional biometry binding ‖ salt (16) ‖ wrapped sealed private key. Tokens live only in
/// the memory of the processes that made them, so a new version needs no reader for the old one.
struct EnclaveKeyToken: Sendable {
    static let version: UInt8 = 3

    let publicKey: Data
    let protection: ProtectionClass
    let accessControl: AccessControlPolicy?
    let biometryBinding: Data?
    let salt: Data
    let wrapped: Data

    /// What the wrapping is bound to: every part but the wrapped key.
    var header: Data {
        var writer = ValueWriter()
        writer.byte(Self.version)
        writer.bytes(publicKey)
        writer.protection(protection)
        writer.optional(accessControl) { $0.accessControl($1) }
        writer.optional(biometryBinding) { $0.bytes($1) }
        writer.raw(salt)
        return writer.data
    }

    /// The wrapping context: the token's purpose and its header.
    static func context(header: Data) -> Data { Data("ephemeral enclave key".utf8) + header }

    var encoded: Data {
        var writer = ValueWriter()
        writer.raw(header)
        writer.bytes(wrapped)
        return writer.data
    }

    init(
        publicKey: Data, protection: ProtectionClass, accessControl: AccessControlPolicy?, biometryBinding: Data?,
        salt: Data, wrapped: Data = Data()
    ) {
        self.publicKey = publicKey
        self.protection = protection
        // The key has one class: the token's.
        self.accessControl = accessControl.map { AccessControlPolicy(protection: protection, flags: $0.flags) }
        self.biometryBinding = biometryBinding
        self.salt = salt
        self.wrapped = wrapped
    }

    /// The same token with its wrapped key.
    func wrapping(_ wrapped: Data) -> EnclaveKeyToken {
        EnclaveKeyToken(
            publicKey: publicKey, protection: protection, accessControl: accessControl,
            biometryBinding: biometryBinding, salt: salt, wrapped: wrapped)
    }

    /// Decodes a token a client sent back; anything else is `errSecParam`.
    init(decoding data: Data) throws {
        // Not yet authenticated: every part is parsed without trusting it (no trap, no lossy read).
        var reader = ValueReader(data, limits: .authenticated)
        do throws(FormatError) {
            guard try reader.byte() == Self.version else { throw FormatError("another version") }
            publicKey = try reader.bytes()
            let protection = try reader.protection()
            let accessControl = try reader.optional { (reader) throws(FormatError) in try reader.accessControl() }
            if let accessControl, accessControl.protection != protection {
                throw FormatError("two protection classes")
            }
            self.protection = protection
            self.accessControl = accessControl
            biometryBinding = try reader.optional { (reader) throws(FormatError) in try reader.bytes() }
            salt = try reader.raw(16)
            wrapped = try reader.bytes()
            try reader.finish()
        } catch {
            throw KeychainError.invalidParameter("the enclave key's token is not one this keychain made")
        }
    }
}

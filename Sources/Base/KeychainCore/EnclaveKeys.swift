import FoundationEssentials
import KeychainBytes

/// The token ID of keys the device root holds: Apple's `kSecAttrTokenIDSecureEnclave`.
public let enclaveTokenID = "com.apple.setoken"

/// What a client asks of an enclave key's private half. The private key never leaves the process
/// that holds the device root (the daemon, or the embedded engine): the client sends the input and
/// gets the output.
public enum EnclaveKeyOperation: Sendable, Equatable {
    /// An ECDSA signature (DER, ANSI X9.62) of a message or of its digest.
    case sign(hash: Hash, input: SignatureInput, data: Data)
    /// The raw ECDH shared secret with a peer's public key (ANSI X9.63 `04‖X‖Y`): the step of a key
    /// exchange or of an ECIES decryption that needs the private key.
    case sharedSecret(peerPublicKey: Data)

    /// The operation's name, for logs and messages; never its input.
    public var name: String {
        switch self {
        case .sign: "sign"
        case .sharedSecret: "key exchange"
        }
    }
}

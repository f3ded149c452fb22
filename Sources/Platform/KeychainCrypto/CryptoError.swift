/// Failures of the cryptographic primitives. None of them carries key material or plaintext.
public enum CryptoError: Error, Equatable, Sendable {
    /// The CSPRNG could not produce bytes.
    case randomFailed
    /// A key had the wrong length for the algorithm.
    case invalidKeySize(expected: Int, actual: Int)
    /// A sealed box was too short to hold a nonce and a tag.
    case malformedCiphertext
    /// Authentication failed: wrong key, wrong associated data, or modified ciphertext.
    case authenticationFailed
    /// OpenSSL reported an internal failure in the named operation.
    case libraryFailure(String)
}

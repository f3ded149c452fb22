/// The hash functions of Apple's `SecKeyAlgorithm` names: which one, named at the bottom so that a
/// request can say which without the layer that computes them.
public enum Hash: Sendable, CaseIterable {
    case sha1, sha224, sha256, sha384, sha512

    /// The digest's length in bytes.
    public var length: Int {
        switch self {
        case .sha1: 20
        case .sha224: 28
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }
}

/// Whether an operation takes the message itself (and hashes it) or its digest.
public enum SignatureInput: Sendable, Equatable { case message, digest }

import COpenSSL
import FoundationEssentials
import KeychainBytes
import Synchronization

/// An HMAC-SHA256 key, keyed once in an OpenSSL `EVP_MAC` context.
///
/// The keychain computes several HMACs per query (the digests of the searchable columns), so the
/// per-call cost matters: keying hashes the two pads, and each MAC instead runs in a copy of the
/// keyed context, which costs two SHA-256 compressions for a short message and no hashing of the key
/// again. Copies are kept between MACs (a few, one per thread at work) and reset to the keyed state
/// before each (`EVP_MAC_init` without a key), since making and freeing a copy costs more than the MAC
/// of a short message. They hold nothing the key itself does not: the pad states, which the key holds
/// as long as it lives. OpenSSL wipes the keyed state when it frees a context.
public final class HMACKey: @unchecked Sendable {
    // Keyed in init and never changed after: every MAC runs in a copy, and copying only reads the
    // original, so threads may share one key.
    private let keyed: OpaquePointer
    /// Copies of `keyed` between uses, each used by one thread at a time (taken out under the lock).
    private let spares = Mutex<[SpareContext]>([])
    private static let maximumSpares = 8

    // Fetched once: a fetch is a locked search of OpenSSL's algorithm store, which no key needs to repeat.
    nonisolated(unsafe) private static let algorithm: OpaquePointer? = libcrypto.EVP_MAC_fetch(nil, "HMAC", nil)

    /// - Parameter pinned: whether the caller holds the key for long (see `SecureBytes`). It changes
    ///   nothing now: the keyed state lives in OpenSSL's memory, which OpenSSL wipes on release but
    ///   does not lock, whatever the caller holds the key for.
    public init(key: SecureBytes, pinned: Bool = true) throws {
        guard let algorithm = Self.algorithm, let context = libcrypto.EVP_MAC_CTX_new(algorithm) else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("no HMAC")
        }
        let ok = key.withUnsafeBytes { keyBytes in
            var parameters = [OpenSSLParameters.utf8("digest", "SHA256"), libcrypto.OSSL_PARAM_construct_end()]
            // A key of no bytes still needs an address: without one OpenSSL reuses a previous key.
            return libcrypto.EVP_MAC_init(context, OpenSSLParameters.address(keyBytes), keyBytes.count, &parameters)
        }
        guard ok == 1 else {
            libcrypto.EVP_MAC_CTX_free(context)
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("HMAC key")
        }
        keyed = context
    }

    deinit {
        libcrypto.EVP_MAC_CTX_free(keyed)
        for spare in spares.withLock({ $0 }) { libcrypto.EVP_MAC_CTX_free(spare.context) }
    }

    /// A copy of the keyed context, reset to the keyed state: a kept one, or a new one.
    private func takeContext() throws -> OpaquePointer {
        if let kept = spares.withLock({ $0.popLast() })?.context {
            // Without a key, the context starts again from its keyed pad states.
            guard libcrypto.EVP_MAC_init(kept, nil, 0, nil) == 1 else {
                libcrypto.EVP_MAC_CTX_free(kept)
                libcrypto.ERR_clear_error()
                throw CryptoError.libraryFailure("EVP_MAC_init")
            }
            return kept
        }
        guard let context = libcrypto.EVP_MAC_CTX_dup(keyed) else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("EVP_MAC_CTX_dup")
        }
        return context
    }

    /// Keeps a context whose MAC was finished, for the next; frees it when enough are kept.
    private func giveBack(_ context: OpaquePointer) {
        let kept = spares.withLock { spares in
            guard spares.count < Self.maximumSpares else { return false }
            spares.append(SpareContext(context: context))
            return true
        }
        if !kept { libcrypto.EVP_MAC_CTX_free(context) }
    }

    /// HMAC over the concatenation of `parts`, without building the concatenation, written to the
    /// 32 bytes at `out` (a key's own buffer, when the result is a key).
    public func authenticationCode(_ parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer) throws {
        guard out.count >= 32, let result = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError.libraryFailure("HMAC output buffer too small")
        }
        let context = try takeContext()
        var finished = false
        // A context whose MAC failed midway is freed, never kept.
        defer { if finished { giveBack(context) } else { libcrypto.EVP_MAC_CTX_free(context) } }
        for part in parts where part.count > 0 {
            guard libcrypto.EVP_MAC_update(context, OpenSSLParameters.address(part), part.count) == 1 else {
                libcrypto.ERR_clear_error()
                throw CryptoError.libraryFailure("EVP_MAC_update")
            }
        }
        var length = 0
        guard libcrypto.EVP_MAC_final(context, result, &length, 32) == 1, length == 32 else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("EVP_MAC_final")
        }
        finished = true
    }

    /// HMAC over the concatenation of `parts`, for MACs and digests that are not keys.
    public func authenticationCode(_ parts: [UnsafeRawBufferPointer]) throws -> Data {
        var digest = Data(count: 32)
        try digest.withUnsafeMutableBytes { try authenticationCode(parts, into: $0) }
        return digest
    }

    public func authenticationCode(_ message: Data) throws -> Data {
        try message.withUnsafeBytes { try authenticationCode([$0]) }
    }

    /// An HMAC over bytes that arrive in pieces (a file streamed through): `update` with each piece,
    /// then `finish`.
    public func stream() throws -> HMACStream {
        guard let context = libcrypto.EVP_MAC_CTX_dup(keyed) else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("EVP_MAC_CTX_dup")
        }
        return HMACStream(context: context)
    }
}

/// A kept copy of a keyed context: only ever in the spares list or in the one thread that took it.
private struct SpareContext: @unchecked Sendable {
    let context: OpaquePointer
}

/// One HMAC-SHA256 computed piece by piece (`HMACKey.stream()`); its context is freed, and wiped by
/// OpenSSL, when it is released.
public final class HMACStream {
    private var context: OpaquePointer?

    init(context: OpaquePointer) { self.context = context }

    deinit { libcrypto.EVP_MAC_CTX_free(context) }

    /// Adds the next bytes.
    public func update(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > 0 else { return }
        guard let context, libcrypto.EVP_MAC_update(context, OpenSSLParameters.address(bytes), bytes.count) == 1 else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("EVP_MAC_update")
        }
    }

    public func update(_ bytes: Data) throws { try bytes.withUnsafeBytes { try update($0) } }

    /// The MAC of everything added; the stream takes nothing after it.
    public func finish() throws -> Data {
        guard let context else { throw CryptoError.libraryFailure("the HMAC was already finished") }
        var result = Data(count: 32)
        var length = 0
        let ok = result.withUnsafeMutableBytes { out in
            libcrypto.EVP_MAC_final(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, 32)
        }
        libcrypto.EVP_MAC_CTX_free(context)
        self.context = nil
        guard ok == 1, length == 32 else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("EVP_MAC_final")
        }
        return result
    }
}

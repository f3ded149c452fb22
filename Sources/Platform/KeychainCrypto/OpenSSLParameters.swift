import COpenSSL
import KeychainBytes

/// `OSSL_PARAM` entries and byte pointers as the derivations and MACs pass them to OpenSSL.
enum OpenSSLParameters {
    /// A name or value that lives as long as the program: OpenSSL keeps some of these pointers beyond
    /// the call that takes them (parameter builders, decoders), so the temporary C strings Swift makes
    /// for one call would not do.
    static func name(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    static func utf8(_ key: StaticString, _ value: StaticString) -> OSSL_PARAM {
        libcrypto.OSSL_PARAM_construct_utf8_string(name(key), UnsafeMutablePointer(mutating: name(value)), 0)
    }

    /// `bytes` as an octet string, which OpenSSL only reads. It refuses a null pointer even for no
    /// bytes (an empty key would then be no key at all), so an empty buffer without an address
    /// points at the parameter's name instead, of which nothing is read.
    static func octets(_ key: StaticString, _ bytes: UnsafeRawBufferPointer) -> OSSL_PARAM {
        let address = bytes.baseAddress ?? UnsafeRawPointer(name(key))
        return libcrypto.OSSL_PARAM_construct_octet_string(
            name(key), UnsafeMutableRawPointer(mutating: address), bytes.count)
    }

    /// The address of `bytes`, never null: for calls that, as `octets`, take a null pointer to mean
    /// something else than no bytes (`EVP_MAC_init` then keeps the key it had).
    static func address(_ bytes: UnsafeRawBufferPointer) -> UnsafePointer<UInt8> {
        (bytes.baseAddress ?? UnsafeRawPointer(name(""))).assumingMemoryBound(to: UInt8.self)
    }
}

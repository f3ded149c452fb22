import CTLS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Why TLS failed: a code plus a reason (OpenSSL's own text).
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }

    static func library(_ doing: String) -> TLSError {
        var text = ""
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let message = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            text += text.isEmpty ? message : "; " + message
        }
        return TLSError(text.isEmpty ? doing : "\(doing): \(text)")
    }
}

/// libssl's functions, loaded with the first TLS context (see the CTLS shim); nil when libssl cannot be
/// loaded. Every function in it was found, so each call below goes through.
private let libssl: keychain_ssl? = {
    var functions = keychain_ssl()
    return keychain_ssl_load(&functions) == 0 ? functions : nil
}()

/// TLS 1.3 through OpenSSL's libssl (Debian's libssl-dev): a server's certificate and key, or a
/// client's trust (a CA file, else the system's), and sessions over connected sockets.
public final class TLSContext: @unchecked Sendable {
    private let context: OpaquePointer
    private let isServer: Bool
    fileprivate let ssl: keychain_ssl

    private init(server: Bool) throws(TLSError) {
        guard let ssl = libssl else { throw TLSError("cannot load libssl.so.3 (Debian's libssl3)") }
        self.ssl = ssl
        guard let method = server ? ssl.TLS_server_method?() : ssl.TLS_client_method?(),
            let made = ssl.SSL_CTX_new?(method)
        else {
            throw .library("cannot make a TLS context")
        }
        context = made
        isServer = server
        var functions = ssl
        guard tls_context_require_tls13(&functions, context) == 1 else { throw .library("cannot require TLS 1.3") }
    }

    deinit { ssl.SSL_CTX_free?(context) }

    /// A server's context: its certificate chain and private key, PEM files.
    public static func server(certificateChain: String, privateKey: String) throws(TLSError) -> TLSContext {
        let made = try TLSContext(server: true)
        guard made.ssl.SSL_CTX_use_certificate_chain_file?(made.context, certificateChain) == 1 else {
            throw .library("cannot read the certificate chain \(certificateChain)")
        }
        guard made.ssl.SSL_CTX_use_PrivateKey_file?(made.context, privateKey, SSL_FILETYPE_PEM) == 1,
            made.ssl.SSL_CTX_check_private_key?(made.context) == 1
        else { throw .library("cannot use the private key \(privateKey) with that certificate") }
        return made
    }

    /// A client's context: it trusts the CA certificates of `authorities` (PEM), else the system's.
    public static func client(authorities: String?) throws(TLSError) -> TLSContext {
        let made = try TLSContext(server: false)
        // Fails closed: without this call the peer's certificate would not be checked.
        guard let requirePeerCertificate = made.ssl.SSL_CTX_set_verify else {
            throw TLSError("libssl has no SSL_CTX_set_verify")
        }
        requirePeerCertificate(made.context, SSL_VERIFY_PEER, nil)
        if let authorities {
            guard made.ssl.SSL_CTX_load_verify_locations?(made.context, authorities, nil) == 1 else {
                throw .library("cannot read the CA certificates \(authorities)")
            }
        } else {
            guard made.ssl.SSL_CTX_set_default_verify_paths?(made.context) == 1 else {
                throw .library("cannot load the system's CA certificates")
            }
        }
        return made
    }

    /// Runs the server's side of a handshake on a connected socket (its timeouts bound the wait).
    public func accept(_ descriptor: Int32) throws(TLSError) -> TLSSession {
        let session = try TLSSession(context: context, ssl: ssl, descriptor: descriptor)
        guard ssl.SSL_accept?(session.handle) == 1 else { throw .library("TLS handshake failed") }
        return session
    }

    /// Runs the client's side, checking that the server's certificate names `host` (a name or an IP
    /// address) and chains to a trusted CA.
    public func connect(_ descriptor: Int32, host: String) throws(TLSError) -> TLSSession {
        let session = try TLSSession(context: context, ssl: ssl, descriptor: descriptor)
        var address = in6_addr()
        let isAddress = inet_pton(AF_INET, host, &address) == 1 || inet_pton(AF_INET6, host, &address) == 1
        if isAddress {
            guard X509_VERIFY_PARAM_set1_ip_asc(ssl.SSL_get0_param?(session.handle), host) == 1 else {
                throw .library("cannot check the certificate against \(host)")
            }
        } else {
            guard ssl.SSL_set1_host?(session.handle, host) == 1 else {
                throw .library("cannot check the certificate against \(host)")
            }
            var functions = ssl
            _ = tls_set_server_name(&functions, session.handle, host)
        }
        guard ssl.SSL_connect?(session.handle) == 1 else {
            let result = ssl.SSL_get_verify_result?(session.handle) ?? Int(X509_V_ERR_UNSPECIFIED)
            if result != X509_V_OK {
                let text = X509_verify_cert_error_string(Int(result)).map { String(cString: $0) } ?? "\(result)"
                throw TLSError("the sync server's certificate is not trusted: \(text)")
            }
            throw .library("TLS handshake failed")
        }
        return session
    }
}

/// One TLS connection over a socket the caller owns (and closes).
public final class TLSSession {
    let handle: OpaquePointer
    private let ssl: keychain_ssl

    init(context: OpaquePointer, ssl: keychain_ssl, descriptor: Int32) throws(TLSError) {
        guard let made = ssl.SSL_new?(context) else { throw .library("cannot make a TLS session") }
        handle = made
        self.ssl = ssl
        // Fully initialised by now: a throw here still runs deinit, which frees the session.
        guard ssl.SSL_set_fd?(handle, descriptor) == 1 else { throw .library("cannot attach TLS to the socket") }
    }

    deinit { ssl.SSL_free?(handle) }

    /// Bytes read into `buffer`: more than 0, or 0 at the end, or -1 on a failure or timeout.
    public func read(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        let result = ssl.SSL_read_ex?(handle, base, buffer.count, &done) ?? 0
        if result == 1 { return done }
        return ssl.SSL_get_error?(handle, result) == SSL_ERROR_ZERO_RETURN ? 0 : -1
    }

    /// Bytes written from `buffer`, or -1.
    public func write(_ buffer: UnsafeRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        return ssl.SSL_write_ex?(handle, base, buffer.count, &done) == 1 ? done : -1
    }

    public func shutdown() { _ = ssl.SSL_shutdown?(handle) }
}

import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import SecurityCommandCore

/// A gnome-keyring keyring file (the "version 0" format of `~/.local/share/keyrings/*.keyring`, which
/// gnome-keyring 3 and 42 write), opened with its password. Layout: a 16-byte magic, version, cipher
/// and hash bytes, the keyring's name, dates, flags and key-derivation parameters (iterations, 8-byte
/// salt), the items' ids and hashed attributes in the clear, then the items encrypted with
/// AES-128-CBC under a key and IV from SHA-256 iterated over the password and salt, zero-padded, the
/// plaintext led by the MD5 of the rest (which is how a wrong password shows). Integers are 32-bit
/// big-endian; strings a length and bytes, 0xffffffff for none.
enum GnomeKeyringFile {
    static let magic = Data("GnomeKeyring\n\r\0\n".utf8)
    /// More rounds than any keyring gnome-keyring makes (a few thousand): a file asking for more is
    /// refused rather than spun on.
    static let maximumIterations: UInt32 = 10_000_000

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The keyring's secrets; `Failure` when the file is not one, or the password is wrong.
    static func read(_ data: Data, password: SecureBytes) throws(Failure) -> (name: String, secrets: [ImportedSecret]) {
        do {
            return try data.withUnsafeBytes { try read(file: $0, password: password) }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("the keyring cannot be read: \(error)")
        }
    }

    private static func read(file: UnsafeRawBufferPointer, password: SecureBytes) throws -> (String, [ImportedSecret]) {
        var header = BigEndianReader(file)
        guard Data(try header.raw(16)) == magic else { throw Failure("not a gnome-keyring keyring file") }
        let version = Array(try header.raw(2))
        let cipher = try header.byte()
        let hash = try header.byte()
        guard version == [0, 0], cipher == 0, hash == 0 else {
            throw Failure(
                "a keyring file of a format this command does not read (version \(version), cipher \(cipher))")
        }
        let name = try header.string() ?? ""
        _ = try header.raw(16)  // created, modified
        _ = try header.raw(8)  // flags, lock timeout
        let iterations = try header.unsigned()
        guard iterations >= 1, iterations <= maximumIterations else {
            throw Failure("a key derivation of \(iterations) rounds")
        }
        let salt = Data(try header.raw(8))
        _ = try header.raw(16)  // reserved
        let count = Int(try header.unsigned())
        guard count <= header.remaining / 12 else { throw Failure("more items than the file can hold") }
        for _ in 0..<count {
            _ = try header.raw(8)  // id, type
            let attributes = try header.unsigned()
            guard attributes <= header.remaining / 8 else { throw Failure("more attributes than the file can hold") }
            for _ in 0..<attributes {
                _ = try header.string()
                if try header.unsigned() == 0 { _ = try header.string() } else { _ = try header.unsigned() }
            }
        }
        let length = Int(try header.unsigned())
        guard length == header.remaining, length > 16, length % AESCBC.blockSize == 0 else {
            throw Failure("the encrypted part is damaged")
        }
        let encrypted = Data(try header.raw(length))
        let (key, iv) = try derive(password: password, salt: salt, iterations: iterations)
        let plaintext = try AESCBC.decryptUnpadded(encrypted, key: key, iv: iv)
        // Read where it was decrypted (wiped memory): the plaintext holds every secret.
        return try plaintext.withUnsafeBytes { bytes in
            let body = UnsafeRawBufferPointer(rebasing: bytes.dropFirst(16))
            guard ConstantTime.equal(try Digest.md5(body), Data(bytes.prefix(16))) else {
                throw Failure("the password is wrong (or the keyring is damaged)")
            }
            var reader = BigEndianReader(body)
            var secrets: [ImportedSecret] = []
            for _ in 0..<count {
                let label = try reader.string() ?? ""
                let secret = SecureBytes(copying: try reader.rawBytes() ?? UnsafeRawBufferPointer(start: nil, count: 0))
                _ = try reader.raw(16)  // created, modified
                _ = try reader.string()  // reserved
                _ = try reader.raw(16)  // reserved
                var attributes: [String: String] = [:]
                let attributeCount = try reader.unsigned()
                guard attributeCount <= reader.remaining / 8 else { throw Failure("an item's attributes are damaged") }
                for _ in 0..<attributeCount {
                    let key = try reader.string() ?? ""
                    attributes[key] =
                        try reader.unsigned() == 0 ? try reader.string() ?? "" : String(try reader.unsigned())
                }
                var applications: [String] = []
                let accessCount = try reader.unsigned()
                guard accessCount <= reader.remaining / 12 else { throw Failure("an item's access list is damaged") }
                for _ in 0..<accessCount {
                    _ = try reader.unsigned()  // types allowed
                    _ = try reader.string()  // display name
                    if let path = try reader.string(), path.hasPrefix("/") { applications.append(path) }
                    _ = try reader.string()  // reserved
                    _ = try reader.unsigned()  // reserved
                }
                secrets.append(
                    ImportedSecret(
                        collection: name, label: label, attributes: attributes, secret: secret,
                        applications: applications))
            }
            return (name, secrets)
        }
    }

    /// Key and IV: SHA-256 of the password and salt, then of the digest, `iterations` digests in all;
    /// the first 16 bytes are the key, the next 16 the IV.
    private static func derive(password: SecureBytes, salt: Data, iterations: UInt32) throws -> (SecureBytes, Data) {
        var digest = try password.withUnsafeBytes { bytes in
            var input = Data(bytes)
            defer { input.resetBytes(in: 0..<input.count) }
            input.append(salt)
            return try Digest.sha256(input)
        }
        defer { digest.resetBytes(in: 0..<digest.count) }
        for _ in 1..<iterations { digest = try Digest.sha256(digest) }
        return (SecureBytes(copying: digest.prefix(16)), Data(digest[16..<32]))
    }
}

/// Reads big-endian fields from memory it does not copy, each bounded by what is left.
struct BigEndianReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func raw(_ count: Int) throws(GnomeKeyringFile.Failure) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw .init("the file ends early") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
    }

    mutating func byte() throws(GnomeKeyringFile.Failure) -> UInt8 { try raw(1)[0] }

    mutating func unsigned() throws(GnomeKeyringFile.Failure) -> UInt32 {
        try raw(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// Bytes after their length, in place; nil for the "no string" length.
    mutating func rawBytes() throws(GnomeKeyringFile.Failure) -> UnsafeRawBufferPointer? {
        let length = try unsigned()
        if length == 0xffff_ffff { return nil }
        return try raw(Int(length))
    }

    mutating func string() throws(GnomeKeyringFile.Failure) -> String? {
        guard let bytes = try rawBytes() else { return nil }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .init("a string that is not UTF-8") }
        return text
    }
}

import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainSyncProtocol

/// A record's ciphertext, as CKKS makes one: a random key per record (AES-256-GCM) seals the item,
/// and the class key (A for `WhenUnlocked` items, C for `AfterFirstUnlock` and `Always`; each derived
/// from the zone key of a generation) seals that key. Both seals authenticate the same associated
/// data: the account, the record id, the class and generation of the key that wraps it, the version,
/// the writer and whether it is a tombstone. So the server can neither read a record, move it to
/// another id or version, pass it off under another key, nor forge one.
///
///     format (1) = 1 ‖ class (1: "A" or "C") ‖ generation (8) ‖ writer (16) ‖ wrapped key (bytes) ‖
///     sealed (bytes) ‖ zeros to a multiple of 256
///     sealed plaintext: kind (1: 1 item, 2 tombstone) ‖ modified (8, seconds, IEEE double) ‖ payload
///     (bytes) ‖ zeros to a multiple of 256
enum RecordCipher {
    static let format: UInt8 = 1

    struct Opened {
        var payload: SecureBytes
        var date: Date
        var deleted: Bool
    }

    static func classLetter(for protection: ProtectionClass) -> UInt8 {
        protection == .whenUnlocked ? UInt8(ascii: "A") : UInt8(ascii: "C")
    }

    static func associatedData(
        account: Data, recordID: Data, letter: UInt8, generation: UInt64, version: Int64, writer: Data, deleted: Bool
    ) -> Data {
        var writer2 = ByteWriter(capacity: 96)
        writer2.writeRaw(Data("swift-keychain sync record v1".utf8))
        writer2.writeBytes(account)
        writer2.writeBytes(recordID)
        writer2.write(letter)
        writer2.write(generation)
        writer2.write(version)
        writer2.writeBytes(writer)
        writer2.write(UInt8(deleted ? 1 : 0))
        return writer2.data
    }

    static func seal(
        payload: SecureBytes, deleted: Bool, date: Date, letter: UInt8, generation: UInt64, classKey: SecureBytes,
        account: Data, recordID: Data, version: Int64, writer: Data
    ) throws(SyncError) -> Data {
        let aad = associatedData(
            account: account, recordID: recordID, letter: letter, generation: generation, version: version,
            writer: writer, deleted: deleted)
        do {
            var inner = ByteWriter(capacity: payload.count + 64)
            inner.write(UInt8(deleted ? 2 : 1))
            inner.write(date.timeIntervalSince1970)
            payload.withUnsafeBytes { inner.writeSecretBytes($0) }
            let padding = (256 - inner.count % 256) % 256
            inner.writeRaw(Data(count: padding))
            let plaintext = inner.takeSecure()
            let itemKey = try SecureBytes(randomCount: AESGCM.keySize)
            let sealed = try AESGCM.seal(plaintext, key: itemKey, authenticating: aad)
            let wrapped = try AESGCM.seal(itemKey, key: classKey, authenticating: aad)
            var outer = ByteWriter(capacity: sealed.count + 160)
            outer.write(format)
            outer.write(letter)
            outer.write(generation)
            outer.writeRaw(writer)
            outer.writeBytes(wrapped)
            outer.writeBytes(sealed)
            outer.writeRaw(Data(count: (256 - outer.count % 256) % 256))
            return outer.data
        } catch {
            throw SyncError(.server, "cannot seal a record: \(error)")
        }
    }

    /// Where a ciphertext says its key is: its class letter, generation and writer.
    static func header(_ ciphertext: Data) throws(SyncError) -> (letter: UInt8, generation: UInt64, writer: Data) {
        var reader = ByteReader(ciphertext)
        guard let format = try? reader.read() as UInt8, format == Self.format, let letter = try? reader.read() as UInt8,
            letter == UInt8(ascii: "A") || letter == UInt8(ascii: "C"), let generation = try? reader.read() as UInt64,
            let writer = try? reader.readRaw(SyncDevice.idSize)
        else { throw SyncError(.forged, "a record's ciphertext is not one a device made") }
        return (letter, generation, writer)
    }

    static func open(
        _ ciphertext: Data, classKey: SecureBytes, account: Data, recordID: Data, version: Int64, writer: Data,
        deleted: Bool
    ) throws(SyncError) -> Opened {
        let (letter, generation, stated) = try header(ciphertext)
        guard stated == writer else { throw SyncError(.forged, "a record names another writer than its batch") }
        var reader = ByteReader(ciphertext)
        _ = try? reader.readRaw(2 + 8 + SyncDevice.idSize)
        guard let wrapped = try? reader.readBytes(), let sealed = try? reader.readBytes(),
            (try? reader.readRaw(reader.remaining))?.allSatisfy({ $0 == 0 }) == true
        else { throw SyncError(.forged, "a record's ciphertext is damaged") }
        let aad = associatedData(
            account: account, recordID: recordID, letter: letter, generation: generation, version: version,
            writer: writer, deleted: deleted)
        let plaintext: SecureBytes
        do {
            let itemKey = try AESGCM.openSecure(wrapped, key: classKey, authenticating: aad)
            plaintext = try AESGCM.openSecure(sealed, key: itemKey, authenticating: aad)
        } catch {
            throw SyncError(
                .forged, "record \(Hex.encode(recordID.prefix(4))) does not open: moved, swapped, replayed or forged")
        }
        return try plaintext.withBorrowedData { (data) throws(SyncError) -> Opened in
            var inner = ByteReader(data)
            guard let kind = try? inner.read() as UInt8, kind == (deleted ? 2 : 1),
                let seconds = try? inner.read() as Double, seconds.isFinite, let payload = try? inner.readSecureBytes()
            else { throw SyncError(.forged, "a record's content is damaged") }
            return Opened(payload: payload, date: Date(timeIntervalSince1970: seconds), deleted: deleted)
        }
    }
}

import Foundation
import KeychainBytes
import KeychainKeybag
import KeychainTPM

/// The TPM root's file: what finds the root again in the TPM, nothing that opens it elsewhere.
///
/// `SKTR` ‖ version ‖ device identifier (16) ‖ the storage primary's name ‖ the generation, writes and
/// epoch counters' NV handles ‖ the epoch the root secret is sealed for ‖ the sealed root secret.
struct TPMRootFile: Equatable {
    var deviceIdentifier: Data
    /// Pinned at creation: a cleared or other TPM derives another primary, and salted sessions go only
    /// to this one.
    var primaryName: Data
    var generationCounter: UInt32
    var writesCounter: UInt32
    var epochCounter: UInt32
    var epoch: UInt64
    var rootSecret: TPMSealedObject

    /// 2: the root secret sealed for an epoch. (1 was never released.)
    static let version: UInt8 = 2

    func encoded() -> Data {
        var writer = ByteWriter()
        writer.writeRaw(DeviceRootFile.tpmMagic)
        writer.write(Self.version)
        writer.writeRaw(deviceIdentifier)
        writer.writeBytes(primaryName)
        writer.write(generationCounter)
        writer.write(writesCounter)
        writer.write(epochCounter)
        writer.write(epoch)
        writer.writeBytes(rootSecret.encoded())
        return writer.data
    }

    static func decode(_ contents: Data, path: String) throws -> TPMRootFile {
        var reader = ByteReader(contents)
        do {
            guard try reader.readRaw(4) == DeviceRootFile.tpmMagic, try reader.read() as UInt8 == version else {
                throw KeybagError.corrupt("device root \(path) is not a TPM root file of this version")
            }
            let file = TPMRootFile(
                deviceIdentifier: try reader.readRaw(16), primaryName: try reader.readBytes(),
                generationCounter: try reader.read(), writesCounter: try reader.read(), epochCounter: try reader.read(),
                epoch: try reader.read(), rootSecret: try TPMSealedObject.decode(try reader.readBytes()))
            let handles = [file.generationCounter, file.writesCounter, file.epochCounter]
            guard reader.isAtEnd, handles.allSatisfy(TPM.counterHandles.contains), Set(handles).count == 3 else {
                throw KeybagError.corrupt("device root \(path) is damaged")
            }
            return file
        } catch is ByteReader.Truncated {
            throw KeybagError.corrupt("device root \(path) is truncated")
        }
    }
}

extension TPMSealedObject {
    /// Public ‖ private, each with its length: how a sealed object is kept in the keybag and root file.
    func encoded() -> Data {
        var writer = ByteWriter()
        writer.writeBytes(publicArea)
        writer.writeBytes(privateArea)
        return writer.data
    }

    static func decode(_ data: Data) throws -> TPMSealedObject {
        var reader = ByteReader(data)
        do {
            let object = TPMSealedObject(publicArea: try reader.readBytes(), privateArea: try reader.readBytes())
            guard reader.isAtEnd, !object.publicArea.isEmpty, !object.privateArea.isEmpty else {
                throw KeybagError.corrupt("a sealed TPM object in the keychain is malformed")
            }
            return object
        } catch is ByteReader.Truncated {
            throw KeybagError.corrupt("a sealed TPM object in the keychain is truncated")
        }
    }
}

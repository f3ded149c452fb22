import Foundation
import KeychainBytes
import KeychainKeybag
import KeychainTPM

/// The TPM root's file: what finds the root again in the TPM, nothing that opens it elsewhere.
///
/// `SKTR` ‖ version ‖ device identifier (16) ‖ the storage primary's name ‖ the generation, writes and
/// epoch counters' NV handles ‖ the epoch the root secret is sealed for ‖ the sealed root secret ‖ (3)
/// the sealed secret of the software root it took over, or nothing.
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
    /// The secret of the software root this one took over (`security device migrate-root tpm`), sealed
    /// as the root secret is; nil for a root made for a new keychain.
    var inheritedSecret: TPMSealedObject? = nil

    /// 3: and the inherited secret. 2: the root secret sealed for an epoch. (1 was never released.)
    static let version: UInt8 = 3

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
        writer.writeBytes(inheritedSecret?.encoded() ?? Data())
        return writer.data
    }

    static func decode(_ contents: Data, path: String) throws -> TPMRootFile {
        var reader = ByteReader(contents)
        do {
            let fileVersion: UInt8
            guard try reader.readRaw(4) == DeviceRootFile.tpmMagic, case let found = try reader.read() as UInt8,
                (2...version).contains(found)
            else {
                throw KeybagError.corrupt("device root \(path) is not a TPM root file of a version this build reads")
            }
            fileVersion = found
            var file = TPMRootFile(
                deviceIdentifier: try reader.readRaw(16), primaryName: try reader.readBytes(),
                generationCounter: try reader.read(), writesCounter: try reader.read(), epochCounter: try reader.read(),
                epoch: try reader.read(), rootSecret: try TPMSealedObject.decode(try reader.readBytes()))
            if fileVersion >= 3, case let inherited = try reader.readBytes(), !inherited.isEmpty {
                file.inheritedSecret = try TPMSealedObject.decode(inherited)
            }
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

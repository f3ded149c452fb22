import Foundation
import KeychainBytes
import KeychainCore
import KeychainSystem

/// A document the daemon keeps beside a keychain and alone may write: the hex MAC of the document under
/// the keychain's device root, a newline, then the document. A copy edited by hand, or by any process
/// but the daemon, fails its check and is refused whole rather than trusted in part.
struct AuthenticatedFile: Sendable {
    let path: String
    /// What the file is, for messages ("the app registry").
    let name: String
    let authenticate: @Sendable (Data) throws -> Data

    /// The document; nil when there is no file yet.
    func read() -> Result<Data?, KeychainError> {
        let contents: Data?
        do {
            contents = try SecureFiles.read(path)
        } catch {
            return .failure(.notAvailable("cannot read \(name): \(error)"))
        }
        guard let contents else { return .success(nil) }
        guard let newline = contents.firstIndex(of: 0x0a) else {
            return .failure(.notAvailable("\(name) is damaged (no MAC line)"))
        }
        let document = Data(contents[(newline + 1)...])
        guard let expected = try? authenticate(document),
            let stored = Hex.decode(utf8: contents[..<newline]), ConstantTime.equal(stored, expected)
        else {
            return .failure(.notAvailable("\(name) fails its integrity check (edited outside the daemon, or damaged)"))
        }
        return .success(document)
    }

    /// Replaces the file with `document`, authenticated.
    func write(_ document: Data) throws {
        let mac = try authenticate(document)
        do {
            try SecureFiles.writeAtomically(Data(Hex.encode(mac).utf8) + Data([0x0a]) + document, to: path)
        } catch {
            throw KeychainError.ioError("cannot write \(name): \(error)")
        }
    }
}

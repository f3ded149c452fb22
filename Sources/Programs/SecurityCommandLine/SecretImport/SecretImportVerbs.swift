import Foundation
import KeychainBytes
import KeychainCore
import Security

/// `security import gnome-keyring FILE` and `security import kwallet FILE`: secrets of another store
/// into the Secret Service's items (docs/secret-service.md). The command reads and decrypts the file as
/// its user; the daemon puts each secret in its collection and group.
struct SecretImportVerbs {
    let session: Session
    static let function = "SecKeychainImportSecrets"
    /// Larger than any keyring or export a person keeps.
    static let maximumFileSize = 64 << 20

    static func handles(_ arguments: [CommandArgument]) -> Bool {
        ["gnome-keyring", "kwallet"].contains(arguments.first?.text ?? "")
    }

    func run(_ raw: [CommandArgument]) throws(Failure) {
        let format = raw.first?.text ?? ""
        let arguments: Arguments
        do {
            arguments = try Arguments(Array(raw.dropFirst()), takingValue: ["p", "w"])
        } catch {
            throw .usage(verb: "import", message: error.message)
        }
        guard arguments.positional.count == 1, let path = arguments.positional.first?.text, !path.isEmpty else {
            throw .usage(verb: "import", message: "import \(format) takes one file")
        }
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            data = try handle.read(upToCount: Self.maximumFileSize + 1) ?? Data()
        } catch {
            throw .message("cannot read \(path): \(error.localizedDescription)")
        }
        guard data.count <= Self.maximumFileSize else {
            throw .message("\(path) is over \(Self.maximumFileSize >> 20) MiB: not a keyring")
        }
        let secrets: [ImportedSecret]
        let source: String
        switch format {
        case "gnome-keyring":
            if arguments["w"] != nil, arguments.bytes("w")?.isEmpty ?? true {
                throw .usage(verb: "import", message: "-w takes the keyring's password")
            }
            let given = arguments.bytes("w").map { SecureBytes(copying: $0) }
            guard
                let password = given
                    ?? (Terminal.inputIsTerminal
                        ? Terminal.readSecret(prompt: "keyring password: ") : Terminal.readLine())
            else { throw .message("no keyring password entered") }
            do {
                let keyring = try GnomeKeyringFile.read(data, password: password)
                secrets = keyring.secrets
                source = "gnome-keyring keyring \"\(keyring.name)\" (\(path))"
            } catch {
                throw .message("\(path): \(error.description)")
            }
        default:
            do {
                secrets = try KWalletExport.read(data)
                source = "KWallet export \(path)"
            } catch {
                throw .message("\(path): \(error.description)")
            }
        }
        let passcode = try session.wholeKeychainPasscode(arguments)
        let report: ImportReport
        do {
            report = try session.keychain().importSecrets(secrets, source: source, passcode: passcode)
        } catch {
            throw Failure.withReason(error, function: Self.function)
        }
        print("imported \(report.imported) of \(secrets.count) secrets from \(source)")
        for (reason, count) in report.skipped.sorted(by: { $0.key < $1.key }) {
            print("left out \(count): \(reason)")
        }
    }
}

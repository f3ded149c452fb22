import Foundation
import KeychainBytes
import KeychainCore
import Security
import SecurityCommandCore

/// `security import gnome-keyring FILE` and `security import kwallet FILE`: secrets of another store
/// into the Secret Service's items (docs/secret-service.md). The command reads and decrypts the file as
/// its user; the daemon puts each secret in its collection and group.
struct SecretImportVerbs {
    let session: Session
    static let function = "SecKeychainImportSecrets"
    /// Larger than any keyring or export a person keeps.
    static let maximumFileSize = 64 << 20

    /// What one request carries at most: the daemon takes frames of up to 1 MiB from a program that
    /// is not a registered app, as this command is not.
    static let maximumBatch = 768 << 10
    /// And at most this many secrets (a request's lists hold 4,096 entries at most).
    static let maximumBatchCount = 1_000

    /// About what a secret takes in a request (its strings and lengths).
    static func encodedSize(_ secret: ImportedSecret) -> Int {
        secret.collection.utf8.count + secret.label.utf8.count + secret.secret.count + secret.contentType.utf8.count
            + secret.attributes.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 8 }
            + secret.applications.reduce(0) { $0 + $1.utf8.count + 4 } + 64
    }

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
        var report = ImportReport(imported: 0, skipped: [:])
        var batches: [[ImportedSecret]] = [[]]
        var batchSize = 0
        for secret in secrets {
            let size = Self.encodedSize(secret)
            guard size <= Self.maximumBatch else {
                report.skipped["larger than an import request carries (\(Self.maximumBatch >> 10) KiB)", default: 0] +=
                    1
                continue
            }
            if batchSize + size > Self.maximumBatch || batches[batches.count - 1].count == Self.maximumBatchCount {
                batches.append([])
                batchSize = 0
            }
            batches[batches.count - 1].append(secret)
            batchSize += size
        }
        do {
            for batch in batches where !batch.isEmpty {
                let done = try session.keychain().importSecrets(batch, source: source, passcode: passcode)
                report.imported += done.imported
                report.skipped.merge(done.skipped, uniquingKeysWith: +)
            }
        } catch {
            if report.imported > 0 { print("imported \(report.imported) secrets before this failure") }
            throw Failure.withReason(error, function: Self.function)
        }
        print("imported \(report.imported) of \(secrets.count) secrets from \(source)")
        for (reason, count) in report.skipped.sorted(by: { $0.key < $1.key }) {
            print("left out \(count): \(reason)")
        }
    }
}

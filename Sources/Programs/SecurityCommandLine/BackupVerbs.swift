import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import Security
import SecurityCommandCore

/// `security backup create | restore | info`: whole-keychain backups with iOS's rules (docs/backup.md).
struct BackupVerbs {
    let session: Session

    private enum Functions {
        static let create = "SecKeychainCopyBackup"
        static let restore = "SecKeychainRestoreBackup"
        static let info = "SecKeychainCopyBackupInfo"
    }

    func run(_ arguments: [CommandArgument]) throws(Failure) {
        guard let action = arguments.first?.text else {
            throw .usage(verb: "backup", message: "no backup command given")
        }
        let rest = Array(arguments.dropFirst())
        switch action {
        case "create": try create(rest)
        case "restore": try restore(rest)
        case "info": try info(rest)
        default: throw .usage(verb: "backup", message: "unknown backup command \"\(action)\"")
        }
    }

    private func parse(_ raw: [CommandArgument], long: Set<String> = []) throws(Failure) -> (Arguments, String) {
        let arguments: Arguments
        do {
            arguments = try Arguments(raw, takingValue: ["p"], long: long)
        } catch {
            throw .usage(verb: "backup", message: error.message)
        }
        guard arguments.positional.count == 1, let file = arguments.positional.first?.text, !file.isEmpty else {
            throw .usage(verb: "backup", message: "name one backup file")
        }
        let path = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
        return (arguments, path)
    }

    private func create(_ raw: [CommandArgument]) throws(Failure) {
        let (arguments, path) = try parse(raw, long: ["no-password"])
        let passcode = try session.wholeKeychainPasscode(arguments)
        var password: SecureBytes?
        if !arguments.has(long: "no-password") {
            password = try newBackupPassword()
        }
        let summary: BackupSummary
        let bar = ProgressBar.onTerminal(label: "backing up")
        do {
            defer { bar?.finish() }
            if KeychainServices.daemonSocketInUse() != nil {
                // The daemon opens no file for this command: the command makes the file, as its user,
                // and passes it over the socket; it goes into place only once the backup is complete.
                let target = try BackupTarget(path: path)
                do {
                    summary = try session.keychain().createBackup(
                        to: .descriptor(target.descriptor), password: password, passcode: passcode,
                        progress: bar?.show)
                    try target.commit()
                } catch {
                    target.abandon()
                    throw error
                }
            } else {
                summary = try session.keychain().createBackup(
                    to: .path(path), password: password, passcode: passcode, progress: bar?.show)
            }
        } catch {
            throw Failure.withReason(error, function: Functions.create)
        }
        var line = "backup written to \(path): \(summary.itemCount) items"
        if summary.deviceBound { line += " (no password: it restores only onto this keychain)" }
        print(line)
        if !summary.skipped.isEmpty { print("    left out: " + Self.list(summary.skipped)) }
    }

    private func restore(_ raw: [CommandArgument]) throws(Failure) {
        let (arguments, path) = try parse(raw)
        let summary: BackupSummary
        do {
            summary = try Keychain.backupSummary(of: path)
        } catch {
            throw Failure.withReason(error, function: Functions.restore)
        }
        let passcode = try session.wholeKeychainPasscode(arguments)
        var password: SecureBytes?
        if !summary.deviceBound {
            let typed =
                Terminal.inputIsTerminal ? Terminal.readSecret(prompt: "backup password: ") : Terminal.readLine()
            guard let typed, typed.count > 0 else { throw .message("no backup password entered") }
            password = typed
        }
        let report: RestoreReport
        let bar = ProgressBar.onTerminal(label: "restoring")
        do {
            defer { bar?.finish() }
            if KeychainServices.daemonSocketInUse() != nil {
                // Opened by the command, as its user, and passed to the daemon.
                let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
                guard descriptor >= 0 else {
                    throw KeychainError.ioError("cannot open \(path): \(String(cString: strerror(errno)))")
                }
                defer { close(descriptor) }
                report = try session.keychain().restoreBackup(
                    from: .descriptor(descriptor), password: password, passcode: passcode, progress: bar?.show)
            } else {
                report = try session.keychain().restoreBackup(
                    from: .path(path), password: password, passcode: passcode, progress: bar?.show)
            }
        } catch {
            throw Failure.withReason(error, function: Functions.restore)
        }
        print("restored \(report.restored) items from \(path)")
        if report.notForThisDevice > 0 {
            print("    not restored: \(report.notForThisDevice) ThisDeviceOnly items of a backup of another device")
        }
        if report.skipped > 0 { print("    skipped: \(report.skipped) items that could not be stored here") }
        if report.replacedLocal > 0 { print("    replaced: \(report.replacedLocal) items this keychain held") }
        if report.keptLocal > 0 {
            print("    kept: \(report.keptLocal) newer or synchronizable items of this keychain")
        }
    }

    private func info(_ raw: [CommandArgument]) throws(Failure) {
        let (_, path) = try parse(raw)
        let summary: BackupSummary
        do {
            summary = try Keychain.backupSummary(of: path)
        } catch {
            throw Failure.withReason(error, function: Functions.info)
        }
        let created = ISO8601DateFormatter().string(from: summary.created)
        var lines = [
            "Backup \"\(path)\"",
            "    format version: \(summary.formatVersion)",
            "    keybag UUID: \(summary.keybagUUID.uuidString)",
            "    created: \(created)",
            "    bound to a device: "
                + (summary.deviceBound
                    ? "yes (made without a password: it restores only onto the keychain it was made from)"
                    : "no (restores onto another keychain with its password; ThisDeviceOnly items only onto this one)"),
            "    items: \(summary.itemCount)"
                + (summary.itemsPerClass.isEmpty ? "" : " (\(Self.list(summary.itemsPerClass)))"),
        ]
        if !summary.itemsPerProtection.isEmpty {
            lines.append("    by protection: " + Self.list(summary.itemsPerProtection))
        }
        if !summary.skipped.isEmpty { lines.append("    left out: " + Self.list(summary.skipped)) }
        lines.append("    (read without the password: a restore checks the whole file)")
        print(lines.joined(separator: "\n"))
    }

    /// The keychain's passcode, when it has one: through a daemon a backup and a restore prove it, and
    /// embedded a locked keychain needs it to be read. `-p`, else the terminal, else a line of standard
    /// input (before the backup password's).
    /// A new backup password: typed twice on a terminal, else one line of standard input.
    private func newBackupPassword() throws(Failure) -> SecureBytes {
        if Terminal.inputIsTerminal {
            guard let first = Terminal.readSecret(prompt: "backup password: "), first.count > 0 else {
                throw .message("no backup password entered (--no-password makes a backup only this keychain restores)")
            }
            guard let second = Terminal.readSecret(prompt: "retype backup password: ") else {
                throw .message("no backup password entered")
            }
            guard first.constantTimeEquals(second) else { throw .message("passwords don't match") }
            return first
        }
        guard let line = Terminal.readLine(), line.count > 0 else {
            throw .message(
                "give the backup password on standard input (--no-password makes a backup only this keychain restores)")
        }
        return line
    }

    private static func list(_ counts: [String: Int]) -> String {
        counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// A progress bar on standard error, redrawn at most once a percent: `label [#####     ] 42% 4200/10000`.
/// Embedded, the engine tells it how far it has come; through the daemon, the daemon's progress frames do.
final class ProgressBar {
    private let label: String
    private var lastPercent = -1
    private var drawn = false

    init(label: String) { self.label = label }

    /// A bar when standard error is a terminal, none otherwise (a log or a pipe gets no redrawn line).
    static func onTerminal(label: String) -> ProgressBar? {
        isatty(STDERR_FILENO) == 1 ? ProgressBar(label: label) : nil
    }

    func show(_ done: Int, _ total: Int) {
        guard total > 0, done >= 0 else { return }
        // In floating point: counts from a daemon are bounded, but no product of them may trap.
        let percent = Int(min(100, Double(done) * 100 / Double(total)))
        guard percent != lastPercent else { return }
        lastPercent = percent
        let width = 30
        let filled = width * percent / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(percent)% \(done)/\(total)".utf8))
        drawn = true
    }

    /// Ends the bar's line, if one was drawn.
    func finish() {
        if drawn { FileHandle.standardError.write(Data("\n".utf8)) }
        drawn = false
    }
}

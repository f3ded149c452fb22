import Foundation
import KeychainBytes
import KeychainCore
import Security
import SecurityCommandCore

/// `security device reboot | erase | restore`: the device scenarios of an iPhone, in one place, for
/// tests and people (docs/backup.md).
struct DeviceVerbs {
    let session: Session

    private enum Functions {
        static let reboot = "SecKeychainRestart"
        static let erase = "SecKeychainErase"
        static let migrateRoot = "SecKeychainMigrateDeviceRoot"
    }

    func run(_ arguments: [CommandArgument]) throws(Failure) {
        guard let action = arguments.first?.text else {
            throw .usage(verb: "device", message: "no device command given")
        }
        let rest = Array(arguments.dropFirst())
        switch action {
        case "reboot": try reboot(rest)
        case "erase": try erase(rest)
        case "restore": try BackupVerbs(session: session).run([CommandArgument("restore")] + rest)
        case "migrate-root": try migrateRoot(rest)
        default: throw .usage(verb: "device", message: "unknown device command \"\(action)\"")
        }
    }

    private func reboot(_ arguments: [CommandArgument]) throws(Failure) {
        guard arguments.isEmpty else { throw .usage(verb: "device", message: "device reboot takes no arguments") }
        do {
            try session.keychain().restart()
        } catch {
            throw Failure.withReason(error, function: Functions.reboot)
        }
    }

    private func erase(_ raw: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(raw, takingValue: ["p"], booleans: ["y"])
        } catch {
            throw .usage(verb: "device", message: error.message)
        }
        guard arguments.positional.isEmpty else {
            throw .usage(verb: "device", message: "device erase takes no keychain name")
        }
        if !arguments.has("y") {
            guard Terminal.inputIsTerminal else {
                throw .message("erasing deletes every item, the keybag and the device root; confirm with -y")
            }
            let answer = Terminal.ask(
                "Erase all content and settings? Every item, the keybag and the device root will be deleted. [y/N] ")
            guard answer?.lowercased() == "y" || answer?.lowercased() == "yes" else { throw .message("nothing erased") }
        }
        let passcode = try keychainPasscode(arguments)
        do {
            try session.keychain().eraseAllContentAndSettings(passcode: passcode)
        } catch {
            throw Failure.withReason(error, function: Functions.erase)
        }
        print("erased: the next use of the keychain makes a new one, under a new device root")
    }

    /// The passcode `-p` gives, else asked for (a terminal) or read (a line of standard input) when the
    /// keychain has one; nil when it has none.
    private func keychainPasscode(_ arguments: Arguments) throws(Failure) -> SecureBytes? {
        var passcode = arguments.bytes("p").map { SecureBytes(copying: $0) }
        if passcode == nil, try session.status().passcodeSet {
            passcode =
                Terminal.inputIsTerminal ? Terminal.readPasscode(prompt: "keychain passcode: ") : Terminal.readLine()
            guard passcode != nil else { throw .message("no keychain passcode entered") }
        }
        return passcode
    }

    private func migrateRoot(_ raw: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(raw, takingValue: ["p"], booleans: [])
        } catch {
            throw .usage(verb: "device", message: error.message)
        }
        let names = DeviceRootKind.allCases.map(\.name).joined(separator: " or ")
        guard arguments.positional.count == 1, let name = arguments.positional.first?.text else {
            throw .usage(verb: "device", message: "device migrate-root takes the kind of root to move to: \(names)")
        }
        guard let kind = DeviceRootKind.allCases.first(where: { $0.name == name }) else {
            throw .usage(verb: "device", message: "\"\(name)\" is not a kind of device root (\(names))")
        }
        let passcode = try keychainPasscode(arguments)
        do {
            try session.keychain().migrateDeviceRoot(to: kind, passcode: passcode)
        } catch {
            throw Failure.withReason(error, function: Functions.migrateRoot)
        }
        print("moved: the device root is now \((try? session.status().deviceRoot) ?? kind.name)")
    }
}

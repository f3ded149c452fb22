import Foundation
import KeychainCore
import KeychainCrypto
import Security

/// `security app register | list | remove`: the daemon's app registry, which decides each client
/// executable's application identifier and access groups.
struct AppVerbs {
    let session: Session

    func run(_ arguments: [CommandArgument]) throws(Failure) {
        guard let action = arguments.first?.text else { throw .usage(verb: "app", message: "no app command given") }
        let rest = Array(arguments.dropFirst())
        switch action {
        case "register": try register(rest)
        case "list": try list(rest)
        case "remove": try remove(rest)
        default: throw .usage(verb: "app", message: "unknown app command \"\(action)\"")
        }
    }

    private func register(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rawArguments, takingValue: ["p"], long: ["development"],
                longTakingValue: ["application-identifier", "access-group"])
        } catch {
            throw .usage(verb: "app", message: error.message)
        }
        guard arguments.positional.count == 1, let executable = arguments.positional.first?.text else {
            throw .usage(verb: "app", message: "app register takes one executable")
        }
        guard let identifier = arguments.value(long: "application-identifier") else {
            throw .usage(verb: "app", message: "app register needs --application-identifier")
        }
        let request = AppRegistrationRequest(
            executablePath: absolute(executable), applicationIdentifier: identifier,
            accessGroups: groups(rawArguments), trustPathOnly: arguments.has(long: "development"),
            passcode: arguments.bytes("p").map { SecureBytes(copying: $0) })
        try withPasscodeIfAsked(request.passcode) { service, passcode in
            var request = request
            request.passcode = passcode
            try service.registerApp(request)
        }
        let granted = request.accessGroups.isEmpty ? [identifier] : request.accessGroups
        if !granted.contains(Self.embeddedGroup), request.executablePath == absolute("/proc/self/exe") {
            FileHandle.standardError.write(
                Data(
                    ("security: note: items stored without a daemon are in access group \"\(Self.embeddedGroup)\" "
                        + "(the command's own group when KEYCHAIN_ACCESS_GROUPS is not set), which this registration "
                        + "does not grant: through the daemon the command will not see them. To keep seeing them, "
                        + "register with --access-group \(Self.embeddedGroup) as well, e.g. --access-group "
                        + "\(Self.embeddedGroup) --access-group \(granted[0]).\n").utf8))
        }
    }

    /// The access group of what the command stores embedded without KEYCHAIN_ACCESS_GROUPS: its
    /// application identifier, the executable's name (`security`).
    private static var embeddedGroup: String { ClientIdentity.applicationIdentifier ?? "security" }

    private func list(_ rawArguments: [CommandArgument]) throws(Failure) {
        guard rawArguments.isEmpty else { throw .usage(verb: "app", message: "app list takes no arguments") }
        let apps: [AppRegistration]
        do {
            apps = try session.keychain().listApps()
        } catch {
            throw failure(error)
        }
        if apps.isEmpty { print("no apps registered") }
        for app in apps {
            let trust =
                app.executableDigest.map { "sha256 " + $0.map { String(format: "%02x", $0) }.joined() }
                ?? "development: trusted by path, whatever its contents"
            print(app.executablePath)
            print("    application identifier: \(app.applicationIdentifier)")
            print("    access groups: \(app.identity.accessGroups.joined(separator: ", "))")
            print("    executable: \(trust)")
        }
    }

    private func remove(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["p"])
        } catch {
            throw .usage(verb: "app", message: error.message)
        }
        guard arguments.positional.count == 1, let executable = arguments.positional.first?.text else {
            throw .usage(verb: "app", message: "app remove takes one executable")
        }
        let path = absolute(executable)
        try withPasscodeIfAsked(arguments.bytes("p").map { SecureBytes(copying: $0) }) { service, passcode in
            try service.removeApp(executablePath: path, passcode: passcode)
        }
    }

    /// Runs a registry change; when the daemon wants the keychain's passcode (system mode) and none was
    /// given, asks for it on a terminal and tries once more.
    private func withPasscodeIfAsked(
        _ given: SecureBytes?, _ body: (any KeychainService, SecureBytes?) throws -> Void
    ) throws(Failure) {
        let service = try session.keychain()
        do {
            try body(service, given)
        } catch let error as KeychainError where error.code == .authenticationFailed && given == nil {
            guard Terminal.inputIsTerminal, let passcode = Terminal.readSecret(prompt: "keychain passcode: ") else {
                throw failure(error)
            }
            do {
                try body(service, passcode)
            } catch {
                throw failure(error)
            }
        } catch {
            throw failure(error)
        }
    }

    /// The values of every --access-group, in order.
    private func groups(_ arguments: [CommandArgument]) -> [String] {
        var groups: [String] = []
        var index = 0
        while index < arguments.count {
            if arguments[index].text == "--access-group", index + 1 < arguments.count {
                groups.append(arguments[index + 1].text)
                index += 1
            }
            index += 1
        }
        return groups
    }

    /// The path as the daemon stores it: the daemon registers an executable under its real path, so
    /// the command resolves symbolic links the same way (for an existing file) before register and
    /// remove, and a path through a link names the same entry in both.
    private func absolute(_ path: String) -> String {
        let absolute =
            path.hasPrefix("/")
            ? path : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
        guard let resolved = realpath(absolute, nil) else { return absolute }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private func failure(_ error: any Error) -> Failure {
        if let failure = error as? Failure { return failure }
        guard let error = error as? KeychainError else {
            return .keychain(errSecInternalComponent, function: "SecKeychainAppRegistry", detail: "\(error)")
        }
        return .keychain(error.osStatus, function: "SecKeychainAppRegistry", detail: error.reason)
    }
}

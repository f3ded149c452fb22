import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import Security
import SecurityCommandCore

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
        case "policy": try policy(rest)
        default: throw .usage(verb: "app", message: "unknown app command \"\(action)\"")
        }
    }

    private func register(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rawArguments, takingValue: ["p"], long: ["development", "tool", "allow-interpreter"],
                longTakingValue: ["application-identifier", "access-group", "approval-reuse"])
        } catch {
            throw .usage(verb: "app", message: error.message)
        }
        guard arguments.positional.count == 1, let executable = arguments.positional.first?.text else {
            throw .usage(verb: "app", message: "app register takes one executable")
        }
        guard let identifier = arguments.value(long: "application-identifier") else {
            throw .usage(verb: "app", message: "app register needs --application-identifier")
        }
        var reuse = Self.defaultApprovalReuse
        if let text = arguments.value(long: "approval-reuse") {
            guard let seconds = Int(text), (0...86_400).contains(seconds) else {
                throw .usage(verb: "app", message: "--approval-reuse takes 0 to 86400 seconds")
            }
            reuse = seconds
        }
        let path = absolute(executable)
        // The command runs whatever its user tells it: registered, it would lend its groups to every
        // process of that user, so it is always registered as a tool whose reads ask the user. Its two
        // halves are one program (see `CommandPair`): both are registered, alike.
        let halves = Self.commandHalves(of: path)
        let isThisCommand = halves != nil
        let request = AppRegistrationRequest(
            executablePath: path, applicationIdentifier: identifier,
            accessGroups: groups(rawArguments), trustPathOnly: arguments.has(long: "development"),
            passcode: arguments.bytes("p").map { SecureBytes(copying: $0) },
            generalPurposeTool: isThisCommand || arguments.has(long: "tool"),
            allowInterpreter: arguments.has(long: "allow-interpreter"), approvalReuseSeconds: reuse)
        // The companion first: if it is refused, nothing is registered.
        try withPasscodeIfAsked(request.passcode) { service, passcode in
            for half in (halves ?? [path]).reversed() {
                var request = request
                request.executablePath = half
                request.passcode = passcode
                try service.registerApp(request)
            }
        }
        if let halves, halves.count == 2 {
            FileHandle.standardError.write(
                Data("security: \(halves[1]), the command's other half, is registered alike\n".utf8))
        }
        if request.generalPurposeTool || request.allowInterpreter {
            let window = reuse > 0 ? "an approval holds for \(reuse) s in the same terminal session" : "every read asks"
            let warning =
                request.allowInterpreter
                ? "warning: an interpreter registered as an app makes every script of this user run by it that app. "
                : ""
            FileHandle.standardError.write(
                Data(
                    ("security: \(warning)\(path) is registered as a general-purpose tool: the daemon asks the user "
                        + "(biometry, else the device passcode) before it gives it a secret; \(window).\n").utf8))
        }
        let granted = request.accessGroups.isEmpty ? [identifier] : request.accessGroups
        if !granted.contains(Self.embeddedGroup), isThisCommand {
            FileHandle.standardError.write(
                Data(
                    ("security: note: items stored without a daemon are in access group \"\(Self.embeddedGroup)\" "
                        + "(the command's own group when KEYCHAIN_ACCESS_GROUPS is not set), which this registration "
                        + "does not grant: through the daemon the command will not see them. To keep seeing them, "
                        + "register with --access-group \(Self.embeddedGroup) as well, e.g. --access-group "
                        + "\(Self.embeddedGroup) --access-group \(granted[0]).\n").utf8))
        }
    }

    /// How long a tool's approval holds in one terminal session unless `--approval-reuse` says
    /// otherwise: five minutes, as `sudo`'s.
    static let defaultApprovalReuse = 300

    /// The command's two halves when `path` is either of them (the same file as this `security-full`
    /// or the lean `security` beside it, under its own name or the one it handed on with, or a copy of
    /// one: the same contents), each by its path: `path` and its companion beside it, when that file is
    /// a half of this command too (a file that merely has the name gets nothing, and loses nothing).
    /// Nil for any other program.
    private static func commandHalves(of path: String) -> [String]? {
        guard let own = realpath("/proc/self/exe", nil) else { return nil }
        let ownPath = String(cString: own)
        free(own)
        let directory = PathText.parent(ownPath)
        let known = Set([
            ownPath, PathText.join(directory, CommandPair.leanName), PathText.join(directory, CommandPair.pairName),
        ])
        guard known.contains(where: { isSameProgram(path, $0) }) else { return nil }
        let companion = CommandPair.companion(of: path)
        guard companion != path, known.contains(where: { isSameProgram(companion, $0) }) else { return [path] }
        return [path, companion]
    }

    /// Whether the files at `path` and `other` are one program: the same path, or the same contents.
    private static func isSameProgram(_ path: String, _ other: String) -> Bool {
        if path == other { return true }
        var mine = stat()
        var theirs = stat()
        guard stat(other, &mine) == 0, stat(path, &theirs) == 0, mine.st_size == theirs.st_size,
            let ownBytes = FileManager.default.contents(atPath: other),
            let otherBytes = FileManager.default.contents(atPath: path),
            let ownDigest = try? Digest.sha256(ownBytes), let otherDigest = try? Digest.sha256(otherBytes)
        else { return false }
        return ownDigest == otherDigest
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
                app.executableDigest.map { "sha256 " + Hex.encode($0) }
                ?? "development: trusted by path, whatever its contents"
            print(app.executablePath)
            print("    application identifier: \(app.applicationIdentifier)")
            print("    access groups: \(app.identity.accessGroups.joined(separator: ", "))")
            print("    executable: \(trust)")
            if app.isGeneralPurposeTool {
                let reuse = app.approvalReuseSeconds ?? 0
                print(
                    "    reads of secrets: ask the user (general-purpose tool; "
                        + (reuse > 0 ? "an approval holds \(reuse) s per terminal session)" : "every read asks)"))
            }
        }
    }

    private func remove(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["p"], long: ["delete-items"])
        } catch {
            throw .usage(verb: "app", message: error.message)
        }
        guard arguments.positional.count == 1, let executable = arguments.positional.first?.text else {
            throw .usage(verb: "app", message: "app remove takes one executable")
        }
        let path = absolute(executable)
        let deletingItems = arguments.has(long: "delete-items")
        // The command's two halves were registered together, and go together: the other half too when
        // its file shows it is one, or when neither file is there any more (a stale pair; a program of
        // another kind at the other half's path keeps its entry).
        var halves = Self.commandHalves(of: path) ?? [path]
        let companion = CommandPair.companion(of: path)
        if halves.count == 1, companion != path,
            [CommandPair.leanName, CommandPair.fullName].contains(PathText.lastComponent(path)),
            access(path, F_OK) != 0, access(companion, F_OK) != 0
        {
            halves.append(companion)
        }
        try withPasscodeIfAsked(arguments.bytes("p").map { SecureBytes(copying: $0) }) { service, passcode in
            for half in halves {
                do {
                    try service.removeApp(executablePath: half, passcode: passcode, deletingItems: deletingItems)
                } catch let error as KeychainError where half != path && error.code == .itemNotFound {
                    // A companion registered by an older build, or removed on its own: nothing to remove.
                }
            }
        }
    }

    /// `app policy secret-service ask|allow|deny`: what the Secret Service does for unregistered programs.
    private func policy(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["p"])
        } catch {
            throw .usage(verb: "app", message: error.message)
        }
        guard arguments.positional.count == 2, arguments.positional[0].text == "secret-service",
            let policy = SecretServicePolicy(rawValue: arguments.positional[1].text)
        else {
            throw .usage(verb: "app", message: "app policy takes secret-service and one of ask, allow, deny")
        }
        try withPasscodeIfAsked(arguments.bytes("p").map { SecureBytes(copying: $0) }) { service, passcode in
            try service.setSecretServicePolicy(policy, passcode: passcode)
        }
        print("Secret Service policy for unregistered programs: \(policy.rawValue)")
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

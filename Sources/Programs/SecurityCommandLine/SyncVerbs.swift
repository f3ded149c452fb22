import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import Security
import SecurityCommandCore

/// `security sync enroll | recover | devices | approve | remove | now | status | history | leave`: this keychain as a
/// device of a sync account (docs/sync.md). Each takes `--json`. On the embedded keychain the command
/// runs the sync itself; through securityd, the daemon does (and keeps syncing in the background).
struct SyncVerbs {
    let session: Session

    func run(_ raw: [CommandArgument]) throws(Failure) {
        guard let verb = raw.first?.text else { throw .usage(verb: "sync", message: "no sync command given") }
        // A server that drops a TLS connection mid-write ends the write, not the command.
        signal(SIGPIPE, SIG_IGN)
        let arguments: Arguments
        do {
            arguments = try Arguments(
                Array(raw.dropFirst()), takingValue: ["p", "s", "a"], long: ["json", "internet"],
                longTakingValue: ["server", "account", "name", "ca", "version"])
        } catch {
            throw .usage(verb: "sync", message: error.message)
        }
        let positional = arguments.positional.map(\.text)
        var values: [String] = []
        switch verb {
        case "enroll", "recover":
            guard positional.isEmpty, let server = arguments.value(long: "server"),
                let account = arguments.value(long: "account")
            else { throw .usage(verb: "sync", message: "\(verb) takes --server ADDRESS and --account NAME") }
            // Checked here, before the secret is read: a remote address is refused at once.
            do { _ = try SyncAddress(parsing: server) } catch {
                throw .message("security: sync \(verb): \(error.reason)")
            }
            values = [server, account, arguments.value(long: "name") ?? Self.hostName]
            // --ca: the CA certificates a tls:// server's certificate is checked against (else the system's).
            if let authorities = arguments.value(long: "ca") {
                values.append(
                    authorities.hasPrefix("/")
                        ? authorities : FileManager.default.currentDirectoryPath + "/" + authorities)
            }
        case "approve", "remove":
            guard positional.count == 1 else {
                throw .usage(
                    verb: "sync",
                    message: "\(verb) takes one device id (32 hexadecimal digits, as sync devices lists it)")
            }
            values = positional
        case "history":
            guard positional.isEmpty, let name = arguments["s"] else {
                throw .usage(verb: "sync", message: "history takes -s SERVICE (or SERVER, with --internet)")
            }
            let internet = arguments.has(long: "internet")
            values = ["class=" + (internet ? "inet" : "genp"), (internet ? "srvr=" : "svce=") + name]
            if let account = arguments["a"] { values.append("acct=" + account) }
            if let version = arguments.value(long: "version") {
                guard let number = Int64(version), number > 0 else {
                    throw .usage(verb: "sync", message: "--version takes a version number, as history lists them")
                }
                values.append("version=\(number)")
            }
        case "devices", "now", "status", "leave", "reset-guesses":
            guard positional.isEmpty else { throw .usage(verb: "sync", message: "unexpected \"\(positional[0])\"") }
        default:
            throw .usage(verb: "sync", message: "unknown sync command \"\(verb)\"")
        }
        let changesAccount = KeychainAdminRequest.syncVerbsDecidedAsABackup.contains(verb)
        let result: Data
        if KeychainServices.daemonSocketInUse() != nil {
            let passcode = changesAccount ? try session.wholeKeychainPasscode(arguments) : nil
            let secret = try secrets(for: verb)
            do {
                guard
                    case .syncResult(let data) = try session.keychain().administer(
                        .sync(verb: verb, arguments: values, secret: secret, passcode: passcode))
                else { throw Failure.message("security: sync \(verb): the daemon's answer is not a sync result") }
                result = data
            } catch let failure as Failure {
                throw failure
            } catch let error as KeychainError {
                throw .keychain(error.osStatus, function: "SecKeychainSync", detail: error.reason)
            } catch {
                throw .message("security: sync \(verb): \(error)")
            }
        } else {
            let secret = try secrets(for: verb)
            let keychain: Keychain
            do { keychain = try EmbeddedKeychain.current() } catch {
                throw .keychain(errSecNotAvailable, function: "SecKeychainCopyDefault", detail: "\(error)")
            }
            result = SyncAgent(keychain: keychain).perform(verb: verb, arguments: values, secret: secret)
        }
        guard let object = (try? JSONSerialization.jsonObject(with: result)) as? [String: Any] else {
            throw .message("security: sync \(verb): the result is damaged")
        }
        if let reason = object["reason"] as? String, object["error"] != nil {
            throw .message("security: sync \(verb): \(reason)")
        }
        if arguments.has(long: "json") {
            let listed = ["devices": "devices", "history": "versions"][verb]
            print(ItemFormatter.json(listed.map { object[$0] ?? [] } ?? object))
        } else if verb == "history", arguments.value(long: "version") != nil {
            // The version's secret alone, as -w prints one.
            let versions = (object["versions"] as? [[String: Any]]) ?? []
            guard let chosen = versions.first(where: { $0["secret"] != nil || $0["secretHex"] != nil }) else {
                throw .message("security: sync history: that version does not open on this device")
            }
            print((chosen["secret"] ?? chosen["secretHex"]).map { "\($0)" } ?? "")
        } else {
            print(Self.text(verb, object))
        }
    }

    private static func text(_ verb: String, _ object: [String: Any]) -> String {
        let string = { (key: String) in object[key].map { "\($0)" } ?? "" }
        switch verb {
        case "recover":
            let removed = ((object["removedDevices"] as? [[String: Any]]) ?? []).map {
                "\($0["name"] as? String ?? "") (\(($0["id"] as? String ?? "").prefix(8)))"
            }
            return
                "recovered: this device (\(string("device"))) holds the account alone, under new keys and the new recovery secret; \(string("pulled")) items pulled"
                + (removed.isEmpty ? "" : "\nremoved: " + removed.joined(separator: ", "))
        case "enroll":
            let id = string("device")
            return string("status") == "trusted"
                ? "enrolled: this device (\(id)) is trusted"
                : "enrolled: this device (\(id)) waits for approval; on a trusted device run: security sync approve \(id)"
        case "devices":
            return ((object["devices"] as? [[String: Any]]) ?? []).map { device in
                let status = (device["status"] as? String ?? "").padding(toLength: 8, withPad: " ", startingAt: 0)
                let this = device["this"] as? Bool == true ? "  (this device)" : ""
                return "\(device["id"] as? String ?? "")  \(status)  \(device["name"] as? String ?? "")\(this)"
            }.joined(separator: "\n")
        case "now":
            let tooLarge = object["tooLarge"] as? Int ?? 0
            return
                "synced: \(string("pushed")) pushed, \(string("pulled")) pulled, \(string("conflictsResolved")) conflicts resolved"
                + (tooLarge > 0 ? ", \(tooLarge) items too large to sync" : "")
        case "status":
            return """
                account: \(string("account")) on \(string("server"))
                device: \(string("device")) (\(string("deviceName"))), one of \(string("trustedDevices")) trusted
                last sync: \(object["lastSync"] as? String ?? "never")
                position: \(string("position")), chain \(string("chain"))
                pending changes: \(string("pendingChanges"))
                conflicts resolved: \(string("conflictsResolved"))
                """
        case "leave": return "this keychain syncs no more (its items stay)"
        case "reset-guesses":
            return "\(string("forgiven")) wrong recovery secrets forgiven: the account takes 10 guesses again"
        case "history":
            return ((object["versions"] as? [[String: Any]]) ?? []).map { version in
                let writer = (version["writerName"] as? String).map { "\($0) " } ?? ""
                let id = String((version["writer"] as? String ?? "").prefix(8))
                let date = version["date"] as? String ?? "(sealed under a key this device never had)"
                let deleted = version["deleted"] as? Bool == true ? "  deleted" : ""
                return "version \(version["version"].map { "\($0)" } ?? "")  \(date)  by \(writer)(\(id))\(deleted)"
            }.joined(separator: "\n")
        default: return "\(verb)d \(string("device"))"
        }
    }

    private static var hostName: String {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty ? "device" : String(name.prefix(64))
    }

    /// What `verb` reads: `enroll` the account's recovery secret; `recover` that secret and a new one,
    /// each with its length, as the agent takes them.
    private func secrets(for verb: String) throws(Failure) -> SecureBytes? {
        switch verb {
        case "enroll":
            return try readSecret("recovery secret for the sync account: ", verb: verb)
        case "recover":
            let old = try readSecret("recovery secret for the sync account: ", verb: verb)
            let new = try readSecret("new recovery secret: ", verb: verb)
            if Terminal.inputIsTerminal {
                let again = try readSecret("new recovery secret again: ", verb: verb)
                guard again == new else { throw .message("security: sync recover: the new secrets differ") }
            }
            var writer = ByteWriter()
            old.withUnsafeBytes { writer.writeSecretBytes($0) }
            new.withUnsafeBytes { writer.writeSecretBytes($0) }
            return writer.takeSecure()
        default:
            return nil
        }
    }

    /// A secret read as `-w` reads a password: asked on a terminal, else one line of standard input.
    private func readSecret(_ prompt: String, verb: String) throws(Failure) -> SecureBytes {
        if Terminal.inputIsTerminal {
            guard let secret = Terminal.readSecret(prompt: prompt), secret.count > 0 else {
                throw .message("no recovery secret was entered")
            }
            return secret
        }
        guard let line = Terminal.readLine(), line.count > 0 else {
            throw .message("security: sync \(verb): give each recovery secret as one line of standard input")
        }
        return line
    }
}

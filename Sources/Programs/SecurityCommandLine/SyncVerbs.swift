import Foundation
import KeychainBytes
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import Security

/// `security sync enroll | devices | approve | remove | now | status | leave`: this keychain as a
/// device of a sync account (docs/sync.md). Each takes `--json`.
struct SyncVerbs {
    let session: Session

    func run(_ arguments: [CommandArgument]) throws(Failure) {
        guard let action = arguments.first?.text else { throw .usage(verb: "sync", message: "no sync command given") }
        let parsed: Arguments
        do {
            parsed = try Arguments(
                Array(arguments.dropFirst()), takingValue: [], long: ["json"],
                longTakingValue: ["server", "account", "name"])
        } catch {
            throw .usage(verb: "sync", message: error.message)
        }
        let json = parsed.has(long: "json")
        let positional = parsed.positional.map(\.text)
        let agent = try self.agent()
        do {
            switch action {
            case "enroll":
                guard positional.isEmpty, let server = parsed.value(long: "server"),
                    let account = parsed.value(long: "account")
                else { throw Failure.usage(verb: "sync", message: "enroll takes --server ADDRESS and --account NAME") }
                let address = try SyncAddress(parsing: server)
                let secret = try recoverySecret()
                let name = parsed.value(long: "name") ?? Self.hostName
                let status = try agent.enroll(
                    server: address, accountName: account, recoverySecret: secret, deviceName: name)
                let id = Hex.encode(try agent.status().device.id)
                print(
                    json
                        ? ItemFormatter.json(["device": id, "status": Self.name(status)])
                        : status == .trusted
                            ? "enrolled: this device (\(id)) is trusted in account \(account)"
                            : "enrolled: this device (\(id)) waits for approval; on a trusted device run: security sync approve \(id.prefix(8))"
                )
            case "devices":
                try Self.noArguments(positional)
                let devices = try agent.devices()
                if json {
                    print(
                        ItemFormatter.json(
                            devices.map {
                                [
                                    "id": Hex.encode($0.device.id), "name": $0.device.name,
                                    "status": Self.name($0.status),
                                    "this": $0.isThisDevice,
                                ] as [String: Any]
                            }))
                } else {
                    for entry in devices {
                        print(
                            "\(Hex.encode(entry.device.id))  \(Self.name(entry.status).padding(toLength: 8, withPad: " ", startingAt: 0))  \(entry.device.name)\(entry.isThisDevice ? "  (this device)" : "")"
                        )
                    }
                }
            case "approve", "remove":
                guard positional.count == 1, let device = positional.first else {
                    throw Failure.usage(
                        verb: "sync", message: "\(action) takes one device id (or its first characters)")
                }
                if action == "approve" { try agent.approve(device: device) } else { try agent.remove(device: device) }
                print(json ? ItemFormatter.json(["device": device, "done": action]) : "\(action)d \(device)")
            case "now":
                try Self.noArguments(positional)
                let report = try agent.syncNow()
                print(
                    json
                        ? ItemFormatter.json([
                            "pushed": report.pushed, "pulled": report.pulled,
                            "conflictsResolved": report.conflictsResolved, "position": report.cursor,
                            "tooLarge": report.tooLarge,
                        ])
                        : "synced: \(report.pushed) pushed, \(report.pulled) pulled, \(report.conflictsResolved) conflicts resolved\(report.tooLarge > 0 ? ", \(report.tooLarge) items too large to sync" : "")"
                )
            case "status":
                try Self.noArguments(positional)
                let status = try agent.status()
                let last = status.lastSync.map { ISO8601DateFormatter().string(from: $0) }
                if json {
                    var object: [String: Any] = [
                        "server": status.server, "account": status.accountName, "device": Hex.encode(status.device.id),
                        "deviceName": status.device.name, "trustedDevices": status.trustedDevices,
                        "keyGeneration": status.generation, "position": status.cursor,
                        "pendingChanges": status.pendingChanges, "conflictsResolved": status.conflictsResolved,
                    ]
                    object["lastSync"] = last
                    print(ItemFormatter.json(object))
                } else {
                    print(
                        """
                        account: \(status.accountName) on \(status.server)
                        device: \(Hex.encode(status.device.id)) (\(status.device.name)), one of \(status.trustedDevices) trusted
                        last sync: \(last ?? "never")
                        pending changes: \(status.pendingChanges)
                        conflicts resolved: \(status.conflictsResolved)
                        """)
                }
            case "leave":
                try Self.noArguments(positional)
                try agent.leave()
                print(json ? ItemFormatter.json(["done": "leave"]) : "this keychain syncs no more (its items stay)")
            default:
                throw Failure.usage(verb: "sync", message: "unknown sync command \"\(action)\"")
            }
        } catch let failure as Failure {
            throw failure
        } catch let error as SyncError {
            throw .message("security: sync \(action): \(error.reason)")
        } catch {
            throw .message("security: sync \(action): \(error)")
        }
    }

    private static func noArguments(_ positional: [String]) throws(Failure) {
        guard positional.isEmpty else { throw .usage(verb: "sync", message: "unexpected \"\(positional[0])\"") }
    }

    private static func name(_ status: SyncDeviceStatus) -> String {
        switch status {
        case .unknown: "unknown"
        case .pending: "waiting"
        case .trusted: "trusted"
        case .removed: "removed"
        }
    }

    private static var hostName: String {
        ProcessInfo.processInfo.hostName.isEmpty ? "device" : String(ProcessInfo.processInfo.hostName.prefix(64))
    }

    /// The keychain sync works on: the embedded one. Through securityd, sync is the daemon's to run.
    private func agent() throws(Failure) -> SyncAgent {
        if KeychainServices.daemonSocketInUse() != nil {
            throw .message(
                "security: sync: this command talks to securityd, which does not run sync yet; run it on the embedded keychain (KEYCHAIN_SOCKET= security sync …) with the daemon stopped"
            )
        }
        do { return SyncAgent(keychain: try EmbeddedKeychain.current()) } catch {
            throw .keychain(errSecNotAvailable, function: "SecKeychainCopyDefault", detail: "\(error)")
        }
    }

    /// The account's recovery secret, read as `-w` reads a password: asked on a terminal (twice when
    /// it is being set, which the command cannot tell: once), else one line of standard input.
    private func recoverySecret() throws(Failure) -> SecureBytes {
        if Terminal.inputIsTerminal {
            guard let secret = Terminal.readSecret(prompt: "recovery secret for the sync account: "), secret.count > 0
            else { throw .message("no recovery secret was entered") }
            return secret
        }
        guard let line = Terminal.readLine(), line.count > 0 else {
            throw .message("security: sync enroll: give the recovery secret as one line of standard input")
        }
        return line
    }
}

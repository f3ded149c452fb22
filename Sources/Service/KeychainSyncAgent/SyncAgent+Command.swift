import Foundation
import KeychainBytes
import KeychainSyncProtocol

/// The `security sync` verbs as one call, for the command on the embedded keychain and for securityd
/// on its own: the result is a JSON object, `{"error": code, "reason": …}` on failure.
extension SyncAgent {
    public func perform(verb: String, arguments: [String], secret: SecureBytes?) -> Data {
        let object: [String: Any]
        do {
            object = try result(verb: verb, arguments: arguments, secret: secret)
        } catch {
            object = ["error": Int(error.code.rawValue), "reason": error.reason]
        }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }

    public static func statusName(_ status: SyncDeviceStatus) -> String {
        switch status {
        case .unknown: "unknown"
        case .pending: "waiting"
        case .trusted: "trusted"
        case .removed: "removed"
        }
    }

    private func result(verb: String, arguments: [String], secret: SecureBytes?) throws(SyncError) -> [String: Any] {
        func expect(_ count: Int) throws(SyncError) {
            guard arguments.count == count else { throw SyncError(.invalid, "sync \(verb) takes \(count) arguments") }
        }
        switch verb {
        case "enroll":
            guard arguments.count == 3 || arguments.count == 4 else {
                throw SyncError(.invalid, "sync enroll takes a server, an account, a device name and a CA file")
            }
            guard let secret else { throw SyncError(.invalid, "enrolling needs the account's recovery secret") }
            let status = try enroll(
                server: try SyncAddress(parsing: arguments[0]), accountName: arguments[1], recoverySecret: secret,
                deviceName: arguments[2], authorities: arguments.count == 4 ? arguments[3] : nil)
            return ["device": Hex.encode(try self.status().device.id), "status": Self.statusName(status)]
        case "recover":
            guard arguments.count == 3 || arguments.count == 4 else {
                throw SyncError(.invalid, "sync recover takes a server, an account, a device name and a CA file")
            }
            // The secret and the new one, each with its length.
            guard let secret,
                let (old, new) = secret.withBorrowedData({ data -> (SecureBytes, SecureBytes)? in
                    var reader = ByteReader(data)
                    guard let old = try? reader.readSecureBytes(), let new = try? reader.readSecureBytes(),
                        reader.isAtEnd
                    else { return nil }
                    return (old, new)
                })
            else { throw SyncError(.invalid, "recovering needs the account's recovery secret and a new one") }
            let report = try recover(
                server: try SyncAddress(parsing: arguments[0]), accountName: arguments[1], recoverySecret: old,
                newSecret: new, deviceName: arguments[2], authorities: arguments.count == 4 ? arguments[3] : nil)
            return [
                "device": Hex.encode(try status().device.id), "status": "trusted", "pulled": report.sync.pulled,
                "pushed": report.sync.pushed,
                "removedDevices": report.removedDevices.map {
                    ["id": Hex.encode($0.id), "name": $0.name] as [String: Any]
                },
            ]
        case "history":
            // name=value pairs to match (class, svce, acct, srvr), and version=N for that version's secret.
            var matching: [String: String] = [:]
            var wanted: Int64?
            for argument in arguments {
                guard let equals = argument.firstIndex(of: "=") else {
                    throw SyncError(.invalid, "sync history takes name=value arguments")
                }
                let name = String(argument[..<equals])
                let value = String(argument[argument.index(after: equals)...])
                if name == "version" {
                    guard let version = Int64(value), version > 0 else {
                        throw SyncError(.invalid, "a version is a positive number")
                    }
                    wanted = version
                } else {
                    guard ["class", "svce", "acct", "srvr"].contains(name) else {
                        throw SyncError(.invalid, "sync history matches class, svce, acct and srvr only")
                    }
                    matching[name] = value
                }
            }
            let entries = try history(matching: matching)
            if let wanted, !entries.contains(where: { $0.version == wanted }) {
                throw SyncError(.invalid, "the server keeps no version \(wanted) of that item")
            }
            let formatter = ISO8601DateFormatter()
            return [
                "versions": entries.map { entry -> [String: Any] in
                    var object: [String: Any] = [
                        "record": Hex.encode(entry.recordID), "version": entry.version,
                        "writer": Hex.encode(entry.writer), "deleted": entry.deleted, "opened": entry.date != nil,
                    ]
                    object["writerName"] = entry.writerName
                    object["date"] = entry.date.map { formatter.string(from: $0) }
                    // A secret only when asked for, by its version.
                    if entry.version == wanted, let secret = entry.secret {
                        secret.withBorrowedData { data in
                            if let text = String(data: data, encoding: .utf8) {
                                object["secret"] = text
                            } else {
                                object["secretHex"] = Hex.encode(data)
                            }
                        }
                    }
                    return object
                }
            ]
        case "reset-guesses":
            try expect(0)
            return ["forgiven": try resetRecoveryGuesses()]
        case "devices":
            try expect(0)
            return [
                "devices": try devices().map {
                    [
                        "id": Hex.encode($0.device.id), "name": $0.device.name, "status": Self.statusName($0.status),
                        "this": $0.isThisDevice,
                    ] as [String: Any]
                }
            ]
        case "approve", "remove":
            try expect(1)
            if verb == "approve" { try approve(device: arguments[0]) } else { try remove(device: arguments[0]) }
            return ["device": arguments[0], "done": verb]
        case "now":
            try expect(0)
            let report = try syncNow()
            return [
                "pushed": report.pushed, "pulled": report.pulled, "conflictsResolved": report.conflictsResolved,
                "position": report.cursor, "tooLarge": report.tooLarge,
            ]
        case "status":
            try expect(0)
            let status = try status()
            var object: [String: Any] = [
                "server": status.server, "account": status.accountName, "device": Hex.encode(status.device.id),
                "deviceName": status.device.name, "trustedDevices": status.trustedDevices,
                "keyGeneration": status.generation, "position": status.cursor, "chain": Hex.encode(status.chain),
                "pendingChanges": status.pendingChanges,
                "conflictsResolved": status.conflictsResolved,
            ]
            object["lastSync"] = status.lastSync.map { ISO8601DateFormatter().string(from: $0) }
            return object
        case "leave":
            try expect(0)
            try leave()
            return ["done": "leave"]
        default:
            throw SyncError(.invalid, "unknown sync command \"\(verb)\"")
        }
    }
}

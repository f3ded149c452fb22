// A child process for the multi-process tests: it uses the keychain named by KEYCHAIN_HOME through
// the public Security API, as an app would, and reports each success on standard output.
//
//   keychain-test-helper add <prefix> <count>        add <count> items, print "added <n>" after each
//   keychain-test-helper churn <prefix> <count>      add, read back and delete <count> items
//   keychain-test-helper read <service> <account>    print the secret, or "status <n>"
//   keychain-test-helper close <service> <account>   read the item, then close the databases as the
//                                                     `security` command does on its way out
//   keychain-test-helper put <service> <account> <secret> [group] [accessibility]
//   keychain-test-helper update <service> <account> <secret>
//   keychain-test-helper remove <service> <account>
//   keychain-test-helper count <service>              how many generic passwords of <service> it can see
//   keychain-test-helper groups <service>             the access groups of those it can see
//                                                     (each prints "status <n>" on failure)
//   keychain-test-helper sleep <seconds> <ignored>    wait, doing nothing
//   keychain-test-helper read-claiming <service> <account> <uuid>
//                                                     read naming an authentication context this process
//                                                     never evaluated (another's identifier), without
//                                                     allowing a prompt

import Foundation
import KeychainCore
import Security

/// A context that claims another context's identifier, as a client faking an authentication would.
final class ClaimedContext: SecAuthenticationContextObject {
    let contextIdentifier: UUID

    init(_ identifier: UUID) { contextIdentifier = identifier }

    var authenticationContextReference: AuthenticationContextReference {
        AuthenticationContextReference(identifier: contextIdentifier, interactionNotAllowed: true)
    }
}

/// Writes a line straight to standard output (no buffering), so a parent sees it even if this
/// process is killed right after.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func item(_ service: String, _ account: String) -> [String: Any] {
    [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
        kSecAttrAccount as String: account,
    ]
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: keychain-test-helper VERB ARG...\n".utf8))
    exit(2)
}
guard arguments.count >= 4 || ["count", "groups", "sleep"].contains(arguments[1]) else { exit(2) }

switch arguments[1] {
case "add":
    let count = Int(arguments[3]) ?? 0
    for index in 0..<count {
        var query = item(arguments[2], "account-\(index)")
        query[kSecValueData as String] = Data("secret-\(arguments[2])-\(index)".utf8)
        let status = SecItemAdd(query as CFDictionary, nil)
        guard status == errSecSuccess else {
            say("status \(status)")
            exit(1)
        }
        say("added \(index)")
    }
case "churn":
    let count = Int(arguments[3]) ?? 0
    for index in 0..<count {
        var query = item(arguments[2], "churn-\(index)")
        query[kSecValueData as String] = Data("value-\(index)".utf8)
        guard SecItemAdd(query as CFDictionary, nil) == errSecSuccess else { exit(3) }
        var result: CFTypeRef?
        var read = item(arguments[2], "churn-\(index)")
        read[kSecReturnData as String] = true
        guard SecItemCopyMatching(read as CFDictionary, &result) == errSecSuccess,
            result as? Data == Data("value-\(index)".utf8)
        else { exit(4) }
        guard SecItemDelete(item(arguments[2], "churn-\(index)") as CFDictionary) == errSecSuccess else { exit(5) }
    }
    say("churned \(count)")
case "read", "close", "read-claiming":
    var query = item(arguments[2], arguments[3])
    query[kSecReturnData as String] = true
    if arguments[1] == "read-claiming" {
        guard arguments.count >= 5, let identifier = UUID(uuidString: arguments[4]) else { exit(2) }
        query[kSecUseAuthenticationContext as String] = ClaimedContext(identifier)
    }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    if status == errSecSuccess, let data = result as? Data {
        say(String(decoding: data, as: UTF8.self))
    } else {
        say("status \(status)")
    }
    if arguments[1] == "close" { EmbeddedKeychain.closeDatabases() }
case "sleep":
    sleep(UInt32(arguments[2]) ?? 1)
case "put":
    guard arguments.count >= 5 else { exit(2) }
    var query = item(arguments[2], arguments[3])
    query[kSecValueData as String] = Data(arguments[4].utf8)
    if arguments.count > 5, !arguments[5].isEmpty { query[kSecAttrAccessGroup as String] = arguments[5] }
    if arguments.count > 6 { query[kSecAttrAccessible as String] = arguments[6] }
    say("status \(SecItemAdd(query as CFDictionary, nil))")
case "update":
    guard arguments.count >= 5 else { exit(2) }
    let changes = [kSecValueData as String: Data(arguments[4].utf8)]
    say("status \(SecItemUpdate(item(arguments[2], arguments[3]) as CFDictionary, changes as CFDictionary))")
case "remove":
    say("status \(SecItemDelete(item(arguments[2], arguments[3]) as CFDictionary))")
case "count", "groups":
    let query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: arguments[2],
        kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
    ]
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    let items = result as? [[String: Any]] ?? []
    if status != errSecSuccess, status != errSecItemNotFound {
        say("status \(status)")
    } else if arguments[1] == "count" {
        say("count \(items.count)")
    } else {
        say(
            "groups "
                + items.compactMap { $0[kSecAttrAccessGroup as String] as? String }.sorted().joined(separator: ","))
    }
default:
    exit(2)
}

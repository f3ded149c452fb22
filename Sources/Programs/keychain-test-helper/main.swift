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
//   keychain-test-helper read-twice <service> <account> <milliseconds>
//                                                     read, wait, read again (in one process)
//   keychain-test-helper read-claiming <service> <account> <uuid>
//                                                     read naming an authentication context this process
//                                                     never evaluated (another's identifier), without
//                                                     allowing a prompt
//   keychain-test-helper read-hiding-environment <service> <account>
//                                                     move the environment to the heap, make the pages the
//                                                     kernel shows as the environment unreadable, then read
//   keychain-test-helper read-with-runtime-code <service> <account>
//                                                     map a page of executable memory that no file backs
//                                                     (as a library that copied itself there would), then read
//   keychain-test-helper set-passcode <new> <current|->
//                                                     send a passcode-setting request as it is (- : none)
//   keychain-test-helper make-stored-format-fixture <directory>
//                                                     make the keychain StoredFormatTests opens
//   keychain-test-helper hold-frames <socket> <count> <bytes>
//                                                     open <count> connections, each announcing a frame of
//                                                     <bytes> and sending one byte of it; then wait

import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
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
guard arguments.count >= 4 || ["count", "groups", "sleep", "make-stored-format-fixture"].contains(arguments[1]) else {
    exit(2)
}

/// The OSStatus the facade gives for an error of the service.
func status(of error: any Error) -> OSStatus {
    (error as? KeychainError)?.osStatus ?? errSecInternalComponent
}

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
    var claimed: UUID?
    if arguments[1] == "read-claiming" {
        guard arguments.count >= 5, let identifier = UUID(uuidString: arguments[4]) else { exit(2) }
        claimed = identifier
    }
    readAndSay(arguments[2], arguments[3], claiming: claimed)
    if arguments[1] == "close" { EmbeddedKeychain.closeDatabases() }
case "sleep":
    sleep(UInt32(arguments[2]) ?? 1)
case "read-twice":
    // Reads, waits the given milliseconds, reads again: one process whose service may go away between.
    guard arguments.count >= 5, let pause = UInt32(arguments[4]) else { exit(2) }
    readAndSay(arguments[2], arguments[3])
    usleep(pause * 1000)
    readAndSay(arguments[2], arguments[3])
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
case "read-with-runtime-code":
    guard let page = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        page != MAP_FAILED
    else { exit(3) }
    page.storeBytes(of: 0xc3, as: UInt8.self)  // a lone `ret`
    guard mprotect(page, 4096, PROT_READ | PROT_EXEC) == 0 else { exit(3) }
    readAndSay(arguments[2], arguments[3])
case "read-hiding-environment":
    hideEnvironment()
    readAndSay(arguments[2], arguments[3])
case "set-passcode":
    let new = SecureBytes(copying: arguments[2].utf8)
    let current = arguments[3] == "-" ? nil : SecureBytes(copying: arguments[3].utf8)
    do {
        _ = try KeychainServices.current().administer(.setPasscode(new: new, current: current))
        say("status 0")
    } catch {
        say("status \(status(of: error))")
    }
case "make-stored-format-fixture":
    do {
        try makeStoredFormatFixture(at: arguments[2])
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(1)
    }
case "hold-frames":
    guard arguments.count >= 5, let count = Int(arguments[3]), let size = UInt32(arguments[4]) else { exit(2) }
    var held: [Int32] = []
    for _ in 0..<count {
        guard let connection = announceFrame(socket: arguments[2], size: size) else { break }
        held.append(connection)
    }
    say("holding \(held.count)")
    while true { sleep(60) }
default:
    exit(2)
}

/// Reads an item's data and prints it, or the status; `claiming` names another context's identifier.
func readAndSay(_ service: String, _ account: String, claiming: UUID? = nil) {
    var query = item(service, account)
    query[kSecReturnData as String] = true
    if let claiming { query[kSecUseAuthenticationContext as String] = ClaimedContext(claiming) }
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    if status == errSecSuccess, let data = result as? Data {
        say(String(decoding: data, as: UTF8.self))
    } else {
        say("status \(status)")
    }
}

/// Copies the environment to the heap (what getenv reads from then on), then takes every access away
/// from the whole pages inside the range `/proc/self/stat` gives for it: the kernel's `environ` file
/// then reads short (unmapped pages would not do: the stack grows back into them, as zeros).
func hideEnvironment() {
    let variables = ProcessInfo.processInfo.environment
    clearenv()
    for (name, value) in variables { setenv(name, value, 1) }
    guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { exit(3) }
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 48, let start = UInt(fields[47]), let finish = UInt(fields[48]) else { exit(3) }
    let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
    let first = (start + page - 1) / page * page
    let last = finish / page * page
    guard last > first, let address = UnsafeMutableRawPointer(bitPattern: first) else {
        say("the environment spans no whole page: give a larger one")
        exit(3)
    }
    guard mprotect(address, Int(last - first), PROT_NONE) == 0 else { exit(3) }
}

/// A connection to `socket` that announces a request frame of `size` bytes and sends one of them.
func announceFrame(socket path: String, size: UInt32) -> Int32? {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return nil }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0 else {
        close(descriptor)
        return nil
    }
    var header: [UInt8] = Array("SKWP".utf8) + [3, 1, 1, 0, 0, 0]  // protocol version 3, a request, id 1
    header += withUnsafeBytes(of: size.littleEndian) { Array($0) }
    header.append(0)
    guard write(descriptor, header, header.count) == header.count else {
        close(descriptor)
        return nil
    }
    return descriptor
}

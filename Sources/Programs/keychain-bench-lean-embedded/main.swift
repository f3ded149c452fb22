// The benchmark's measure of what an embedded lookup costs a program that links the engine without
// the Core Foundation facade or Foundation (FoundationEssentials alone): `keychain-bench-lean-embedded
// SERVICE ACCOUNT` protects itself as the `security` command does (no core file, not dumpable, the work
// in a child forked after that), opens the keychain at KEYCHAIN_HOME with the engine's default options
// (no authenticator is set up, as none is needed for an item without access control) in the command's own access group
// (`security`), and prints the generic password's secret as `find-generic-password -w` does; exit 1
// with the reason when there is none.
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a line to standard error.
func complain(_ text: String) {
    let line = Array((text + "\n").utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let home = getenv("KEYCHAIN_HOME").map({ String(cString: $0) }), !home.isEmpty else {
    complain("usage: KEYCHAIN_HOME=DIR keychain-bench-lean-embedded SERVICE ACCOUNT")
    exit(2)
}
guard ProcessProtection.protectProcess(), ProcessProtection.continueInProtectedChild() else {
    complain("keychain-bench-lean-embedded: cannot protect this process's memory")
    exit(1)
}
CryptoLibrary.startWithoutSystemConfiguration()
let query: [String: ItemValue] = [
    "class": .string("genp"), "svce": .string(arguments[1]), "acct": .string(arguments[2]),
    "r_Data": .bool(true), "m_Limit": .string("m_LimitOne"),
]
do {
    let keychain = try Keychain(directory: home)
    defer { keychain.closeIdleConnections() }
    let service = InProcessKeychainService(keychain: keychain, client: ClientIdentity(accessGroups: ["security"]))
    guard case .secret(let secret)? = try service.copyMatching(query) else {
        complain("keychain-bench-lean-embedded: no secret in the answer")
        exit(1)
    }
    secret.withUnsafeBytes { print(String(decoding: $0, as: UTF8.self)) }
} catch {
    complain("keychain-bench-lean-embedded: \((error as? KeychainError)?.message ?? "\(error)")")
    exit(1)
}

// The benchmark's measure of what a lookup through securityd costs a client that links neither the
// Core Foundation facade, nor Foundation, nor libcrypto: the modules below the facade alone
// (KeychainCore, KeychainWire, KeychainClient), in a static binary. `keychain-bench-lean-client
// SERVICE ACCOUNT` prints the generic password's secret as `security find-generic-password -w` does,
// from the daemon at KEYCHAIN_SOCKET; exit 1 with the reason when there is none.
import KeychainBytes
import KeychainClient
import KeychainCore

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a line to standard error.
func complain(_ text: String) {
    let line = Array((text + "\n").utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let socket = getenv("KEYCHAIN_SOCKET").map({ String(cString: $0) }), !socket.isEmpty
else {
    complain("usage: KEYCHAIN_SOCKET=PATH keychain-bench-lean-client SERVICE ACCOUNT")
    exit(2)
}
let query: [String: ItemValue] = [
    "class": .string("genp"), "svce": .string(arguments[1]), "acct": .string(arguments[2]),
    "r_Data": .bool(true), "m_Limit": .string("m_LimitOne"),
]
do {
    guard case .secret(let secret)? = try DaemonKeychainService(socketPath: socket).copyMatching(query) else {
        complain("keychain-bench-lean-client: no secret in the answer")
        exit(1)
    }
    secret.withUnsafeBytes { print(String(decoding: $0, as: UTF8.self)) }
} catch {
    complain("keychain-bench-lean-client: \((error as? KeychainError)?.message ?? "\(error)")")
    exit(1)
}

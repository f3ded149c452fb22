// `security`: the keychain from the shell, with the verbs, flags, output and exit codes of macOS's
// /usr/bin/security, on the embedded keychain (KEYCHAIN_HOME).

import Foundation
import KeychainCrypto
import Security

func run(_ arguments: [CommandArgument]) throws(Failure) {
    guard let verb = arguments.first?.text else { throw .usage(verb: nil, message: "") }
    let rest = Array(arguments.dropFirst())
    let session = Session()
    switch verb {
    case "add-generic-password": try PasswordVerbs(kind: .generic, session: session).add(rest)
    case "find-generic-password": try PasswordVerbs(kind: .generic, session: session).find(rest)
    case "delete-generic-password": try PasswordVerbs(kind: .generic, session: session).delete(rest)
    case "add-internet-password": try PasswordVerbs(kind: .internet, session: session).add(rest)
    case "find-internet-password": try PasswordVerbs(kind: .internet, session: session).find(rest)
    case "delete-internet-password": try PasswordVerbs(kind: .internet, session: session).delete(rest)
    case "dump-keychain": try DumpVerb(session: session).run(rest)
    case "set-keychain-password": try StateVerbs(session: session).setPassword(rest)
    case "lock-keychain": try StateVerbs(session: session).lock(rest)
    case "unlock-keychain": try StateVerbs(session: session).unlock(rest)
    case "show-keychain-info": try StateVerbs(session: session).showInfo(rest)
    case "error":
        guard !rest.isEmpty else { throw .usage(verb: "error", message: "no error code given") }
        for code in rest.map(\.text) {
            let parsed = code.hasPrefix("0x") ? Int64(code.dropFirst(2), radix: 16) : Int64(code)
            guard let parsed,
                let status = OSStatus(exactly: parsed) ?? OSStatus(exactly: Int64(Int32(truncatingIfNeeded: parsed)))
            else {
                throw .usage(verb: "error", message: "\"\(code)\" is not an error code")
            }
            let message = SecCopyErrorMessageString(status, nil).map { String($0) } ?? "OSStatus \(status)"
            print("Error: 0x\(String(format: "%08X", UInt32(bitPattern: status))) \(status) \(message)")
        }
    case "help", "-h", "--help":
        if let topic = rest.first?.text {
            guard let text = Usage.text(for: topic) else {
                throw .usage(verb: nil, message: "unknown command \"\(topic)\"")
            }
            print(text)
        } else {
            print(Usage.overview)
        }
    default:
        throw .usage(verb: nil, message: "unknown command \"\(verb)\"")
    }
}

// Before any secret is read: no core file, and no other process of this user reads our memory; the
// work then happens in a child forked after that, whose memory no one could have opened earlier.
SecureMemory.protectProcess()
SecureMemory.continueInProtectedChild()
// This process is ours alone: skip reading openssl.cnf, a cost paid on every start.
CryptoLibrary.startWithoutSystemConfiguration()
// A write past the file-size limit fails with EFBIG and is reported, rather than killing the process
// at a moment of the limit-setter's choosing.
signal(SIGXFSZ, SIG_IGN)
let failure: Failure?
do {
    try run(CommandArgument.processArguments)
    failure = nil
} catch {
    failure = error
}
// Leave a database the next run opens without replaying a log.
EmbeddedKeychain.closeDatabases()
if let failure {
    FileHandle.standardError.write(Data((failure.text + "\n").utf8))
    exit(failure.exitStatus)
}

import Foundation
import KeychainSyncProtocol
import KeychainSyncServer
import KeychainSyncStore
import KeychainTLS

#if canImport(Glibc)
    import Glibc
#endif

/// keychain-syncd --database CONNINFO --listen ADDRESS
///
/// The sync server: stores what devices push (ciphertext, signed by them) in PostgreSQL and hands it to
/// the account's other devices. CONNINFO is a libpq connection string or URI (a password belongs in
/// ~/.pgpass or PGPASSFILE, not here: the command line is visible to every local user). ADDRESS is a
/// Unix socket path or HOST:PORT on loopback.
func complain(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }

let usage = """
    usage: keychain-syncd --database CONNINFO --listen ADDRESS [--tls-certificate FILE --tls-key FILE]
                          [--account-quota MIB] [--new-accounts-per-hour N]
      --account-quota MIB        ciphertext one account stores, history included (default 256; 0: none)
      --new-accounts-per-hour N  accounts made on the database in an hour, by anyone (default 60; 0: no limit)

    """
var database: String?
var listen: String?
var certificate: String?
var key: String?
var limits = SyncLimits()
/// A whole number of at least 0 and below `bound`, or the usage.
func number(_ text: String?, below bound: Int64, _ option: String) -> Int64 {
    guard let text, let value = Int64(text), value >= 0, value < bound else {
        complain("keychain-syncd: \(option) takes a whole number below \(bound)\n" + usage)
        exit(64)
    }
    return value
}
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--database": database = arguments.popFirst()
    case "--listen": listen = arguments.popFirst()
    case "--tls-certificate": certificate = arguments.popFirst()
    case "--tls-key": key = arguments.popFirst()
    case "--account-quota": limits.accountBytes = number(arguments.popFirst(), below: 1 << 40, argument) << 20
    case "--new-accounts-per-hour":
        limits.newAccountsPerHour = number(arguments.popFirst(), below: 1 << 40, argument)
    case "-h", "--help":
        print(usage, terminator: "")
        exit(0)
    default:
        complain("keychain-syncd: unknown argument \(argument)\n" + usage)
        exit(64)
    }
}
guard let database, let listen else {
    complain(usage)
    exit(64)
}
signal(SIGPIPE, SIG_IGN)
do {
    let address = try SyncAddress(parsing: listen)
    var tls: TLSContext?
    if certificate != nil || key != nil {
        guard let certificate, let key else {
            complain("keychain-syncd: --tls-certificate and --tls-key go together\n" + usage)
            exit(64)
        }
        tls = try TLSContext.server(certificateChain: certificate, privateKey: key)
    }
    let server = try SyncServer(database: database, listen: address, tls: tls, limits: limits)
    complain("keychain-syncd: listening on \(address)\n")
    server.run()
} catch {
    complain("keychain-syncd: \(error)\n")
    exit(1)
}

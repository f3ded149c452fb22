import Foundation
import KeychainSyncProtocol
import KeychainSyncServer
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

let usage = "usage: keychain-syncd --database CONNINFO --listen ADDRESS\n"
var database: String?
var listen: String?
var certificate: String?
var key: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--database": database = arguments.popFirst()
    case "--listen": listen = arguments.popFirst()
    case "--tls-certificate": certificate = arguments.popFirst()
    case "--tls-key": key = arguments.popFirst()
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
    let server = try SyncServer(database: database, listen: address, tls: tls)
    complain("keychain-syncd: listening on \(address)\n")
    server.run()
} catch {
    complain("keychain-syncd: \(error)\n")
    exit(1)
}

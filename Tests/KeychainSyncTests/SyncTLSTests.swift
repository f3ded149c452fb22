import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// keychain-syncd exposed with TLS (tls://HOST:PORT): devices that trust its CA sync through it; one
/// that does not trust it, or that speaks no TLS, gets nothing.
final class SyncTLSTests: SyncTestCase {
    private var authority = ""
    private var address = ""
    private var scratch = ""

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let result = try ChildProcess.run(process, input: nil, errorsToOutput: true)
        guard result.status == 0 else {
            throw TestDaemon.Failure(
                description: "openssl \(arguments[0]): \(String(decoding: result.stdout, as: UTF8.self))")
        }
    }

    /// A CA and a certificate for 127.0.0.1 signed by it; the server gets its chain and key.
    private func startTLSServer() throws -> TestSyncServer {
        scratch = NSTemporaryDirectory() + "sync-tls-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        authority = scratch + "/ca.pem"
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            scratch + "/ca.key",
            "-out", authority, "-subj", "/CN=sync test CA", "-days", "1",
        ])
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", scratch + "/server.key",
            "-out", scratch + "/server.csr", "-subj", "/CN=127.0.0.1",
        ])
        try Data("subjectAltName=IP:127.0.0.1\n".utf8).write(to: URL(fileURLWithPath: scratch + "/ext"))
        try openssl([
            "x509", "-req", "-in", scratch + "/server.csr", "-CA", authority, "-CAkey", scratch + "/ca.key",
            "-CAcreateserial", "-out", scratch + "/server.pem", "-days", "1", "-extfile", scratch + "/ext",
        ])
        var lastError: Error?
        for _ in 0..<5 {
            address = "tls://127.0.0.1:\(Int.random(in: 20_000..<60_000))"
            let scratch = scratch
            do {
                return try TestSyncServer(
                    database: postgres.conninfo, listen: address,
                    arguments: { ["--tls-certificate", $0 + "/server.pem", "--tls-key", $0 + "/server.key"] }
                ) { directory in
                    // The server (nobody, when the tests run as root) reads its own copies.
                    for name in ["server.pem", "server.key"] {
                        try FileManager.default.copyItem(atPath: scratch + "/" + name, toPath: directory + "/" + name)
                        if getuid() == 0 { chown(directory + "/" + name, 65534, 65534) }
                        chmod(directory + "/" + name, 0o600)
                    }
                }
            } catch {
                lastError = error
            }
        }
        throw lastError ?? TestDaemon.Failure(description: "no port")
    }

    override func tearDown() {
        if !scratch.isEmpty { try? FileManager.default.removeItem(atPath: scratch) }
        super.tearDown()
    }

    func testDevicesThatTrustTheCASyncOverTLSAndOthersGetNothing() throws {
        let server = try startTLSServer()
        _ = server
        let tls = try SyncAddress(parsing: address)
        let a = try TestDevice("laptop")
        XCTAssertEqual(
            try a.agent.enroll(
                server: tls, accountName: "alice", recoverySecret: secret, deviceName: "laptop", authorities: authority),
            .trusted)
        try a.add("mail.example.com", "alice", "over-tls")
        _ = try a.agent.syncNow()
        let b = try TestDevice("phone")
        XCTAssertEqual(
            try b.agent.enroll(
                server: tls, accountName: "alice", recoverySecret: secret, deviceName: "phone", authorities: authority),
            .pending)
        try a.agent.approve(device: try b.deviceID)
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "over-tls")

        // Without the CA (the system's trust only), the certificate is refused before anything is sent.
        let stranger = try TestDevice("stranger")
        XCTAssertThrowsError(
            try stranger.agent.enroll(server: tls, accountName: "alice", recoverySecret: secret, deviceName: "x")
        ) { error in
            XCTAssertEqual((error as? SyncError)?.code, .unavailable, "\(error)")
            XCTAssertTrue("\(error)".contains("not trusted"), "\(error)")
        }
        // A client that speaks no TLS to the TLS port gets no hello.
        let plain = try SyncAddress(parsing: address.replacingOccurrences(of: "tls://", with: ""))
        XCTAssertThrowsError(
            try SyncConnection(
                address: plain, account: Data(count: 16), keys: try SyncDeviceKeys.generate(name: "p"),
                timeout: .seconds(5)))
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices"), "2")
    }

    func testTheServerRefusesTLSWithoutACertificateAndPlainTCPBeyondLoopback() throws {
        XCTAssertThrowsError(try SyncAddress(parsing: "0.0.0.0:7000")) { error in
            XCTAssertTrue("\(error)".contains("tls://"), "\(error)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestSyncServer.binary)
        process.arguments = ["--database", postgres.conninfo, "--listen", "tls://127.0.0.1:1"]
        let result = try ChildProcess.run(process, input: nil, errorsToOutput: true)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(String(decoding: result.stdout, as: UTF8.self).contains("--tls-certificate"))
    }
}

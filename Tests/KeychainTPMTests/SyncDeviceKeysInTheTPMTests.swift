import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTPMRoot
import KeychainTestSupport
import XCTest

/// A keychain on a TPM root is a sync device whose keys the TPM holds: made in the chip as enclave
/// keys, used there to sign and to open the zone keys shared with it; beside it, a software one.
final class SyncDeviceKeysInTheTPMTests: KeychainOnSoftwareTPMTestCase {
    private let secret = SecureBytes(copying: Array("correct horse battery staple".utf8))

    private func password(_ service: String, _ secret: String? = nil) -> [String: ItemValue] {
        var query: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string(service), "acct": .string("alice"), "sync": .bool(true),
        ]
        if let secret { query["v_Data"] = .data(Data(secret.utf8)) } else { query["r_Data"] = .bool(true) }
        return query
    }

    private func read(_ keychain: Keychain, _ service: String) throws -> String? {
        guard let data = try keychain.copyMatching(password(service), client: client)?.bytes else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    func testADeviceOnATPMRootSignsAndOpensItsSharesInTheChip() throws {
        let postgres = try TestPostgres()
        let server = try TestSyncServer(database: postgres.conninfo)
        var options = KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        options.deviceRoots = TPMDeviceRootProvider(tpm: tpm)
        let chip = try Keychain(directory: directory, options: options)
        XCTAssertTrue(chip.enclaveKeysAreInHardware)
        let softwareDirectory = directory + "-software"
        defer { try? FileManager.default.removeItem(atPath: softwareDirectory) }
        let software = try Keychain(
            directory: softwareDirectory, options: KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1)))
        XCTAssertFalse(software.enclaveKeysAreInHardware)

        // The TPM keychain makes the account (signing its first view in the chip) and approves the other
        // (sharing the zone key, signed in the chip); the other approves nothing.
        let address = try SyncAddress(parsing: server.socket)
        let chipAgent = SyncAgent(keychain: chip)
        let softwareAgent = SyncAgent(keychain: software)
        XCTAssertEqual(
            try chipAgent.enroll(server: address, accountName: "alice", recoverySecret: secret, deviceName: "tpm"),
            .trusted)
        XCTAssertEqual(
            try softwareAgent.enroll(server: address, accountName: "alice", recoverySecret: secret, deviceName: "sw"),
            .pending)
        let waiting = try XCTUnwrap(try chipAgent.devices().first { !$0.isThisDevice })
        try chipAgent.approve(device: Hex.encode(waiting.device.id))

        // Items travel both ways: the chip signs every batch and head, and opened its zone key share.
        _ = try chip.add(password("from-tpm.example.com", "tpm-secret"), client: client)
        _ = try chipAgent.syncNow()
        _ = try software.add(password("from-software.example.com", "software-secret"), client: client)
        _ = try softwareAgent.syncNow()
        _ = try chipAgent.syncNow()
        XCTAssertEqual(try read(software, "from-tpm.example.com"), "tpm-secret")
        XCTAssertEqual(try read(chip, "from-software.example.com"), "software-secret")

        // A removal makes a new generation, which the TPM device opens in the chip too.
        let third = try Keychain(
            directory: softwareDirectory + "-3",
            options: KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1)))
        defer { try? FileManager.default.removeItem(atPath: softwareDirectory + "-3") }
        let thirdAgent = SyncAgent(keychain: third)
        _ = try thirdAgent.enroll(server: address, accountName: "alice", recoverySecret: secret, deviceName: "third")
        try softwareAgent.approve(device: Hex.encode(try XCTUnwrap(try thirdAgent.status().device.id)))
        try softwareAgent.remove(device: Hex.encode(try XCTUnwrap(try thirdAgent.status().device.id)))
        _ = try chipAgent.syncNow()
        XCTAssertEqual(try chipAgent.status().generation, 2)

        // What the TPM keychain keeps of its keys: tokens, no private key.
        let kept = try chip.syncTransaction { local in
            (
                try local.ledger.value("device signing key"), try local.ledger.value("device signing token"),
                try local.ledger.value("device encryption key"), try local.ledger.value("device encryption token")
            )
        }
        XCTAssertNil(kept.0)
        XCTAssertNotNil(kept.1)
        XCTAssertNil(kept.2)
        XCTAssertNotNil(kept.3)
        // The software keychain keeps its (sealed) keys.
        XCTAssertNotNil(try software.syncTransaction { local in try local.ledger.value("device signing key") })
    }
}

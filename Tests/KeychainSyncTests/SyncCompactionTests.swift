import Foundation
import KeychainBytes
import KeychainCore
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

@testable import KeychainSyncAgent

/// The log does not grow without end: trusted devices sign checkpoints, the server drops what every
/// trusted device has read, and a device that joins later starts from the newest checkpoint.
final class SyncCompactionTests: SyncTestCase {
    private func compactingPair() throws -> (TestDevice, TestDevice) {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        for device in [a, b] { device.agent.checkpointInterval = 4 }
        _ = try b.agent.syncNow()
        for round in 0..<4 {
            for number in 0..<3 {
                try a.add("site\(round)-\(number).example.com", "alice", "secret \(round) \(number)")
            }
            _ = try a.agent.syncNow()
            _ = try b.agent.syncNow()
        }
        try b.update("site0-0.example.com", "alice", to: "changed")
        try b.delete("site1-1.example.com", "alice")
        for device in [b, a, b, a] { _ = try device.agent.syncNow() }
        return (a, b)
    }

    func testTheLogIsDroppedUpToACheckpointAndALaterDeviceStartsFromIt() throws {
        let (a, b) = try compactingPair()
        let dropped = try XCTUnwrap(Int(try postgres.query("SELECT compacted_through FROM accounts")))
        XCTAssertGreaterThan(dropped, 0, "the log was compacted")
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM batches WHERE last_seq <= \(dropped)"), "0")
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM checkpoints"), "1", "the newest only")

        // A device approved now reads the checkpoint, then the log after it: every item, exactly.
        let c = try enrolledDevice("tablet", approver: a)
        let report = try c.agent.syncNow()
        XCTAssertEqual(report.notTrusted, 0)
        XCTAssertEqual(try c.secret("site0-0.example.com", "alice"), "changed")
        XCTAssertNil(try c.secret("site1-1.example.com", "alice"))
        XCTAssertEqual(try c.secret("site3-2.example.com", "alice"), "secret 3 2")
        XCTAssertEqual(
            try c.attributes("site2-1.example.com", "alice"), try a.attributes("site2-1.example.com", "alice"))
        // And goes on syncing both ways, at one chain with the others.
        try c.add("from-tablet.example.com", "alice", "tablet")
        _ = try c.agent.syncNow()
        for device in [a, b] { _ = try device.agent.syncNow() }
        _ = try c.agent.syncNow()
        XCTAssertEqual(try b.secret("from-tablet.example.com", "alice"), "tablet")
        let chains = try [a, b, c].map { try $0.agent.status() }
        XCTAssertEqual(Set(chains.map(\.cursor)).count, 1)
        XCTAssertEqual(Set(chains.map(\.chain)).count, 1)
    }

    func testAForgedOrAlteredCheckpointIsRefused() throws {
        let (a, _) = try compactingPair()
        // A record swapped for another's under the checkpoint: the signed hash differs.
        _ = try postgres.query(
            """
            UPDATE records r SET ciphertext = (SELECT ciphertext FROM records o WHERE o.record_id <> r.record_id
                                               AND o.version = r.version LIMIT 1)
            WHERE r.version = 1 AND EXISTS (SELECT 1 FROM records o WHERE o.record_id <> r.record_id AND o.version = 1)
            """)
        let c = try enrolledDevice("tablet", approver: a)
        assertSyncError(.forged) { _ = try c.agent.syncNow() }
        XCTAssertNil(try c.secret("site3-2.example.com", "alice"))
        // A checkpoint whose signature does not hold: refused too.
        _ = try postgres.query("UPDATE checkpoints SET checkpoint = overlay(checkpoint placing '\\x00' from 60 for 1)")
        assertSyncError(.forged) { _ = try c.agent.syncNow() }
    }

    func testAServerThatHidesARecordBehindANewerVersionIsNoticedByADeviceStartingFromACheckpoint() throws {
        let (a, _) = try compactingPair()
        // The server says a record moved on after the checkpoint, and never brings the newer version.
        _ = try postgres.query(
            "UPDATE records SET version = version + 1 WHERE record_id = (SELECT record_id FROM records WHERE NOT deleted ORDER BY record_id LIMIT 1)"
        )
        let c = try enrolledDevice("tablet", approver: a)
        assertSyncError(.withheld) { _ = try c.agent.syncNow() }
    }

    func testADeviceStartsFromACheckpointSignedByADeviceRemovedSince() throws {
        let (a, b) = try compactingPair()
        // B signs the newest checkpoint, then is removed (A signs none meanwhile).
        a.agent.checkpointInterval = 0
        for number in 0..<5 { try b.add("late\(number).example.com", "alice", "late \(number)") }
        _ = try b.agent.syncNow()
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        try a.agent.remove(device: try b.deviceID)
        let c = try enrolledDevice("tablet", approver: a)
        _ = try c.agent.syncNow()
        XCTAssertEqual(try c.secret("late4.example.com", "alice"), "late 4")
        XCTAssertEqual(try c.secret("site0-0.example.com", "alice"), "changed")
    }

    func testARecoveryAfterACompactionStartsFromTheCheckpointTheLostDevicesSigned() throws {
        _ = try compactingPair()
        XCTAssertGreaterThan(try XCTUnwrap(Int(try postgres.query("SELECT compacted_through FROM accounts"))), 0)
        let r = try TestDevice("new phone")
        let report = try r.agent.recover(
            server: try address(), accountName: "alice", recoverySecret: secret,
            newSecret: SecureBytes(copying: Array("a brand new recovery secret".utf8)), deviceName: "new phone")
        XCTAssertEqual(report.sync.notTrusted, 0)
        XCTAssertEqual(try r.secret("site0-0.example.com", "alice"), "changed")
        XCTAssertEqual(try r.secret("site3-2.example.com", "alice"), "secret 3 2")
        XCTAssertNil(try r.secret("site1-1.example.com", "alice"))
    }

    func testNothingIsDroppedPastADeviceThatHasNotReadIt() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        a.agent.checkpointInterval = 1
        _ = try b.agent.syncNow()
        let before = try XCTUnwrap(Int(try postgres.query("SELECT last_seq FROM accounts")))
        // B is away while A writes and checkpoints: the log B has not read stays.
        for number in 0..<5 {
            try a.add("site\(number).example.com", "alice", "secret \(number)")
            _ = try a.agent.syncNow()
        }
        XCTAssertGreaterThan(try XCTUnwrap(Int(try postgres.query("SELECT count(*) FROM checkpoints"))), 0)
        XCTAssertLessThanOrEqual(
            try XCTUnwrap(Int(try postgres.query("SELECT compacted_through FROM accounts"))), before)
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("site4.example.com", "alice"), "secret 4")
    }
}

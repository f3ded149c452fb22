import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

/// Edits made apart merge to the same result on every device, by the documented rules.
final class SyncMergeTests: SyncTestCase {
    private func pair() throws -> (TestDevice, TestDevice) {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        _ = try b.agent.syncNow()
        return (a, b)
    }

    func testOfflineEditsOnTwoDevicesEndAsTheLaterEditEverywhereAndTheOtherIsKeptInHistory() throws {
        let (a, b) = try pair()
        try a.add("mail.example.com", "alice", "original")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        // Both edit while apart; B's edit is the later one, but A reaches the server first.
        a.clock.advance(10)
        try a.update("mail.example.com", "alice", to: "edit-on-a")
        b.clock.advance(20)
        try b.update("mail.example.com", "alice", to: "edit-on-b")
        _ = try a.agent.syncNow()
        let merged = try b.agent.syncNow()
        XCTAssertEqual(merged.conflictsResolved, 1)
        _ = try a.agent.syncNow()
        XCTAssertEqual(try a.secret("mail.example.com", "alice"), "edit-on-b")
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "edit-on-b")
        // The version B's won over is kept, encrypted, in the record's history.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM history"), "2")
        XCTAssertEqual(try a.agent.status().pendingChanges, 0)
        XCTAssertEqual(try b.agent.status().conflictsResolved, 1)
    }

    func testTheHistoryOfAnItemReadsBackEveryKeptVersionEvenAfterItsDeletion() throws {
        let (a, b) = try pair()
        try a.add("mail.example.com", "alice", "first")
        try a.add("other.example.com", "alice", "other")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        try b.update("mail.example.com", "alice", to: "second")
        _ = try b.agent.syncNow()
        _ = try a.agent.syncNow()
        try a.delete("mail.example.com", "alice")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertNil(try b.secret("mail.example.com", "alice"))
        // The deleted item's versions, newest first, each with its writer; the deletion holds no secret.
        let matching = ["class": "genp", "svce": "mail.example.com", "acct": "alice"]
        let history = try b.agent.history(matching: matching)
        XCTAssertEqual(history.map(\.version), [3, 2, 1])
        XCTAssertEqual(history.map(\.deleted), [true, false, false])
        XCTAssertEqual(
            history.map { $0.secret.map { String(decoding: $0.withUnsafeBytes { Data($0) }, as: UTF8.self) } },
            [nil, "second", "first"])
        XCTAssertEqual(history.map(\.writerName), ["laptop", "phone", "laptop"])
        XCTAssertTrue(history.allSatisfy { $0.date != nil })
        XCTAssertEqual(Set(history.map(\.recordID)).count, 1)
        assertSyncError(.invalid) {
            _ = try b.agent.history(matching: ["class": "genp", "svce": "nothing.example.com"])
        }
        // A server that hands another record's version out as this one's is found out.
        _ = try postgres.query(
            """
            UPDATE history h SET ciphertext = (SELECT ciphertext FROM records r WHERE r.record_id <> h.record_id)
            """)
        assertSyncError(.forged) { _ = try b.agent.history(matching: matching) }
    }

    /// A's later edit is on the server; B's earlier one, made apart, is not yet.
    private func anEarlierEditOnBAfterALaterOneOnA() throws -> (TestDevice, TestDevice) {
        let (a, b) = try pair()
        try a.add("mail.example.com", "alice", "original")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        a.clock.advance(30)
        try a.update("mail.example.com", "alice", to: "later-on-a")
        _ = try a.agent.syncNow()
        b.clock.advance(5)
        try b.update("mail.example.com", "alice", to: "earlier-on-b")
        return (a, b)
    }

    func testAnEarlierOfflineEditLosesEvenWhenItArrivesLast() throws {
        let (a, b) = try anEarlierEditOnBAfterALaterOneOnA()
        _ = try b.agent.syncNow()
        _ = try a.agent.syncNow()
        XCTAssertEqual(try a.secret("mail.example.com", "alice"), "later-on-a")
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "later-on-a")
        // B's lost edit went to the server as a version of its own before the winner replaced it.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM history"), "3")
    }

    func testTurningSyncOffForAnItemDeletesItElsewhereAndKeepsItHere() throws {
        let (a, b) = try pair()
        try a.add("mail.example.com", "alice", "s3cret")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "s3cret")
        try a.keychain.update(
            a.password("mail.example.com", "alice", sync: true), attributes: ["sync": .bool(false)],
            client: TestDevice.client)
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertNil(try b.secret("mail.example.com", "alice"))
        XCTAssertEqual(try a.secret("mail.example.com", "alice"), "s3cret")
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records WHERE NOT deleted"), "0")
        XCTAssertEqual(try a.agent.status().pendingChanges, 0)
    }

    /// B's earlier edit loses to A's later one in a merge whose push fails (the server stops taking
    /// writes after B's pull): the losing edit waits in B's ledger.
    private func aMergeWhosePushFails() throws -> (TestDevice, TestDevice) {
        let (a, b) = try anEarlierEditOnBAfterALaterOneOnA()
        _ = try postgres.query("ALTER TABLE batches ADD CONSTRAINT frozen CHECK (first_seq < 0) NOT VALID")
        assertSyncError(.server) { _ = try b.agent.syncNow() }
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "later-on-a")
        _ = try postgres.query("ALTER TABLE batches DROP CONSTRAINT frozen")
        return (a, b)
    }

    func testALosingEditIsKeptWhenThePushAfterTheMergeFails() throws {
        let (a, b) = try aMergeWhosePushFails()
        // The next sync still has B's losing edit to put in the history.
        _ = try b.agent.syncNow()
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM history"), "3")
        _ = try a.agent.syncNow()
        XCTAssertEqual(try a.secret("mail.example.com", "alice"), "later-on-a")
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "later-on-a")
    }

    func testALosingEditIsKeptWhenTheDeviceEnrollsAgainBeforePushingIt() throws {
        let (a, b) = try aMergeWhosePushFails()
        // B enrolls again in its account before any sync: its fresh ledger keeps the losing edit.
        XCTAssertEqual(
            try b.agent.enroll(
                server: try address(), accountName: "alice", recoverySecret: secret, deviceName: "phone"),
            .trusted)
        _ = try b.agent.syncNow()
        let versions = try a.agent.history(matching: ["class": "genp", "svce": "mail.example.com"])
        let secrets = versions.compactMap {
            $0.secret.map { String(decoding: $0.withUnsafeBytes { Data($0) }, as: UTF8.self) }
        }
        XCTAssertTrue(secrets.contains("earlier-on-b"), "\(secrets)")
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "later-on-a")
    }

    func testAnEditAfterADeletionWinsAndADeletionAfterAnEditWins() throws {
        let (a, b) = try pair()
        try a.add("one.example.com", "alice", "one")
        try a.add("two.example.com", "alice", "two")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        // one: deleted on A, edited later on B: the edit wins.
        a.clock.advance(10)
        try a.delete("one.example.com", "alice")
        b.clock.advance(20)
        try b.update("one.example.com", "alice", to: "one-edited")
        // two: edited on A, deleted later on B: the deletion wins.
        try a.update("two.example.com", "alice", to: "two-edited")
        try b.delete("two.example.com", "alice")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        _ = try a.agent.syncNow()
        for device in [a, b] {
            XCTAssertEqual(try device.secret("one.example.com", "alice"), "one-edited", device.name)
            XCTAssertNil(try device.secret("two.example.com", "alice"), device.name)
        }
    }

    func testTheSamePrimaryKeyMadeOnTwoDevicesResolvesToTheSmallerRecordIDEverywhere() throws {
        let (a, b) = try pair()
        try a.add("shared.example.com", "alice", "made-on-a")
        try b.add("shared.example.com", "alice", "made-on-b")
        let reference = { (device: TestDevice) throws -> Data in
            var query = device.password("shared.example.com", "alice", sync: true)
            query["r_PersistentRef"] = .bool(true)
            return try XCTUnwrap(try device.keychain.copyMatching(query, client: TestDevice.client)?.bytes)
        }
        let winner = try reference(a).lexicographicallyPrecedes(try reference(b)) ? "made-on-a" : "made-on-b"
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        _ = try a.agent.syncNow()
        XCTAssertEqual(try a.secret("shared.example.com", "alice"), winner)
        XCTAssertEqual(try b.secret("shared.example.com", "alice"), winner)
        // One live record; the loser is a tombstone that keeps its content.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records WHERE NOT deleted"), "1")
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records WHERE deleted"), "1")
    }

    func testAClockAheadWinsByTheDateItWrote() throws {
        // Modification dates are the devices' own: a device whose clock is an hour ahead wins over a
        // later edit made on a device with the right time. Documented; nothing is lost (history).
        let (a, b) = try pair()
        try a.add("mail.example.com", "alice", "original")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        b.clock.advance(3600)
        try b.update("mail.example.com", "alice", to: "skewed-b")
        _ = try b.agent.syncNow()
        a.clock.advance(60)
        try a.update("mail.example.com", "alice", to: "correct-a")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try a.secret("mail.example.com", "alice"), "skewed-b")
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "skewed-b")
        // A's edit is kept: the original, B's first version and A's lost edit are the history.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM history"), "3")
    }

    func testOfflineEditsQueueAndADeviceAwayForLongCatchesUpFromItsCursor() throws {
        let (a, b) = try pair()
        servers.forEach { $0.stop() }
        // Offline: the edits wait, and the sync fails with a clear status.
        for index in 0..<30 { try a.add("item\(index).example.com", "alice", "secret-\(index)") }
        assertSyncError(.unavailable) { _ = try a.agent.syncNow() }
        XCTAssertEqual(try a.agent.status().pendingChanges, 30)
        servers = [try TestSyncServer(database: postgres.conninfo), try TestSyncServer(database: postgres.conninfo)]
        try reenroll(a, b)
        XCTAssertEqual(try a.agent.syncNow().pushed, 30)
        // B was away: it catches up from where it was.
        let before = try b.agent.status().cursor
        let report = try b.agent.syncNow()
        XCTAssertEqual(report.pulled, 30)
        XCTAssertGreaterThan(report.cursor, before)
        XCTAssertEqual(try b.secret("item29.example.com", "alice"), "secret-29")
    }

    /// Servers restarted on new sockets: the devices are pointed at them (what a user would do with a
    /// server that moved is enroll again; here the ledger's address is changed in place).
    private func reenroll(_ devices: TestDevice...) throws {
        for (index, device) in devices.enumerated() {
            try device.agent.setServer(try SyncAddress(parsing: servers[index % 2].socket))
        }
    }
}

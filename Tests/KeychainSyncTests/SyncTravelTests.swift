import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

/// Items travel between three devices through two servers on one database, exactly, and only the
/// ones that should.
final class SyncTravelTests: SyncTestCase {
    func testEnrolledDevicesSeeEachOthersAddsUpdatesAndDeletesExactly() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        let c = try enrolledDevice("tablet", approver: a)
        for device in [a, b, c] { _ = try device.agent.syncNow() }

        try a.add("mail.example.com", "alice", "s3cret-1", label: "Mail")
        try a.add("keys.example.com", "alice", "s3cret-2", protection: "ak")
        _ = try a.agent.syncNow()
        for device in [b, c] {
            let report = try device.agent.syncNow()
            XCTAssertEqual(report.pulled, 2)
            XCTAssertEqual(try device.secret("mail.example.com", "alice"), "s3cret-1")
            XCTAssertEqual(try device.secret("keys.example.com", "alice"), "s3cret-2")
            let here = try XCTUnwrap(try device.attributes("mail.example.com", "alice"))
            let there = try XCTUnwrap(try a.attributes("mail.example.com", "alice"))
            XCTAssertEqual(here, there, "every attribute, dates and group included, is the writer's")
            XCTAssertEqual(here["labl"], .string("Mail"))
            XCTAssertEqual(here["sync"], .integer(1))
        }

        try b.update("mail.example.com", "alice", to: "changed-on-b")
        _ = try b.agent.syncNow()
        try c.delete("keys.example.com", "alice")
        _ = try c.agent.syncNow()
        for device in [a, b, c] { _ = try device.agent.syncNow() }
        for device in [a, b, c] {
            XCTAssertEqual(try device.secret("mail.example.com", "alice"), "changed-on-b", device.name)
            XCTAssertNil(try device.secret("keys.example.com", "alice"), device.name)
        }
        let status = try a.agent.status()
        XCTAssertEqual(status.trustedDevices, 3)
        XCTAssertEqual(status.pendingChanges, 0)
        // At one position, the devices show one chain: what a user compares to find a fork.
        for device in [b, c] {
            let other = try device.agent.status()
            XCTAssertEqual(other.cursor, status.cursor, device.name)
            XCTAssertEqual(other.chain, status.chain, device.name)
        }
        XCTAssertNotEqual(status.chain, SyncHead.origin)
    }

    func testThisDeviceOnlyAndUnsynchronizedItemsNeverReachTheServer() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", approver: a)
        try a.add("local.example.com", "alice", "never-leaves-1", sync: false)
        try a.add("tdo.example.com", "alice", "never-leaves-2", protection: "aku")
        try a.add("tdo2.example.com", "alice", "never-leaves-3", protection: "dku")
        try a.add("travels.example.com", "alice", "travels-4", label: "Visible-Label")
        let report = try a.agent.syncNow()
        XCTAssertEqual(report.pushed, 1)
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("travels.example.com", "alice"), "travels-4")
        for service in ["local.example.com", "tdo.example.com", "tdo2.example.com"] {
            XCTAssertNil(try b.secret(service, "alice"), service)
        }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records"), "1")

        // Nothing of any item is in the database's files (tables and WAL): no service, account,
        // label, group or secret, of the item that travelled or of the others; nor the account's name.
        let bytes = try postgres.allFileBytes()
        for needle in [
            "travels.example.com", "Visible-Label", "travels-4", "TEAM.app", "never-leaves", "local.example.com",
            "alice",
        ] {
            XCTAssertNil(bytes.range(of: Data(needle.utf8)), "\(needle) is in the database's files")
        }
    }

    func testAWaitingDeviceIsWokenByAWriteAndOtherwiseTimesOut() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        _ = try b.agent.syncNow()
        XCTAssertFalse(try b.agent.waitForChange(timeout: .seconds(1)))
        let woken = expectation(description: "woken")
        let agent = b.agent
        Thread.detachNewThread {
            if (try? agent.waitForChange(timeout: .seconds(40))) == true { woken.fulfill() }
        }
        Thread.sleep(forTimeInterval: 0.3)
        try a.add("mail.example.com", "alice", "s3cret")
        _ = try a.agent.syncNow()
        wait(for: [woken], timeout: 30)
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "s3cret")
    }

    func testManyLongPollsShareOneDatabaseConnectionAndAWriteWakesThemAll() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        _ = try b.agent.syncNow()
        // Before any long poll, the connections the servers hold.
        let connections = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        let before = try XCTUnwrap(Int(try postgres.query(connections)))
        let waiters = 48
        let woken = expectation(description: "woken")
        woken.expectedFulfillmentCount = waiters
        let agent = b.agent
        for _ in 0..<waiters {
            Thread.detachNewThread {
                if (try? agent.waitForChange(timeout: .seconds(40))) == true { woken.fulfill() }
            }
        }
        Thread.sleep(forTimeInterval: 1.5)
        // 48 waits on one server: its one LISTEN and its pool of idle connections (16 at most, from the
        // first read of each wait), not one each.
        let during = try XCTUnwrap(Int(try postgres.query(connections)))
        XCTAssertLessThanOrEqual(during - before, 17, "long polls hold no connection each")
        try a.add("mail.example.com", "alice", "s3cret")
        _ = try a.agent.syncNow()
        wait(for: [woken], timeout: 30)
    }
}

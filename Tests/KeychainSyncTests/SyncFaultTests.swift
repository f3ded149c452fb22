import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import Synchronization
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Faults on the way: a server killed mid-push and mid-pull, PostgreSQL restarted under load, two
/// servers racing on one account. Each ends with every item on every device, once.
final class SyncFaultTests: SyncTestCase {
    private func items(_ device: TestDevice, prefix: String) throws -> Int {
        var query: [String: ItemValue] = [
            "class": .string("genp"), "sync": .string("syna"), "m_Limit": .string("m_LimitAll"),
            "r_Attributes": .bool(true),
        ]
        query["labl"] = .string(prefix)
        do {
            guard case .array(let found) = try device.keychain.copyMatching(query, client: TestDevice.client) else {
                return 0
            }
            return found.count
        } catch let error as KeychainError where error.code == .itemNotFound {
            return 0
        }
    }

    private func add(_ device: TestDevice, _ count: Int, prefix: String) throws {
        _ = try device.keychain.add(
            contentsOf: (0..<count).map { index in
                device.password("\(prefix)-\(index).example.com", "alice", secret: "secret-\(index)", label: prefix)
            }, client: TestDevice.client)
    }

    func testAServerKilledMidPushAndMidPullLeavesNothingHalfDone() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        _ = try b.agent.syncNow()
        try add(a, 3_000, prefix: "bulk")
        // The server A talks to dies while A pushes: whatever batch was in flight is all or nothing.
        let victim = servers[0]
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { victim.stop() }
        XCTAssertThrowsError(try a.agent.syncNow(), "the push was cut short")
        XCTAssertLessThan(
            try XCTUnwrap(Int(try postgres.query("SELECT count(*) FROM records"))), 3000, "the push was cut short")
        try a.agent.setServer(try SyncAddress(parsing: servers[1].socket))
        _ = try a.agent.syncNow()
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records"), "3000")
        // Each record written once: a change row a write.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM changes"), "3000")
        // B's server dies while B pulls: the page in flight is not applied, the next pull finishes.
        servers[0] = try TestSyncServer(database: postgres.conninfo)
        let pulling = servers[1]
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { pulling.stop() }
        _ = try? b.agent.syncNow()
        try b.agent.setServer(try SyncAddress(parsing: servers[0].socket))
        _ = try b.agent.syncNow()
        XCTAssertEqual(try items(b, prefix: "bulk"), 3_000)
        XCTAssertEqual(try b.agent.status().pendingChanges, 0)
        XCTAssertEqual(try b.secret("bulk-2999.example.com", "alice"), "secret-2999")
    }

    func testPostgreSQLRestartedUnderLoadLosesNothing() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        _ = try b.agent.syncNow()
        let done = expectation(description: "writes")
        let failures = Mutex<[SyncError.Code]>([])
        let agent = a.agent
        let keychain = a.keychain
        Thread.detachNewThread {
            for round in 0..<40 {
                _ = try? keychain.add(
                    [
                        "class": .string("genp"), "svce": .string("load-\(round)"), "acct": .string("alice"),
                        "sync": .bool(true), "labl": .string("load"), "v_Data": .data(Data("v\(round)".utf8)),
                    ],
                    client: TestDevice.client)
                do { _ = try agent.syncNow() } catch let error as SyncError {
                    failures.withLock { $0.append(error.code) }
                } catch {}
            }
            done.fulfill()
        }
        Thread.sleep(forTimeInterval: 0.3)
        try postgres.restart()
        wait(for: [done], timeout: 120)
        // Syncs during the restart failed with a clear status; the next ones carry everything.
        for code in failures.withLock({ $0 }) {
            XCTAssertTrue([.server, .unavailable].contains(code), "a sync failed with \(code)")
        }
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try items(b, prefix: "load"), 40)
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records"), "40")
    }

    func testTwoServersRacingOnOneAccountKeepEveryWrite() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        let c = try enrolledDevice("tablet", approver: a)
        for device in [a, b, c] { _ = try device.agent.syncNow() }
        let group = DispatchGroup()
        for (index, device) in [a, b, c].enumerated() {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for round in 0..<10 {
                    _ = try? device.keychain.add(
                        device.password(
                            "race-\(index)-\(round).example.com", "alice", secret: "s\(round)", label: "race"),
                        client: TestDevice.client)
                    // The same item edited everywhere: one value wins, the same on every device.
                    _ = try? device.keychain.add(
                        device.password("shared.example.com", "alice", secret: "first", label: "shared"),
                        client: TestDevice.client)
                    try? device.update("shared.example.com", "alice", to: "from-\(index)-\(round)")
                    _ = try? device.agent.syncNow()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 180), .success)
        for _ in 0..<2 { for device in [a, b, c] { _ = try device.agent.syncNow() } }
        let shared = try [a, b, c].map { try $0.secret("shared.example.com", "alice") }
        XCTAssertEqual(Set(shared).count, 1, "\(shared)")
        for device in [a, b, c] {
            XCTAssertEqual(try items(device, prefix: "race"), 30, device.name)
            XCTAssertEqual(try items(device, prefix: "shared"), 1, device.name)
        }
    }
}

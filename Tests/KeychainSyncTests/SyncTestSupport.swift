import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import Synchronization
import XCTest

/// A clock each device moves by hand, so that modification dates (which decide merges) are the test's.
final class DeviceClock: KeychainClock, @unchecked Sendable {
    private let current: Mutex<Date>
    init(_ start: Date) { current = Mutex(start) }
    func now() -> Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
    func sinceBoot() -> BootInstant {
        BootInstant(boot: Data(repeating: 7, count: 16), nanoseconds: UInt64(max(0, now().timeIntervalSince1970) * 1e9))
    }
}

/// One device: a keychain of its own in a temporary directory, and its sync agent.
final class TestDevice: @unchecked Sendable {
    let name: String
    let directory: String
    let clock: DeviceClock
    let keychain: Keychain
    let agent: SyncAgent
    static let client = ClientIdentity(accessGroups: ["TEAM.app"])

    init(_ name: String, start: Date = Date(timeIntervalSince1970: 1_900_000_000)) throws {
        self.name = name
        directory = NSTemporaryDirectory() + "sync-device-" + UUID().uuidString.prefix(8)
        clock = DeviceClock(start)
        keychain = try Keychain(
            directory: directory,
            options: KeychainOptions(clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1)))
        agent = SyncAgent(keychain: keychain)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func password(
        _ service: String, _ account: String, secret: String? = nil, sync: Bool? = true, protection: String? = nil,
        label: String? = nil
    ) -> [String: ItemValue] {
        var query: [String: ItemValue] = ["class": .string("genp"), "svce": .string(service), "acct": .string(account)]
        if let secret { query["v_Data"] = .data(Data(secret.utf8)) }
        if let sync { query["sync"] = .bool(sync) }
        if let protection { query["pdmn"] = .string(protection) }
        if let label { query["labl"] = .string(label) }
        return query
    }

    func add(
        _ service: String, _ account: String, _ secret: String, sync: Bool = true, protection: String? = nil,
        label: String? = nil
    )
        throws
    {
        _ = try keychain.add(
            password(service, account, secret: secret, sync: sync, protection: protection, label: label),
            client: Self.client)
    }

    /// The item's secret, or nil when it is not here.
    func secret(_ service: String, _ account: String) throws -> String? {
        var query = password(service, account, sync: nil)
        query["sync"] = .string("syna")
        query["r_Data"] = .bool(true)
        do {
            guard let data = try keychain.copyMatching(query, client: Self.client)?.bytes else { return nil }
            return String(decoding: data, as: UTF8.self)
        } catch let error as KeychainError where error.code == .itemNotFound {
            return nil
        }
    }

    /// The item's attributes, as SecItemCopyMatching returns them.
    func attributes(_ service: String, _ account: String) throws -> [String: ItemValue]? {
        var query = password(service, account, sync: nil)
        query["sync"] = .string("syna")
        query["r_Attributes"] = .bool(true)
        do {
            guard case .dictionary(let attributes) = try keychain.copyMatching(query, client: Self.client) else {
                return nil
            }
            return attributes
        } catch let error as KeychainError where error.code == .itemNotFound {
            return nil
        }
    }

    func update(_ service: String, _ account: String, to secret: String) throws {
        try keychain.update(
            password(service, account, sync: nil).merging(["sync": .string("syna")]) { $1 },
            attributes: ["v_Data": .data(Data(secret.utf8))], client: Self.client)
    }

    func delete(_ service: String, _ account: String) throws {
        try keychain.delete(
            password(service, account, sync: nil).merging(["sync": .string("syna")]) { $1 }, client: Self.client)
    }

    var deviceID: String {
        get throws { Hex.encode(try agent.status().device.id) }
    }
}

/// A PostgreSQL, two sync servers on it, and devices.
class SyncTestCase: XCTestCase {
    var postgres: TestPostgres!
    var servers: [TestSyncServer] = []
    let secret = SecureBytes(copying: Array("correct horse battery staple".utf8))

    override func setUpWithError() throws {
        postgres = try TestPostgres()
        servers = [try TestSyncServer(database: postgres.conninfo), try TestSyncServer(database: postgres.conninfo)]
    }

    override func tearDown() {
        servers.forEach { $0.stop() }
        servers = []
        postgres = nil
    }

    func address(_ index: Int = 0) throws -> SyncAddress { try SyncAddress(parsing: servers[index].socket) }

    /// A device enrolled and approved (by `approver`, when it is not the first).
    func enrolledDevice(_ name: String, server: Int = 0, approver: TestDevice? = nil) throws -> TestDevice {
        let device = try TestDevice(name)
        let status = try device.agent.enroll(
            server: try address(server), accountName: "alice", recoverySecret: secret, deviceName: name)
        if let approver {
            XCTAssertEqual(status, .pending)
            try approver.agent.approve(device: try device.deviceID)
        } else {
            XCTAssertEqual(status, .trusted)
        }
        return device
    }

    func assertSyncError(
        _ code: SyncError.Code, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? SyncError)?.code, code, "\(error)", file: file, line: line)
        }
    }
}

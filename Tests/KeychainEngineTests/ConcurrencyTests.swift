import Foundation
import KeychainCore
import KeychainEngine
import KeychainStorage
import Synchronization
import XCTest

/// Threads and processes sharing one keychain; a writer killed mid-flight.
final class ConcurrencyTests: EngineTestCase {
    func testManyThreadsAddReadAndDeleteAtOnce() throws {
        let keychain = try XCTUnwrap(self.keychain)
        let client = self.client
        let failures = LogCollector()
        let threads = 8
        let perThread = 60
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                let account = "t\(thread)-\(index)"
                let item: [String: ItemValue] = [
                    "class": .string("genp"), "svce": .string("threads"), "acct": .string(account),
                    "v_Data": .data(Data(account.utf8)),
                ]
                do {
                    _ = try keychain.add(item, client: client)
                    let read = try keychain.copyMatching(
                        ["class": .string("genp"), "acct": .string(account), "r_Data": .bool(true)], client: client)
                    if read != .data(Data(account.utf8)) { failures.append("wrong data for \(account)") }
                    if index % 3 == 0 {
                        try keychain.delete(["class": .string("genp"), "acct": .string(account)], client: client)
                    }
                } catch {
                    failures.append("\(account): \(error)")
                }
            }
        }
        XCTAssertEqual(failures.all, [])
        let all = try keychain.copyMatching(
            [
                "class": .string("genp"), "svce": .string("threads"), "m_Limit": .string("m_LimitAll"),
                "r_Data": .bool(true),
            ],
            client: client)
        guard case .array(let items)? = all else { return XCTFail("no items") }
        XCTAssertEqual(items.count, threads * (perThread - perThread / 3))
        XCTAssertEqual(try integrityCheck(), ["ok"])
    }

    func testConcurrentWritesShareCommitsAndAFailingWriteUndoesOnlyItself() throws {
        let keychain = try XCTUnwrap(self.keychain)
        let client = self.client
        let failures = LogCollector()
        let duplicates = Atomic<Int>(0)
        let before = keychain.writeStatistics
        let threads = 16
        let perThread = 30
        // Real threads, all at once (concurrentPerform would run only as many as there are cores).
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            Thread {
                defer { done.leave() }
                for index in 0..<perThread {
                    let account = "g\(thread)-\(index)"
                    do {
                        _ = try keychain.add(
                            [
                                "class": .string("genp"), "svce": .string("grouped"), "acct": .string(account),
                                "v_Data": .data(Data(account.utf8)),
                            ], client: client)
                        // Every thread also adds the same item once: one add wins, the others fail
                        // alone, inside batches whose other writes must still commit.
                        if index == perThread / 2 {
                            _ = try keychain.add(
                                [
                                    "class": .string("genp"), "svce": .string("grouped"), "acct": .string("shared"),
                                    "v_Data": .data(Data("from \(thread)".utf8)),
                                ], client: client)
                        }
                    } catch let error as KeychainError where error.code == .duplicateItem {
                        duplicates.add(1, ordering: .relaxed)
                    } catch {
                        failures.append("\(account): \(error)")
                    }
                }
            }.start()
        }
        done.wait()
        XCTAssertEqual(failures.all, [])
        XCTAssertEqual(duplicates.load(ordering: .relaxed), threads - 1)
        let all = try keychain.copyMatching(
            [
                "class": .string("genp"), "svce": .string("grouped"), "m_Limit": .string("m_LimitAll"),
                "r_Attributes": .bool(true),
            ],
            client: client)
        guard case .array(let items)? = all else { return XCTFail("no items") }
        XCTAssertEqual(items.count, threads * perThread + 1)
        let after = keychain.writeStatistics
        // Only committed writes count: the fifteen duplicates were rolled back and are not among them.
        XCTAssertEqual(after.writes - before.writes, threads * perThread + 1)
        XCTAssertLessThan(after.commits - before.commits, after.writes - before.writes, "no two writes shared a commit")
        XCTAssertEqual(try integrityCheck(), ["ok"])
    }

    func testProcessesShareOneKeychain() throws {
        keychain = nil
        let processes = (0..<4).map { index in helper(["churn", "proc\(index)", "40"]) }
        let writers = (0..<2).map { index in helper(["add", "writer\(index)", "50"]) }
        for process in processes + writers { try process.run() }
        for process in processes + writers { process.waitUntilExit() }
        for process in processes + writers { XCTAssertEqual(process.terminationStatus, 0) }
        keychain = try open()
        for writer in 0..<2 {
            for index in [0, 25, 49] {
                XCTAssertEqual(try readSecret("writer\(writer)", "account-\(index)"), "secret-writer\(writer)-\(index)")
            }
        }
        let all = try keychain.copyMatching(
            ["class": .string("genp"), "m_Limit": .string("m_LimitAll"), "r_Attributes": .bool(true)], client: client)
        guard case .array(let items)? = all else { return XCTFail("no items") }
        XCTAssertEqual(items.count, 100, "churned items are gone, every written one is there")
        // A write from another process is visible to an already-open keychain.
        let reader = helper(["read", "writer0", "account-7"])
        let pipe = Pipe()
        reader.standardOutput = pipe
        try reader.run()
        reader.waitUntilExit()
        XCTAssertEqual(
            String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self), "secret-writer0-7\n")
        XCTAssertEqual(try integrityCheck(), ["ok"])
    }

    func testKilledWriterLosesNothingItReported() throws {
        keychain = nil
        for round in 0..<3 {
            let process = helper(["add", "crash\(round)", "100000"])
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            // Let it write for a random moment, then kill it without warning.
            usleep(UInt32.random(in: 300_000...800_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationReason, .uncaughtSignal)
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let reported = output.split(separator: "\n").compactMap { line -> Int? in
                line.hasPrefix("added ") ? Int(line.dropFirst(6)) : nil
            }
            XCTAssertGreaterThan(reported.count, 0, "the child should have added something before the kill")
            XCTAssertEqual(try integrityCheck(), ["ok"])
            let reopened = try open()
            for index in reported {
                XCTAssertEqual(
                    try readSecret("crash\(round)", "account-\(index)", in: reopened), "secret-crash\(round)-\(index)",
                    "item \(index) was reported added")
            }
        }
    }

    /// Closing the idle connections checkpoints the log into the database when nothing else has it open;
    /// the keychain stays usable and opens a new connection for the next request.
    func testClosingIdleConnectionsFoldsTheLogAndKeepsTheKeychainUsable() throws {
        for index in 0..<50 { _ = try keychain.add(password("wal", "\(index)"), client: client) }
        let log = directory + "/keychain.db-wal"
        XCTAssertGreaterThan(try logSize(log), 0, "writes go to the log first")

        keychain.closeIdleConnections()
        XCTAssertFalse(FileManager.default.fileExists(atPath: log), "the last close removes the log")
        XCTAssertEqual(try readSecret("wal", "49"), "secret")
        _ = try keychain.add(password("wal", "50"), client: client)
        XCTAssertEqual(try readSecret("wal", "50"), "secret")

        // Another connection open elsewhere keeps the log: it is not this keychain's to fold.
        let other = try Connection(path: directory + "/keychain.db", create: false)
        try other.execute("SELECT count(*) FROM sqlite_master")
        _ = try keychain.add(password("wal", "51"), client: client)
        keychain.closeIdleConnections()
        XCTAssertTrue(FileManager.default.fileExists(atPath: log))
        XCTAssertEqual(try readSecret("wal", "51"), "secret")
        XCTAssertEqual(try integrityCheck(), ["ok"])
    }

    /// Connections opened at once on a new database all turn it to WAL. SQLite answers all but one of
    /// them with SQLITE_BUSY without waiting in its busy handler; the connection must wait instead.
    func testConnectionsOpenedAtOnceOnANewDatabase() {
        let failures = Mutex<[String]>([])
        for round in 0..<10 {
            let path = directory + "/race-\(round).db"
            DispatchQueue.concurrentPerform(iterations: 6) { _ in
                do {
                    _ = try Connection(path: path, create: true)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
    }

    private func logSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    private func helper(_ arguments: [String]) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.productPath("keychain-test-helper"))
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_HOME"] = directory
        environment["KEYCHAIN_ACCESS_GROUPS"] = "TEAM.app"
        environment["KEYCHAIN_LOG"] = "off"
        process.environment = environment
        return process
    }

    private func integrityCheck() throws -> [String] {
        try Connection(path: directory + "/keychain.db", create: false).integrityCheck()
    }
}

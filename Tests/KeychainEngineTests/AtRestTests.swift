import CSQLite
import Foundation
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainStorage
import KeychainSystem
import XCTest

/// What is on disk: nothing readable, nothing that survives tampering, nothing overwritten when damaged.
final class AtRestTests: EngineTestCase {
    func testNoSecretOrAttributeAppearsInAnyFile() throws {
        let marks = [
            "secret": "ZEBRA-SECRET-7731", "account": "quokka-account-4412", "service": "narwhal-service-9921",
            "label": "axolotl-label-5150", "group": "TEAM.pangolin.group-8080",
        ]
        let groupClient = ClientIdentity(accessGroups: [marks["group"]!])
        for index in 0..<20 {
            _ = try keychain.add(
                [
                    "class": .string("genp"), "svce": .string(marks["service"]!),
                    "acct": .string("\(marks["account"]!)-\(index)"),
                    "labl": .string(marks["label"]!), "v_Data": .data(Data(marks["secret"]!.utf8)),
                ], client: groupClient)
            _ = try keychain.add(
                [
                    "class": .string("inet"), "srvr": .string(marks["service"]!), "acct": .string(marks["account"]!),
                    "port": .integer(Int64(index)), "v_Data": .data(Data(marks["secret"]!.utf8)),
                ], client: groupClient)
        }
        try keychain.setPasscode("1234", current: nil)
        try keychain.update(
            ["class": .string("genp"), "svce": .string(marks["service"]!)],
            attributes: ["icmt": .string(marks["label"]!)],
            client: groupClient)

        let files = try filesOnDisk()
        XCTAssertTrue(files.contains { $0.0 == "keychain.db" })
        XCTAssertTrue(files.contains { $0.0 == "keychain.db-wal" }, "the WAL is scanned too")
        XCTAssertTrue(files.contains { $0.0 == "keybag" })
        for (name, contents) in files {
            for (what, mark) in marks {
                let forms: [(String, Data)] = [
                    ("plain", Data(mark.utf8)), ("UTF-16", mark.data(using: .utf16LittleEndian)!),
                    ("SHA-1", try Digest.sha1(Data(mark.utf8))), ("SHA-256", try Digest.sha256(Data(mark.utf8))),
                ]
                for (form, needle) in forms {
                    XCTAssertNil(contents.range(of: needle), "\(form) of the \(what) found in \(name)")
                }
            }
        }
        // Permissions: directory 0700, files 0600.
        XCTAssertEqual(SecureFiles.permissions(of: directory), 0o700)
        for (name, _) in files { XCTAssertEqual(SecureFiles.permissions(of: directory + "/" + name), 0o600, name) }
        // And everything is still readable through the API.
        var query: [String: ItemValue] = [
            "class": .string("genp"), "acct": .string("\(marks["account"]!)-3"), "r_Data": .bool(true),
        ]
        XCTAssertEqual(try keychain.copyMatching(query, client: groupClient), .data(Data(marks["secret"]!.utf8)))
        query = [
            "class": .string("genp"), "icmt": .string(marks["label"]!), "m_Limit": .string("m_LimitAll"),
            "r_Attributes": .bool(true),
        ]
        guard case .array(let all)? = try keychain.copyMatching(query, client: groupClient) else { return XCTFail() }
        XCTAssertEqual(all.count, 20)
    }

    // MARK: Tampering

    private func withDatabase(_ body: (OpaquePointer) throws -> Void) throws {
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(directory + "/keychain.db", &handle), SQLITE_OK)
        defer { sqlite3_close(handle) }
        try body(handle!)
    }

    private func execute(_ database: OpaquePointer, _ sql: String) {
        XCTAssertEqual(sqlite3_exec(database, sql, nil, nil, nil), SQLITE_OK, String(cString: sqlite3_errmsg(database)))
    }

    func testSwappedCiphertextsAreCorruptNotAnotherItem() throws {
        _ = try keychain.add(password("swap", "alice", secret: "alice-secret"), client: client)
        _ = try keychain.add(password("swap", "bob", secret: "bob-secret"), client: client)
        try withDatabase { database in
            execute(database, "CREATE TEMP TABLE saved AS SELECT rowid AS id, metadata, secret FROM items")
            execute(
                database,
                """
                UPDATE items SET metadata = (SELECT metadata FROM saved WHERE id != items.rowid),
                secret = (SELECT secret FROM saved WHERE id != items.rowid)
                """)
        }
        keychain = try open()
        assertError(.itemNotFound) { _ = try readSecret("swap", "alice") }
        assertError(.itemNotFound) { _ = try readSecret("swap", "bob") }
    }

    func testSwappedSecretColumnAloneIsCorrupt() throws {
        _ = try keychain.add(password("swap", "alice", secret: "alice-secret"), client: client)
        _ = try keychain.add(password("swap", "bob", secret: "bob-secret"), client: client)
        try withDatabase { database in
            execute(database, "CREATE TEMP TABLE saved AS SELECT rowid AS id, secret FROM items")
            execute(database, "UPDATE items SET secret = (SELECT secret FROM saved WHERE id != items.rowid)")
        }
        keychain = try open()
        assertError(.itemNotFound) { _ = try readSecret("swap", "alice") }
        // Attributes alone (metadata untouched) are still intact.
        XCTAssertNotNil(
            try keychain.copyMatching(
                ["class": .string("genp"), "acct": .string("bob"), "r_Attributes": .bool(true)], client: client))
    }

    func testSwappedDigestsNeverReturnAnotherItemsData() throws {
        _ = try keychain.add(password("swap", "alice", secret: "alice-secret"), client: client)
        _ = try keychain.add(password("swap", "bob", secret: "bob-secret"), client: client)
        try withDatabase { database in
            execute(database, "CREATE TEMP TABLE saved AS SELECT rowid AS id, pk, lookup FROM items")
            execute(database, "UPDATE items SET pk = randomblob(16)")
            execute(
                database,
                """
                UPDATE items SET pk = (SELECT pk FROM saved WHERE id != items.rowid),
                lookup = (SELECT lookup FROM saved WHERE id != items.rowid)
                """)
            execute(database, "UPDATE attribute_index SET item = item + 1000")
            execute(database, "UPDATE attribute_index SET item = CASE item WHEN 1001 THEN 2 ELSE 1 END")
        }
        keychain = try open()
        let alice = Result { try readSecret("swap", "alice") }
        XCTAssertNotEqual(try? alice.get(), "bob-secret")
        let bob = Result { try readSecret("swap", "bob") }
        XCTAssertNotEqual(try? bob.get(), "alice-secret")
        assertError(.itemNotFound) { _ = try readSecret("swap", "alice") }
    }

    func testEditedFlagColumnsMakeTheItemCorrupt() throws {
        _ = try keychain.add(password("flags", "a", secret: "live"), client: client)
        try withDatabase { database in execute(database, "UPDATE items SET tomb = 1") }
        keychain = try open()
        var tombstones = password("flags", "a", secret: nil)
        tombstones["tomb"] = .bool(true)
        tombstones["r_Data"] = .bool(true)
        assertError(.itemNotFound) { _ = try keychain.copyMatching(tombstones, client: client) }
        tombstones["r_Data"] = nil
        tombstones["r_Attributes"] = .bool(true)
        assertError(.itemNotFound) { _ = try keychain.copyMatching(tombstones, client: client) }
        try withDatabase { database in execute(database, "UPDATE items SET tomb = 0, keyclass = 8") }
        keychain = try open()
        assertError(.itemNotFound) { _ = try readSecret("flags", "a") }
    }

    /// Changes byte 41 of `column` in the row of `rowid` to a different value, whatever it was.
    private func flipByte(of column: String, rowid: Int) throws {
        try withDatabase { database in
            execute(
                database,
                """
                UPDATE items SET \(column) = substr(\(column), 1, 40) ||
                CASE WHEN substr(\(column), 41, 1) = X'00' THEN X'01' ELSE X'00' END ||
                substr(\(column), 42) WHERE rowid = \(rowid)
                """)
        }
    }

    func testFlippedByteMakesTheItemCorrupt() throws {
        _ = try keychain.add(password("flip", "a", secret: "original"), client: client)
        _ = try keychain.add(password("flip", "b", secret: "other"), client: client)
        let before = try blobs(rowid: 1)
        for column in ["metadata", "secret"] { try flipByte(of: column, rowid: 1) }
        let after = try blobs(rowid: 1)
        XCTAssertNotEqual(before.metadata, after.metadata)
        XCTAssertNotEqual(before.secret, after.secret)
        XCTAssertEqual(before.metadata.count, after.metadata.count)
        keychain = try open()
        assertError(.itemNotFound) { _ = try readSecret("flip", "a") }
        XCTAssertEqual(try readSecret("flip", "b"), "other")
        // An add over the corrupt row replaces it.
        _ = try keychain.add(password("flip", "a", secret: "fresh"), client: client)
        XCTAssertEqual(try readSecret("flip", "a"), "fresh")
    }

    func testAnItemWhoseSecretAloneIsDamagedGivesWayToAnAdd() throws {
        _ = try keychain.add(password("flip", "a", secret: "original"), client: client)
        try flipByte(of: "secret", rowid: 1)
        keychain = try open()
        // Its attributes still open, so it is found by them, but its data is gone.
        var attributes = password("flip", "a", secret: nil)
        attributes["r_Attributes"] = .bool(true)
        XCTAssertNotNil(try keychain.copyMatching(attributes, client: client))
        assertError(.itemNotFound) { _ = try readSecret("flip", "a") }
        _ = try keychain.add(password("flip", "a", secret: "fresh"), client: client)
        XCTAssertEqual(try readSecret("flip", "a"), "fresh")
        XCTAssertEqual(try count("SELECT count(*) FROM items"), 1)
    }

    private func blobs(rowid: Int) throws -> (metadata: Data, secret: Data) {
        var result = (metadata: Data(), secret: Data())
        try withDatabase { database in
            var statement: OpaquePointer?
            XCTAssertEqual(
                sqlite3_prepare_v2(database, "SELECT metadata, secret FROM items WHERE rowid = ?", -1, &statement, nil),
                SQLITE_OK)
            defer { sqlite3_finalize(statement) }
            sqlite3_bind_int64(statement, 1, Int64(rowid))
            XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
            for column in 0..<2 {
                let bytes = sqlite3_column_blob(statement, Int32(column))
                let length = Int(sqlite3_column_bytes(statement, Int32(column)))
                let data = bytes.map { Data(bytes: $0, count: length) } ?? Data()
                if column == 0 { result.metadata = data } else { result.secret = data }
            }
        }
        return result
    }

    private func count(_ sql: String) throws -> Int64 {
        var value: Int64 = -1
        try withDatabase { database in
            var statement: OpaquePointer?
            XCTAssertEqual(sqlite3_prepare_v2(database, sql, -1, &statement, nil), SQLITE_OK)
            defer { sqlite3_finalize(statement) }
            XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
            value = sqlite3_column_int64(statement, 0)
        }
        return value
    }

    // MARK: Damaged files

    func testGarbageDatabaseIsNotAvailableAndLeftAlone() throws {
        _ = try keychain.add(password("db", "a"), client: client)
        keychain = nil
        let path = directory + "/keychain.db"
        try? FileManager.default.removeItem(atPath: path + "-wal")
        try? FileManager.default.removeItem(atPath: path + "-shm")
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 * 7) })
        try garbage.write(to: URL(fileURLWithPath: path))
        var logged: [String] = []
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open() }
        logged = lines.all
        XCTAssertTrue(logged.contains { $0.contains("not a database") }, "\(logged)")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), garbage)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-wal"))
    }

    func testTruncatedDatabaseIsNotAvailableAndLeftAlone() throws {
        for index in 0..<300 {
            _ = try keychain.add(
                password("db", "account-\(index)", secret: String(repeating: "x", count: 200)), client: client)
        }
        keychain = nil  // closing checkpoints the WAL into the database file
        let path = directory + "/keychain.db"
        let full = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertGreaterThan(full.count, 20_000)
        let truncated = full.prefix(full.count / 2)
        try truncated.write(to: URL(fileURLWithPath: path))
        try? FileManager.default.removeItem(atPath: path + "-wal")
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open() }
        XCTAssertTrue(lines.all.contains { $0.contains("malformed") }, "\(lines.all)")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), truncated)
    }

    func testUnusableDirectoryIsNotAvailable() throws {
        let file = directory + "-file"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open(directory: file) }
        assertError(.notAvailable("")) { _ = try open(directory: file + "/keychain") }
        XCTAssertEqual(lines.all.count, 2)
        XCTAssertTrue(lines.all[0].contains("not a directory"), lines.all[0])
    }

    /// A copy of a keychain whose root is kept elsewhere, opened without it: refused, and no new root
    /// is written into the copy.
    func testCopyWithoutItsRootIsRefusedAndGetsNoNewRoot() throws {
        let root = directory + "-root-elsewhere"
        defer { try? FileManager.default.removeItem(atPath: root) }
        keychain = nil
        try FileManager.default.removeItem(atPath: directory)
        keychain = try open(rootPath: root)
        _ = try keychain.add(password("copy", "a"), client: client)
        keychain = nil
        let before = try filesOnDisk()
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open() }
        XCTAssertTrue(lines.all.contains { $0.contains("does not exist") }, "\(lines.all)")
        XCTAssertEqual(try filesOnDisk().map(\.0), before.map(\.0), "no device-root appeared in the copy")
        keychain = try open(rootPath: root)
        XCTAssertEqual(try readSecret("copy", "a"), "secret")
    }

    func testKeybagFromAnotherDeviceIsNotAvailable() throws {
        _ = try keychain.add(password("device", "a"), client: client)
        keychain = nil
        let before = try filesOnDisk().filter { $0.0 != "device-root" && !$0.0.hasSuffix(".lock") }
        let otherRoot = directory + "-other-root"
        defer { try? FileManager.default.removeItem(atPath: otherRoot) }
        _ = try SoftwareDeviceRoot.load(path: otherRoot, create: true)
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open(rootPath: otherRoot) }
        XCTAssertTrue(lines.all.contains { $0.contains("another device") }, "\(lines.all)")
        let after = try filesOnDisk().filter { $0.0 != "device-root" && !$0.0.hasSuffix(".lock") }
        XCTAssertEqual(before.map(\.0), after.map(\.0))
        for (old, new) in zip(before, after) { XCTAssertEqual(old.1, new.1, old.0) }
        // With its own root again, everything is there.
        keychain = try open()
        XCTAssertEqual(try readSecret("device", "a"), "secret")
    }
}

/// Collects log lines from any thread.
final class LogCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

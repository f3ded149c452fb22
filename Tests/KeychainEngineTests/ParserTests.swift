import Foundation
import KeychainCore
import XCTest

@testable import KeychainEngine

/// Query and attribute dictionaries go through one parser: the keys they share (secret, access group,
/// synchronizable, protection, access control) give typed values and the same errors in a query, an
/// add and an update; the rules every dictionary follows (size, nulls) are the same too.
final class ParserTests: XCTestCase {
    private func queryError(_ dictionary: [String: ItemValue], _ operation: ItemOperation = .add) -> KeychainError? {
        var full = dictionary
        full["class"] = .string("genp")
        do {
            _ = try Query.parse(full, for: operation)
            return nil
        } catch {
            return error as? KeychainError
        }
    }

    private func changeError(_ dictionary: [String: ItemValue]) -> KeychainError? {
        do {
            _ = try ItemChange.parse(dictionary, itemClass: .genericPassword)
            return nil
        } catch {
            return error as? KeychainError
        }
    }

    func testSharedKeysFailAlikeEverywhere() {
        let bad: [[String: ItemValue]] = [
            ["v_Data": .string("not data")],
            ["agrp": .string("")],
            ["agrp": .integer(1)],
            ["sync": .string("maybe")],
            ["pdmn": .string("xx")],
            ["accc": .string("ak")],
            ["acct": .null],
            ["pdmn": .string("ak"), "accc": .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 0))],
            Dictionary(uniqueKeysWithValues: (0..<129).map { ("k\($0)", ItemValue.string("x")) }),
        ]
        for dictionary in bad {
            let query = queryError(dictionary)
            let change = changeError(dictionary)
            XCTAssertEqual(query?.code, .invalidParameter, "\(dictionary.keys.sorted().prefix(2))")
            XCTAssertEqual(change?.code, .invalidParameter, "\(dictionary.keys.sorted().prefix(2))")
            if dictionary.count < 100 {
                XCTAssertEqual(query?.reason, change?.reason, "one parser, one message")
            }
        }
    }

    func testSharedKeysGiveTypedValues() throws {
        let policy = AccessControlPolicy(protection: .afterFirstUnlockThisDeviceOnly, flags: 0)
        let query = try Query.parse(
            [
                "class": .string("genp"), "v_Data": .data(Data("s".utf8)), "agrp": .string("TEAM.a"),
                "sync": .string("syna"), "accc": .accessControl(policy),
            ], for: .copyMatching)
        XCTAssertEqual(query.valueData, Data("s".utf8))
        XCTAssertEqual(query.accessGroup, "TEAM.a")
        XCTAssertEqual(query.synchronizable, .any)
        XCTAssertEqual(query.shared.protectionClass, .afterFirstUnlockThisDeviceOnly)
        let change = try ItemChange.parse(["sync": .bool(true), "pdmn": .string("cku")], itemClass: .genericPassword)
        XCTAssertEqual(change.synchronizable, true)
        XCTAssertEqual(change.shared.protection, .afterFirstUnlockThisDeviceOnly)
    }

    func testWhatOnlyAWriteRefuses() {
        // Either value of synchronizable is for searching; an item has one.
        XCTAssertEqual(queryError(["sync": .string("syna")], .copyMatching)?.code, nil)
        XCTAssertEqual(changeError(["sync": .string("syna")])?.code, .invalidParameter)
        // Constraints are refused for items being written until access control is enforced, and never
        // with synchronizable.
        let constrained = ItemValue.accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 1 << 3))
        XCTAssertEqual(changeError(["accc": constrained])?.code, .unimplemented)
        XCTAssertEqual(changeError(["accc": constrained, "sync": .bool(true)])?.code, .invalidParameter)
        XCTAssertEqual(queryError(["accc": constrained], .copyMatching)?.code, nil)
    }
}

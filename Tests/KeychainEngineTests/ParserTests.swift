import Foundation
import KeychainBytes
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

    func testAnAddCarryingAnEnclaveTokenIsToldApartByTheParser() throws {
        let token = Data([3, 1, 2])
        guard
            case .enclaveKeyToken(let bytes, let attributes) = try Addition.parse([
                "class": .string("keys"), "toid": .data(token), "labl": .string("k"),
            ])
        else { return XCTFail("a dictionary with a token is the storing of an enclave key") }
        XCTAssertEqual(bytes, token)
        XCTAssertEqual(attributes, ["class": .string("keys"), "labl": .string("k")], "the token is taken out")
        guard case .item(let query) = try Addition.parse(["class": .string("genp"), "acct": .string("a")]) else {
            return XCTFail("a dictionary without a token is an item")
        }
        XCTAssertEqual(query.itemClass, .genericPassword)
        // A token that is not data is no token: the item's parser has its say on the key.
        XCTAssertThrowsError(try Addition.parse(["class": .string("keys"), "toid": .string("x")]))
    }

    func testSharedKeysGiveTypedValues() throws {
        let policy = AccessControlPolicy(protection: .afterFirstUnlockThisDeviceOnly, flags: 0)
        let query = try Query.parse(
            [
                "class": .string("genp"), "v_Data": .data(Data("s".utf8)), "agrp": .string("TEAM.a"),
                "sync": .string("syna"), "accc": .accessControl(policy),
            ], for: .copyMatching)
        XCTAssertEqual(query.valueData, SecureBytes(copying: Data("s".utf8)))
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
        // Constraints are written, but never with synchronizable.
        let constrained = ItemValue.accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 1 << 3))
        XCTAssertEqual(changeError(["accc": constrained])?.code, nil)
        XCTAssertEqual(changeError(["accc": constrained, "sync": .bool(true)])?.code, .invalidParameter)
        XCTAssertEqual(queryError(["accc": constrained], .copyMatching)?.code, nil)
        // An access control that SecAccessControlCreateWithFlags would never make (a frame from the
        // wire can carry any bits) is refused wherever it appears.
        for flags: UInt in [1 << 7, 1 << 14 | 1 << 15, 1 << 1 | 1 << 3, 1 << 0 | 1 << 1] {
            let invalid = ItemValue.accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: flags))
            XCTAssertEqual(changeError(["accc": invalid])?.code, .invalidParameter, "flags \(flags)")
            XCTAssertEqual(queryError(["accc": invalid], .copyMatching)?.code, .invalidParameter, "flags \(flags)")
        }
    }

    // MARK: Bad input, once, here (the SecItem tests check that the codes reach the caller)

    private func code(_ dictionary: [String: ItemValue], _ operation: ItemOperation) -> KeychainError.Code? {
        do {
            _ = try Query.parse(dictionary, for: operation)
            return nil
        } catch {
            return (error as? KeychainError)?.code
        }
    }

    private let base: [String: ItemValue] = [
        "class": .string("genp"), "svce": .string("bad"), "acct": .string("input"),
    ]

    private func with(_ extra: [String: ItemValue]) -> [String: ItemValue] { base.merging(extra) { $1 } }

    func testWrongValueTypes() {
        let wrong: [[String: ItemValue]] = [
            ["v_Data": .string("a string")], ["agrp": .integer(42)], ["pdmn": .integer(7)],
            ["pdmn": .string("sometimes")], ["cdat": .string("yesterday")], ["sync": .string("maybe")],
            ["accc": .string("not an ACL")], ["class": .integer(3)],
        ]
        for extra in wrong { XCTAssertEqual(code(with(extra), .add), .invalidParameter, "\(extra)") }
        XCTAssertEqual(code(with(["r_Data": .string("yes")]), .copyMatching), .invalidParameter)
        XCTAssertEqual(code(with(["r_Data": .integer(1)]), .copyMatching), .invalidParameter)
    }

    func testClassProblems() {
        XCTAssertEqual(code(with(["class": .string("nope")]), .add), .noSuchClass)
        XCTAssertEqual(code(with(["class": .string("nope")]), .copyMatching), .noSuchClass)
        var noClass = base
        noClass["class"] = nil
        for operation in [ItemOperation.add, .copyMatching, .delete] {
            XCTAssertEqual(code(noClass, operation), .invalidParameter)
        }
    }

    func testUnknownAttributesAndKeys() {
        for operation in [ItemOperation.add, .copyMatching, .delete] {
            XCTAssertEqual(code(with(["zzzz": .string("x")]), operation), .noSuchAttribute)
        }
        // An attribute of another class is unknown here too (application tag on a password).
        XCTAssertEqual(code(with(["atag": .string("t")]), .add), .noSuchAttribute)
        for key in ["not_a_key", "u_Bogus", "r_Bogus", "m_Bogus", "v_Bogus"] {
            XCTAssertEqual(code(with([key: .bool(true)]), .add), .invalidParameter, key)
        }
        XCTAssertEqual(code(with(["u_AuthUI": .string("u_AuthUIS")]), .add), .invalidParameter)
        XCTAssertEqual(code(with(["u_AuthUI": .string("u_AuthUIS")]), .delete), .invalidParameter)
        XCTAssertEqual(code(with(["u_AuthUI": .string("u_AuthUIS")]), .copyMatching), nil)
        let protectionOnly = ItemValue.accessControl(AccessControlPolicy(protection: .always, flags: 0))
        XCTAssertEqual(
            code(with(["pdmn": .string("dk"), "accc": protectionOnly]), .add), .invalidParameter,
            "kSecAttrAccessible and kSecAttrAccessControl conflict")
    }

    func testTooManyKeys() {
        // Keys starting with "f" are ignored callbacks, so only the count can make these fail.
        var query = base
        for index in 0..<125 { query["f_callback\(index)"] = .string("x") }
        XCTAssertEqual(query.count, 128)
        XCTAssertNil(code(query, .copyMatching), "128 keys are allowed")
        query["f_callback_too_many"] = .string("x")
        XCTAssertEqual(code(query, .add), .invalidParameter)
        XCTAssertEqual(code(query, .copyMatching), .invalidParameter)
    }

    func testNullValues() {
        XCTAssertEqual(code(with(["v_Data": .null]), .add), .invalidParameter)
        XCTAssertEqual(code(with(["labl": .null]), .copyMatching), .invalidParameter)
        XCTAssertThrowsError(try ItemChange.parse(["v_Data": .null], itemClass: .genericPassword))
    }

    func testTheFirstProblemInKeyOrderIsReported() throws {
        // Two problems: the one whose key sorts first is reported, whatever the dictionary's hashing.
        for padding in 0..<20 {
            // Ignored callback keys change the dictionary's layout, and so the order it is walked in.
            var query = with(["zzzz": .string("x"), "agrp": .integer(1)])
            for index in 0..<padding { query["f_pad\(index)"] = .string("x") }
            XCTAssertEqual(code(query, .add), .invalidParameter, "agrp sorts before zzzz")
        }
    }
}

import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

/// A request naming another app's group is refused (-34018) before anything is looked up: neither its
/// answer nor its time tells whether such an item exists. Measured here, interleaved, as an app would
/// probe: the medians must agree within noise.
final class ForeignGroupTimingTests: XCTestCase {
    func testARefusalTakesTheSameTimeWhetherTheItemExistsOrNot() throws {
        let daemon = try TestDaemon()
        let service = daemon.service()
        try daemon.register(groups: ["TEAM.victim"])
        for index in 0..<200 {
            _ = try service.add([
                "class": .string("genp"), "svce": .string("bank"), "acct": .string("user-\(index)"),
                "v_Data": .data(Data("victim-secret".utf8)),
            ])
        }
        try daemon.register(groups: ["TEAM.attacker"])
        func probe(_ account: String) -> (nanoseconds: UInt64, error: KeychainError?) {
            let query: [String: ItemValue] = [
                "class": .string("genp"), "svce": .string("bank"), "acct": .string(account),
                "agrp": .string("TEAM.victim"), "r_Data": .bool(true),
            ]
            let start = DispatchTime.now().uptimeNanoseconds
            var refusal: KeychainError?
            do { _ = try service.copyMatching(query) } catch { refusal = error as? KeychainError }
            return (DispatchTime.now().uptimeNanoseconds - start, refusal)
        }
        var existing: [UInt64] = []
        var missing: [UInt64] = []
        for round in 0..<400 {
            let present = probe("user-\(round % 200)")
            let absent = probe("nobody-\(round)")
            XCTAssertEqual(present.error?.code, .missingEntitlement)
            XCTAssertEqual(present.error?.reason, absent.error?.reason, "the refusal's reason tells")
            existing.append(present.nanoseconds)
            missing.append(absent.nanoseconds)
        }
        let medians = [existing, missing].map { $0.sorted()[$0.count / 2] }
        let ratio = Double(medians.max() ?? 1) / Double(max(medians.min() ?? 1, 1))
        XCTAssertLessThan(ratio, 1.5, "refusals take \(medians[0]) ns for an existing item, \(medians[1]) ns for none")
    }
}

import Foundation
import Security
import Synchronization
import XCTest

/// Many threads calling SecItem* at once, as an app's background work does.
final class ThreadSafetyTests: KeychainTestCase {
    func testConcurrentSecItemCalls() {
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 6) { thread in
            for index in 0..<40 {
                let account = "thread\(thread)-\(index)"
                let item = Item.password(service: "concurrent", account: account, secret: account)
                var problems: [String] = []
                if Item.add(item) != errSecSuccess { problems.append("add \(account)") }
                if Item.secret(item) != account { problems.append("read \(account)") }
                if index % 2 == 0, Item.delete(item.filter { $0.key != kSecValueData as String }) != errSecSuccess {
                    problems.append("delete \(account)")
                }
                if !problems.isEmpty { failures.withLock { $0 += problems } }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        let all =
            Item.copy([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "concurrent",
                kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
            ]).1 as? [[String: Any]]
        XCTAssertEqual(all?.count, 6 * 20)
    }
}

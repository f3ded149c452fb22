import Foundation
import Synchronization
import XCTest

@testable import KeychainDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// Each connection runs on a thread of its own; a thread whose connection ended serves the next one,
/// and ends after waiting idle for its lifetime.
final class ConnectionThreadsTests: XCTestCase {
    /// The calling thread (a live thread's id is never another live thread's).
    private static func threadID() -> UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }

    func testAThreadWhoseWorkEndedRunsTheNextWork() {
        let threads = ConnectionThreads(stackSize: 1 << 20, idleLifetime: .seconds(30))
        let ids = Mutex<[UInt]>([])
        for _ in 0..<3 {
            let done = expectation(description: "work ran")
            XCTAssertTrue(
                threads.run {
                    ids.withLock { $0.append(Self.threadID()) }
                    done.fulfill()
                })
            wait(for: [done], timeout: 5)
            // The thread goes back to waiting once its work has returned.
            XCTAssertTrue(waitUntil { threads.idleThreads == 1 })
        }
        let seen = ids.withLock { $0 }
        XCTAssertEqual(seen.count, 3)
        XCTAssertEqual(Set(seen).count, 1, "one thread served the three in turn: \(seen)")
        XCTAssertNotEqual(seen.first, Self.threadID(), "not on the caller's thread")
    }

    func testWorkNeverWaitsForOtherWork() {
        // Each piece of work holds its thread until every one has started: with fewer threads than
        // pieces this would never end.
        let threads = ConnectionThreads(stackSize: 1 << 20, idleLifetime: .seconds(30))
        let count = 6
        let started = Atomic<Int>(0)
        let ids = Mutex<Set<UInt>>([])
        let finished = expectation(description: "all ran at once")
        finished.expectedFulfillmentCount = count
        for _ in 0..<count {
            _ = threads.run {
                ids.withLock { _ = $0.insert(Self.threadID()) }
                started.add(1, ordering: .sequentiallyConsistent)
                let deadline = Date().addingTimeInterval(5)
                while started.load(ordering: .sequentiallyConsistent) < count, Date() < deadline { usleep(1000) }
                finished.fulfill()
            }
        }
        wait(for: [finished], timeout: 10)
        XCTAssertEqual(started.load(ordering: .sequentiallyConsistent), count)
        XCTAssertEqual(ids.withLock { $0.count }, count, "each ran on a thread of its own")
        XCTAssertTrue(waitUntil { threads.idleThreads == count })
        // Work given now goes to one of the idle threads rather than a new one.
        let again = expectation(description: "ran again")
        let reused = Mutex<Bool>(false)
        let known = ids.withLock { $0 }
        _ = threads.run {
            reused.withLock { $0 = known.contains(Self.threadID()) }
            again.fulfill()
        }
        wait(for: [again], timeout: 5)
        XCTAssertTrue(reused.withLock { $0 })
    }

    func testWorkHandedOverBehindWorkThatWaitsIsNotQueuedBehindIt() {
        // One idle thread. The first piece of work goes to it and waits for the second to run; the
        // second must get a thread of its own, not wait in line behind the first.
        let threads = ConnectionThreads(stackSize: 1 << 20, idleLifetime: .seconds(30))
        let warmed = expectation(description: "a thread is idle")
        _ = threads.run { warmed.fulfill() }
        wait(for: [warmed], timeout: 5)
        XCTAssertTrue(waitUntil { threads.idleThreads == 1 })
        for _ in 0..<20 {
            let secondRan = Atomic<Bool>(false)
            let firstSawSecond = Atomic<Bool>(false)
            let both = expectation(description: "both ran")
            both.expectedFulfillmentCount = 2
            _ = threads.run {
                let deadline = Date().addingTimeInterval(3)
                while !secondRan.load(ordering: .sequentiallyConsistent), Date() < deadline { usleep(500) }
                firstSawSecond.store(
                    secondRan.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
                both.fulfill()
            }
            _ = threads.run {
                secondRan.store(true, ordering: .sequentiallyConsistent)
                both.fulfill()
            }
            wait(for: [both], timeout: 10)
            XCTAssertTrue(firstSawSecond.load(ordering: .sequentiallyConsistent), "the second waited for the first")
        }
    }

    func testNoWorkIsLostWhileIdleThreadsTimeOut() {
        // Lifetimes as short as the gaps between hand-overs, so that work keeps arriving just as idle
        // threads give up: each piece must still run, once.
        let threads = ConnectionThreads(stackSize: 1 << 20, idleLifetime: .microseconds(50))
        let count = 4000
        let ran = Mutex<[Int]>([])
        let all = expectation(description: "every piece ran")
        all.expectedFulfillmentCount = count
        for index in 0..<count {
            usleep(UInt32.random(in: 0...100))
            XCTAssertTrue(
                threads.run {
                    ran.withLock { $0.append(index) }
                    all.fulfill()
                })
        }
        wait(for: [all], timeout: 30)
        XCTAssertEqual(ran.withLock { $0.sorted() }, Array(0..<count))
    }

    func testAnIdleThreadEndsAfterItsLifetime() {
        let threads = ConnectionThreads(stackSize: 1 << 20, idleLifetime: .milliseconds(200))
        let done = expectation(description: "work ran")
        _ = threads.run { done.fulfill() }
        wait(for: [done], timeout: 5)
        XCTAssertTrue(waitUntil { threads.idleThreads == 1 })
        XCTAssertTrue(waitUntil(seconds: 5) { threads.idleThreads == 0 }, "the idle thread ended")
        // Work after that gets a new thread and runs all the same.
        let later = expectation(description: "work after the idle thread ended")
        _ = threads.run { later.fulfill() }
        wait(for: [later], timeout: 5)
    }

    private func waitUntil(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(2000)
        }
        return condition()
    }
}

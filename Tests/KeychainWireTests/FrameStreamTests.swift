import Foundation
import KeychainCore
import KeychainWire
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Whole frames over a socket, with and without polling before sleeping: the same frames arrive,
/// whether they come while the reader polls or only after it went to sleep, and a peer that closes
/// is seen as closed either way.
final class FrameStreamTests: XCTestCase {
    private func pair() throws -> (FrameStream, FrameStream) {
        var descriptors: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0 else {
            throw XCTSkip("no socketpair (errno \(errno))")
        }
        return (FrameStream(descriptor: descriptors[0]), FrameStream(descriptor: descriptors[1]))
    }

    func testAFrameArrivesWhetherItComesWhileThePeerPollsOrAfterItSlept() throws {
        let (writer, reader) = try pair()
        defer {
            close(writer.descriptor)
            close(reader.descriptor)
        }
        reader.pollBeforeSleeping = .milliseconds(50)
        for delay in [0, 10_000, 200_000] {  // µs: already there, during the poll, after it
            let frame = WireCodec.frame(.copyMatching(query: ["svce": .string("poll-\(delay)")]), id: UInt32(delay))
            let descriptor = writer.descriptor
            let sender = Thread {
                usleep(useconds_t(delay))
                _ = frame.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            sender.start()
            let received = try reader.readFrame(idle: .seconds(5), stall: .seconds(1))
            XCTAssertEqual(received, frame)
            let decoded = try WireCodec.request(from: received)
            XCTAssertEqual(decoded.id, UInt32(delay))
        }
    }

    func testAPeerThatClosesWhileThePeerPollsIsSeenAsClosed() throws {
        let (writer, reader) = try pair()
        defer { close(reader.descriptor) }
        reader.pollBeforeSleeping = .milliseconds(200)
        let descriptor = writer.descriptor
        let closer = Thread {
            usleep(20_000)
            close(descriptor)
        }
        closer.start()
        XCTAssertThrowsError(try reader.readFrame(idle: .seconds(5), stall: .seconds(1))) { error in
            XCTAssertEqual(error as? FrameStream.Failure, .closed)
        }
    }

    func testNothingComingEndsInTheIdleTimeoutAfterThePoll() throws {
        let (writer, reader) = try pair()
        defer {
            close(writer.descriptor)
            close(reader.descriptor)
        }
        reader.pollBeforeSleeping = .milliseconds(20)
        let start = ContinuousClock.now
        XCTAssertThrowsError(try reader.readFrame(idle: .milliseconds(100), stall: .seconds(1))) { error in
            XCTAssertEqual(error as? FrameStream.Failure, .timedOut)
        }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(100))
    }

    /// A descriptor passed beside a frame (SCM_RIGHTS) arrives with it, as a descriptor of the reader's
    /// own on the same open file; one passed with each piece of a frame is kept once, the rest closed.
    func testADescriptorPassedBesideAFrameArrivesWithIt() throws {
        let (writer, reader) = try pair()
        defer {
            close(writer.descriptor)
            close(reader.descriptor)
        }
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends), 0)
        defer { close(ends[1]) }
        let frame = WireCodec.frame(
            .restoreBackup(file: .descriptor(ends[0]), password: nil, passcode: nil), id: 5)
        try writer.writeFrame(frame, passing: ends[0], stall: .seconds(5))
        close(ends[0])
        let received = try reader.readFrame(idle: .seconds(5), stall: .seconds(5))
        let decoded = try WireCodec.request(from: received)
        XCTAssertEqual(decoded.request.passedDescriptor, -1, "the number is not sent: the receiver puts its own in")
        let passed = reader.takePassedDescriptors()
        XCTAssertEqual(passed.count, 1)
        guard let descriptor = passed.first else { return }
        XCTAssertEqual(reader.takePassedDescriptors(), [], "taken once")
        XCTAssertEqual(send(ends[1], "x", 1, Int32(MSG_NOSIGNAL)), 1)
        var byte: UInt8 = 0
        XCTAssertEqual(recv(descriptor, &byte, 1, 0), 1)
        XCTAssertEqual(byte, UInt8(ascii: "x"))
        XCTAssertEqual(fcntl(descriptor, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "close-on-exec")
        close(descriptor)
    }
}

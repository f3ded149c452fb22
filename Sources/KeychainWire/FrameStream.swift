import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Whole frames over a connected stream socket, for both ends: a header is read and checked before
/// its payload is, and no read waits longer than its deadline, so a peer that stalls mid-frame costs
/// this end a bounded wait and never a thread forever.
public struct FrameStream: Sendable {
    public let descriptor: Int32

    public init(descriptor: Int32) { self.descriptor = descriptor }

    /// Why a read or write ended the conversation.
    public enum Failure: Error, Equatable, Sendable {
        /// The peer closed the connection before a frame began.
        case closed
        /// No byte came within the deadline.
        case timedOut
        /// The peer closed or reset the connection in the middle of a frame, or a call failed.
        case broken(Int32)
        /// The bytes are not a frame.
        case malformed(WireError)
    }

    /// Reads one frame. `idle` bounds the wait for its first byte (nil: wait as long as it takes), and
    /// `stall` every wait after that.
    public func readFrame(idle: Duration?, stall: Duration) throws(Failure) -> Data {
        var header = [UInt8](repeating: 0, count: WireFormat.headerSize)
        try Self.typed {
            try header.withUnsafeMutableBytes { buffer in
                try fill(buffer, firstWait: idle, laterWait: stall, frameStarted: false)
            }
        }
        let checked: FrameHeader
        do {
            checked = try FrameHeader(Data(header))
        } catch {
            throw .malformed(error)
        }
        var frame = Data(count: WireFormat.headerSize + checked.payloadLength)
        try Self.typed {
            try frame.withUnsafeMutableBytes { buffer in
                header.withUnsafeBytes { buffer.copyMemory(from: $0) }
                if checked.payloadLength > 0 {
                    try fill(
                        UnsafeMutableRawBufferPointer(rebasing: buffer[WireFormat.headerSize...]), firstWait: stall,
                        laterWait: stall, frameStarted: true)
                }
            }
        }
        return frame
    }

    /// Writes a whole frame; `stall` bounds each wait for the peer to take more bytes.
    public func writeFrame(_ frame: Data, stall: Duration) throws(Failure) {
        try Self.typed { try frame.withUnsafeBytes { buffer in try write(buffer, stall: stall) } }
    }

    /// Buffer access rethrows untyped errors; every error thrown inside is a `Failure`.
    private static func typed(_ body: () throws -> Void) throws(Failure) {
        do {
            try body()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .broken(0)
        }
    }

    private func write(_ buffer: UnsafeRawBufferPointer, stall: Duration) throws(Failure) {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let written = send(descriptor, base + offset, buffer.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                try wait(for: Int16(POLLOUT), timeout: stall)
            } else {
                throw .broken(errno)
            }
        }
    }

    private func fill(
        _ buffer: UnsafeMutableRawBufferPointer, firstWait: Duration?, laterWait: Duration, frameStarted: Bool
    ) throws(Failure) {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        var deadline = firstWait
        while offset < buffer.count {
            // Read first and wait only when nothing is there: an answer usually is.
            let count = recv(descriptor, base + offset, buffer.count - offset, Int32(MSG_DONTWAIT))
            if count > 0 {
                offset += count
                deadline = laterWait
            } else if count == 0 {
                throw offset == 0 && !frameStarted ? .closed : .broken(0)
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                try wait(for: Int16(POLLIN), timeout: deadline)
            } else if errno == EINTR {
                continue
            } else {
                throw offset == 0 && !frameStarted && errno == ECONNRESET ? .closed : .broken(errno)
            }
        }
    }

    private func wait(for events: Int16, timeout: Duration?) throws(Failure) {
        let milliseconds: Int32 =
            timeout.map { duration in
                let (seconds, attoseconds) = duration.components
                return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
            } ?? -1
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        while true {
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return }
            if ready == 0 { throw .timedOut }
            if errno != EINTR { throw .broken(errno) }
        }
    }
}

import CProcessControl
import Dispatch
import FoundationEssentials
import KeychainBytes
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Whole frames over a connected stream socket, for both ends: a header is read and checked before
/// its payload is, and no read waits longer than its deadline, so a peer that stalls mid-frame costs
/// this end a bounded wait and never a thread forever.
///
/// The socket is used blocking, with the kernel's receive and send timeouts (SO_RCVTIMEO,
/// SO_SNDTIMEO) as deadlines: a read that waits costs one `recv`, not a `recv`, a `poll` and another
/// `recv`. Reads go through a small buffer, so that a frame that arrived whole (most do) costs one
/// `recv`. Used by one thread at a time.
public final class FrameStream {
    public let descriptor: Int32
    /// Bytes received and not yet handed out: `buffer[start..<end]`; bytes past one frame wait here
    /// for the next read.
    private var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    private var start = 0
    private var end = 0

    /// The timeouts set on the socket now (nil: none set yet), so they are set again only on change.
    private var receiveTimeout: Duration??
    private var sendTimeout: Duration?

    /// How long to poll for the first bytes of a frame before sleeping in the kernel. Waking a
    /// sleeping process costs a scheduler round on each side of a round trip (some 20–30 µs on a
    /// virtual machine, several times an embedded lookup); a peer that answers within this time is
    /// read without either side having slept. Zero: never poll.
    public var pollBeforeSleeping: Duration = .zero

    /// Threads of this process polling now: no more than the cores but one, so that polling never
    /// takes the processor from the work it waits for.
    private static let pollers = Atomic<Int>(0)
    private static let pollerLimit = max(1, ProcessInfo.processInfo.activeProcessorCount - 1)

    /// Descriptors the peer passed beside its bytes (SCM_RIGHTS), in order, not yet taken.
    private var passed: [Int32] = []

    deinit {
        buffer.withUnsafeMutableBytes { SecureMemory.wipe($0) }
        for descriptor in passed { DescriptorReaper.close(descriptor) }
    }

    /// The descriptors that came with the bytes read so far, handed over to the caller (who closes
    /// them). A frame carries at most one: the daemon takes them after each frame it reads.
    public func takePassedDescriptors() -> [Int32] {
        defer { passed = [] }
        return passed
    }

    /// Takes over a connected socket, turning it blocking.
    public init(descriptor: Int32) {
        self.descriptor = descriptor
        let flags = fcntl(descriptor, F_GETFL)
        if flags >= 0, flags & O_NONBLOCK != 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
    }

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
        /// `admit` refused the frame for now (the reader holds too much at once); its payload was not
        /// read, so the connection cannot go on.
        case refused
    }

    /// Reads one frame. `idle` bounds the wait for its first byte (nil: wait as long as it takes), and
    /// `stall` every wait after that.
    ///
    /// `maximumPayload` may lower the protocol's limit for this frame, and `admit` is asked before memory
    /// is set aside for a frame larger than the read buffer (false refuses the frame).
    public func readFrame(
        idle: Duration?, stall: Duration, maximumPayload: Int = WireFormat.maximumPayload,
        admit: (Int) -> Bool = { _ in true }
    ) throws(Failure) -> Data {
        try buffered(atLeast: WireFormat.headerSize, firstWait: idle, laterWait: stall, frameStarted: false)
        let checked: FrameHeader
        do {
            checked = try FrameHeader(Data(buffer[start..<start + WireFormat.headerSize]))
        } catch {
            throw .malformed(error)
        }
        guard checked.payloadLength <= maximumPayload else {
            throw .malformed(
                WireError(
                    "a payload of \(checked.payloadLength) bytes is over this connection's limit of \(maximumPayload)"))
        }
        let total = WireFormat.headerSize + checked.payloadLength
        guard total <= buffer.count || admit(total) else { throw .refused }
        if total <= buffer.count {
            try buffered(atLeast: total, firstWait: stall, laterWait: stall, frameStarted: true)
            defer { consume(total) }
            return Data(buffer[start..<start + total])
        }
        // Larger than the buffer: what is buffered, then the rest straight into the frame.
        var frame = Data(count: total)
        let have = end - start
        do {
            try Self.typed {
                try frame.withUnsafeMutableBytes { target in
                    buffer.withUnsafeBytes { source in
                        target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<end]))
                    }
                    try fill(
                        UnsafeMutableRawBufferPointer(rebasing: target[have...]), firstWait: stall, laterWait: stall,
                        frameStarted: true)
                }
            }
        } catch {
            // What arrived of a frame that never completed may be part of a secret: wiped before it is freed.
            frame.withUnsafeMutableBytes { SecureMemory.wipe($0) }
            throw error
        }
        consume(have)
        return frame
    }

    /// Receives until `count` bytes are buffered (moving what is there to the front first).
    private func buffered(atLeast count: Int, firstWait: Duration?, laterWait: Duration, frameStarted: Bool)
        throws(Failure)
    {
        if end - start >= count { return }
        if start > 0 {
            buffer.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return }
                memmove(base, base + start, end - start)
                SecureMemory.wipe(UnsafeMutableRawBufferPointer(rebasing: raw[(end - start)..<end]))
            }
            end -= start
            start = 0
        }
        var wait = firstWait
        var started = frameStarted || end > 0
        while end < count {
            let received = try Self.typedValue {
                try buffer.withUnsafeMutableBytes { raw in
                    try receive(
                        into: UnsafeMutableRawBufferPointer(rebasing: raw[end...]), wait: wait, frameStarted: started)
                }
            }
            end += received
            wait = laterWait
            started = true
        }
    }

    private func consume(_ count: Int) {
        // What was handed out may hold a passcode or a secret: it does not stay behind in the buffer.
        buffer.withUnsafeMutableBytes { raw in
            SecureMemory.wipe(UnsafeMutableRawBufferPointer(rebasing: raw[start..<start + count]))
        }
        start += count
        if start == end {
            start = 0
            end = 0
        }
    }

    /// Writes a whole frame; `stall` bounds each wait for the peer to take more bytes. `passing`, a
    /// descriptor this process opened, goes beside the frame's first bytes (the peer gets its own copy).
    public func writeFrame(_ frame: Data, passing descriptor: Int32? = nil, stall: Duration) throws(Failure) {
        try Self.typed {
            try frame.withUnsafeBytes { buffer in try write(buffer, passing: descriptor, stall: stall) }
        }
    }

    /// Buffer access rethrows untyped errors; every error thrown inside is a `Failure`.
    private static func typed(_ body: () throws -> Void) throws(Failure) {
        _ = try typedValue { try body() }
    }

    private static func typedValue<T>(_ body: () throws -> T) throws(Failure) -> T {
        do {
            return try body()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .broken(0)
        }
    }

    private func write(_ buffer: UnsafeRawBufferPointer, passing: Int32?, stall: Duration) throws(Failure) {
        guard let base = buffer.baseAddress else { return }
        if sendTimeout != stall {
            setTimeout(SO_SNDTIMEO, stall)
            sendTimeout = stall
        }
        var offset = 0
        var passing = passing
        while offset < buffer.count {
            let written: Int
            if let descriptorToPass = passing {
                written = process_control_send_descriptor(
                    descriptor, base + offset, UInt(buffer.count - offset), descriptorToPass, Int32(MSG_NOSIGNAL))
                if written > 0 { passing = nil }
            } else {
                written = send(descriptor, base + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                throw .timedOut
            } else {
                throw offset == 0 && (errno == EPIPE || errno == ECONNRESET) ? .closed : .broken(errno)
            }
        }
    }

    private func fill(
        _ buffer: UnsafeMutableRawBufferPointer, firstWait: Duration?, laterWait: Duration, frameStarted: Bool
    ) throws(Failure) {
        var offset = 0
        var wait = firstWait
        while offset < buffer.count {
            offset += try receive(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]), wait: wait,
                frameStarted: frameStarted || offset > 0)
            wait = laterWait
        }
    }

    /// One receive of at least a byte into `buffer`, waiting at most `wait` for it (nil: no limit).
    private func receive(into buffer: UnsafeMutableRawBufferPointer, wait: Duration?, frameStarted: Bool)
        throws(Failure) -> Int
    {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        if !frameStarted, pollBeforeSleeping > .zero, let count = try poll(into: base, count: buffer.count) {
            return count
        }
        if receiveTimeout != .some(wait) {
            setTimeout(SO_RCVTIMEO, wait)
            receiveTimeout = .some(wait)
        }
        while true {
            let count = receiveKeepingDescriptors(base, buffer.count, 0)
            if count > 0 { return count }
            if count == 0 { throw frameStarted ? .broken(0) : .closed }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut }
            if errno != EINTR { throw !frameStarted && errno == ECONNRESET ? .closed : .broken(errno) }
        }
    }

    /// Polls for up to `pollBeforeSleeping` (when a polling slot is free), yielding the processor
    /// between tries; nil when nothing came, for the caller to sleep in the kernel.
    private func poll(into base: UnsafeMutableRawPointer, count: Int) throws(Failure) -> Int? {
        guard Self.pollers.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue <= Self.pollerLimit else {
            Self.pollers.wrappingSubtract(1, ordering: .acquiringAndReleasing)
            return nil
        }
        defer { Self.pollers.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
        let deadline = ContinuousClock.now + pollBeforeSleeping
        repeat {
            let received = receiveKeepingDescriptors(base, count, Int32(MSG_DONTWAIT))
            if received > 0 { return received }
            if received == 0 { throw .closed }
            if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                throw errno == ECONNRESET ? .closed : .broken(errno)
            }
            sched_yield()
        } while ContinuousClock.now < deadline
        return nil
    }

    /// `recv`, keeping the first descriptor that came with the bytes for `takePassedDescriptors`; the
    /// rest go to `DescriptorReaper`.
    private func receiveKeepingDescriptors(_ base: UnsafeMutableRawPointer, _ count: Int, _ flags: Int32) -> Int {
        // On the stack: every read of the daemon and its clients comes here.
        withUnsafeTemporaryAllocation(of: Int32.self, capacity: 253) { descriptors in
            var received: Int32 = 0
            let bytes = process_control_receive(
                descriptor, base, UInt(count), flags, descriptors.baseAddress, 253, &received)
            // One at a time: a peer sending one with every byte cannot make this end hold many.
            for passedDescriptor in descriptors.prefix(Int(received)) {
                if passed.isEmpty { passed.append(passedDescriptor) } else { DescriptorReaper.close(passedDescriptor) }
            }
            return bytes
        }
    }

    private func setTimeout(_ option: Int32, _ timeout: Duration?) {
        var value = timeval()
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            value.tv_sec = Int(seconds)
            value.tv_usec = Int(attoseconds / 1_000_000_000_000)
            // Zero would mean "no timeout": the shortest wait is a microsecond.
            if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }
        }
        _ = setsockopt(descriptor, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// Closes descriptors another process passed, away from the thread that received them: closing one can
/// wait for as long as its sender likes (a socket set to linger, a file of a FUSE mount that never
/// answers the flush), and a connection's thread must never. One thread closes them all, in order; a
/// sender that stalls it makes later descriptors wait for it (the daemon's descriptors, not its threads).
public enum DescriptorReaper {
    private static let queue = DispatchQueue(label: "swift-keychain descriptor reaper")

    public static func close(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        queue.async { _ = Glibc.close(descriptor) }
    }
}

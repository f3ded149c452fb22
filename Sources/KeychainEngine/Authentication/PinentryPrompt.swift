import Foundation
import KeychainCore
import KeychainCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Asks a person for the device passcode through `pinentry`, GnuPG's standard prompt program (a
/// Debian package, with terminal and desktop variants), speaking its Assuan protocol: the prompt shows
/// the app's reason, and the passcode comes back into wiped memory, never through Foundation's buffers.
///
/// Which program runs is the keychain's owner's choice, never a client's: the daemon's `--pinentry`,
/// or, embedded, `KEYCHAIN_PINENTRY` (a process runs its own prompt either way).
struct PinentryPrompt: Sendable {
    let program: String
    /// How long a person has to answer.
    var timeout: Duration = .seconds(120)

    /// GnuPG's error code for a canceled operation (`GPG_ERR_CANCELED`), in the low 16 bits of an ERR.
    private static let canceled = 99

    func askPasscode(reason: String) -> Result<SecureBytes, AuthenticationFailure> {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0 else { return .failure(.authenticationFailed) }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0])
            close(toChild[1])
            return .failure(.authenticationFailed)
        }
        // Close-on-exec: another program this process starts later does not inherit the passcode's pipe.
        for descriptor in toChild + fromChild { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        let childInput = FileHandle(fileDescriptor: toChild[0], closeOnDealloc: true)
        let childOutput = FileHandle(fileDescriptor: fromChild[1], closeOnDealloc: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.standardInput = childInput
        process.standardOutput = childOutput
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            close(toChild[1])
            close(fromChild[0])
            return .failure(.authenticationFailed)
        }
        // The child has its ends; this process keeps only its own, so that the child's exit is an
        // end of file here.
        try? childInput.close()
        try? childOutput.close()
        let session = Session(input: fromChild[0], output: toChild[1], deadline: ContinuousClock.now + timeout)
        defer {
            session.close()
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        return session.converse(reason: reason)
    }

    /// One conversation with the program: its greeting, the prompt's texts, GETPIN.
    private final class Session {
        let input: Int32
        let output: Int32
        let deadline: ContinuousClock.Instant
        private var buffer: [UInt8] = []

        init(input: Int32, output: Int32, deadline: ContinuousClock.Instant) {
            self.input = input
            self.output = output
            self.deadline = deadline
        }

        func close() {
            wipe(&buffer)
            Glibc.close(input)
            Glibc.close(output)
        }

        func converse(reason: String) -> Result<SecureBytes, AuthenticationFailure> {
            guard expectOK() else { return .failure(.authenticationFailed) }
            let description = reason.isEmpty ? "Enter the device passcode." : reason
            for command in [
                "SETTITLE Keychain", "SETDESC " + Self.escape(description), "SETPROMPT Passcode:",
                "SETOK Continue",
            ] {
                guard send(command), expectOK() else { return .failure(.authenticationFailed) }
            }
            guard send("GETPIN") else { return .failure(.authenticationFailed) }
            var pin: [UInt8] = []
            defer { wipe(&pin) }
            while var line = readLine() {
                defer { wipe(&line) }
                if line.starts(with: Array("D ".utf8)) {
                    guard Self.unescape(line.dropFirst(2), into: &pin) else { return .failure(.authenticationFailed) }
                } else if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) {
                    _ = send("BYE")
                    return .success(SecureBytes(copying: pin))
                } else if line.starts(with: Array("ERR ".utf8)) {
                    let code = Int(String(decoding: line.dropFirst(4).prefix { $0 != 32 }, as: UTF8.self)) ?? 0
                    return .failure(code & 0xffff == PinentryPrompt.canceled ? .userCancel : .authenticationFailed)
                } else if line.starts(with: Array("INQUIRE".utf8)) {
                    guard send("CAN") else { return .failure(.authenticationFailed) }
                }
                // "S" status lines and "#" comments are skipped.
            }
            return .failure(.systemCancel)  // the program went away, or nobody answered in time
        }

        private func send(_ line: String) -> Bool {
            let bytes = Array((line + "\n").utf8)
            var written = 0
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes { write(output, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                written += count
            }
            return true
        }

        private func expectOK() -> Bool {
            while var line = readLine() {
                defer { wipe(&line) }
                if line.first == UInt8(ascii: "#") || line.starts(with: Array("S ".utf8)) { continue }
                return line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8))
            }
            return false
        }

        /// The next line (without its newline), or nil at the end, after the deadline, or past the
        /// protocol's line length.
        private func readLine() -> [UInt8]? {
            while true {
                if let newline = buffer.firstIndex(of: 10) {
                    let line = Array(buffer[..<newline])
                    // Wiped where it was before the rest moves down over it: the line may be the passcode.
                    buffer.withUnsafeMutableBytes {
                        SecureMemory.wipe(UnsafeMutableRawBufferPointer(rebasing: $0[...newline]))
                    }
                    buffer.removeSubrange(...newline)
                    return line
                }
                guard buffer.count <= 4096 else { return nil }
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else { return nil }
                var entry = pollfd(fd: input, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + 1)
                let ready = poll(&entry, 1, milliseconds)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { return nil }
                var chunk = [UInt8](repeating: 0, count: 512)
                defer { wipe(&chunk) }
                let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return nil }
                buffer.append(contentsOf: chunk[..<count])
            }
        }

        private func wipe(_ bytes: inout [UInt8]) {
            bytes.withUnsafeMutableBytes { SecureMemory.wipe($0) }
            bytes.removeAll()
        }

        /// Assuan's escaping of a parameter: %, CR, LF and other control characters as %XX; at most
        /// 900 bytes, so the line stays under the protocol's 1,000.
        static func escape(_ text: String) -> String {
            var out = ""
            for byte in text.utf8.prefix(900) {
                if byte == UInt8(ascii: "%") || byte < 32 {
                    out += String(format: "%%%02X", byte)
                } else {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                }
            }
            return out
        }

        /// Undoes %XX escapes of a data line into `pin`; false on a malformed escape.
        static func unescape(_ line: ArraySlice<UInt8>, into pin: inout [UInt8]) -> Bool {
            var index = line.startIndex
            while index < line.endIndex {
                let byte = line[index]
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < line.endIndex, let high = hex(line[index + 1]), let low = hex(line[index + 2])
                    else { return false }
                    pin.append(high << 4 | low)
                    index += 3
                } else {
                    pin.append(byte)
                    index += 1
                }
            }
            return true
        }

        private static func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}

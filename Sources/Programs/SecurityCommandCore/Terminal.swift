import FoundationEssentials
import KeychainBytes

#if canImport(Glibc)
    import Glibc
#endif

/// Reading secrets: from the terminal without echo, or from standard input when it is not a terminal.
/// Passcodes go straight into wiped memory (`SecureBytes`), never through a `String`.
package enum Terminal {
    package static var inputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Prompts on standard error and reads one line from the terminal with echo turned off.
    package static func readSecret(prompt: String) -> SecureBytes? {
        // Echo goes off before the prompt appears, and without flushing input: whatever is typed
        // once the prompt shows must be neither echoed nor thrown away.
        var original = termios()
        let canSilence = tcgetattr(STDIN_FILENO, &original) == 0
        if canSilence {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &silent)
        }
        defer {
            if canSilence { _ = tcsetattr(STDIN_FILENO, TCSANOW, &original) }
        }
        StandardError.write(prompt)
        return readLine()
    }

    /// A passcode typed on the terminal without echo: Enter alone is no passcode, and is asked again.
    /// Nil at the end of input.
    package static func readPasscode(prompt: String) -> SecureBytes? {
        while let line = readSecret(prompt: prompt) {
            if line.count > 0 { return line }
        }
        return nil
    }

    /// One line of standard input without its line ending, read a byte at a time (nothing past the line
    /// is consumed, so a later line stays for the next reader) into a buffer that is wiped; nil at the
    /// end of input with nothing read. A line longer than `limit` bytes is refused (nil).
    package static func readLine(limit: Int = 4096) -> SecureBytes? {
        var buffer = [UInt8](repeating: 0, count: limit + 1)
        defer { SecureMemory.wipe(&buffer) }
        var count = 0
        var endOfInput = true
        while count <= limit {
            let got = buffer.withUnsafeMutableBytes { bytes in
                bytes.baseAddress.map { Glibc.read(STDIN_FILENO, $0 + count, 1) } ?? -1
            }
            if got < 0, errno == EINTR { continue }
            guard got == 1 else { break }
            endOfInput = false
            if buffer[count] == UInt8(ascii: "\n") { break }
            count += 1
        }
        guard !endOfInput, count <= limit else { return nil }
        if count > 0, buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        return SecureBytes(copying: buffer[0..<count])
    }

    /// Prompts and reads one line with echo (for yes/no questions).
    package static func ask(_ prompt: String) -> String? {
        StandardError.write(prompt)
        return readLine().map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
    }

    /// The most a password read from standard input may hold.
    package static let maximumInput = 64 << 20

    package enum InputProblem: Error {
        case tooLarge
        case unreadable(String)
    }

    /// All of standard input, without one trailing newline: a password piped in by a script. Refused
    /// when it holds more than `maximumInput` bytes (it is not read further) or cannot be read: a read
    /// that fails part-way must not store part of a secret. Read into a buffer that doubles as it
    /// fills, each outgrown one wiped, and handed over as `SecureBytes`.
    package static func readStandardInput() throws(InputProblem) -> SecureBytes {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        defer { SecureMemory.wipe(&buffer) }
        var count = 0
        while true {
            if count == buffer.count {
                guard buffer.count <= maximumInput else { throw .tooLarge }
                var larger = [UInt8](repeating: 0, count: buffer.count * 2)
                larger.withUnsafeMutableBytes { target in
                    buffer.withUnsafeBytes { target.copyMemory(from: $0) }
                }
                SecureMemory.wipe(&buffer)
                buffer = larger
            }
            let got = buffer.withUnsafeMutableBytes { bytes in
                bytes.baseAddress.map { Glibc.read(STDIN_FILENO, $0 + count, bytes.count - count) } ?? -1
            }
            if got < 0, errno == EINTR { continue }
            if got < 0 { throw .unreadable(String(cString: strerror(errno))) }
            if got == 0 { break }
            count += got
            if count > maximumInput { throw .tooLarge }
        }
        if count > 0, buffer[count - 1] == UInt8(ascii: "\n") { count -= 1 }
        if count > 0, buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        return SecureBytes(copying: buffer[0..<count])
    }
}

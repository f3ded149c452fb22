#if canImport(Glibc)
    import Glibc
#endif

/// The command's messages and prompts, written straight to file descriptor 2: unbuffered, as a prompt
/// must appear before the command waits for input.
package enum StandardError {
    /// Writes `text` whole (retrying a write cut short or interrupted); a closed or failing standard
    /// error loses the message, which has nowhere else to go.
    package static func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

import Dispatch
import Foundation
import Synchronization

/// What a child process gave back.
public struct ChildOutput: Sendable {
    public let status: Int32
    public let stdout: Data
    public let stderr: Data
}

/// Runs a child process with pipes on its standard streams, reading its output and its errors at once
/// and writing its input at the same time: read one after the other, a child that fills the pipe of
/// the other (64 KiB) waits for it to be read while this waits for the first to end, and neither
/// moves again.
public enum ChildProcess {
    /// Runs `process` (set up but not started). `errorsToOutput` sends standard error into the
    /// output's pipe (one stream, in the order written); `stderr` is then empty.
    public static func run(_ process: Process, input: Data? = nil, errorsToOutput: Bool = false) throws -> ChildOutput {
        let output = Pipe()
        let errors = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = errorsToOutput ? output : errors
        process.standardInput = stdin
        try process.run()
        let collected = Mutex<(stdout: Data, stderr: Data)>((Data(), Data()))
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            let bytes = output.fileHandleForReading.readDataToEndOfFile()
            collected.withLock { $0.stdout = bytes }
        }
        if !errorsToOutput {
            DispatchQueue.global().async(group: group) {
                let bytes = errors.fileHandleForReading.readDataToEndOfFile()
                collected.withLock { $0.stderr = bytes }
            }
        }
        DispatchQueue.global().async(group: group) {
            if let input { stdin.fileHandleForWriting.write(input) }
            try? stdin.fileHandleForWriting.close()
        }
        group.wait()
        process.waitUntilExit()
        if errorsToOutput { try? errors.fileHandleForReading.close() }
        let (stdout, stderr) = collected.withLock { $0 }
        return ChildOutput(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }
}

import Foundation
import KeychainWire

/// A long control's progress (a backup, a restore), sent to its caller as progress frames before the
/// answer: at most one a percent, so a request sends at most 101 whatever the keychain's size. A
/// caller that does not read them is sent no more after the first that cannot be written within the
/// stall timeout; the control itself goes on, and its connection ends without an answer (part of a
/// frame may have gone, after which nothing more can be read as frames).
final class ProgressFrames {
    private let stream: FrameStream
    private let id: UInt32
    private let stall: Duration
    private var lastPercent = -1
    /// A progress frame could not be written: the stream is no longer whole.
    private(set) var broken = false

    init(stream: FrameStream, id: UInt32, stall: Duration) {
        self.stream = stream
        self.id = id
        self.stall = stall
    }

    func report(_ done: Int, _ total: Int) {
        guard !broken, total > 0 else { return }
        let percent = Int(min(100, Double(max(0, done)) * 100 / Double(total)))
        guard percent != lastPercent else { return }
        lastPercent = percent
        do {
            try stream.writeFrame(WireCodec.progressFrame(done: min(done, total), total: total, id: id), stall: stall)
        } catch {
            broken = true
        }
    }
}

import Foundation
import KeychainCore

/// Who a connection's process is, as the daemon's decisions see it: facts the kernel gave when it
/// connected, never anything it said. `CallerIdentity` finds them for a real connection; a test gives
/// its own, so that every decision runs in-process without a second process or a second user.
protocol PeerIdentity: Sendable {
    var uid: uid_t { get }
    var pid: Int32 { get }
    /// The scope its authentication contexts live in (the process, by pid and start time).
    var contextScope: String { get }
    /// Its terminal session (session id, leader's start time, tty), for reusing a tool's approval.
    var terminalSession: String? { get }
    /// The executable it runs, or why it cannot be trusted to be that program.
    var executable: Result<RunningExecutable, KeychainError> { get }
    /// Whether it now runs another executable than when it connected (its connection then closes).
    var hasChangedExecutable: Bool { get }
    /// `decide` once per connection, then its answer: whether its executable is a general-purpose tool.
    func isKnownTool(_ decide: () -> Bool) -> Bool
    /// Whether `reason` differs from the last refusal logged for it (and records it).
    func isNewRefusal(_ reason: String) -> Bool
    /// Its controlling pseudo-terminal when that is its user's: where a prompt for it can ask when no
    /// graphical session can.
    var controllingTerminal: String? { get }
}

extension PeerIdentity {
    /// A peer made up by a test has no terminal.
    var controllingTerminal: String? { nil }
}

extension CallerIdentity: PeerIdentity {
    var uid: uid_t { peer.uid }
    var pid: Int32 { peer.pid }
    var contextScope: String { peer.contextScope }
    var terminalSession: String? { peer.terminalSession }
    var executable: Result<RunningExecutable, KeychainError> { identified }
    var controllingTerminal: String? { peer.controllingTerminal }
}

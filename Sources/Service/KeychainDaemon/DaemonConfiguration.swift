import Foundation
import KeychainTPMRoot

/// How a daemon runs: for one user, or for the whole system.
public struct DaemonConfiguration: Sendable {
    public enum Mode: String, Sendable {
        /// One keychain, the user's own (the embedded keychain's directory), served to that user's
        /// processes only. Stops other apps' API calls and mistakes; not a process of the same user that
        /// reads the files.
        case user
        /// One keychain per client uid, under a directory only the daemon's own user can read. Stops that
        /// same-user process too: the files are out of its reach, and only the daemon decides.
        case system
    }

    public var mode: Mode
    /// User mode: the keychain directory. System mode: the directory holding `users/<uid>`.
    public var home: String
    /// User mode only: where the device root is (nil: `device-root` in `home`).
    public var deviceRootPath: String?
    public var socketPath: String
    /// Locks every keychain that has a passcode after this long without an item request.
    public var idleLock: Duration?
    /// The system bus to follow systemd-logind's sessions on (a D-Bus address): a session that locks
    /// locks its user's keychain. Nil: sessions are not followed.
    public var sessionBus: String?
    /// The `pinentry` program the daemon asks the device passcode with (`--pinentry`); nil: the
    /// passcode cannot be asked for, and constraints that need it are not satisfied.
    public var pinentryProgram: String?
    /// Biometry from the simulated sensor (default), or from a fingerprint reader through fprintd on
    /// the system bus (`--biometry fprintd`), verifying the fingers of each keychain's user.
    public var useFprintd = false
    /// A simulated companion device (`--companion simulated`); none otherwise.
    public var simulatedCompanion = false
    /// The TPM new keychains get their device root in, as a TCTI string (`--tpm`, `KEYCHAIN_TPM`):
    /// `.automatic` uses `/dev/tpmrm0` when it exists; `.none`, no TPM (software roots only).
    public var tpm: TPMChoice = .automatic
    /// The dictionary-attack parameters a new TPM root sets (`--tpm-lockout`).
    public var tpmLockout = TPMLockoutPolicy.standard

    /// Which TPM the daemon uses.
    public enum TPMChoice: Sendable, Equatable {
        case automatic
        case none
        case tcti(String)
    }
    /// Honour registry entries that trust an executable by path alone (rebuilt test binaries). Never
    /// the default; `security app list` says when it is on.
    public var development: Bool
    /// Connections served at once; more are closed at once (and logged).
    public var maximumConnections: Int
    /// How long a connection may sit between requests, and how long a frame may stall midway.
    public var idleTimeout: Duration
    public var stallTimeout: Duration

    public init(
        mode: Mode, home: String, deviceRootPath: String? = nil, socketPath: String, idleLock: Duration? = nil,
        sessionBus: String? = nil, pinentryProgram: String? = nil, development: Bool = false,
        maximumConnections: Int = 1024,
        idleTimeout: Duration = .seconds(300),
        stallTimeout: Duration = .seconds(5)
    ) {
        self.mode = mode
        self.home = home
        self.deviceRootPath = deviceRootPath
        self.socketPath = socketPath
        self.idleLock = idleLock
        self.sessionBus = sessionBus
        self.pinentryProgram = pinentryProgram
        self.development = development
        self.maximumConnections = maximumConnections
        self.idleTimeout = idleTimeout
        self.stallTimeout = stallTimeout
    }
}

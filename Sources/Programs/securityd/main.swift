// securityd: the keychain daemon. One owner for a keychain (user mode) or for every user's keychain
// (system mode): clients reach items only through it, and it decides who they are.

import CProcessControl
import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainDBus
import KeychainDaemon
import KeychainSystem
import KeychainTPMRoot
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

let usage = """
    usage: securityd [--system] [--home DIR] [--socket PATH] [--idle-lock SECONDS] [--follow-session-lock]
                     [--pinentry PROGRAM] [--biometry simulated|fprintd] [--companion simulated] [--development]
                     [--exit-with-parent] [--stall-timeout-ms MS] [--idle-timeout-ms MS]
                     [--tpm TCTI|none] [--tpm-lockout TRIES:SECONDS] [--secret-service [--replace]]
           securityd --help | --version | --man

      (default)        serve this user's keychain (KEYCHAIN_HOME, else $XDG_DATA_HOME/keychain, else
                       ~/.local/share/keychain) on KEYCHAIN_SOCKET, else $XDG_RUNTIME_DIR/keychain/securityd.sock
      --system         serve one keychain per client uid under --home (default \(KeychainLocations.systemHome))
                       on a socket every user may connect to (default \(KeychainLocations.systemSocket))
      --home DIR       where the keychain (user mode) or the users' keychains (--system) are
      --socket PATH    the socket to listen on (a socket systemd passes is used instead)
      --idle-lock S    lock each keychain with a passcode after S seconds without an item request from
                       one of its own permitted apps
      --follow-session-lock
                       lock a user's keychain when their login session locks (systemd-logind, on the
                       system bus: DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket)
      --pinentry P     ask for the device passcode (access controls with devicePasscode, userPresence
                       without biometry) with this pinentry program; without it the passcode is never asked
      --biometry B     biometry from the simulated sensor (simulated, the default; security biometry drives
                       it) or from a fingerprint reader through fprintd on the system bus (fprintd)
      --companion simulated
                       a simulated companion device (security companion) for kSecAccessControlCompanion;
                       without it no companion exists (anyone who drives it satisfies such ACLs)
      --development    honour app registry entries trusted by path alone; let any user drive the
                       simulated biometric sensor of a system daemon (never for production)
      --exit-with-parent
                       for supervisors and tests: end when the process that started the daemon ends
      --stall-timeout-ms MS
                       drop a connection whose frame stalls midway for MS milliseconds (default 5000)
      --idle-timeout-ms MS
                       close a connection idle between requests for MS milliseconds (default 300000)
      --tpm TCTI       make new keychains' device roots in this TPM (a tpm2-tss TCTI string:
                       device:/dev/tpmrm0, swtpm:path=SOCKET); none: the software root only. Default:
                       $KEYCHAIN_TPM, else /dev/tpmrm0 when it exists. A keychain made with a TPM root
                       opens only with its TPM (docs/tpm.md)
      --tpm-lockout T:S  the dictionary-attack parameters a new TPM root sets: T wrong passcodes, then
                       one more every S seconds (default 32:600)
      --secret-service also serve the freedesktop Secret Service (org.freedesktop.secrets) from this
                       keychain on the session bus (the bus that started the daemon, else
                       DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus), each program seeing only its
                       own items (user mode only; docs/secret-service.md). The name is taken only when
                       no one holds it
      --replace        with --secret-service: take the name over from the program that holds it
      --help           this text
      --version        the daemon's version
      --man            this text as a manual page (roff): securityd --man > securityd.8

    """

func fail(_ message: String, status: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data("securityd: \(message)\n".utf8))
    exit(status)
}

var system = false
var home: String?
var socketPath = getenv("KEYCHAIN_SOCKET").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
var idleLock: Duration?
var development = false
var followSessionLock = false
var pinentry: String?
var useFprintd = false
var simulatedCompanion = false
var stall = Duration.seconds(5)
var idle = Duration.seconds(300)
var tpmChoice: DaemonConfiguration.TPMChoice =
    getenv("KEYCHAIN_TPM").map { String(cString: $0) }.map { $0 == "none" ? .none : .tcti($0) } ?? .automatic
var tpmLockout = TPMLockoutPolicy.standard
var secretService = false
var replaceSecretService = false
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    func value() -> String {
        guard let value = arguments.next() else { fail("\(argument) needs a value\n\(usage)") }
        return value
    }
    switch argument {
    case "--system": system = true
    case "--home": home = value()
    case "--socket": socketPath = value()
    case "--idle-lock":
        guard let seconds = Int(value()), seconds > 0 else { fail("--idle-lock takes a number of seconds") }
        idleLock = .seconds(seconds)
    case "--development": development = true
    case "--follow-session-lock": followSessionLock = true
    case "--companion":
        guard value() == "simulated" else { fail("--companion takes simulated") }
        simulatedCompanion = true
    case "--biometry":
        switch value() {
        case "simulated": useFprintd = false
        case "fprintd": useFprintd = true
        default: fail("--biometry takes simulated or fprintd")
        }
    case "--pinentry":
        let program = value()
        var info = stat()
        guard program.hasPrefix("/"), access(program, X_OK) == 0, stat(program, &info) == 0 else {
            fail("--pinentry takes the absolute path of an executable program")
        }
        // The daemon runs it: a program that someone else could change would run as the daemon.
        guard info.st_uid == 0 || info.st_uid == getuid(), info.st_mode & 0o022 == 0 else {
            fail("--pinentry \(program) must belong to root or this user and be writable by no one else")
        }
        pinentry = program
    case "--exit-with-parent":
        // For a parent that supervises the daemon (tests): a parent that crashes leaves no daemon behind.
        _ = process_control_die_with_parent()
    case "--stall-timeout-ms":
        guard let milliseconds = Int(value()), milliseconds > 0 else { fail("--stall-timeout-ms takes a number") }
        stall = .milliseconds(milliseconds)
    case "--idle-timeout-ms":
        guard let milliseconds = Int(value()), milliseconds > 0 else { fail("--idle-timeout-ms takes a number") }
        idle = .milliseconds(milliseconds)
    case "--tpm":
        let tcti = value()
        tpmChoice = tcti == "none" ? DaemonConfiguration.TPMChoice.none : .tcti(tcti)
    case "--tpm-lockout":
        let parts = value().split(separator: ":").map { UInt32($0) }
        guard parts.count == 2, let tries = parts[0], let seconds = parts[1], tries > 0, seconds > 0 else {
            fail("--tpm-lockout takes TRIES:SECONDS, two positive numbers")
        }
        tpmLockout = TPMLockoutPolicy(maxTries: tries, recoveryTime: seconds)
    case "--secret-service": secretService = true
    case "--replace": replaceSecretService = true
    case "-h", "--help":
        print(usage, terminator: "")
        exit(0)
    case "--version":
        print("securityd (swift-keychain) \(ProjectVersion.string)")
        exit(0)
    case "--man":
        print(manPage(usage: usage), terminator: "")
        exit(0)
    default: fail("unknown option \(argument)\n\(usage)")
    }
}

if replaceSecretService, !secretService { fail("--replace goes with --secret-service") }
if secretService, system { fail("--secret-service serves one user's keychain: not with --system") }

// No core files, no ptrace or /proc/<pid>/mem by other processes of this user, no crash dumps of memory.
guard ProcessProtection.protectProcess() else { fail("cannot make the process non-dumpable", status: 1) }

/// Started by systemd with the listening socket already open (socket activation).
let socketActivated = getenv("LISTEN_PID").flatMap { pid_t(String(cString: $0)) } == getpid()

let defaultSocket = system ? KeychainLocations.systemSocket : KeychainLocations.userSocket
let resolvedSocketPath: String
if let path = socketPath ?? defaultSocket {
    resolvedSocketPath = path
} else if socketActivated {
    resolvedSocketPath = "(the socket systemd passed)"
} else {
    fail("no socket: set KEYCHAIN_SOCKET or XDG_RUNTIME_DIR, or give --socket")
}

var configuration = DaemonConfiguration(
    mode: system ? .system : .user,
    home: home ?? (system ? KeychainLocations.systemHome : KeychainLocations.userDirectory),
    deviceRootPath: system ? nil : getenv("KEYCHAIN_DEVICE_ROOT").map { String(cString: $0) },
    socketPath: resolvedSocketPath,
    idleLock: idleLock, sessionBus: followSessionLock ? DBusConnection.systemBusAddress : nil,
    pinentryProgram: pinentry, development: development,
    idleTimeout: idle, stallTimeout: stall)
configuration.useFprintd = useFprintd
configuration.simulatedCompanion = simulatedCompanion
configuration.tpm = tpmChoice
configuration.tpmLockout = tpmLockout
// The TPM stack logs every refused command to standard error, expected ones too (a wrong passcode):
// its errors reach the daemon's log through the keychain's own messages instead.
if getenv("TSS2_LOG") == nil { setenv("TSS2_LOG", "all+NONE", 1) }

// The signals that stop the daemon are taken by the main thread alone (sigwait below): blocked here,
// before any other thread starts, so that every thread inherits the mask.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
for stopSignal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stopSignals, stopSignal) }
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
signal(SIGPIPE, SIG_IGN)
// A file-size limit makes a write past it fail (errSecDiskFull) instead of killing the daemon.
signal(SIGXFSZ, SIG_IGN)

let server: DaemonServer
let daemon: KeychainDaemon
do {
    daemon = try KeychainDaemon(configuration: configuration)
    server = try DaemonServer(daemon: daemon)
} catch let error as KeychainError {
    fail(error.reason, status: 1)
} catch {
    fail("\(error)", status: 1)
}

/// Set when the daemon stopped listening because accepting failed: it then stops as on SIGTERM and
/// exits with an error, so that its supervisor starts it again.
let listeningFailed = Atomic<Bool>(false)
let listening = Thread {
    if !server.run() {
        listeningFailed.store(true, ordering: .releasing)
        kill(getpid(), SIGTERM)
    }
}
listening.start()

/// The Secret Service, when asked for: a bus or a name it cannot have is logged, and the keychain's
/// socket is served all the same.
let secretServiceServer: SecretServiceServer?
if secretService {
    // The bus that started the daemon (D-Bus activation without systemd), else the session's.
    func variable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }
    let address =
        variable("DBUS_STARTER_ADDRESS") ?? variable("DBUS_SESSION_BUS_ADDRESS")
        ?? variable("XDG_RUNTIME_DIR").map { "unix:path=" + $0 + "/bus" }
    do {
        guard let address else {
            throw KeychainError.notAvailable("no session bus: DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset")
        }
        secretServiceServer = try SecretServiceServer(daemon: daemon, address: address, replace: replaceSecretService)
    } catch {
        DaemonLog.error("the Secret Service is not served: \(error)")
        secretServiceServer = nil
    }
    if let secretServiceServer {
        Thread {
            if !secretServiceServer.run() { DaemonLog.error("the Secret Service stopped") }
        }.start()
    }
} else {
    secretServiceServer = nil
}

var received: Int32 = 0
sigwait(&stopSignals, &received)
let failed = listeningFailed.load(ordering: .acquiring)
DaemonLog.info(
    failed
        ? "no longer listening: finishing the requests in progress"
        : "signal \(received): finishing the requests in progress")
secretServiceServer?.stop()
server.stop()
DaemonLog.info("stopped")
exit(failed ? 1 : 0)

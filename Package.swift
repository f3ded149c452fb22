// swift-tools-version:6.0
import PackageDescription

// Layers, bottom to top (dependencies point down only):
//   CSQLite, COpenSSL          system libraries from Debian (libsqlite3-dev, libssl-dev)
//   CProcessControl            prctl in a form Swift can call (header only)
//   KeychainCrypto             AES-256-GCM, HMAC, scrypt, randomness, wiped and pinned key buffers
//   KeychainCore               what a keychain is asked and answers: values, errors, KeychainService
//   KeychainDBus               a small D-Bus client (the system bus, for systemd-logind's session lock)
//   KeychainWire               those requests and answers as the daemon's frames (for securityd and its clients)
//   KeychainStorage            SQLite: connections, cached statements, the item schema
//   KeychainKeybag             device root, class keys, passcode, lock state, safe files
//   KeychainEngine             item semantics: parsing, search, sealing, access groups; the in-process service
//   KeychainDaemon             securityd: the socket, who is calling (kernel + app registry), one lock state
//   KeychainClient             the daemon as a KeychainService, over its socket
//   Security                   Apple's SecItem API over a KeychainService (the embedded engine by default)
//   LocalAuthentication        LAContext; re-exports Security
//   SecurityCommandLine        the security command's verbs (over Security), run by SecurityCommand

// A shell command starts for every call, so the release `security` links the Swift runtime and Foundation
// in: about 4 ms less dynamic linking per start. The static Foundation needs its C parts named (the
// modules were compiled against the shared one, whose link entries omit them), and the toolchain's lld
// does the link because gold warns about a libc function that the static Foundation references.
let staticRuntime = [
    "-static-stdlib", "-use-ld=lld",
    "-lCoreFoundation", "-l_FoundationICU", "-l_FoundationCShims", "-l_FoundationCollections",
]

let package = Package(
    name: "swift-keychain",
    products: [
        .library(name: "Security", targets: ["Security"]),
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "KeychainEngine", targets: ["KeychainEngine"]),
        .executable(name: "keychain-bench", targets: ["keychain-bench"]),
        .executable(name: "security", targets: ["SecurityCommand"]),
        .executable(name: "securityd", targets: ["securityd"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Header-only: fixed-argument forms of prctl, which Swift cannot call (it is variadic).
        .systemLibrary(name: "CProcessControl"),
        .target(name: "KeychainDBus"),
        .target(name: "KeychainCrypto", dependencies: ["COpenSSL", "CProcessControl"]),
        .target(name: "KeychainCore", dependencies: ["KeychainCrypto"]),
        .target(name: "KeychainWire", dependencies: ["KeychainCore", "KeychainCrypto"]),
        .target(name: "KeychainStorage", dependencies: ["CSQLite"]),
        .target(name: "KeychainKeybag", dependencies: ["KeychainCore", "KeychainCrypto"]),
        .target(
            name: "KeychainEngine",
            dependencies: ["KeychainCore", "KeychainCrypto", "KeychainStorage", "KeychainKeybag", "KeychainDBus"]
        ),
        .target(
            name: "KeychainDaemon",
            dependencies: [
                "CProcessControl", "KeychainCore", "KeychainCrypto", "KeychainWire", "KeychainKeybag", "KeychainEngine",
                "KeychainDBus",
            ]
        ),
        .executableTarget(
            name: "securityd", dependencies: ["KeychainDaemon", "KeychainDBus", "KeychainCrypto", "CProcessControl"]),
        .target(name: "KeychainClient", dependencies: ["CProcessControl", "KeychainCore", "KeychainWire"]),
        .target(
            name: "Security", dependencies: ["KeychainCore", "KeychainEngine", "KeychainClient", "KeychainCrypto"]),
        .target(name: "LocalAuthentication", dependencies: ["Security", "KeychainCore", "KeychainCrypto"]),
        .executableTarget(
            name: "keychain-bench",
            dependencies: [
                "KeychainEngine", "KeychainCrypto", "KeychainKeybag", "KeychainStorage", "Security", "KeychainClient",
                "KeychainCore", "COpenSSL",
            ]
        ),
        .target(name: "SecurityCommandLine", dependencies: ["Security", "KeychainCore", "KeychainCrypto"]),
        .executableTarget(
            name: "SecurityCommand",
            dependencies: ["SecurityCommandLine", "Security", "KeychainCrypto"],
            linkerSettings: [.unsafeFlags(staticRuntime, .when(platforms: [.linux], configuration: .release))]
        ),
        .executableTarget(
            name: "keychain-test-helper",
            dependencies: ["Security", "KeychainCore", "KeychainCrypto"]
        ),
        // Test support (not a product): a securityd of its own for tests that need the daemon.
        .target(
            name: "KeychainTestSupport", dependencies: ["KeychainClient", "KeychainCore", "KeychainDBus"],
            path: "Tests/KeychainTestSupport"),
        .testTarget(name: "KeychainCryptoTests", dependencies: ["KeychainCrypto"]),
        .testTarget(name: "KeychainCoreTests", dependencies: ["KeychainCore", "KeychainCrypto"]),
        .testTarget(name: "KeychainDBusTests", dependencies: ["KeychainDBus"]),
        .testTarget(name: "KeychainWireTests", dependencies: ["KeychainWire", "KeychainCore", "KeychainCrypto"]),
        .testTarget(name: "KeychainKeybagTests", dependencies: ["KeychainKeybag", "KeychainCore", "KeychainCrypto"]),
        .testTarget(
            name: "KeychainEngineTests",
            dependencies: [
                "CSQLite", "KeychainCore", "KeychainEngine", "KeychainKeybag", "KeychainStorage", "KeychainCrypto",
                "keychain-test-helper", "KeychainTestSupport", "KeychainDBus",
            ]
        ),
        .testTarget(
            name: "SecurityCommandTests",
            dependencies: [
                "SecurityCommand", "SecurityCommandLine", "Security", "KeychainEngine", "keychain-test-helper",
                "KeychainTestSupport", "securityd", "keychain-bench",
            ]),
        .testTarget(
            name: "KeychainDaemonTests",
            dependencies: [
                "KeychainDaemon", "KeychainClient", "KeychainWire", "KeychainCore", "KeychainCrypto", "Security",
                "KeychainDBus", "KeychainEngine",
                "KeychainTestSupport", "securityd", "SecurityCommand", "keychain-test-helper",
            ]),
        .testTarget(
            name: "SecurityTests",
            dependencies: [
                "Security", "LocalAuthentication", "KeychainCore", "KeychainEngine", "KeychainCrypto",
                "keychain-test-helper", "KeychainTestSupport", "securityd",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

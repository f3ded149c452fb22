// swift-tools-version:6.0
import PackageDescription

// Layers, bottom to top; dependencies point down only, and Sources/ is laid out by layer:
//   Base/      KeychainBytes        wiped buffers, byte reader/writer, constant-time compare, hex, clocks (no C library)
//              KeychainCore         the vocabulary: values and their one encoding, requests, errors, KeychainService
//   Platform/  CSQLite, COpenSSL,   system libraries from Debian (libsqlite3-dev, libssl-dev, libtss2-dev,
//              CTSS2, CSystemdBus,  libsystemd-dev's sd-bus header); prctl for Swift
//              CProcessControl
//              KeychainCrypto       OpenSSL: AES-GCM, HMAC, HKDF, scrypt, keys, certificates, randomness
//              KeychainStorage      SQLite (loaded on first use): connections, cached statements, the item schema
//              KeychainSystem       the operating system: safe files, the owner lock, process protection
//              KeychainDBus         D-Bus over sd-bus, loaded on first use (systemd-logind's session lock, fprintd)
//              KeychainTPM          tpm2-tss ESYS (libtss2-dev): salted sessions, sealing, NV counters, lockout
//              KeychainTLS          TLS 1.3 through libssl (libssl-dev), loaded on first use: the sync server's
//                                   listener and its clients
//   Engine/    KeychainKeybag       device root, class keys, passcode, lock state
//              KeychainEngine       item semantics: parsing, search, sealing, access groups; the in-process service
//              KeychainTPMRoot      the device root in a TPM (the daemon's; embedded processes do not link it)
//              KeychainAuthenticators  behind the engine's protocols: the simulated sensor, fprintd, pinentry
//   Service/   KeychainWire         requests and answers as the daemon's frames
//              KeychainDaemon       securityd: the socket, who is calling (kernel + app registry), one lock state
//              KeychainClient       the daemon as a KeychainService, over its socket
//              KeychainSyncStore    the sync server's storage on PostgreSQL (libpq-dev): accounts, records, change log
//              KeychainSyncProtocol the sync protocol: frames, devices, trust views, signed batches and heads
//              KeychainSyncServer   keychain-syncd's sessions: authenticating devices, checking what they sign
//              KeychainSyncAgent    a keychain's side: enrollment, trust, the key tree, merging, push and pull
//   Facade/    KeychainStatus       Apple's OSStatus codes and messages, and each keychain error's status
//              KeychainEnvironment  the service this process's environment chooses: the daemon at its socket, or
//                                   the embedded engine on its directory, for the caller the environment describes
//              Security             Apple's SecItem API over a KeychainService (the embedded engine by default)
//              LocalAuthentication  LAContext; re-exports Security
//   Programs/  security (with security-full), securityd, keychain-bench, keychain-test-helper

// A shell command starts for every call, so the release `security` links the Swift runtime and Foundation
// in: about 4 ms less dynamic linking per start. The static Foundation needs its C parts named (the
// modules were compiled against the shared one, whose link entries omit them), and the toolchain's lld
// does the link because gold warns about a libc function that the static Foundation references.
let staticRuntime = [
    "-static-stdlib", "-use-ld=lld",
    "-lCoreFoundation", "-l_FoundationICU", "-l_FoundationCShims", "-l_FoundationCollections",
]

// The same for a program on FoundationEssentials alone (the lean `security`, the benchmark's lean
// programs): its static library needs its C parts named too.
let leanStaticRuntime = ["-static-stdlib", "-use-ld=lld", "-l_FoundationCShims", "-l_FoundationCollections"]

let package = Package(
    name: "swift-keychain",
    products: [
        .library(name: "Security", targets: ["Security"]),
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "KeychainCore", targets: ["KeychainCore"]),
        .library(name: "KeychainEngine", targets: ["KeychainEngine"]),
        .executable(name: "keychain-bench", targets: ["keychain-bench"]),
        .executable(name: "keychain-bench-floor", targets: ["keychain-bench-floor"]),
        .executable(name: "keychain-bench-crypto-floor", targets: ["keychain-bench-crypto-floor"]),
        .executable(name: "keychain-bench-lean-client", targets: ["keychain-bench-lean-client"]),
        .executable(name: "keychain-bench-lean-embedded", targets: ["keychain-bench-lean-embedded"]),
        .executable(name: "security", targets: ["SecurityCommand"]),
        .executable(name: "security-full", targets: ["SecurityCommandFull"]),
        .executable(name: "securityd", targets: ["securityd"]),
        .executable(name: "keychain-syncd", targets: ["keychain-syncd"]),
    ],
    targets: [
        // Header-only: libsqlite3 (libsqlite3-dev) is loaded when a database is first opened, not linked
        // (see its shim); tests that read a database directly link it themselves.
        .systemLibrary(name: "CSQLite", path: "Sources/Platform/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // Header-only: libcrypto (libssl-dev) is loaded when KeychainCrypto is first used, not linked (see
        // its shim); programs that call OpenSSL directly link it themselves.
        .systemLibrary(name: "COpenSSL", path: "Sources/Platform/COpenSSL", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CTSS2", path: "Sources/Platform/CTSS2",
            pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]
        ),
        // Header-only: sd-bus (libsystemd-dev) is loaded when a bus is first used, not linked (see its shim).
        .systemLibrary(
            name: "CSystemdBus", path: "Sources/Platform/CSystemdBus", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(
            name: "CPostgreSQL", path: "Sources/Platform/CPostgreSQL", pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]),
        .systemLibrary(
            name: "CTLS", path: "Sources/Platform/CTLS", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Header-only: fixed-argument forms of prctl, which Swift cannot call (it is variadic).
        .systemLibrary(name: "CProcessControl", path: "Sources/Platform/CProcessControl"),
        .target(name: "KeychainBytes", path: "Sources/Base/KeychainBytes"),
        .target(name: "KeychainCore", dependencies: ["KeychainBytes"], path: "Sources/Base/KeychainCore"),
        .target(
            name: "KeychainCrypto", dependencies: ["KeychainBytes", "COpenSSL"], path: "Sources/Platform/KeychainCrypto"
        ),
        .target(
            name: "KeychainStorage", dependencies: ["CSQLite", "KeychainSystem"],
            path: "Sources/Platform/KeychainStorage"),
        .target(
            name: "KeychainSystem", dependencies: ["KeychainBytes", "KeychainCore", "CProcessControl"],
            path: "Sources/Platform/KeychainSystem"),
        .target(name: "KeychainDBus", dependencies: ["CSystemdBus"], path: "Sources/Platform/KeychainDBus"),
        .target(name: "KeychainTLS", dependencies: ["CTLS"], path: "Sources/Platform/KeychainTLS"),
        .target(name: "KeychainTPM", dependencies: ["KeychainBytes", "CTSS2"], path: "Sources/Platform/KeychainTPM"),
        .target(
            name: "KeychainKeybag",
            dependencies: ["KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainSystem"],
            path: "Sources/Engine/KeychainKeybag"),
        .target(
            name: "KeychainEngine",
            dependencies: [
                "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainStorage", "KeychainSystem",
                "KeychainKeybag",
                "KeychainDBus",
            ],
            path: "Sources/Engine/KeychainEngine"
        ),
        .target(
            name: "KeychainTPMRoot",
            dependencies: [
                "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainSystem", "KeychainKeybag", "KeychainEngine",
                "KeychainTPM",
            ],
            path: "Sources/Engine/KeychainTPMRoot"
        ),
        .target(
            name: "KeychainAuthenticators",
            dependencies: [
                "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainSystem", "KeychainKeybag", "KeychainEngine",
                "KeychainDBus",
            ],
            path: "Sources/Engine/KeychainAuthenticators"
        ),
        .target(
            name: "KeychainWire", dependencies: ["CProcessControl", "KeychainBytes", "KeychainCore"],
            path: "Sources/Service/KeychainWire"),
        .target(
            name: "KeychainDaemon",
            dependencies: [
                "CProcessControl", "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainSystem", "KeychainWire",
                "KeychainKeybag", "KeychainEngine", "KeychainAuthenticators", "KeychainDBus", "KeychainTPM",
                "KeychainTPMRoot", "KeychainSyncAgent", "KeychainSyncProtocol",
            ],
            path: "Sources/Service/KeychainDaemon"
        ),
        .target(
            name: "KeychainSyncStore", dependencies: ["CPostgreSQL", "KeychainBytes"],
            path: "Sources/Service/KeychainSyncStore"),
        .target(
            name: "KeychainSyncProtocol", dependencies: ["KeychainBytes", "KeychainCrypto", "KeychainTLS"],
            path: "Sources/Service/KeychainSyncProtocol"),
        .target(
            name: "KeychainSyncServer",
            dependencies: [
                "CProcessControl", "KeychainSyncProtocol", "KeychainSyncStore", "KeychainBytes", "KeychainCrypto",
                "KeychainTLS",
            ],
            path: "Sources/Service/KeychainSyncServer"),
        .target(
            name: "KeychainSyncAgent",
            dependencies: [
                "KeychainSyncProtocol", "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainStorage",
                "KeychainEngine",
            ],
            path: "Sources/Service/KeychainSyncAgent"),
        .target(
            name: "KeychainClient", dependencies: ["CProcessControl", "KeychainBytes", "KeychainCore", "KeychainWire"],
            path: "Sources/Service/KeychainClient"),
        .target(name: "KeychainStatus", dependencies: ["KeychainCore"], path: "Sources/Facade/KeychainStatus"),
        .target(
            name: "KeychainEnvironment",
            dependencies: [
                "KeychainBytes", "KeychainCore", "KeychainEngine", "KeychainAuthenticators", "KeychainClient",
            ],
            path: "Sources/Facade/KeychainEnvironment"),
        .target(
            name: "Security",
            dependencies: [
                "KeychainBytes", "KeychainCore", "KeychainEngine", "KeychainAuthenticators", "KeychainClient",
                "KeychainCrypto", "KeychainEnvironment", "KeychainStatus",
            ],
            path: "Sources/Facade/Security"),
        .target(
            name: "LocalAuthentication", dependencies: ["Security", "KeychainBytes", "KeychainCore"],
            path: "Sources/Facade/LocalAuthentication"),
        .executableTarget(
            name: "securityd",
            dependencies: [
                "KeychainDaemon", "KeychainDBus", "KeychainBytes", "KeychainSystem", "CProcessControl",
                "KeychainTPMRoot",
            ],
            path: "Sources/Programs/securityd"),
        .executableTarget(
            name: "keychain-syncd",
            dependencies: ["KeychainSyncServer", "KeychainSyncProtocol", "KeychainSyncStore", "KeychainTLS"],
            path: "Sources/Programs/keychain-syncd"),
        .executableTarget(
            name: "keychain-bench",
            dependencies: [
                "KeychainEngine", "KeychainBytes", "KeychainCrypto", "KeychainKeybag", "KeychainStorage", "Security",
                "KeychainClient", "KeychainCore", "COpenSSL", "KeychainTPM", "KeychainTPMRoot", "KeychainSyncAgent",
                "KeychainSyncProtocol", "KeychainSyncStore",
            ],
            path: "Sources/Programs/keychain-bench",
            // It makes keys with OpenSSL directly, to compare with the keychain's.
            linkerSettings: [.linkedLibrary("crypto")]
        ),
        // The benchmark's floor for a command's start: a static Swift binary that prints a line.
        .executableTarget(
            name: "keychain-bench-floor", path: "Sources/Programs/keychain-bench-floor",
            linkerSettings: [.unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release))]
        ),
        // The floor for an embedded lookup's start: the static Swift floor with libcrypto loaded and the
        // lookup's algorithms fetched.
        .executableTarget(
            name: "keychain-bench-crypto-floor", dependencies: ["COpenSSL"],
            path: "Sources/Programs/keychain-bench-crypto-floor",
            linkerSettings: [
                .linkedLibrary("crypto"),
                .unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        // A client without the facade, Foundation or libcrypto: the same lookup through securityd, measured
        // beside the command. FoundationEssentials' static library needs its C parts named, as above.
        .executableTarget(
            name: "keychain-bench-lean-client", dependencies: ["KeychainBytes", "KeychainCore", "KeychainClient"],
            path: "Sources/Programs/keychain-bench-lean-client",
            linkerSettings: [
                .unsafeFlags(leanStaticRuntime, .when(platforms: [.linux], configuration: .release))
            ]
        ),
        // An embedded lookup by a program with the engine and without the facade or Foundation, measured
        // beside the command.
        .executableTarget(
            name: "keychain-bench-lean-embedded",
            dependencies: ["KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainEngine", "KeychainSystem"],
            path: "Sources/Programs/keychain-bench-lean-embedded",
            linkerSettings: [
                .unsafeFlags(leanStaticRuntime, .when(platforms: [.linux], configuration: .release))
            ]
        ),
        // The command's verbs that need only the keychain service, and what every verb shares (arguments,
        // failures, the terminal, the session): FoundationEssentials, no Security API.
        .target(
            name: "SecurityCommandCore",
            dependencies: [
                "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainEnvironment", "KeychainStatus",
                "KeychainSystem",
            ],
            path: "Sources/Programs/SecurityCommandCore"),
        .target(
            name: "SecurityCommandLine",
            dependencies: [
                "Security", "SecurityCommandCore", "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainEngine",
                "KeychainSyncAgent", "KeychainSyncProtocol",
            ],
            path: "Sources/Programs/SecurityCommandLine"),
        // `security`: the command's lean half, without the Security API or Foundation (FoundationEssentials
        // alone, static as the benchmark's lean programs): it answers the lookups scripts make most and
        // starts `security-full`, beside it, for every other verb.
        .executableTarget(
            name: "SecurityCommand",
            dependencies: ["SecurityCommandCore", "KeychainEnvironment"],
            path: "Sources/Programs/SecurityCommand",
            linkerSettings: [.unsafeFlags(leanStaticRuntime, .when(platforms: [.linux], configuration: .release))]
        ),
        // `security-full`: every verb, over the Security API.
        .executableTarget(
            name: "SecurityCommandFull",
            dependencies: ["SecurityCommandLine", "SecurityCommandCore", "KeychainCore", "KeychainEnvironment"],
            path: "Sources/Programs/SecurityCommandFull",
            linkerSettings: [.unsafeFlags(staticRuntime, .when(platforms: [.linux], configuration: .release))]
        ),
        .executableTarget(
            name: "keychain-test-helper",
            dependencies: ["Security", "KeychainBytes", "KeychainCore", "KeychainCrypto"],
            path: "Sources/Programs/keychain-test-helper"
        ),
        // Test support (not a product): a securityd of its own for tests that need the daemon.
        .target(
            name: "KeychainTestSupport",
            dependencies: ["KeychainClient", "KeychainBytes", "KeychainCore", "KeychainDBus", "KeychainSystem"],
            path: "Tests/KeychainTestSupport"),
        .testTarget(name: "KeychainBytesTests", dependencies: ["KeychainBytes"]),
        .testTarget(
            name: "KeychainCryptoTests", dependencies: ["KeychainBytes", "KeychainCrypto", "KeychainTestSupport"]),
        .testTarget(name: "KeychainCoreTests", dependencies: ["KeychainBytes", "KeychainCore"]),
        .testTarget(name: "KeychainDBusTests", dependencies: ["KeychainDBus", "KeychainTestSupport"]),
        .testTarget(
            name: "KeychainSyncTests",
            dependencies: [
                "KeychainSyncAgent", "KeychainSyncProtocol", "KeychainSyncStore", "KeychainBytes", "KeychainCore",
                "KeychainCrypto", "KeychainEngine", "KeychainTestSupport", "keychain-syncd",
            ]),
        .testTarget(
            name: "KeychainSyncStoreTests", dependencies: ["KeychainSyncStore", "KeychainBytes", "KeychainTestSupport"]),
        .testTarget(
            name: "KeychainTPMTests",
            dependencies: [
                "KeychainTPM", "KeychainTPMRoot", "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainKeybag",
                "KeychainEngine", "KeychainTestSupport", "KeychainSyncAgent", "KeychainSyncProtocol", "keychain-syncd",
            ],
            linkerSettings: [.linkedLibrary("sqlite3")]),
        .testTarget(
            name: "KeychainWireTests",
            dependencies: ["KeychainWire", "KeychainBytes", "KeychainCore", "KeychainCrypto"]),
        .testTarget(
            name: "KeychainKeybagTests",
            dependencies: ["KeychainKeybag", "KeychainBytes", "KeychainCore", "KeychainCrypto", "KeychainSystem"]),
        .testTarget(
            name: "KeychainEngineTests",
            dependencies: [
                "CSQLite", "KeychainBytes", "KeychainCore", "KeychainEngine", "KeychainAuthenticators",
                "KeychainKeybag",
                "KeychainStorage",
                "KeychainCrypto", "KeychainSystem",
                "keychain-test-helper", "KeychainTestSupport", "KeychainDBus",
            ],
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        .testTarget(
            name: "SecurityCommandTests",
            dependencies: [
                "SecurityCommand", "SecurityCommandFull", "SecurityCommandLine", "SecurityCommandCore", "Security",
                "KeychainEngine", "KeychainCore", "KeychainBytes",
                "keychain-test-helper",
                "KeychainTestSupport", "securityd", "keychain-bench", "keychain-syncd",
            ]),
        .testTarget(
            name: "KeychainDaemonTests",
            dependencies: [
                "CProcessControl", "KeychainDaemon", "KeychainClient", "KeychainWire", "KeychainBytes", "KeychainCore",
                "KeychainCrypto", "Security",
                "KeychainDBus", "KeychainEngine",
                "KeychainTestSupport", "securityd", "SecurityCommand", "SecurityCommandFull", "keychain-test-helper",
                "keychain-bench-lean-client",
            ]),
        .testTarget(
            name: "SecurityTests",
            dependencies: [
                "Security", "LocalAuthentication", "KeychainBytes", "KeychainCore", "KeychainEngine", "KeychainCrypto",
                "keychain-test-helper", "KeychainTestSupport", "securityd",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

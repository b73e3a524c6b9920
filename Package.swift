// swift-tools-version: 6.1
import PackageDescription

// scripts/test sets VAULT_WARNINGS_AS_ERRORS=1: the project's own Swift targets then fail to
// build on any warning, while dependencies keep their warnings to themselves.
let strict: [SwiftSetting] = Context.environment["VAULT_WARNINGS_AS_ERRORS"] == "1" ? [.unsafeFlags(["-warnings-as-errors"])] : []

let package = Package(
    name: "vault",
    products: [
        .executable(name: "vault", targets: ["vault"]),
        .library(name: "VaultCore", targets: ["VaultCore"]),
        .library(name: "VaultHolders", targets: ["VaultHolders"]),
        .library(name: "VaultNet", targets: ["VaultNet"]),
        .library(name: "VaultRelay", targets: ["VaultRelay"]),
        .library(name: "VaultRelayClient", targets: ["VaultRelayClient"]),
        // Grouper's framework (Docs/API.md): an app's objects synced through a key's group.
        .library(name: "VaultSync", targets: ["VaultSync"]),
        // Its example (Examples/AccountBook): the standalone app, and the same app synced.
        .executable(name: "account-book", targets: ["AccountBook"]),
        // The benchmarks (scripts/bench*, Docs/BENCHMARKS.md), outside the production targets.
        .executable(name: "vault-bench", targets: ["VaultBench"]),
        .executable(name: "account-book-synced", targets: ["AccountBookSynced"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", "2.101.2"..<"2.102.0"),
        // Relays (Docs/RELAY.md): the server (and its logger, kept quiet) and the client.
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", exact: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
        // Hummingbird's own lifecycle: a relay shutting down answers its waiting lists at once.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
    ],
    targets: [
        // System libraries (Debian -dev packages, found through pkg-config).
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CQRencode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        .systemLibrary(name: "CZbar", pkgConfig: "zbar", providers: [.apt(["libzbar-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Intel's ISA-L for the dispersal's erasure coding (Docs/DECISIONS.md, "Format v2").
        .systemLibrary(name: "CISAL", pkgConfig: "libisal", providers: [.apt(["libisal-dev"])]),
        // cairo for the printed recovery kits' PDF pages (Docs/DECISIONS.md, "Recovery kits").
        .systemLibrary(name: "CCairo", pkgConfig: "cairo", providers: [.apt(["libcairo2-dev"])]),
        // libpng and libjpeg report errors by longjmp, which Swift cannot catch:
        // a small C shim keeps every setjmp on the C side.
        .target(
            name: "CVaultImage",
            linkerSettings: [.linkedLibrary("png16"), .linkedLibrary("jpeg")]
        ),

        // prctl is variadic, so Swift reaches it through C.
        .target(name: "CVaultProcess"),

        // sync_file_range (write-behind) is a GNU extension Swift's Glibc does not export.
        .target(name: "CVaultFile"),

        // The TPM 2.0 through tpm2-tss (Debian's libtss2-dev: ESAPI, the TCTI loader, MU),
        // loaded with dlopen when a keystore is sealed by the TPM, so that vault starts
        // without tpm2-tss installed (Docs/DECISIONS.md, "Keys bound to the machine").
        // libcrypto for the PCR digest of a policy, as tpm2-tss itself uses it.
        .target(name: "CVaultTPM", linkerSettings: [.linkedLibrary("crypto")]),

        .target(
            name: "VaultCore",
            dependencies: [
                "CSodium", "COpenSSL", "CQRencode", "CZbar", "CVaultImage", "CISAL", "CVaultFile", "CVaultTPM", "CCairo",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // The holder protocol (Docs/ARCHITECTURE.md): the requests a holder is asked, their
        // lifecycle and checks, the consent queue, emergency access, and the records holders
        // send each other. Below both transports: the LAN (VaultNet) and the relays
        // (VaultRelayClient) carry it, and neither is known here.
        .target(
            name: "VaultHolders",
            dependencies: ["VaultCore", "CSodium", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        .target(
            name: "VaultNet",
            dependencies: [
                "VaultCore", "VaultHolders", "CSodium",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            // NIO's async channel APIs and Swift 6's region checks disagree on results that
            // cross executeThenClose; the checks stay on as warnings.
            swiftSettings: [.swiftLanguageMode(.v5)] + strict
        ),
        // What relays and their clients agree on: signed requests and responses, the JSON
        // bodies, the group record. The server and the client share it, never each other.
        .target(name: "VaultRelayProtocol", dependencies: ["VaultCore"], swiftSettings: strict),
        .target(
            name: "VaultRelay",
            dependencies: [
                "VaultCore", "VaultRelayProtocol",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            // The share-link page, built into the binary (LinkPage).
            resources: [
                .embedInCode("Links/Assets/link.html"),
                .embedInCode("Links/Assets/link.js"),
                .embedInCode("Links/Assets/link.css"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VaultRelayClient",
            dependencies: [
                "VaultCore", "VaultHolders", "VaultRelayProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // Applications on synced keys: the Swift API over VaultCore's objects, the agent's
        // item keys and the relay client's object sync.
        .target(name: "VaultSync", dependencies: ["VaultCore", "VaultNet", "VaultRelayClient"], swiftSettings: strict),
        .executableTarget(
            name: "vault",
            dependencies: [
                "VaultCore", "VaultHolders", "VaultNet", "VaultRelay", "VaultRelayClient", "VaultSync", "CVaultProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)] + strict
        ),
        // The measuring harness behind scripts/bench, bench-relay and bench-sync: loopback
        // holders, relays and syncs timed in one process. Not installed.
        .executableTarget(
            name: "VaultBench",
            dependencies: [
                "VaultCore", "VaultNet", "VaultRelay", "VaultRelayProtocol", "VaultRelayClient", "VaultSync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/VaultBench",
            swiftSettings: [.swiftLanguageMode(.v5)] + strict
        ),

        // The examples, built with the package (no second build of its dependencies) and
        // driven by vaultTests (AppTests). The synced one differs from the standalone one by
        // Examples/AccountBook/sync.diff, which a test keeps true.
        .executableTarget(
            name: "AccountBook",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift"), .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/AccountBook/Standalone", swiftSettings: strict
        ),
        .executableTarget(
            name: "AccountBookSynced",
            dependencies: ["VaultSync", .product(name: "GRDB", package: "GRDB.swift"),
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/AccountBook/Synced", swiftSettings: strict
        ),

        .target(name: "VaultTestSupport", dependencies: ["VaultCore", "CSodium", "CVaultProcess"], swiftSettings: strict),
        // Vectors are read from the source tree (#filePath), not bundled.
        .testTarget(name: "VaultCoreTests", dependencies: ["VaultCore", "VaultTestSupport"], exclude: ["Threshold/Vectors", "Words/Vectors"],
                    swiftSettings: strict),
        .testTarget(
            name: "VaultNetTests",
            dependencies: [
                "VaultNet", "VaultHolders", "VaultCore", "VaultTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            exclude: ["Noise/Vectors"],
            swiftSettings: strict
        ),
        // The relay client alone: what it decides without a relay (RelayRound's count of
        // relays read, a recovery's wait on the keystore).
        .testTarget(name: "VaultRelayClientTests", dependencies: ["VaultRelayClient", "VaultHolders", "VaultCore", "VaultTestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "VaultHoldersTests", dependencies: ["VaultHolders", "VaultCore", "VaultTestSupport"], swiftSettings: strict),
        .testTarget(
            name: "vaultTests",
            // GRDB to run SQLite's integrity check on keystores left by killed processes and to alter a
            // relay's stored share; VaultRelayProtocol to sign requests by hand; VaultRelayClient for
            // the waiting list's client function and to send holder messages no command would (a
            // replayed or redirected request).
            dependencies: ["VaultCore", "VaultHolders", "VaultRelayProtocol", "VaultRelayClient", "VaultTestSupport",
                           .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
    ]
)

// Fuzz targets (libFuzzer), one executable per parser, built only by scripts/fuzz
// (VAULT_FUZZ=1, its own scratch path, with -sanitize=fuzzer,address).
if Context.environment["VAULT_FUZZ"] == "1" {
    let targets: [(String, [Target.Dependency])] = [
        ("FuzzKeyCard", ["VaultCore"]), ("FuzzQRText", ["VaultCore"]), ("FuzzBundle", ["VaultCore"]),
        ("FuzzReleasedPiece", ["VaultCore"]), ("FuzzItem", ["VaultCore"]), ("FuzzPasswordLayer", ["VaultCore"]),
        ("FuzzNoise", ["VaultNet", "VaultCore"]), ("FuzzPeerMessage", ["VaultNet", "VaultHolders", "VaultCore"]),
        ("FuzzDNS", ["VaultNet"]), ("FuzzURL", ["VaultCore"]), ("FuzzHolderRecord", ["VaultCore", "VaultHolders"]),
        // Issue 37: the relay formats and the relay's own parsing.
        ("FuzzGroupRecord", ["VaultCore"]), ("FuzzMessageShare", ["VaultCore"]), ("FuzzItemChange", ["VaultCore"]),
        ("FuzzObjectMessage", ["VaultCore"]), ("FuzzLink", ["VaultCore", "VaultRelayProtocol"]),
        ("FuzzRelayRequest", ["VaultCore", "VaultRelayProtocol"]),
        // Issue 50: typed SLIP-39 mnemonics, and a recovery kit's scanned codes.
        ("FuzzMnemonic", ["VaultCore"]), ("FuzzKitCode", ["VaultCore"]),
    ]
    for (name, dependencies) in targets {
        package.targets.append(.executableTarget(name: name, dependencies: dependencies + ["FuzzSupport"], path: "Fuzz/Targets/\(name)",
                                                 swiftSettings: [.swiftLanguageMode(.v5)]))
        package.products.append(.executable(name: name, targets: [name]))
    }
    package.targets.append(.target(name: "FuzzSupport", dependencies: ["VaultCore"], path: "Fuzz/Support"))
}

// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "EntitlementLedger",
    // `LedgerProjections` is the product an app adds: one import brings all it uses. The others
    // serve the benchmarks (Tools/Benchmarks, a package of their own). The `ledger` command is an
    // executable target, not a product, so that a package depending on this one resolves none
    // of its packages (swift-argument-parser).
    products: [
        .library(name: "LedgerProjections", targets: ["LedgerProjections"]),
        .library(name: "LedgerModels", targets: ["LedgerModels"]),
        .library(name: "LedgerStore", targets: ["LedgerStore"]),
        .library(name: "LedgerCore", targets: ["LedgerCore"]),
        .library(name: "LMDB", targets: ["LMDB"]),
        .library(name: "LedgerDemo", targets: ["LedgerDemo"]),
        .library(name: "LedgerCluster", targets: ["LedgerCluster"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        // The index tail's persistent tables (TreeDictionary): a reader takes the whole tail as
        // a value, in constant time, and looks events up in it with no lock held.
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        // X.509 chains of the App Store's signed notifications (LedgerAppStore).
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.0"),
        // `ledger serve` (LedgerServer): the HTTP server, and its route tests' client. No traits:
        // neither swift-configuration nor the full Foundation is needed.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0", traits: []),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        // Hummingbird's own dependency: its HTTP parts' types, for the server's connection deadlines.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.0"),
        // The server's /metrics, in Prometheus' text format.
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
        // `swift package generate-documentation`: the DocC catalogs under Sources/*/*.docc.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Debian's liblmdb-dev, seen through pkg-config; only the LMDB module imports it.
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .target(name: "LMDB", dependencies: ["CLMDB"]),
        // Debian's libnats-dev (the NATS C client); only the LedgerCluster module imports it.
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // The ledger as a cluster on NATS JetStream: nodes, partitions, appends and reads.
        .target(
            name: "LedgerCluster",
            dependencies: ["CNATS", "LedgerProjections", "LedgerStore", "LedgerModels", "LedgerCore"]
        ),
        .target(name: "LedgerCore", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        .target(
            name: "LedgerStore",
            dependencies: [
                "LMDB",
                "LedgerCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HashTreeCollections", package: "swift-collections"),
            ]
        ),
        // The read models as pure code: reducers, views and their rules; no store.
        .target(name: "LedgerModels", dependencies: ["LedgerCore"]),
        .target(name: "LedgerProjections", dependencies: ["LMDB", "LedgerCore", "LedgerStore", "LedgerModels", "LedgerAppStore", .product(name: "Crypto", package: "swift-crypto")]),
        // The App Store's signed notifications: verification as Apple's library does it.
        .target(
            name: "LedgerAppStore",
            dependencies: [
                "LedgerCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // `ledger serve`: the App Store's webhook, the JSON API and the support pages over HTTP.
        .target(
            name: "LedgerServer",
            dependencies: [
                "LedgerProjections",
                "LedgerAppStore",
                "LedgerModels",
                "LedgerStore",
                "LedgerCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The demo's customer histories: `ledger demo` and the benchmarks (Tools/Benchmarks).
        .target(name: "LedgerDemo", dependencies: ["LedgerCore", "LedgerStore", "LedgerModels"]),
        .executableTarget(
            name: "ledger",
            dependencies: [
                "LedgerProjections",
                "LedgerStore",
                "LedgerCore",
                "LMDB",
                "LedgerDemo",
                "LedgerServer",
                "LedgerCluster",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `ledger node --port`'s /healthz.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),

        // A child process the crash and multi-process tests start, kill and read against.
        .executableTarget(
            name: "ledger-test-child",
            dependencies: ["LedgerProjections", "LedgerModels", "LedgerStore", "LedgerCore", "LMDB"],
            path: "Tests/LedgerTestChild"
        ),
        // Generators of valid events that several test targets share.
        .target(
            name: "LedgerTestSupport",
            dependencies: [
                "LedgerCore", "LedgerModels",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Tests/LedgerTestSupport"
        ),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB"]),
        // Against a real NATS JetStream cluster that the tests start (Tools/cluster).
        .testTarget(
            name: "LedgerClusterTests",
            dependencies: ["LedgerCluster", "ledger", "LedgerProjections", "LedgerModels", "LedgerStore", "LedgerCore", "LedgerTestSupport"]
        ),
        // The read models' rules, folded in memory: no store.
        .testTarget(
            name: "LedgerModelsTests",
            dependencies: [
                "LedgerModels",
                "LedgerCore",
                "LedgerTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "LedgerProjectionsTests",
            dependencies: [
                "LedgerProjections",
                "LedgerModels",
                "LedgerStore",
                "LedgerCore",
                "LMDB",
                "ledger-test-child",
                "LedgerTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        // The README's "library in five minutes", as it stands there (a test keeps the two equal
        // and runs it): an example that does not compile fails the build.
        .executableTarget(
            name: "readme-example",
            dependencies: ["LedgerProjections"],
            path: "Tests/ReadmeExample"
        ),
        // The DocC articles' examples, as they stand there (a test keeps the two equal and runs
        // them).
        .executableTarget(
            name: "docc-examples",
            dependencies: ["LedgerProjections"],
            path: "Tests/DocCExamples"
        ),
        .testTarget(name: "LedgerCLITests", dependencies: ["ledger", "readme-example", "docc-examples", "LedgerTestSupport", "LedgerStore", "LedgerCore", "LMDB"]),
        .testTarget(
            name: "LedgerCoreTests",
            dependencies: [
                "LedgerCore",
                "LedgerTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "LedgerAppStoreTests",
            dependencies: [
                "LedgerAppStore",
                "LedgerCore",
                "LedgerModels",
                "LedgerProjections",
                "LedgerStore",
                "LedgerTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "LedgerServerTests",
            dependencies: [
                "LedgerServer",
                "LedgerProjections",
                "LedgerAppStore",
                "LedgerModels",
                "LedgerStore",
                "LedgerCore",
                "LedgerTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LedgerStoreTests",
            dependencies: [
                "LedgerStore",
                "LedgerCore",
                "LMDB",
                "ledger-test-child",
                "LedgerTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ]
)

// swift-tools-version: 6.1
import PackageDescription

// The benchmarks: the ledger measured against raw LMDB and an SQLite event store (GRDB), side
// by side in one run. A package of its own, so that the `ledger` product links neither GRDB
// nor SQLite; `Tools/bench` builds and runs it.
let package = Package(
    name: "Benchmarks",
    dependencies: [
        .package(name: "EntitlementLedger", path: "../.."),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // valgrind's client requests around the phase a case measures (`--callgrind`).
        .target(name: "CCallgrind"),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                "CCallgrind",
                .product(name: "LedgerProjections", package: "EntitlementLedger"),
                .product(name: "LedgerModels", package: "EntitlementLedger"),
                .product(name: "LedgerStore", package: "EntitlementLedger"),
                .product(name: "LedgerCore", package: "EntitlementLedger"),
                .product(name: "LMDB", package: "EntitlementLedger"),
                .product(name: "LedgerDemo", package: "EntitlementLedger"),
                .product(name: "LedgerCluster", package: "EntitlementLedger"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(name: "BenchmarksTests", dependencies: ["Benchmarks"]),
    ]
)

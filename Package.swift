// swift-tools-version:6.0
import PackageDescription

// The arrows point one way: the `overtime` CLI → `Overtime` (the supervisor engine) →
// `OvertimeLoop` (the only module that touches libuv) and `OvertimeProtocol` (the wire
// format, pure Swift, shared later with the child-side worker library).
let package = Package(
    name: "Overtime",
    products: [
        .library(name: "Overtime", targets: ["Overtime"]),
        .library(name: "OvertimeProtocol", targets: ["OvertimeProtocol"]),
        .executable(name: "overtime", targets: ["overtime"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        .target(
            name: "OvertimeLoop",
            dependencies: ["CLibUV"]
        ),
        .target(name: "OvertimeProtocol"),
        .target(
            name: "Overtime",
            dependencies: ["OvertimeLoop", "OvertimeProtocol"]
        ),
        .executableTarget(
            name: "overtime",
            dependencies: ["Overtime"]
        ),
        // Drives the library for scripts/bench (spawn throughput, protocol throughput).
        .executableTarget(
            name: "overtime-bench",
            dependencies: ["Overtime"]
        ),
        .testTarget(
            name: "OvertimeProtocolTests",
            dependencies: ["OvertimeProtocol"]
        ),
        .testTarget(
            name: "OvertimeTests",
            dependencies: ["Overtime", "OvertimeProtocol", "overtime"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

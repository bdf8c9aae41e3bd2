// swift-tools-version:6.0
import PackageDescription

// The arrows point one way: the `overtime` CLI → `Overtime` (the supervisor library) →
// `OvertimeCore` (the pure machines and models) and `OvertimeLoop` (the only module that
// touches libuv); `OvertimeLoop` → `OvertimeCore` (for its pure readers of the kernel's text);
// `OvertimeCore` → `OvertimeProtocol` (the wire format, pure Swift, shared with the
// child-side worker library); the CLI → `OvertimeReport` (`overtime report`'s reader and
// page) → `OvertimeCore`; `Overtime` → `OvertimeYAML` (YAML job files, through libyaml) →
// `OvertimeProtocol`. docs/design.md draws the whole map.
// On x86-64 the CLI starts at COvertime's `overtime_entry`: a task guard (the CLI's own
// binary run again) becomes the guard there, before the C library's start, whose CPU probe
// costs a trap to the hypervisor per `cpuid` in a virtual machine (about 0.25 ms); every
// other start goes straight on to the C library's `_start`. Sources/COvertime/spawn.c says
// why. Elsewhere the guard is caught by a constructor, after the C library's start.
#if arch(x86_64)
let cliEntry: [LinkerSetting] = [.unsafeFlags(["-Xlinker", "--entry=overtime_entry"], .when(platforms: [.linux]))]
#else
let cliEntry: [LinkerSetting] = []
#endif

let package = Package(
    name: "Overtime",
    products: [
        .library(name: "Overtime", targets: ["Overtime"]),
        .library(name: "OvertimeProtocol", targets: ["OvertimeProtocol"]),
        .library(name: "OvertimeCore", targets: ["OvertimeCore"]),
        .library(name: "OvertimeReport", targets: ["OvertimeReport"]),
        .library(name: "OvertimeWorker", targets: ["OvertimeWorker"]),
        .executable(name: "overtime", targets: ["OvertimeCLI"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // libyaml, for YAML job files; OvertimeYAML only.
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        // All of Overtime's own C, in one room: what runs as a vfork child or a fork of the
        // supervisor (the child's side of a spawn, the group guard), where only plain system
        // calls are safe; the pseudo-terminal a task's output may go through; and the calls
        // Swift cannot make as they are (glibc's _GNU_SOURCE-only accept4 and SO_PEERCRED,
        // variadic prctl, the wait-status macros). Named for Overtime rather than for
        // spawning, since it is no longer only that. It needs no libuv header: CLibUV stays
        // the bare libuv system library. OvertimeLoop only, like CLibUV.
        .target(name: "COvertime"),
        .target(
            name: "OvertimeLoop",
            dependencies: ["CLibUV", "COvertime", "OvertimeCore"]
        ),
        .target(name: "OvertimeProtocol"),
        // YAML text read into the protocol's `JSONValue` (libyaml's event parser, YAML 1.2's
        // core schema), so a YAML job file meets the same decoder and checks as a JSON one.
        // Not core: core imports nothing but the protocol module.
        .target(
            name: "OvertimeYAML",
            dependencies: ["CYAML", "OvertimeProtocol"]
        ),
        // The pure core: the task and queue machines, budget policy, events and their
        // encoder, durations, the job file's model, decoder and validator. It imports
        // OvertimeProtocol only: no Glibc, no Foundation, no loop. What it needs of the
        // machine (a clock, the wall-clock offset, the account database, a command lookup)
        // is given to it. The CorePurity plugin fails its build on any other import.
        .target(
            name: "OvertimeCore",
            dependencies: ["OvertimeProtocol"],
            plugins: ["CorePurity"]
        ),
        .plugin(name: "CorePurity", capability: .buildTool(), dependencies: ["core-purity"]),
        .executableTarget(name: "core-purity"),
        // `overtime report`: a run directory's journal read back (`RunReport`) and drawn as
        // one HTML page (`RunReportPage`). Not core: it decides nothing the supervisor does.
        // The page is Page/page.html with page.css and its scripts; the live page (--ui, served
        // by the Overtime library) is Page/live.html with the same look and common.js. The
        // PageBundle plugin makes both Swift strings at build time. Tests/ReportPage and
        // Tests/LivePage hold the pages' own tests (node).
        .target(
            name: "OvertimeReport",
            dependencies: ["OvertimeCore", "OvertimeProtocol"],
            plugins: ["PageBundle"]
        ),
        .plugin(name: "PageBundle", capability: .buildTool(), dependencies: ["page-bundle"]),
        .executableTarget(name: "page-bundle"),
        // The task's side: what a Swift program run by Overtime links. Never sees the
        // supervisor's code.
        .target(
            name: "OvertimeWorker",
            dependencies: ["OvertimeProtocol"]
        ),
        .target(
            name: "Overtime",
            dependencies: ["OvertimeCore", "OvertimeLoop", "OvertimeProtocol", "OvertimeReport", "OvertimeYAML"]
        ),
        // The CLI. The target is not named `overtime`: `Sources/overtime` beside
        // `Sources/Overtime` collides on a case-insensitive filesystem. The product (and so
        // the binary, `.build/<config>/overtime`) keeps the name users type.
        // It names OvertimeLoop too, for its plain system calls alone (Syscall.retrying,
        // Descriptors.writeAll): one EINTR loop and one write-all loop for the whole program;
        // and OvertimeProtocol, whose messages and JSON writer it prints.
        .executableTarget(
            name: "OvertimeCLI",
            dependencies: ["Overtime", "OvertimeLoop", "OvertimeProtocol", "OvertimeReport"],
            linkerSettings: cliEntry,
            plugins: ["BuildInfo"]
        ),
        // The version (the checkout's VERSION file) and the commit, for `overtime version`.
        .plugin(name: "BuildInfo", capability: .buildTool()),
        // Drives the library for scripts/bench (spawn throughput, protocol throughput).
        .executableTarget(
            name: "overtime-bench",
            dependencies: ["Overtime"]
        ),
        // Example workers (workers/README.md), built as programs Overtime runs.
        .executableTarget(
            name: "upload-file",
            dependencies: ["OvertimeWorker"],
            path: "workers/upload-file"
        ),
        .executableTarget(
            name: "process-payment",
            dependencies: ["OvertimeWorker"],
            path: "workers/process-payment"
        ),
        .testTarget(
            name: "OvertimeProtocolTests",
            dependencies: ["OvertimeProtocol"]
        ),
        // The YAML reader on its own, beside PyYAML's reading of the same files.
        .testTarget(
            name: "OvertimeYAMLTests",
            dependencies: ["OvertimeYAML", "OvertimeProtocol", "OvertimeTestSupport"]
        ),
        // The loop module on its own: real descriptors and processes, no supervisor.
        .testTarget(
            name: "OvertimeLoopTests",
            dependencies: ["OvertimeLoop", "OvertimeProtocol", "OvertimeTestSupport"]
        ),
        // What the test targets share: a deterministic dice for the fuzz tests, a way off
        // the few shared test threads for blocking or heavy work.
        .target(
            name: "OvertimeTestSupport",
            path: "Tests/OvertimeTestSupport"
        ),
        // The pure core on its own, as it builds: the machines on a fake clock, the job
        // file's fields, the decoders, the metrics page. Depends on nothing of the
        // supervisor library (`swift test --filter OvertimeCoreTests`).
        .testTarget(
            name: "OvertimeCoreTests",
            dependencies: ["OvertimeCore", "OvertimeProtocol", "OvertimeTestSupport"]
        ),
        // Fast, no process started, with the supervisor library and the CLI at hand: the
        // job file as loaded, the journal's thinning, the display's rendering, the run
        // report, the argument parser (`swift test --filter OvertimeUnitTests`).
        .testTarget(
            name: "OvertimeUnitTests",
            dependencies: ["Overtime", "OvertimeProtocol", "OvertimeReport", "OvertimeCLI", "OvertimeTestSupport"]
        ),
        // Real processes, signals, terminals: the supervisor library and the CLI as users meet them.
        .testTarget(
            name: "OvertimeTests",
            dependencies: ["Overtime", "OvertimeProtocol", "OvertimeCLI", "OvertimeTestSupport", "upload-file", "process-payment"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The bundled Python bridge: an overtime installed with `share/overtime/python` beside its
// `bin/` (as the wheel, the tarball and the image lay it out) puts it on each task's
// PYTHONPATH, after the task's own entries, so that a job whose Python has tqdm but no
// overtime-worker keeps running past its budget while its bar moves. Off, or from a binary
// without it, PYTHONPATH is the task's own. scripts/package's tests do the same from the
// real wheels and tarball; these run on every build.

import Foundation
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// An overtime laid out as an install is: PREFIX/bin/overtime (the built binary, a hard link
/// or a copy: the bridge is found from the binary's own path), and beside it
/// PREFIX/share/overtime/python with the checkout's sitecustomize.py and the library in lib/.
struct CLIInstalledOvertime {
    static let workerLibrary = Checkout.path("workers/python")
    let prefix: String
    var binary: String { prefix + "/bin/overtime" }
    var bridge: String { prefix + "/share/overtime/python" }

    init(in scratch: CLIScratch) throws {
        prefix = scratch.path("prefix")
        let files = FileManager.default
        try files.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try files.createDirectory(atPath: prefix + "/share/overtime/python/lib", withIntermediateDirectories: true)
        if link(CLIBinary.path, binary) != 0 { try files.copyItem(atPath: CLIBinary.path, toPath: binary) }
        let source = Self.workerLibrary
        try files.copyItem(atPath: source + "/sitecustomize.py", toPath: bridge + "/sitecustomize.py")
        try files.copyItem(atPath: source + "/_overtime_worker_startup.py", toPath: bridge + "/lib/_overtime_worker_startup.py")
        try files.copyItem(atPath: source + "/overtime_worker", toPath: bridge + "/lib/overtime_worker")
    }

    /// A directory holding only tqdm (the real one, from the test venv) for a job's own
    /// PYTHONPATH: a Python that has tqdm and no overtime-worker, as a job's venv would be.
    static func tqdmOnly(in scratch: CLIScratch) throws -> String {
        let venvLib = Checkout.path(".venv/lib")
        let versions = try FileManager.default.contentsOfDirectory(atPath: venvLib).filter { $0.hasPrefix("python3") }
        guard let tqdm = versions.map({ "\(venvLib)/\($0)/site-packages/tqdm" }).first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw CLIFailure("no tqdm in \(venvLib)/python3*/site-packages: run scripts/setup --tests")
        }
        let directory = scratch.path("job-packages")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory + "/tqdm", withDestinationPath: tqdm)
        return directory
    }

    /// The test's environment without a PYTHONPATH of its own.
    static var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONPATH"] = nil
        return environment
    }
}

@Suite("CLI Python bridge")
struct CLIPythonBridgeTests {
    static let python = CLIBatchWorker.python

    /// Prints what the task's Python saw: its PYTHONPATH, the overtime_worker it imports and
    /// the last entry of sys.path.
    static let whereabouts = #"""
    import json, os, sys
    import overtime_worker
    print(json.dumps({"pythonpath": os.environ.get("PYTHONPATH"), "library": overtime_worker.__file__, "last": sys.path[-1]}))
    """#

    @Test("a tqdm loop of 7 s in a Python with no overtime-worker runs to its end under a 3 s budget through the bundled bridge, and is cancelled at 3 s with --python-bridge off")
    func tqdmReportsThroughTheBundledBridge() async throws {
        let scratch = try CLIScratch()
        let installed = try CLIInstalledOvertime(in: scratch)
        let packages = try CLIInstalledOvertime.tqdmOnly(in: scratch)
        let script = try scratch.write("loop.py", """
        import time
        from tqdm import tqdm
        for _ in tqdm(range(14)):
            time.sleep(0.5)
        """)
        func run(_ bridge: String) async throws -> CLIResult {
            let process = CLIProcess(["run", "--budget", "3s", "--progress", "none", "--python-bridge", bridge,
                                      "--env", "PYTHONPATH=\(packages)", "--", Self.python, script],
                                     executable: installed.binary, environment: CLIInstalledOvertime.environment, in: scratch)
            try await process.start()
            return await process.finish(timeout: .seconds(40))
        }
        let on = try await run("on")
        #expect(on.status == 0, "the bar's progress should have kept it alive: \(on)")
        #expect(on.wall > .seconds(6), "\(on)")
        let off = try await run("off")
        #expect(off.status == 124, "without the bridge nothing reports: \(off)")
        #expect(off.wall < .seconds(6), "\(off)")
    }

    @Test("the task's own PYTHONPATH comes first, and a copy of overtime_worker on it is the one imported; the bundled library is sys.path's last entry")
    func theJobsOwnCopyWins() async throws {
        let scratch = try CLIScratch()
        let installed = try CLIInstalledOvertime(in: scratch)
        let script = try scratch.write("where.py", Self.whereabouts)
        let process = CLIProcess(["run", "--progress", "none", "--env", "PYTHONPATH=\(CLIInstalledOvertime.workerLibrary)", "--", Self.python, script],
                                 executable: installed.binary, environment: CLIInstalledOvertime.environment, in: scratch)
        try await process.start()
        let r = await process.finish()
        #expect(r.status == 0, "\(r)")
        let seen = try CLIJSON.object(r.stdoutLines.last ?? "")
        #expect(seen["pythonpath"] as? String == CLIInstalledOvertime.workerLibrary + ":" + installed.bridge, "\(r)")
        #expect((seen["library"] as? String)?.hasPrefix(CLIInstalledOvertime.workerLibrary + "/") == true, "\(r)")
        #expect(seen["last"] as? String == installed.bridge + "/lib", "\(r)")
    }

    @Test("a binary with no share/overtime/python beside it leaves PYTHONPATH alone")
    func noBridgeBesideTheBinary() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.write("path.py", "import os; print(os.environ.get('PYTHONPATH'))")
        let process = CLIProcess(["run", "--progress", "none", "--", Self.python, script],
                                 environment: CLIInstalledOvertime.environment, in: scratch)
        try await process.start()
        let r = await process.finish()
        #expect(r.status == 0 && r.stdoutLines.last == "None", "\(r)")
    }

    @Test("in a batch, a task with \"python-bridge\": false gets none, the others get it, and --python-bridge off turns it off for all")
    func batchKeyAndOption() async throws {
        let scratch = try CLIScratch()
        let installed = try CLIInstalledOvertime(in: scratch)
        let show = [Self.python, "-c", "import os; print(os.environ.get('PYTHONPATH'))"]
        let tasks: [[String: Any]] = [["name": "on", "command": show], ["name": "off", "command": show, "python-bridge": false]]
        let job = try scratch.write("job.json", String(decoding: try JSONSerialization.data(withJSONObject: ["tasks": tasks]), as: UTF8.self))
        func batch(_ runDirectory: String, _ extra: [String]) async throws -> (on: String?, off: String?) {
            let process = CLIProcess(["batch", job, "--progress", "none", "--run-dir", scratch.path(runDirectory)] + extra,
                                     executable: installed.binary, environment: CLIInstalledOvertime.environment, in: scratch)
            try await process.start()
            let r = await process.finish()
            #expect(r.status == 0, "\(r)")
            func line(_ task: String) -> String? {
                scratch.read("\(runDirectory)/logs/\(task).log")?.split(separator: "\n").last.map(String.init)
            }
            return (line("on"), line("off"))
        }
        let plain = try await batch("run-1", [])
        #expect(plain.on == installed.bridge && plain.off == "None", "\(plain)")
        let off = try await batch("run-2", ["--python-bridge", "off"])
        #expect(off.on == "None" && off.off == "None", "\(off)")
    }
}

// Overtime as PID 1 of a real container (DESIGN §5 and §8): `podman run IMAGE /overtime run
// --budget none -- TASK`, as an `ENTRYPOINT ["overtime", "run", "--budget", "none", "--"]`
// runs it. CLIPidOneTests makes a PID namespace by hand; here the runtime makes all of it
// (namespaces, mounts, cgroups, `podman stop`'s signals and timeout), with runc.
//
// The image is the debug binary these tests already run, copied with its libraries
// (`scripts/containers image --with-libs`), so no registry and no static build are
// needed; it is made again only when the binary changes. The tasks are busybox sh scripts
// and a small static C program, in a scratch directory bind-mounted at /work, where they
// also leave what they saw.

import Foundation
import OvertimeTestSupport
import Testing

/// What `scripts/containers up` found, once for the whole suite.
enum CLIContainers {
    static let script = Checkout.path("scripts/containers")
    static let image = "localhost/overtime-cli-tests"

    struct Setup: Sendable {
        /// The test's environment plus the exports `scripts/containers up` prints
        /// (CONTAINERS_CONF: the runtime and limits that started a container here).
        var environment: [String: String]
    }

    enum State: Sendable {
        case ready(Setup)
        /// The script said no runtime can start a container on this machine.
        case noRuntime(String)
        case failed(String)
    }

    static let state = Task<State, Never> { await prepare() }

    /// The setup, or the test cancelled (shown as skipped, with the script's reason) where
    /// no container runtime can start, or failed for any other trouble.
    static func ready() async throws -> Setup {
        switch await state.value {
        case .ready(let setup): return setup
        case .noRuntime(let reason): try Test.cancel("no container runtime can start here: \(reason)")
        case .failed(let reason): throw CLIFailure(reason)
        }
    }

    private static func prepare() async -> State {
        do {
            let scratch = try CLIScratch()
            let up = try await run([script, "up"], timeout: .seconds(300), in: scratch)
            print("containers: `scripts/containers up` took \(seconds(up.wall)), exit \(up.status)")
            if up.status == 2, up.stderr.contains("no container can start here") {
                return .noRuntime(up.stderr)
            }
            guard up.status == 0 else { return .failed("scripts/containers up failed: \(up)") }
            var environment = ProcessInfo.processInfo.environment
            for (key, value) in exports(up.stdout) { environment[key] = value }
            let image = try await run([script, "image", "--with-libs", Self.image, CLIBinary.path],
                                      environment: environment, timeout: .seconds(300), in: scratch)
            print("containers: `scripts/containers image --with-libs` took \(seconds(image.wall)): "
                  + (image.stderr.split(separator: "\n").last.map(String.init) ?? ""))
            guard image.status == 0 else { return .failed("scripts/containers image --with-libs failed: \(image)") }
            return .ready(Setup(environment: environment))
        } catch {
            return .failed("setting up containers: \(error)")
        }
    }

    /// `export NAME=VALUE` lines, as `eval "$(scripts/containers up)"` would take them.
    static func exports(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("export ") {
            let pair = line.dropFirst("export ".count)
            guard let equals = pair.firstIndex(of: "=") else { continue }
            result[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return result
    }

    static func run(_ argv: [String], environment: [String: String]? = nil, timeout: Duration,
                    in scratch: CLIScratch) async throws -> CLIResult {
        let process = CLIProcess(Array(argv.dropFirst()), executable: argv[0], environment: environment, in: scratch)
        try await process.start()
        return await process.finish(timeout: timeout)
    }

    static func seconds(_ d: Duration) -> String { String(format: "%.2f s", d.cliSeconds) }

    /// The first `name` on PATH (podman, docker).
    static func tool(_ name: String, _ environment: [String: String]) -> String {
        for dir in (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return "/usr/bin/\(name)"
    }
}

@Suite("CLI as PID 1 of a container (podman, runc)", .serialized)
struct CLIContainerTests {
    /// A container engine's command line: podman, or docker for the one docker scenario.
    struct Engine {
        var executable: String
        var environment: [String: String]

        func call(_ arguments: [String], timeout: Duration = .seconds(30), in scratch: CLIScratch) async throws -> CLIResult {
            try await CLIContainers.run([executable] + arguments, environment: environment, timeout: timeout, in: scratch)
        }

        /// `ENGINE run --name NAME -v SCRATCH:/work [options] IMAGE COMMAND...`, not started
        /// yet (the test may act on it while it runs). COMMAND is PID 1.
        func container(_ name: String, options: [String] = [], command: [String], in scratch: CLIScratch) -> CLIProcess {
            CLIProcess(["run", "--name", name, "-v", "\(scratch.url.path):/work"] + options + [CLIContainers.image] + command,
                       executable: executable, environment: environment, in: scratch)
        }

        /// Overtime as PID 1, as the ENTRYPOINT runs it: `/overtime run --budget none
        /// OVERTIME... -- TASK...`.
        func container(_ name: String, options: [String] = [], overtime: [String], task: [String],
                       in scratch: CLIScratch) -> CLIProcess {
            container(name, options: options, command: ["/overtime", "run", "--budget", "none"] + overtime + ["--"] + task, in: scratch)
        }

        /// `rm -f`, which kills a container still running (podman would first wait its
        /// stop timeout without `-t 0`; docker's `rm -f` kills at once and has no `-t`).
        func remove(_ name: String, in scratch: CLIScratch) async throws -> CLIResult {
            let force = executable.hasSuffix("podman") ? ["-f", "-t", "0"] : ["-f"]
            return try await call(["rm"] + force + [name], in: scratch)
        }

        /// Runs `body` with a fresh container name; the container is removed afterwards
        /// whatever happened, so a failed or timed-out test leaves none behind.
        func withContainer(in scratch: CLIScratch, _ body: (String) async throws -> Void) async throws {
            let name = "overtime-test-" + UUID().uuidString.prefix(8).lowercased()
            do {
                try await body(name)
            } catch {
                _ = try? await remove(name, in: scratch)
                throw error
            }
            let rm = try await remove(name, in: scratch)
            #expect(rm.status == 0, "removing \(name): \(rm)")
        }

        /// The exit code the engine recorded for the container.
        func exitCode(_ name: String, in scratch: CLIScratch) async throws -> Int? {
            let r = try await call(["inspect", "--format", "{{.State.ExitCode}}", name], in: scratch)
            return Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    func podman() async throws -> Engine {
        let setup = try await CLIContainers.ready()
        return Engine(executable: CLIContainers.tool("podman", setup.environment), environment: setup.environment)
    }

    /// A task that tells the test it runs, then reads fd 3 until the `cancel` line, records
    /// it and exits 0. The TERM trap only keeps the shell alive: busybox sh restarts the
    /// `read` after it, so the line is still read.
    static let shutdownTask = """
    trap 'echo TERM >> /work/heard' TERM
    touch /work/ready
    n=0
    while [ $n -lt 20 ]; do
      n=$((n + 1))
      read -r line <&3 || continue
      case $line in *'"cancel"'*) echo "$line" > /work/seen; exit 0;; esac
    done
    exit 9
    """

    /// `ENGINE stop -t 10`: SIGTERM to PID 1, SIGKILL after 10 s. Overtime turns it into a
    /// shutdown cancel; the task survives it, so the container ends well inside the
    /// engine's timeout with Overtime's exit code (the task's 0, or --shutdown-exit-code).
    func stopScenario(_ engine: Engine, shutdownExitCode: Int?, in scratch: CLIScratch) async throws {
        try scratch.write("task.sh", Self.shutdownTask)
        let expected = shutdownExitCode ?? 0
        try await engine.withContainer(in: scratch) { name in
            let options = ["--grace", "5s"] + (shutdownExitCode.map { ["--shutdown-exit-code", "\($0)"] } ?? [])
            let run = engine.container(name, overtime: options, task: ["/bin/sh", "/work/task.sh"], in: scratch)
            try await run.start()
            #expect(await scratch.waitForFile("ready", timeout: .seconds(30)) != nil, "the task never started")
            let stop = try await engine.call(["stop", "-t", "10", name], timeout: .seconds(40), in: scratch)
            let r = await run.finish(timeout: .seconds(30))
            print("containers: \(engine.executable) stop -t 10 (--shutdown-exit-code \(shutdownExitCode.map(String.init) ?? "unset")) took \(CLIContainers.seconds(stop.wall)); the run \(CLIContainers.seconds(r.wall)), exit \(r.status)")
            #expect(stop.status == 0, "\(stop)")
            // Under the 5 s grace, not the engine's 10 s: the container ended on
            // Overtime's terms, not by the engine's SIGKILL (which would be 137).
            #expect(stop.wall < .seconds(5), "stop took \(stop.wall)")
            #expect(r.status == Int32(expected), "\(r)")
            #expect(try await engine.exitCode(name, in: scratch) == expected)
            #expect(scratch.read("seen")?.contains(#""reason":"shutdown""#) == true,
                    "the task's fd 3: \(scratch.read("seen") ?? "no cancel line"); it heard: \(scratch.read("heard") ?? "nothing")")
            #expect(r.stderr.contains("cancelled (shutdown"), "\(r)")
        }
    }

    @Test("podman stop -t 10: a shutdown cancel the task hears on fd 3 and survives; the container exits with Overtime's code",
          arguments: [nil, 143] as [Int?])
    func stop(shutdownExitCode: Int?) async throws {
        let scratch = try CLIScratch()
        try await stopScenario(try await podman(), shutdownExitCode: shutdownExitCode, in: scratch)
    }

    /// PID 1 with Overtime, and, as the control that shows the count can tell, with
    /// busybox xargs, which waits only for the child it started.
    @Test("orphans re-parented to PID 1 are reaped: no zombie in the container (control: xargs as PID 1 leaves them all)",
          arguments: [true, false])
    func reapsOrphans(overtimeIsPidOne: Bool) async throws {
        let engine = try await podman()
        let scratch = try CLIScratch()
        // Each `sh -c 'sleep 1 &'` exits at once, so its sleep is orphaned to PID 1.
        // Counted while they run (they must reach PID 1, or the test shows nothing) and
        // after they have all exited (a PID 1 that does not reap leaves each a zombie).
        try scratch.write("task.sh", """
        for i in $(seq 20); do sh -c 'sleep 1 &'; done
        sleep 0.3
        ps -o ppid,comm | awk '$1 == 1 && $2 == "sleep"' | wc -l > /work/orphans
        sleep 1.5
        ps -o stat | grep -c '^Z' > /work/zombies
        exit 0
        """)
        try await engine.withContainer(in: scratch) { name in
            let task = ["/bin/sh", "/work/task.sh"]
            let run = overtimeIsPidOne ? engine.container(name, overtime: [], task: task, in: scratch)
                                       : engine.container(name, command: ["/bin/xargs"] + task, in: scratch)
            try await run.start()
            let r = await run.finish(timeout: .seconds(60))
            let count = { (file: String) in Int(scratch.read(file)?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") }
            print("containers: orphans under \(overtimeIsPidOne ? "overtime" : "xargs") as PID 1: run \(CLIContainers.seconds(r.wall)), exit \(r.status), "
                  + "\(count("orphans").map(String.init) ?? "?") orphans, \(count("zombies").map(String.init) ?? "?") zombies")
            #expect(r.status == 0, "\(r)")
            #expect((count("orphans") ?? 0) > 0, "no sleep was PID 1's child mid-run, so reaping was not tested: \(scratch.read("orphans") ?? "nothing")")
            if overtimeIsPidOne {
                #expect(count("zombies") == 0, "zombies: \(scratch.read("zombies") ?? "not counted")")
            } else {
                #expect(count("zombies") == count("orphans"), "xargs reaped orphans after all? zombies: \(scratch.read("zombies") ?? "not counted")")
            }
        }
    }

    @Test("the task's exit status is the container's: its code, or 128+N for a signal Overtime did not send",
          arguments: [("exit 0", 0), ("exit 7", 7), ("kill -SEGV $$", 139), ("kill -KILL $$", 137)])
    func exitStatus(script: String, expected: Int) async throws {
        let engine = try await podman()
        let scratch = try CLIScratch()
        try await engine.withContainer(in: scratch) { name in
            let run = engine.container(name, overtime: [], task: ["/bin/sh", "-c", script], in: scratch)
            try await run.start()
            let r = await run.finish(timeout: .seconds(60))
            print("containers: `\(script)` run \(CLIContainers.seconds(r.wall)), exit \(r.status)")
            #expect(r.status == Int32(expected), "\(r)")
            #expect(try await engine.exitCode(name, in: scratch) == expected)
        }
    }

    /// Allocates and touches STEP MiB every 50 ms up to LIMIT MiB, then waits: memory that
    /// grows at a known pace, without a Python in the image.
    static let grower = """
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>
    int main(int argc, char **argv) {
        long step = (argc > 1 ? atol(argv[1]) : 4) << 20, limit = (argc > 2 ? atol(argv[2]) : 1024) << 20;
        for (long total = 0; total < limit; total += step) {
            char *p = malloc(step);
            if (!p) return 3;
            memset(p, 1, step);
            usleep(50000);
        }
        pause();
        return 0;
    }
    """

    @Test("podman run --memory 300m, --memory-max 150M inside: the growing task is a memory cancel (exit 124), and the report says which containment the container allowed")
    func memoryCancel() async throws {
        let engine = try await podman()
        let scratch = try CLIScratch()
        try scratch.write("grow.c", Self.grower)
        // Static: the image has no libc of its own but the copy made for overtime.
        let gcc = try await CLIContainers.run(["/usr/bin/gcc", "-static", "-O2", "-o", scratch.path("grow"), scratch.path("grow.c")],
                                              timeout: .seconds(60), in: scratch)
        #expect(gcc.status == 0, "gcc -static (build-essential and libc6-dev give it): \(gcc)")
        guard gcc.status == 0 else { return }
        // The task notes the container's own memory limit (v1 or v2 file) and cgroup
        // mounts, then grows 4 MiB per 50 ms: ~20 MiB between two 250 ms samples, far from
        // the 300 MiB where the kernel would kill it first.
        try scratch.write("task.sh", """
        cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null > /work/limit
        grep cgroup /proc/mounts > /work/mounts
        exec /work/grow 4 1024
        """)
        try await engine.withContainer(in: scratch) { name in
            let run = engine.container(name, options: ["--memory", "300m"], overtime: ["--json", "--memory-max", "150M"],
                                       task: ["/bin/sh", "/work/task.sh"], in: scratch)
            try await run.start()
            let r = await run.finish(timeout: .seconds(60))
            print("containers: memory run \(CLIContainers.seconds(r.wall)), exit \(r.status)")
            #expect(r.status == 124, "\(r)")
            #expect(scratch.read("limit")?.trimmingCharacters(in: .whitespacesAndNewlines) == "314572800",
                    "podman's --memory was not in force in the container: \(scratch.read("limit") ?? "no limit file")")
            let report = try r.report()
            #expect(report["cancel_reason"] as? String == "memory", "\(r)")
            #expect(CLIJSON.int(report["overtime_exit_code"]) == 124, "\(r)")
            #expect(CLIJSON.int(report["oom_kills"]) ?? 0 == 0, "the kernel killed it before Overtime did: \(r)")
            let peak = CLIJSON.int(report["peak_memory"]) ?? 0
            print("containers: memory cancel at a peak of \(peak >> 20) MiB, reason \(report["cancel_reason"] ?? "none")")
            #expect(peak >= 140 << 20 && peak < 300 << 20, "peak \(peak): not near the 150M max, or past the container's 300m")

            // What containment the container allows: a cgroup per task needs a writable
            // cgroup hierarchy, which a runtime mounts only in some setups (cgroup v2
            // with a cgroup namespace, a privileged container); where every cgroup mount
            // is read-only, process groups and /proc samples, and the report must say so
            // rather than claim a cgroup. The cancel above happened either way.
            let containment = report["containment"] as? [String: Any] ?? [:]
            print("containers: containment in the container: \(containment); memory_source \(report["memory_source"] ?? "none")")
            let mounts = (scratch.read("mounts") ?? "").split(separator: "\n")
            let writable = mounts.contains { line in
                let fields = line.split(separator: " ")
                guard fields.count >= 4, fields[2] == "cgroup2" || (fields[2] == "cgroup" && fields[3].contains("memory")) else { return false }
                return fields[3].split(separator: ",").first == "rw"
            }
            if writable {
                #expect(containment["kind"] as? String == "cgroup", "a writable cgroup hierarchy (\(mounts)) but: \(containment)")
            } else {
                #expect(containment["kind"] as? String == "process-group", "every cgroup mount is read-only (\(mounts)) but: \(containment)")
                #expect(containment["memory"] as? String == "proc", "\(containment)")
                #expect(report["memory_source"] as? String == "sampled", "\(r)")
                #expect(!((containment["notes"] as? [String]) ?? []).isEmpty, "a downgrade without a reason: \(containment)")
            }
        }
    }

    /// The stop scenario once more under Docker, where this machine can run a dockerd of
    /// ours (`scripts/containers up --docker`); skipped with the script's reason where it
    /// cannot, as Docker is optional here. A dockerd this test started is stopped again.
    @Test("docker stop -t 10 as well, when a dockerd can run here")
    func dockerStop() async throws {
        let setup = try await CLIContainers.ready()
        let scratch = try CLIScratch()
        let before = try await CLIContainers.run([CLIContainers.script, "env"], environment: setup.environment,
                                                 timeout: .seconds(30), in: scratch)
        let wasRunning = before.stdout.contains("DOCKER_HOST=")
        let up = try await CLIContainers.run([CLIContainers.script, "up", "--docker"], environment: setup.environment,
                                             timeout: .seconds(300), in: scratch)
        print("containers: `scripts/containers up --docker` took \(CLIContainers.seconds(up.wall)), exit \(up.status)")
        guard up.status == 0 else {
            try Test.cancel("docker cannot run here (scripts/containers up --docker, exit \(up.status)): \(up.stderr.suffix(800))")
        }
        var environment = setup.environment
        for (key, value) in CLIContainers.exports(up.stdout) { environment[key] = value }
        defer {
            if !wasRunning {
                // Our own dockerd, by the pid the script keeps; not awaited in a defer,
                // so a plain blocking run, bounded by the script's own 20 s.
                let down = Process()
                down.executableURL = URL(fileURLWithPath: CLIContainers.script)
                down.arguments = ["down"]
                down.standardOutput = FileHandle.nullDevice
                down.standardError = FileHandle.nullDevice
                if (try? down.run()) != nil { down.waitUntilExit() }
            }
        }
        // The image exists in podman already; this imports it into the dockerd.
        let image = try await CLIContainers.run([CLIContainers.script, "image", "--with-libs", CLIContainers.image, CLIBinary.path],
                                                environment: environment, timeout: .seconds(300), in: scratch)
        print("containers: image into dockerd took \(CLIContainers.seconds(image.wall))")
        #expect(image.status == 0, "\(image)")
        guard image.status == 0 else { return }
        let docker = Engine(executable: CLIContainers.tool("docker", environment), environment: environment)
        try await stopScenario(docker, shutdownExitCode: 143, in: scratch)
    }
}

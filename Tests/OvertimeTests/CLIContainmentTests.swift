// A task contained whole (issue 13, DESIGN §7): a cgroup per task where this machine allows
// it, process groups elsewhere (`--cgroup off`, or hierarchies made read-only in a mount
// namespace of the test's own), the memory watchdog, honest outcomes, peak memory and CPU
// time, and the diagnose command. Real processes, real signals, the machine's own cgroups.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI containment", .serialized)
struct CLIContainmentTests {
    static let python = CLIBatchWorker.python

    /// The `--cgroup` modes a test runs in: the machine's own containment, and none.
    static let modes = ["auto", "off"]

    static func run(_ arguments: [String], in scratch: CLIScratch, timeout: Duration = .seconds(40)) async throws -> (CLIResult, [String: Any]) {
        let r = try await cliRun(["run", "--json", "--progress", "none"] + arguments, in: scratch, timeout: timeout)
        return (r, try r.report())
    }

    static func containment(_ report: [String: Any]) -> [String: Any] {
        report["containment"] as? [String: Any] ?? [:]
    }

    /// Whether this process's own cgroup, in the v2 hierarchy or the v1 memory one, may have
    /// children: read the test's own way (mountinfo, /proc/self/cgroup), not Overtime's.
    static var machineAllowsCgroups: Bool {
        let own = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
        let mounts = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        for line in own.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 else { continue }
            let wantV2 = parts[0] == "0"
            let wantMemory = parts[1].split(separator: ",").contains("memory")
            guard wantV2 || wantMemory else { continue }
            for mount in mounts.split(separator: "\n") {
                let fields = mount.split(separator: " ").map(String.init)
                guard let dash = fields.firstIndex(of: "-"), fields.count > dash + 3, fields[3] == "/" else { continue }
                let matches = wantV2 ? fields[dash + 1] == "cgroup2"
                    : fields[dash + 1] == "cgroup" && fields[dash + 3].split(separator: ",").contains("memory")
                if matches, access(fields[4] + (parts[2] == "/" ? "" : parts[2]), W_OK) == 0 { return true }
            }
        }
        return false
    }

    // MARK: Which containment

    @Test("on this machine: a cgroup per task when its hierarchies are writable, and the task is in it")
    func detected() async throws {
        let scratch = try CLIScratch()
        let (r, report) = try await Self.run(["--", "cat", "/proc/self/cgroup"], in: scratch)
        #expect(r.status == 0, "\(r)")
        let containment = Self.containment(report)
        let run = try #require(report["run"] as? String)
        if Self.machineAllowsCgroups {
            #expect(containment["kind"] as? String == "cgroup", "\(r)")
            #expect(r.stdout.contains("/overtime-\(run)/slot-"), "the task's /proc/self/cgroup does not name its own cgroup: \(r)")
            let help = try await cliRun(["run", "--help"], in: scratch)
            #expect(help.stdout.contains("On this machine: a cgroup per task"), "\(help)")
        } else {
            #expect(containment["kind"] as? String == "process-group", "\(r)")
            #expect(!((containment["notes"] as? [String]) ?? []).isEmpty, "a downgrade must say why: \(r)")
        }
        // Nothing of the run is left behind in the hierarchies.
        for directory in (containment["directories"] as? [String]) ?? [] {
            #expect(!FileManager.default.fileExists(atPath: directory), "\(directory) outlived its run")
        }
    }

    @Test("a task and a child it forked at once are both in the task's memory cgroup: from the start with a memory-max, after a moment without one", arguments: [true, false])
    func memoryCgroupHoldsTask(withMax: Bool) async throws {
        let scratch = try CLIScratch()
        // The child is forked first thing, before a late join could have happened.
        let script = try scratch.write("join.sh", """
        sleep 30 &
        child=$!
        cat /proc/self/cgroup > \(scratch.path("early"))
        sleep 0.5
        cat /proc/self/cgroup > \(scratch.path("late"))
        cat /proc/$child/cgroup > \(scratch.path("child"))
        kill $child
        """)
        let (r, report) = try await Self.run((withMax ? ["--memory-max", "1G"] : []) + ["--", "sh", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let containment = Self.containment(report)
        guard Self.machineAllowsCgroups, containment["memory"] as? String != "proc" else {
            #expect(containment["kind"] as? String != "cgroup" || containment["memory"] as? String == "proc", "\(r)")
            return
        }
        let run = try #require(report["run"] as? String)
        // The memory controller's line: "N:memory:/PATH" (v1), or "0::/PATH" where v2 counts memory.
        func memoryLine(_ file: String) throws -> String {
            let text = try String(contentsOfFile: scratch.path(file), encoding: .utf8)
            let v1 = text.split(separator: "\n").first { $0.split(separator: ":", omittingEmptySubsequences: false).dropFirst().first?.split(separator: ",").contains("memory") == true }
            return String(v1 ?? text.split(separator: "\n").first { $0.hasPrefix("0::") } ?? "")
        }
        for file in ["late", "child"] + (withMax ? ["early"] : []) {
            let line = try memoryLine(file)
            #expect(line.contains("/overtime-\(run)/slot-"), "\(file): the memory cgroup is not the task's: \(line) (\(r))")
        }
        #expect(CLIJSON.int(report["peak_memory"]) ?? 0 > 0, "\(r)")
    }

    @Test("in a mount namespace where the cgroup hierarchies are read-only: process groups, and the report says why")
    func readOnlyHierarchies() async throws {
        let scratch = try CLIScratch()
        let script = """
        for m in $(awk '$9 == "cgroup" || $9 == "cgroup2" {print $5}' /proc/self/mountinfo); do
            mount -o remount,bind,ro "$m" || exit 99
        done
        exec "$0" run --json --progress none -- true
        """
        let p = CLIProcess(["--mount", "--propagation", "private", "sh", "-c", script, CLIBinary.path],
                           executable: "/usr/bin/unshare", in: scratch)
        try await p.start()
        let r = await p.finish(timeout: .seconds(30))
        #expect(r.status == 0, "unshare (root, util-linux) must run here: \(r)")
        let containment = Self.containment(try r.report())
        #expect(containment["kind"] as? String == "process-group", "\(r)")
        let notes = (containment["notes"] as? [String]) ?? []
        #expect(notes.contains { $0.contains("not writable") }, "the notes must say the hierarchies were not writable: \(notes)")
    }

    // MARK: Nothing outlives the supervisor

    /// A task that starts one plain child, one that starts a session of its own, and one
    /// that double-forks out of a session of its own; all pids in `file`, then it waits.
    static func escapers(_ scratch: CLIScratch, _ name: String) -> [String] {
        let file = scratch.path(name)
        return ["sh", "-c", """
            sleep 301 & a=$!
            setsid sleep 302 & b=$!
            setsid sh -c 'sleep 303 & echo $! > \(file).c' &
            while [ ! -s \(file).c ]; do sleep 0.01; done
            echo "$$ $a $b $(cat \(file).c)" > \(file).tmp && mv \(file).tmp \(file)
            wait
            """]
    }

    @Test("kill -9 of overtime run: with a cgroup no process of the task survives, setsid and double fork included", arguments: modes)
    func runKilled(mode: String) async throws {
        let scratch = try CLIScratch()
        let p = CLIProcess(["run", "--progress", "none", "--budget", "10m", "--cgroup", mode, "--"] + Self.escapers(scratch, "pids"), in: scratch)
        try await p.start()
        let pids = CLISupervisorDeathTests.pids(await scratch.waitForFile("pids"))
        try #require(pids.count == 4, "the task never reported its pids")
        p.signal(SIGKILL)
        _ = await p.finish(timeout: .seconds(10))
        defer { for pid in pids { kill(pid, SIGKILL) } }
        let contained = mode == "auto" && Self.machineAllowsCgroups
        for (index, pid) in pids.enumerated() {
            let dead = await CLIProcessTable.waitDead(pid, timeout: .seconds(3))
            if contained || index < 2 {
                // The leader and its plain child die either way (the group guard).
                #expect(dead, "pid \(pid) outlived its supervisor (--cgroup \(mode)): \(CLISupervisorDeathTests.describe(pid))")
            } else {
                // Without a cgroup, what left the task's session is out of reach once its
                // parent is gone: the documented limit of process groups (docs/containment.md).
                #expect(!dead, "without a cgroup a setsid'd process is expected to outlive the supervisor; pid \(pid) did not")
            }
        }
    }

    @Test("kill -9 of overtime batch: no process of any task survives where a cgroup is in use")
    func batchKilled() async throws {
        try #require(Self.machineAllowsCgroups, "this machine offers no writable cgroup hierarchy")
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            ["name": "a", "command": Self.escapers(f.scratch, "a"), "budget": "10m"],
            ["name": "b", "command": Self.escapers(f.scratch, "b"), "budget": "10m"],
        ]])
        let p = try await f.start(["--progress", "none"])
        let pids = CLISupervisorDeathTests.pids(await f.scratch.waitForFile("a"))
            + CLISupervisorDeathTests.pids(await f.scratch.waitForFile("b"))
        try #require(pids.count == 8, "the tasks never reported their pids")
        p.signal(SIGKILL)
        _ = await p.finish(timeout: .seconds(10))
        defer { for pid in pids { kill(pid, SIGKILL) } }
        for pid in pids {
            #expect(await CLIProcessTable.waitDead(pid, timeout: .seconds(3)),
                    "pid \(pid) outlived overtime batch: \(CLISupervisorDeathTests.describe(pid))")
        }
    }

    @Test("a process that left the task's session and lost its parent may report where the task has a cgroup; without one it is refused", arguments: modes)
    func orphanReporter(mode: String) async throws {
        try #require(mode == "off" || Self.machineAllowsCgroups, "this machine offers no writable cgroup hierarchy")
        let scratch = try CLIScratch()
        let reporter = try scratch.python("orphan.py", """
        import socket
        time.sleep(0.3)   # its parent, the subshell, is gone by now
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("\\0" + os.environ["OVERTIME_SOCKET"][1:])
            s.sendall(b'{"type":"progress","completed":1,"total":2,"bar":"orphan"}\\n')
            time.sleep(0.5)
        except OSError:
            pass   # refused (no cgroup): the supervisor may close before the line is sent
        note(\(String(reflecting: scratch.path("done"))), "sent")
        """)
        let r = try await cliRun(["run", "--progress", "json", "--cgroup", mode, "--", "sh", "-c",
                                  // The leader stays until the orphan has sent (at most 10 s): a
                                  // slow start must not end the task under it.
                                  "(setsid \(Self.python) \(reporter) &); i=0; while [ ! -e \(scratch.path("done")) ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done"],
                                 in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(scratch.read("done") == "sent", "the orphan never got to send: \(r)")
        let events = r.stdoutLines.compactMap { try? CLIJSON.object($0) }
        let refused = events.filter { $0["event"] as? String == "reporter-refused" }
        let joined = events.contains { $0["event"] as? String == "reporters" && CLIJSON.int($0["count"]) == 2 }
        if mode == "auto" {
            #expect(refused.isEmpty && joined, "the task's cgroup holds the orphan: it must be let in: \(r)")
        } else {
            #expect(!refused.isEmpty && !joined, "without a cgroup an orphan outside the session is a stranger: \(r)")
        }
    }

    // MARK: The memory watchdog

    /// Grows by 10 MiB every 50 ms to 600 MiB, reading fd 3 in a thread: notes the warning
    /// and the cancel it is sent, in order, in `file`, and exits 0 on SIGTERM.
    static func grower(_ scratch: CLIScratch, _ file: String) throws -> String {
        try scratch.python("grow.py", """
        import threading
        seen = []
        def read():
            while True:
                m = recv()
                if m is None:
                    return
                if m["type"] in ("warning", "cancel"):
                    seen.append(m)
                    note(\(String(reflecting: scratch.path(file))), json.dumps(seen))
        threading.Thread(target=read, daemon=True).start()
        signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.2), os._exit(0)))
        \(Self.growth)
        """)
    }

    /// 10 MiB every 100 ms, each page touched, to 600 MiB: about 100 MiB/s, which leaves the
    /// supervisor some 300 ms between the max and the hard limit 32 MiB above it. At twice
    /// the rate, a full run's load on two cores once let the kernel's OOM killer come first.
    static let growth = """
    blocks = []
    for i in range(60):
        blocks.append(bytearray(10 << 20))
        for j in range(0, 10 << 20, 4096):
            blocks[-1][j] = 1
        time.sleep(0.1)
    """

    @Test("past its warning level, a one-step allocation of 2 GiB beyond a 200M max is cancelled for memory before the OOM killer, where the kernel reports the crossing")
    func crossingHeardAtOnce() async throws {
        let scratch = try CLIScratch()
        let (probe, probeReport) = try await Self.run(["--", "true"], in: scratch)
        try #require(Self.containment(probeReport)["memory"] as? String == "cgroup-v1",
                     "the kernel's threshold events are v1's; this machine's memory is not: \(probe)")
        // Near its max first (185 MiB, past the 90% warning level, seen by a sample), then the
        // burst: from the warning on the kernel is listening for the max.
        let (r, report) = try await Self.run(["--memory-max", "200M", "--grace", "5s", "--", Self.python, "-c",
                                              "import time; a = bytearray(185 << 20); a[::4096] = b'x' * len(a[::4096]); time.sleep(1); b = b'x' * (2 << 30)"], in: scratch)
        #expect(r.status == 124 && report["cancel_reason"] as? String == "memory", "\(r)")
        #expect(report["outcome"] as? String == "cancelled" && CLIJSON.int(report["oom_kills"]) == 0, "\(r)")
    }

    @Test("a task growing past --memory-max 200M: a warning first, then a memory cancel it can read; exit 124, peak near the limit", arguments: modes)
    func memoryCancel(mode: String) async throws {
        let scratch = try CLIScratch()
        let grower = try Self.grower(scratch, "seen")
        let (r, report) = try await Self.run(["--cgroup", mode, "--memory-max", "200M", "--grace", "5s", "--", Self.python, grower], in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(report["cancel_reason"] as? String == "memory", "\(r)")
        let seenText = try #require(scratch.read("seen"), "the task never heard a thing")
        let seen = (try JSONSerialization.jsonObject(with: Data(seenText.utf8)) as? [[String: Any]]) ?? []
        let kinds = seen.compactMap { $0["type"] as? String }
        #expect(kinds == ["warning", "cancel"], "\(seen)")
        if let warning = seen.first {
            #expect(warning["resource"] as? String == "memory")
            #expect(CLIJSON.int(warning["limit"]) == 200 << 20)
            #expect((CLIJSON.int(warning["used"]) ?? 0) >= 180 << 20, "warned below 90% of the max: \(warning)")
        }
        #expect(seen.last?["reason"] as? String == "memory", "\(seen)")
        let peak = try #require(CLIJSON.int(report["peak_memory"]), "\(r)")
        // Cancelled at 200 MiB; sampled every 250 ms while growing 100 MiB/s: at most one
        // sample late, and never past the cgroup's hard limit (max + 32 MiB).
        #expect(peak >= 190 << 20 && peak <= 280 << 20, "peak \(peak) is not near the 200 MiB max: \(r)")
    }

    @Test("a batch: the task past its max is cancelled for memory, its sibling and the supervisor are unharmed", arguments: modes)
    func memorySibling(mode: String) async throws {
        let f = try CLIBatchFixture()
        let grower = try Self.grower(f.scratch, "seen")
        try f.writeJob(["tasks": [
            ["name": "grower", "command": [Self.python, grower], "memory-max": "200M", "grace": "5s"],
            f.task("sibling", ["sleep=3", "exit=0"]),
        ]])
        let r = try await f.run(["--progress", "none", "--cgroup", mode])
        #expect(r.status == 1, "\(r)")
        let rows = (try f.summary()["tasks"] as? [[String: Any]]) ?? []
        let grown = rows.first { $0["name"] as? String == "grower" }
        let sibling = rows.first { $0["name"] as? String == "sibling" }
        #expect(grown?["reason"] as? String == "memory", "\(rows)")
        #expect(sibling?["outcome"] as? String == "succeeded", "\(rows)")
        #expect(CLIJSON.int(grown?["peak_memory"]) ?? 0 >= 190 << 20, "\(rows)")
    }

    @Test("retries.on memory retries a memory cancel, and not a timeout")
    func retryOnMemory() async throws {
        let f = try CLIBatchFixture()
        // Attempt 1 grows past its max; attempt 2 (OVERTIME_ATTEMPT) succeeds at once.
        let grower = try f.scratch.python("grow-once.py", """
        if os.environ.get("OVERTIME_ATTEMPT") != "1":
            sys.exit(0)
        \(Self.growth)
        """)
        let retries: [String: Any] = ["max": 1, "backoff": "100ms", "on": ["memory"]]
        try f.writeJob(["tasks": [
            ["name": "grower", "command": [Self.python, grower], "memory-max": "150M", "grace": "2s", "retries": retries],
            ["name": "stuck", "command": ["sleep", "30"], "budget": "500ms", "grace": "1s", "retries": retries],
        ]])
        let r = try await f.run(["--progress", "none"])
        #expect(r.status == 1, "\(r)")
        let rows = (try f.summary()["tasks"] as? [[String: Any]]) ?? []
        let grown = rows.first { $0["name"] as? String == "grower" }
        let stuck = rows.first { $0["name"] as? String == "stuck" }
        #expect(grown?["outcome"] as? String == "succeeded" && CLIJSON.int(grown?["attempts"]) == 2, "\(rows)")
        #expect(stuck?["reason"] as? String == "timeout" && CLIJSON.int(stuck?["attempts"]) == 1, "\(rows)")
        let retried = try f.events(of: "grower", "retry")
        #expect(retried.first?["because"] as? String == "memory", "\(retried)")
    }

    // The watchdog hears the crossing of the max from the kernel (v1's event_control) and
    // cancels at once, so only a task that does not stop on SIGTERM (a C++ allocation loop,
    // a handler that ignores it) runs on into the hard limit above the max.
    @Test("a task that allocates far past the max in one step, ignoring the cancel, is reported oom, never a plain signal")
    func oomKill() async throws {
        let scratch = try CLIScratch()
        let (probe, probeReport) = try await Self.run(["--", "true"], in: scratch)
        try #require(Self.containment(probeReport)["memory"] as? String != "proc",
                     "this machine offers no memory cgroup to count OOM kills in: \(probe)")
        let (r, report) = try await Self.run(["--memory-max", "200M", "--", Self.python, "-c",
                                              "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(0.3); b = b'x' * (2 << 30)"], in: scratch)
        #expect(r.status == 137, "\(r)")
        #expect(report["outcome"] as? String == "oom", "\(r)")
        #expect((CLIJSON.int(report["oom_kills"]) ?? 0) >= 1, "\(r)")
        #expect(report["killed"] as? Bool == false, "\(r)")
    }

    // MARK: Honest outcomes

    @Test("a task killed from outside with SIGKILL: a signal not sent by Overtime, not 'killed'", arguments: modes)
    func outsideKill(mode: String) async throws {
        let scratch = try CLIScratch()
        let (r, report) = try await Self.run(["--cgroup", mode, "--", "sh", "-c", "kill -9 $$"], in: scratch)
        #expect(r.status == 137, "\(r)")
        #expect(report["outcome"] as? String == "signal", "\(r)")
        #expect(report["signal_sender"] as? String == "outside", "\(r)")
        #expect(report["killed"] as? Bool == false, "\(r)")
    }

    @Test("Overtime's own SIGKILL after grace is 'killed', sent by Overtime", arguments: modes)
    func killedAfterGrace(mode: String) async throws {
        let scratch = try CLIScratch()
        let (r, report) = try await Self.run(["--cgroup", mode, "--budget", "500ms", "--grace", "500ms", "--",
                                              "sh", "-c", "trap '' TERM; sleep 30"], in: scratch)
        #expect(r.status == 137, "\(r)")
        #expect(report["outcome"] as? String == "killed", "\(r)")
        #expect(report["signal_sender"] as? String == "overtime", "\(r)")
    }

    @Test("peak memory and CPU seconds of a task that allocates 300 MB and spins for 1 s, within 10%", arguments: modes)
    func usage(mode: String) async throws {
        let scratch = try CLIScratch()
        let script = try scratch.python("use.py", """
        block = bytearray(300 * 1000 * 1000)
        for j in range(0, len(block), 4096):
            block[j] = 1
        start = time.process_time()
        while time.process_time() - start < 1.0:
            pass
        t = os.times()
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
        send({"type": "result", "value": {"cpu": t.user + t.system, "hwm": int(hwm) * 1024}})
        """)
        let (r, report) = try await Self.run(["--cgroup", mode, "--", Self.python, script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let own = try #require(report["result"] as? [String: Any], "\(r)")
        let hwm = Double(try #require(CLIJSON.int(own["hwm"])))
        let cpu = try #require(CLIJSON.double(own["cpu"]))
        let peak = Double(try #require(CLIJSON.int(report["peak_memory"]), "\(r)"))
        let measured = (CLIJSON.double(report["cpu_user"]) ?? 0) + (CLIJSON.double(report["cpu_system"]) ?? 0)
        #expect(hwm >= 300e6, "the task's own high-water mark: \(hwm)")
        #expect(abs(peak - hwm) <= 0.1 * hwm, "peak \(peak) vs the task's own VmHWM \(hwm) (--cgroup \(mode)): \(r)")
        #expect(cpu >= 1.0 && abs(measured - cpu) <= 0.1 * cpu, "CPU \(measured) s vs the task's own \(cpu) s (--cgroup \(mode)): \(r)")
    }

    @Test("without a memory cgroup, a SIGKILL from nobody while memory was near the max is a likely OOM kill, said as such")
    func likelyOOM() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.python("near.py", """
        block = bytearray(185 << 20)
        for j in range(0, len(block), 4096):
            block[j] = 1
        time.sleep(2.0)   # eight samples at 4 Hz see it, even on a machine loaded enough to miss some
        os.kill(os.getpid(), signal.SIGKILL)
        """)
        let (r, report) = try await Self.run(["--cgroup", "off", "--memory-max", "200M", "--", Self.python, script], in: scratch)
        #expect(r.status == 137, "\(r)")
        #expect(report["outcome"] as? String == "signal" && report["likely_oom"] as? Bool == true, "\(r)")
        #expect(CLIJSON.isNull(report["oom_kills"]), "no counter without a memory cgroup: \(r)")
        let (far, farReport) = try await Self.run(["--cgroup", "off", "--memory-max", "2G", "--", "sh", "-c", "kill -9 $$"], in: scratch)
        #expect(far.status == 137 && farReport["likely_oom"] == nil, "far from its max, a SIGKILL is only a signal: \(far)")
    }

    @Test("ctl status carries the containment and a running task's memory and CPU")
    func statusShowsContainment() async throws {
        let scratch = try CLIScratch()
        let socket = scratch.path("ctl.sock")
        let p = CLIProcess(["run", "--progress", "none", "--control", socket, "--memory-max", "1G", "--", "sleep", "30"], in: scratch)
        try await p.start()
        #expect(await CLICtl.waitForSocket(socket), "no control socket")
        var reply: [String: Any] = [:]
        var task: [String: Any]?
        _ = try await CLICtl.waitUntil {
            let r = try await CLICtl.ctl(socket: socket, ["status", "--json"], in: scratch)
            reply = (try? CLIJSON.object(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))) ?? [:]
            task = (reply["tasks"] as? [[String: Any]])?.first
            return task?["memory"] != nil
        }
        let containment = reply["containment"] as? [String: Any]
        #expect(containment?["kind"] as? String == (Self.machineAllowsCgroups ? "cgroup" : "process-group"), "\(reply)")
        #expect((CLIJSON.int(task?["memory"]) ?? 0) > 0, "\(reply)")
        if Self.machineAllowsCgroups {
            #expect(CLIJSON.double(task?["cpu_user"]) != nil && CLIJSON.int(task?["peak_memory"]) != nil, "\(reply)")
        }
        p.signal(SIGTERM)
        _ = await p.finish(timeout: .seconds(20))
    }

    // MARK: Diagnose before killing

    @Test("--diagnose runs before the cancel message, with the task's pid; its output lands in the task's stderr")
    func diagnoseFirst() async throws {
        let scratch = try CLIScratch()
        let marker = scratch.path("diagnosed")
        let task = try scratch.python("hang.py", """
        catch_term()
        m = recv(30)
        while m is not None and m["type"] != "cancel":
            m = recv(30)
        note(\(String(reflecting: scratch.path("order"))), "diagnosed-before-cancel" if os.path.exists(\(String(reflecting: marker))) else "cancel-first")
        await_term()
        """)
        let (r, report) = try await Self.run(["--budget", "1s", "--grace", "5s", "--diagnose",
                                              "echo DIAG pid={pid} env=$OVERTIME_TASK_PID; echo x > \(marker)",
                                              "--", Self.python, task], in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(scratch.read("order")?.hasPrefix("diagnosed-before-cancel") == true, "\(r)")
        let pid = try #require(CLIJSON.int(report["pid"]))
        #expect(r.stderr.contains("DIAG pid=\(pid) env=\(pid)"), "\(r)")
        #expect(r.stderr.contains("the diagnose command exited 0"), "\(r)")
    }

    @Test("a hanging diagnose command is cut at its limit; a missing one does not delay the cancel")
    func diagnoseBounded() async throws {
        let scratch = try CLIScratch()
        let started = ContinuousClock.now
        let (r, _) = try await Self.run(["--budget", "1s", "--grace", "1s", "--diagnose", "sleep 60", "--diagnose-limit", "1s",
                                         "--", "sleep", "60"], in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(r.stderr.contains("was cut (at its limit)"), "\(r)")
        // 1 s budget + 1 s limit, and SIGTERM ends sleep at once: generous for a loaded machine.
        #expect(ContinuousClock.now - started < .seconds(15), "\(r)")
        let (missing, _) = try await Self.run(["--budget", "1s", "--grace", "1s", "--diagnose", "no-such-diagnose-tool {pid}",
                                               "--", "sleep", "60"], in: scratch)
        #expect(missing.status == 124, "\(missing)")
        #expect(missing.stderr.contains("exited 127"), "\(missing)")
    }

    @Test("a batch task's diagnose command writes into its log before the cancel; diagnose-limit without diagnose is refused")
    func diagnoseInBatch() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            ["name": "hung", "command": ["sleep", "30"], "budget": "1s", "grace": "1s",
             "diagnose": "echo STACKS of {pid}", "diagnose-limit": "5s"],
        ]])
        let r = try await f.run(["--progress", "none"])
        #expect(r.status == 1, "\(r)")
        let log = try String(contentsOfFile: f.runDirectory + "/logs/hung.log", encoding: .utf8)
        let pid = try #require(CLIJSON.int(try f.events(of: "hung", "started").first?["pid"]))
        #expect(log.contains("STACKS of \(pid)"), "\(log)")
        let diagnosing = try f.events(of: "hung", "diagnosing")
        let cancel = try f.events(of: "hung", "cancel")
        #expect(diagnosing.count == 1 && cancel.count == 1, "\(try f.eventLines())")
        try f.writeJob(["tasks": [["name": "x", "command": ["true"], "diagnose-limit": "5s"]]])
        let refused = try await f.run(["--progress", "none"])
        #expect(refused.status == 125 && refused.stderr.contains("needs a 'diagnose' command"), "\(refused)")
    }

    // MARK: Bad input

    @Test("bad memory and diagnose options are clear errors, exit 125")
    func badOptions() async throws {
        let scratch = try CLIScratch()
        for (arguments, words) in [
            (["--memory-max", "lots"], "is not a size"),
            (["--memory-max", "-5M"], "is not a size"),
            (["--memory-warn", "80%"], "needs --memory-max"),
            (["--memory-max", "1G", "--memory-warn", "150%"], "percentage"),
            (["--cgroup", "maybe"], "neither auto nor off"),
            (["--diagnose-limit", "5s"], "needs --diagnose"),
            (["--diagnose", ""], "needs a command"),
        ] {
            let r = try await cliRun(["run"] + arguments + ["--", "true"], in: scratch)
            #expect(r.status == 125 && r.stderr.contains(words), "\(arguments): \(r)")
        }
    }
}

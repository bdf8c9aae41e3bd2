// A batch reuses its emptied task cgroups (the run's pool of `slot-<n>`), and each task's
// figures are its own: CPU, peak memory, OOM kills and the memory limit start afresh for
// the task that takes a slot after another. Real processes on the machine's own cgroups,
// at concurrency 1 so the second task takes the first one's slot.

import Foundation
import Testing

@Suite("CLI cgroup pool", .serialized)
struct CLICgroupPoolTests {
    static let python = CLIBatchWorker.python

    /// A task that prints its v2 cgroup (or v1 memory one) path, then runs `code` in Python.
    static func task(_ name: String, _ code: String, _ fields: [String: Any] = [:]) -> [String: Any] {
        var object = fields
        object["name"] = name
        object["command"] = [python, "-c", """
            import sys
            lines = open('/proc/self/cgroup').read().splitlines()
            own = [l for l in lines if l.startswith('0::')] + [l for l in lines if ':memory:' in l]
            print('cgroup', own[0].split(':', 2)[2], flush=True)
            \(code)
            """]
        return object
    }

    /// The cgroup each task printed, from its log.
    static func cgroupSeen(_ f: CLIBatchFixture, _ name: String) -> String? {
        let log = (try? String(contentsOfFile: f.runDirectory + "/logs/\(name).log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").first { $0.hasPrefix("cgroup ") }.map { String($0.dropFirst(7)) }
    }

    /// A first task that reads what Python reads at start, so its page cache is charged to
    /// a cgroup of its own (removed when that is over 1 MiB) and not to the cgroup the
    /// tasks under test share, on a machine where no Python ran yet.
    static var warmUp: [String: Any] { task("warm-up", "import signal, time") }

    static func cpu(_ row: [String: Any]?) -> Double {
        (CLIJSON.double(row?["cpu_user"]) ?? 0) + (CLIJSON.double(row?["cpu_system"]) ?? 0)
    }

    @Test("a task after a CPU- and memory-hungry one in the same cgroup reports its own small CPU and peak, in summary.json and the journal")
    func figuresStartAfresh() async throws {
        try #require(CLIContainmentTests.machineAllowsCgroups, "this machine offers no writable cgroup hierarchy")
        let f = try CLIBatchFixture()
        try f.writeJob(["concurrency": 1, "tasks": [
            Self.warmUp,
            Self.task("hungry", """
                import time
                b = bytearray(100 << 20)
                for i in range(0, len(b), 4096): b[i] = 1
                end = time.process_time() + 0.5
                while time.process_time() < end: pass
                """),
            Self.task("idle", "import time; time.sleep(0.3)"),
        ]])
        let r = try await f.run(["--progress", "none"])
        #expect(r.status == 0, "\(r)")
        let first = try #require(Self.cgroupSeen(f, "hungry"), "\(r)")
        #expect(first.contains("/slot-"), "the first task's cgroup: \(first)")
        #expect(Self.cgroupSeen(f, "idle") == first, "the second task did not reuse the first one's cgroup: \(r)")
        let rows = try f.summaryTasks()
        #expect(Self.cpu(rows["hungry"]) >= 0.45, "\(rows)")
        #expect(CLIJSON.int(rows["hungry"]?["peak_memory"]) ?? 0 >= 100 << 20, "\(rows)")
        // Python's start and a sleep: a few tens of milliseconds, a few MiB.
        #expect(Self.cpu(rows["idle"]) < 0.2, "the second task reports the first one's CPU: \(rows)")
        let idlePeak = try #require(CLIJSON.int(rows["idle"]?["peak_memory"]), "\(rows)")
        #expect(idlePeak < 30 << 20, "the second task reports the first one's peak: \(rows)")
        // The journal says the same.
        let exited = try #require(try f.events(of: "idle", "exited").last, "no exited line for idle")
        #expect(CLIJSON.int(exited["peak_memory"]) ?? Int.max < 30 << 20, "\(exited)")
        #expect(Self.cpu(exited) < 0.2, "\(exited)")
        let hungry = try f.events(of: "hungry", "exited").last
        #expect(Self.cpu(hungry) >= 0.45, "\(String(describing: hungry))")
    }

    // Linux kills a child created inside a cgroup whose cgroup.kill was ever written
    // (CLONE_INTO_CGROUP, since the fork/kill race fix): such a cgroup must not be reused.
    @Test("a task killed through cgroup.kill does not pass its cgroup on; the next task runs")
    func aKilledCgroupIsNotReused() async throws {
        try #require(CLIContainmentTests.machineAllowsCgroups, "this machine offers no writable cgroup hierarchy")
        let f = try CLIBatchFixture()
        try f.writeJob(["concurrency": 1, "tasks": [
            Self.warmUp,
            // Deaf to the cancel: the SIGKILL after grace goes through cgroup.kill.
            Self.task("deaf", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(30)",
                      ["budget": "1s", "grace": "300ms"]),
            Self.task("after", "pass"),
            Self.task("later", "pass"),
        ]])
        let r = try await f.run(["--progress", "none"])
        let rows = try f.summaryTasks()
        #expect(rows["deaf"]?["reason"] as? String == "timeout", "\(rows)")
        for name in ["after", "later"] {
            #expect(rows[name]?["outcome"] as? String == "succeeded", "\(name): \(rows)")
        }
        let deaf = try #require(Self.cgroupSeen(f, "deaf"), "\(r)")
        #expect(Self.cgroupSeen(f, "after") != deaf, "the killed cgroup was given to the next task: \(r)")
        // The next one's, killed in nothing, is reused.
        #expect(Self.cgroupSeen(f, "later") == Self.cgroupSeen(f, "after"), "\(r)")
    }

    @Test("the metrics' CPU of a running task in a reused cgroup is its own")
    func metricsStartAfresh() async throws {
        try #require(CLIContainmentTests.machineAllowsCgroups, "this machine offers no writable cgroup hierarchy")
        let f = try CLIBatchFixture()
        let stop = f.path("stop")
        try f.writeJob(["concurrency": 1, "metrics-file": f.path("batch.prom"), "tasks": [
            Self.warmUp,
            Self.task("hungry", "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"),
            Self.task("idle", "import os, time\nwhile not os.path.exists('\(stop)'): time.sleep(0.1)"),
        ]])
        let p = try await f.start(["--progress", "none"])
        defer { FileManager.default.createFile(atPath: stop, contents: nil) }
        // The file is written every 5 s; the sampler reads the running tasks once a second.
        var page = ""
        let clock = ContinuousClock()
        let end = clock.now + .seconds(30)
        func cpu(_ page: String, _ mode: String) -> Double? {
            let prefix = #"overtime_task_cpu_seconds_total{task="idle",mode="\#(mode)"} "#
            return page.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
        }
        while clock.now < end {
            page = (try? String(contentsOfFile: f.path("batch.prom"), encoding: .utf8)) ?? ""
            if cpu(page, "user") != nil, page.contains(#"overtime_task_state{task="idle",state="running"} 1"#) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let user = try #require(cpu(page, "user"), "no CPU of the running idle task in the metrics: \(page)")
        #expect(user + (cpu(page, "system") ?? 0) < 0.2, "the running second task's CPU in the metrics is the first one's: \(page)")
        FileManager.default.createFile(atPath: stop, contents: nil)
        let r = await p.finish(timeout: .seconds(30))
        #expect(r.status == 0, "\(r)")
        let first = try #require(Self.cgroupSeen(f, "hungry"), "\(r)")
        #expect(Self.cgroupSeen(f, "idle") == first, "the second task did not reuse the first one's cgroup: \(r)")
    }

    @Test("after a task killed by the OOM killer under its memory-max, the next in its cgroup reports no OOM kill and has no limit")
    func oomAndLimitDoNotCarryOver() async throws {
        try #require(CLIContainmentTests.machineAllowsCgroups, "this machine offers no writable cgroup hierarchy")
        let f = try CLIBatchFixture()
        try f.writeJob(["concurrency": 1, "tasks": [
            Self.warmUp,
            // Past the hard limit in one step, deaf to the cancel: the kernel kills it.
            Self.task("oom", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(0.3); b = b'x' * (2 << 30)",
                      ["memory-max": "100M"]),
            // No limit: 300 MiB, past the first one's hard limit, is fine.
            Self.task("big", "b = bytearray(300 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"),
        ]])
        let r = try await f.run(["--progress", "none"])
        #expect(r.status == 1, "\(r)")
        let rows = try f.summaryTasks()
        let first = try #require(Self.cgroupSeen(f, "oom"), "\(r)")
        #expect(Self.cgroupSeen(f, "big") == first, "the second task did not reuse the first one's cgroup: \(r)")
        try #require(rows["oom"]?["memory_source"] as? String == "cgroup", "this machine offers no memory cgroup to count OOM kills in: \(rows)")
        let oom = try #require(try f.events(of: "oom", "exited").last, "no exited line for oom")
        let big = try #require(try f.events(of: "big", "exited").last, "no exited line for big")
        #expect(rows["oom"]?["reason"] as? String == "oom" && CLIJSON.int(oom["oom_kills"]) ?? 0 >= 1, "\(rows) \(oom)")
        #expect(CLIJSON.int(big["oom_kills"]) == 0 && big["outcome"] as? String == "succeeded",
                "the OOM kill of the first task is counted for the second: \(big)")
        #expect(rows["big"]?["outcome"] as? String == "succeeded", "the first task's limit held for the second: \(rows)")
        #expect(CLIJSON.int(rows["big"]?["peak_memory"]) ?? 0 >= 300 << 20, "\(rows)")
    }
}

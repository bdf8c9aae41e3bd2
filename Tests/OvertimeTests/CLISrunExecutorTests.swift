// A batch spread over a Slurm allocation (issue 14, DESIGN §8): `overtime batch` inside
// `sbatch -c 2` with "executor": "srun", each task a job step supervised on its node by
// `overtime run --control-stdio`. A real Slurm: scripts/test brings up a one-node cluster
// (scripts/slurm) and exports SLURM_CONF; without it these tests fail and say so.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI srun executor", .serialized)
struct CLISrunExecutorTests {
    static let python = CLIBatchWorker.python

    /// A Slurm command, to its end.
    static func slurm(_ executable: String, _ arguments: [String], in scratch: CLIScratch, conf: String) async throws -> CLIResult {
        let process = CLIProcess(arguments, executable: executable, environment: ["SLURM_CONF": conf, "PATH": "/usr/bin:/bin"], in: scratch)
        try await process.start()
        return await process.finish(timeout: .seconds(30))
    }

    /// Runs `command` (a shell line) as a Slurm batch job with 2 CPUs, waits for its end
    /// (at most `timeout`), and returns its final state from `scontrol show job`.
    static func sbatch(_ command: String, in scratch: CLIScratch, timeout: Duration = .seconds(90),
                       whileRunning: (() async throws -> Void)? = nil) async throws -> String {
        let conf = try #require(ProcessInfo.processInfo.environment["SLURM_CONF"],
                                "no SLURM_CONF: scripts/test brings up a one-node Slurm (scripts/slurm up) for these tests")
        let script = try scratch.write("head-\(UUID().uuidString.prefix(6)).sbatch", "#!/bin/sh\n\(command)\n", mode: 0o755)
        let submit = try await slurm("/usr/bin/sbatch", ["--parsable", "-c", "2", "-o", scratch.path("head.out"), script], in: scratch, conf: conf)
        let job = submit.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(submit.status == 0 && !job.isEmpty, "sbatch failed: \(submit)")
        let clock = ContinuousClock()
        let end = clock.now + timeout
        var ranWhile = false
        while clock.now < end {
            let show = try await slurm("/usr/bin/scontrol", ["show", "job", job], in: scratch, conf: conf)
            let state = show.stdout.split(separator: " ").first { $0.hasPrefix("JobState=") }.map { String($0.dropFirst(9)) } ?? "?"
            if ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"].contains(state) { return state }
            if state == "RUNNING", !ranWhile, let whileRunning {
                ranWhile = true
                try await whileRunning()
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        _ = try? await slurm("/usr/bin/scancel", [job], in: scratch, conf: conf)
        throw CLIFailure("job \(job) did not end within \(timeout)")
    }

    /// A task's record: what it saw, written by itself (start and end on CLOCK_MONOTONIC, the
    /// step it ran as, what it heard on fd 3).
    static func worker(_ scratch: CLIScratch) throws -> String {
        try scratch.python("step.py", """
        name, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
        record = {"start": time.monotonic(), "step": os.environ.get("SLURM_STEP_ID"), "attempt": os.environ.get("OVERTIME_ATTEMPT")}
        path = \(String(reflecting: scratch.path("rec"))) + "/" + name + "." + str(record["attempt"])
        catch_term()
        note(path + ".ready", "")   # from here a SIGTERM is caught (see scancelIsAShutdown)
        if mode == "progress":
            for i in range(int(seconds * 4)):
                send({"type": "progress", "completed": i + 1, "total": int(seconds * 4)})
                time.sleep(0.25)
        else:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                m = recv(max(0.01, end - time.monotonic()))
                if m and m.get("type") == "cancel":
                    record["cancel"] = m["reason"]
                    break
                if m and m.get("type") == "budget":
                    record.setdefault("budgets", []).append(m.get("remaining"))
        record["end"] = time.monotonic()
        print("log of", name, "complete")
        note(path, json.dumps(record))
        if "cancel" in record:
            await_term()
            sys.exit(3)
        """)
    }

    @Test("a batch over srun: two steps at once, progress outlives a budget, a stall is a timeout on its node, ctl extend reaches a remote task, logs whole, --resume reruns only what failed")
    func batchOverSrun() async throws {
        let scratch = try CLIScratch()
        try FileManager.default.createDirectory(atPath: scratch.path("rec"), withIntermediateDirectories: true)
        let worker = try Self.worker(scratch)
        let job = try scratch.write("job.json", """
        {"executor": "srun", "concurrency": 2, "tasks": [
          {"name": "steady", "command": ["\(Self.python)", "\(worker)", "steady", "progress", "3"], "budget": "1s"},
          {"name": "stalled", "command": ["\(Self.python)", "\(worker)", "stalled", "silent", "30"], "budget": "2s", "grace": "5s"},
          {"name": "extended", "command": ["\(Self.python)", "\(worker)", "extended", "silent", "6"], "budget": "3s", "after": ["steady"]}
        ]}
        """)
        let run = scratch.path("run")
        let socket = scratch.path("head.sock")
        let head = "exec \(CLIBinary.path) batch \(job) --run-dir \(run) --control \(socket) --progress plain"
        let state = try await Self.sbatch(head, in: scratch) {
            // Once `extended` runs (after `steady`), give it 20 s more from here, over the
            // head's control socket, before its own 3 s budget would end it.
            let clock = ContinuousClock()
            let end = clock.now + .seconds(30)
            while clock.now < end {
                // Asked of the head itself: its journal is written in batches.
                let tasks = (try? await CLICtl.status(socket, in: scratch)) ?? []
                if tasks.contains(where: { $0["name"] as? String == "extended" && $0["state"] as? String == "running" }) {
                    let r = try await CLICtl.ctl(socket: socket, ["extend", "extended", "20s"], in: scratch)
                    #expect(r.status == 0, "ctl extend: \(r)")
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("'extended' never ran: \(scratch.read("head.out") ?? "")")
        }
        let headOut = scratch.read("head.out") ?? ""
        #expect(state == "FAILED", "one task fails, so the batch exits 1: \(state)\n\(headOut)")
        func record(_ name: String, _ attempt: Int = 1) throws -> [String: Any] {
            try CLIJSON.object(try #require(scratch.read("rec/\(name).\(attempt)"), "\(name) left no record\n\(headOut)"))
        }
        let steady = try record("steady"), stalled = try record("stalled"), extended = try record("extended")
        // Job steps of their own, at once.
        #expect(steady["step"] as? String != nil && steady["step"] as? String != stalled["step"] as? String, "\(steady) \(stalled)")
        let overlap = min(CLIJSON.double(steady["end"]) ?? 0, CLIJSON.double(stalled["end"]) ?? 0)
            - max(CLIJSON.double(steady["start"]) ?? 0, CLIJSON.double(stalled["start"]) ?? 0)
        #expect(overlap > 0.5, "the two steps did not run at once: \(steady) \(stalled)")
        // Progress kept it past its 1 s budget.
        #expect((CLIJSON.double(steady["end"]) ?? 0) - (CLIJSON.double(steady["start"]) ?? 0) > 2.5, "\(steady)")
        // The stalled one heard its cancel on its node, with the reason.
        #expect(stalled["cancel"] as? String == "timeout", "\(stalled)")
        // The operator's extension reached the remote task: silent for 6 s on a 3 s budget,
        // it finished (and heard the new budget).
        #expect(extended["cancel"] == nil && ((extended["budgets"] as? [Any])?.count ?? 0) >= 2,
                "\(extended)\nhead:\n\(headOut)\nits log:\n\((try? String(contentsOfFile: run + "/logs/extended.log", encoding: .utf8)) ?? "")\njournal:\n\((try? String(contentsOfFile: run + "/events.jsonl", encoding: .utf8)) ?? "")")
        let summary = try CLIJSON.object(try #require(try? String(contentsOfFile: run + "/summary.json", encoding: .utf8)))
        let rows = (summary["tasks"] as? [[String: Any]]) ?? []
        func row(_ name: String) -> [String: Any]? { rows.first { $0["name"] as? String == name } }
        #expect(row("steady")?["outcome"] as? String == "succeeded" && row("extended")?["outcome"] as? String == "succeeded", "\(rows)")
        #expect(row("stalled")?["reason"] as? String == "timeout" && CLIJSON.int(row("stalled")?["exit_code"]) == 124, "\(rows)")
        for name in ["steady", "stalled", "extended"] {
            let log = (try? String(contentsOfFile: run + "/logs/\(name).log", encoding: .utf8)) ?? ""
            #expect(log.contains("log of \(name) complete"), "\(name)'s log: \(log)")
        }
        let journal = (try? String(contentsOfFile: run + "/events.jsonl", encoding: .utf8)) ?? ""
        #expect(journal.contains(#""task":"extended","event":"budget""#) && journal.contains("operator-extend"), "the remote budget change is in the head's journal")

        // --resume: only what failed runs again.
        _ = try await Self.sbatch("exec \(CLIBinary.path) batch --resume \(run) --progress plain", in: scratch)
        #expect(scratch.read("rec/stalled.1") != nil && FileManager.default.fileExists(atPath: scratch.path("rec/stalled.1")))
        let again = try CLIJSON.object(try #require(try? String(contentsOfFile: run + "/summary.json", encoding: .utf8)))
        let resumed = (again["tasks"] as? [[String: Any]]) ?? []
        #expect(resumed.first { $0["name"] as? String == "steady" }?["resumed"] as? Bool == true, "\(resumed)")
        #expect(resumed.first { $0["name"] as? String == "stalled" }?["resumed"] as? Bool == false, "\(resumed)")
    }

    @Test("scancel of the allocation is a shutdown for every remote task: each reads the reason on its node, the summary says so")
    func scancelIsAShutdown() async throws {
        let scratch = try CLIScratch()
        try FileManager.default.createDirectory(atPath: scratch.path("rec"), withIntermediateDirectories: true)
        let worker = try Self.worker(scratch)
        let job = try scratch.write("job.json", """
        {"executor": "srun", "concurrency": 2, "tasks": [
          {"name": "a", "command": ["\(Self.python)", "\(worker)", "a", "silent", "60"], "budget": "5m", "grace": "5s"},
          {"name": "b", "command": ["\(Self.python)", "\(worker)", "b", "silent", "60"], "budget": "5m", "grace": "5s"}
        ]}
        """)
        let run = scratch.path("run")
        let socket = scratch.path("head.sock")
        let conf = try #require(ProcessInfo.processInfo.environment["SLURM_CONF"], "no SLURM_CONF")
        let state = try await Self.sbatch("exec \(CLIBinary.path) batch \(job) --run-dir \(run) --control \(socket) --progress plain", in: scratch) {
            // Both steps running, then the allocation is cancelled as a user (or a
            // preemption) would: Slurm's SIGTERM to every process of the job. Not before
            // both workers catch SIGTERM: a task's pid is known at its spawn, while its
            // Python is still starting, and Slurm's SIGTERM would then end it the default
            // way before its node's supervisor could tell it why.
            let clock = ContinuousClock()
            let end = clock.now + .seconds(30)
            while clock.now < end {
                let tasks = (try? await CLICtl.status(socket, in: scratch)) ?? []
                let running = tasks.filter { $0["state"] as? String == "running" && $0["pid"] != nil && !($0["pid"] is NSNull) }
                if running.count == 2 && ["a", "b"].allSatisfy({ scratch.read("rec/\($0).1.ready") != nil }) { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            // This test's job: the one whose command is the head script in its scratch directory.
            let all = try await Self.slurm("/usr/bin/squeue", ["-h", "-o", "%i %o"], in: scratch, conf: conf)
            for line in all.stdout.split(separator: "\n") where line.contains(scratch.url.path) {
                _ = try await Self.slurm("/usr/bin/scancel", [String(line.split(separator: " ")[0])], in: scratch, conf: conf)
            }
        }
        #expect(state == "CANCELLED", "\(state)")
        for name in ["a", "b"] {
            let record = try CLIJSON.object(try #require(scratch.read("rec/\(name).1"), "\(name) left no record: \(scratch.read("head.out") ?? "")"))
            #expect(record["cancel"] as? String == "shutdown", "\(name): \(record)")
        }
        let summary = try CLIJSON.object(try #require(try? String(contentsOfFile: run + "/summary.json", encoding: .utf8), "no summary: \(scratch.read("head.out") ?? "")"))
        #expect(summary["stopped_by"] as? String == "shutdown", "\(summary)")
    }

    @Test("outside an allocation the srun executor is refused with the reason, exit 125")
    func outsideAnAllocation() async throws {
        let scratch = try CLIScratch()
        let job = try scratch.write("job.json", #"{"executor": "srun", "tasks": [{"name": "a", "command": ["true"]}]}"#)
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "SLURM_JOB_ID")
        let r = try await cliRun(["batch", job, "--run-dir", scratch.path("run"), "--progress", "none"], in: scratch, environment: environment)
        #expect(r.status == 125 && r.stderr.contains("SLURM_JOB_ID is not set"), "\(r)")
    }
}

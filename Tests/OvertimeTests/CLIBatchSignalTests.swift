// Signals to `overtime batch` itself (issue 4): SIGINT and SIGTERM cancel the running tasks
// (reasons user and shutdown), start nothing new, write the summary and exit 130/143; a
// SIGKILL leaves a journal of whole JSON lines that `--resume` runs on from.
//
// Serialized: these send signals and time what follows.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI batch signals", .serialized)
struct CLIBatchSignalTests {
    @Test("SIGHUP and SIGUSR1 to overtime batch reach every running task's group, as with run")
    func forwardsSignals() async throws {
        let f = try CLIBatchFixture()
        func task(_ name: String) -> [String: Any] {
            let log = f.path(name + ".signals")
            let script = "trap 'echo HUP >> \(log)' HUP; trap 'echo USR1 >> \(log); exit 0' USR1; touch \(log).up; while :; do sleep 0.05; done"
            return ["name": name, "command": ["sh", "-c", script], "budget": "1m"]
        }
        try f.writeJob(["tasks": [task("a"), task("b")]])
        defer { f.killLeftovers() }
        let overtime = try await f.start()
        for name in ["a", "b"] {
            #expect(await f.scratch.waitForFile(name + ".signals.up") != nil, "\(name) never started")
        }
        overtime.signal(SIGHUP)
        for name in ["a", "b"] {
            #expect(await f.scratch.waitForFile(name + ".signals") == "HUP\n", "\(name) did not hear SIGHUP")
        }
        overtime.signal(SIGUSR1)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 0, "both tasks exit 0 on SIGUSR1: \(r)")
        for name in ["a", "b"] {
            #expect(f.scratch.read(name + ".signals") == "HUP\nUSR1\n", "\(name)")
        }
    }

    @Test("SIGINT / SIGTERM mid-run: running tasks cancelled, nothing new starts, summary written",
          arguments: [(SIGINT, "user", Int32(130)), (SIGTERM, "shutdown", Int32(143))])
    func stopMidRun(signal: Int32, reason: String, code: Int32) async throws {
        let f = try CLIBatchFixture()
        let everything = ["timeout", "deadline", "revoked", "exit", "signal"]
        try f.writeJob([
            "concurrency": 3,
            "resources": ["lock": 1],
            "defaults": ["grace": "5s", "retries": ["max": 3, "backoff": "100ms", "on": everything]],
            "tasks": [
                f.task("run1", ["wait-cancel=30", "exit=0"], ["resources": ["lock": 1]]),
                f.task("run2", ["wait-cancel=30", "exit=9"]),
                // Fails at once and waits 20 s for its retry: the signal comes in between.
                f.task("backing-off", ["exit=1"], ["retries": ["max": 3, "backoff": "20s", "on": everything]]),
                // Waits for the lock run1 holds, with a free slot once backing-off failed.
                f.task("queued", [], ["resources": ["lock": 1]]),
                f.task("waits-run1", [], ["after": [["task": "run1", "when": "done"]]]),
            ],
        ])
        defer { f.killLeftovers() }
        let overtime = try await f.start()
        let up1 = await f.scratch.waitForFile("rec/run1.1.start")
        let up2 = await f.scratch.waitForFile("rec/run2.1.start")
        #expect(up1 != nil && up2 != nil, "the tasks never started")
        let clock = ContinuousClock()
        let until = clock.now + .seconds(10)
        while clock.now < until, (try? f.events(of: "backing-off", "retry"))?.isEmpty ?? true {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try !f.events(of: "backing-off", "retry").isEmpty, "backing-off never failed its first attempt")
        overtime.signal(signal)
        let r = await overtime.finish(timeout: .seconds(25))
        #expect(r.status == code, "\(r)")

        for name in ["run1", "run2"] {
            let attempts = f.records(of: name)
            #expect(attempts.count == 1, "\(name): a \(reason) cancel is never retried: \(attempts)")
            #expect(attempts.first?.cancel == .some(reason), "\(name) saw \(String(describing: attempts.first?.cancel))")
        }
        #expect(f.records(of: "queued").isEmpty && f.records(of: "waits-run1").isEmpty,
                "nothing starts after the signal: \(f.loadRecords())")
        #expect(f.records(of: "backing-off").count == 1, "a retry started after the signal: \(f.loadRecords())")

        let summary = try f.summary()
        #expect(summary["stopped_by"] as? String == reason, "\(summary)")
        #expect(CLIJSON.bool(summary["succeeded"]) == false)
        let tasks = try f.summaryTasks()
        for name in ["run1", "run2"] {
            #expect(tasks[name]?["outcome"] as? String == "failed", "\(name): \(tasks[name] ?? [:])")
            #expect(tasks[name]?["reason"] as? String == reason, "\(name): \(tasks[name] ?? [:])")
            #expect(CLIJSON.int(tasks[name]?["attempts"]) == 1, "\(name): \(tasks[name] ?? [:])")
            #expect(try f.events(of: name, "cancel").map { $0["reason"] as? String } == [reason])
        }
        for name in ["queued", "waits-run1"] {
            #expect(tasks[name]?["outcome"] as? String == "skipped", "\(name): \(tasks[name] ?? [:])")
            #expect(tasks[name]?["reason"] as? String == reason, "\(name): \(tasks[name] ?? [:])")
            #expect(try f.events(of: name, "attempt").isEmpty)
        }
        #expect(tasks["backing-off"]?["outcome"] as? String != "succeeded", "\(tasks["backing-off"] ?? [:])")
        #expect(tasks["backing-off"]?["reason"] as? String == reason, "\(tasks["backing-off"] ?? [:])")
        #expect(r.stdout.contains("TASK"), "the final table is still printed: \(r)")
        #expect(r.stderr.contains("received \(signal == SIGINT ? "SIGINT" : "SIGTERM")"), "\(r)")
        #expect(r.wall < .seconds(15), "\(r)")
    }

    @Test("SIGKILL of the supervisor mid-run: every journal line is JSON; --resume runs only what did not succeed")
    func resumeAfterSigkill() async throws {
        let f = try CLIBatchFixture()
        let fastCount = f.path("fast.count")
        let slowFlag = f.path("slow.flag")
        let tailCount = f.path("tail.count")
        try f.writeJob([
            "tasks": [
                f.task("fast", ["touch=\(fastCount)", "progress=5", "print=fast output"]),
                // Slow in the first run (killed), quick once its flag exists.
                f.task("slow", ["exit-if-exists=\(slowFlag)", "touch=\(slowFlag)", "sleep=60"],
                       ["after": ["fast"], "budget": "none"]),
                f.task("tail", ["touch=\(tailCount)"], ["after": ["slow"]]),
            ],
        ])
        defer { f.killLeftovers() }
        let overtime = try await f.start()
        let slowUp = await f.scratch.waitForFile("rec/slow.1.start")
        #expect(slowUp != nil, "slow never started")
        // The supervisor's death takes its tasks with it at once: let slow finish writing its
        // flag first, or the resumed run finds it there but empty.
        let clock = ContinuousClock()
        let until = clock.now + .seconds(10)
        while clock.now < until, f.scratch.read("slow.flag") != "slow\n" { try await Task.sleep(for: .milliseconds(10)) }
        overtime.signal(SIGKILL)
        let killed = await overtime.finish(timeout: .seconds(10))
        #expect(killed.diedOfSignal && killed.status == 137, "\(killed)")

        // The supervisor's death took slow with it (its parent-death signal and the group
        // guard); make sure of it, so it cannot touch anything the resumed run checks.
        f.killLeftovers()
        if let slow = f.records(of: "slow").first {
            #expect(await CLIProcessTable.waitDead(slow.pid), "slow (pid \(slow.pid)) survived SIGKILL")
        }

        let lines = f.eventLines()
        #expect(!lines.isEmpty)
        for (i, line) in lines.enumerated() {
            #expect((try? CLIJSON.object(line)) != nil, "events.jsonl line \(i + 1) is not JSON: \(line)")
        }
        #expect(try f.finished("fast")?["state"] as? String == "succeeded")
        #expect(try f.finished("slow") == nil)
        #expect(!FileManager.default.fileExists(atPath: f.runDirectory + "/summary.json"), "summary.json after SIGKILL?")
        let linesBefore = lines.count

        // Resume from the directory alone: its job.json.
        let r = try await cliRun(["batch", "--resume", f.runDirectory], in: f.scratch,
                                 environment: CLIBatchFixture.environment, timeout: .seconds(30))
        #expect(r.status == 0, "\(r)")
        #expect(f.scratch.read("fast.count") == "fast\n", "fast ran again: \(f.scratch.read("fast.count") ?? "nil")")
        #expect(f.scratch.read("slow.flag") == "slow\n")
        #expect(f.scratch.read("tail.count") == "tail\n", "tail: \(f.scratch.read("tail.count") ?? "nil")")
        #expect(f.records(of: "slow").first?.end != nil, "slow ran to its end in the resumed run")

        let tasks = try f.summaryTasks()
        #expect(tasks["fast"]?["outcome"] as? String == "succeeded")
        #expect(CLIJSON.bool(tasks["fast"]?["resumed"]) == true, "\(tasks["fast"] ?? [:])")
        #expect(CLIJSON.int(tasks["fast"]?["attempts"]) == 0, "\(tasks["fast"] ?? [:])")
        for name in ["slow", "tail"] {
            #expect(tasks[name]?["outcome"] as? String == "succeeded", "\(name): \(tasks[name] ?? [:])")
            #expect(CLIJSON.bool(tasks[name]?["resumed"]) == false)
        }
        // The journal goes on in the same file, every line still JSON.
        let after = f.eventLines()
        #expect(after.count > linesBefore)
        #expect(try f.events().count == after.count)
        #expect(f.log("fast")?.components(separatedBy: "fast output").count == 2, "fast's log: \(f.log("fast") ?? "nil")")
        let fastRow = r.stdoutLines.first { $0.hasPrefix("fast ") }
        #expect(fastRow?.contains("earlier run") == true, "table row: \(fastRow ?? "none"): \(r)")
    }
}

// `overtime ctl cancel | extend | revoke | watch` against a real `overtime run` (issue 5,
// "Control socket"; docs/control.md): what the task reads on fd 3 after each request, and
// how the run ends (exit code, --json report). The task is CLICtlRecorder: it stalls (no
// progress) unless asked to heartbeat, logs every message it reads, and exits with a code
// of its own once released or once cancelled, so the exit code shows the supervisor's rule.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI ctl: operator requests on overtime run")
struct CLICtlOperatorTests {
    @Test("ctl cancel: the task reads cancel/user, exits with its own code; the report says user")
    func cancel() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--grace", "5s", "--json"], code: 3)

        let unknown = try await f.ctl(["cancel", "nope"])
        #expect(unknown.status == 1, "an unknown task is a refused request: \(unknown)")
        #expect(unknown.stderr.contains("nope"), "the refusal names the task: \(unknown)")
        #expect(f.seen("cancel").isEmpty, "cancelling an unknown task touched the task")

        let r = try await f.ctl(["cancel", "job"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "cancelling", "\(r)")

        let message = await f.waitSeen("cancel")
        #expect(message?["reason"] as? String == "user", "the task read: \(f.seen("cancel"))")
        #expect(CLIJSON.double(message?["grace"]) == 5, "the task read: \(f.seen("cancel"))")

        let end = try await f.finish()
        #expect(end.status == 3, "after a user cancel the child's own code stands: \(end)")
        #expect(!f.seen("term").isEmpty, "SIGTERM followed the cancel message")
        let report = try end.report()
        #expect(report["cancel_reason"] as? String == "user", "\(end)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(end)")
        #expect(CLIJSON.int(report["code"]) == 3, "\(end)")
        #expect(end.wall < .seconds(20), "\(end)")

        // The supervisor is gone, and so is its socket.
        #expect(!FileManager.default.fileExists(atPath: f.socket), "the socket outlived its supervisor")
        let after = try await f.ctl(["cancel", "job"])
        #expect(after.status == 125, "\(after)")
        #expect(after.stderr.contains("cannot reach the supervisor at \(f.socket)"), "\(after)")
    }

    @Test("ctl revoke [DUR]: the task reads the shortened budget, heartbeats no longer move it, reason revoked, exit 124",
          arguments: [["1s"], []])
    func revoke(after: [String]) async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--grace", "5s", "--json"], code: 0, heartbeat: true)
        _ = await f.waitSeen("budget")  // the budget at start
        let budgetsBefore = f.seen("budget").count

        let clock = ContinuousClock()
        let asked = clock.now
        let r = try await f.ctl(["revoke", "job"] + after)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.hasSuffix("left\n"), "the reply says what is left: \(r)")

        let budget = await f.waitSeen("budget", count: budgetsBefore + 1)
        let remaining = CLIJSON.double(budget?["remaining"])
        let expected = after.isEmpty ? 0.0 : 1.0
        #expect(remaining != nil && remaining! <= expected + 0.05, "after revoke the task must read remaining ≤ \(expected): \(f.seen("budget"))")

        let cancel = await f.waitSeen("cancel", timeout: .seconds(15))
        #expect(cancel?["reason"] as? String == "revoked", "heartbeats every 50 ms with a 30 s window; still: \(f.seen("cancel"))")
        #expect(clock.now - asked < .seconds(10), "the revoked budget ran out far too late")

        let end = try await f.finish()
        #expect(end.status == 124, "revoked, exited within grace: \(end)")
        let report = try end.report()
        #expect(report["cancel_reason"] as? String == "revoked", "\(end)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(end)")
    }

    @Test("ctl extend keeps a stalled task alive past its budget; it then ends on its own")
    func extendPastBudget() async throws {
        let f = try CLICtlRunFixture()
        // Budgets of a few seconds leave room for the time the socket and the ctl run take to
        // come on a loaded machine (the suite runs in parallel on two cores): with 2 or 3 s,
        // the task sometimes met its budget before the test had reached its socket.
        try await f.start(["--budget", "6s", "--grace", "5s", "--json", "--progress", "json"], code: 0)
        let started = try #require(CLIJSON.double(f.seen("started").first?["t"]))

        let r = try await f.ctl(["extend", "job", "30s"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.hasSuffix("left\n") && !r.stdout.contains("clipped"), "\(r)")
        let budget = await f.waitSeen("budget", count: 2)  // the first is the budget at start
        let remaining = CLIJSON.double(budget?["remaining"]) ?? 0
        #expect(remaining > 28 && remaining <= 36.1, "6 s budget + 30 s from the current deadline; the task read \(f.seen("budget"))")

        // Well past the original 6 s budget, and no progress came: still running.
        while CLIBatchClock.now() - started < 7.5 { try await Task.sleep(for: .milliseconds(50)) }
        let tasks = try await CLICtl.status(f.socket, in: f.scratch)
        #expect(tasks.first?["state"] as? String == "running", "\(tasks)")
        #expect((CLIJSON.double(tasks.first?["remaining"]) ?? 0) > 20, "\(tasks)")
        #expect(f.seen("cancel").isEmpty, "cancelled despite the extension: \(f.seen("cancel"))")

        try f.release()
        let end = try await f.finish()
        #expect(end.status == 0, "\(end)")
        let report = try end.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(end)")
        #expect((CLIJSON.double(report["elapsed"]) ?? 0) > 6, "it outlived its first budget: \(end)")
        // The operator's request is in the run's event stream, with the uid.
        let operators = end.stdoutLines.compactMap { try? CLIJSON.object($0) }.filter { $0["event"] as? String == "operator" }
        #expect(operators.count == 1 && operators.first?["action"] as? String == "extend 30s"
                && CLIJSON.int(operators.first?["uid"]) == Int(geteuid()), "--progress json: \(operators)")
    }

    @Test("ctl extend past max-runtime is clipped: the task reads the clipped budget and ends at max-runtime (deadline, 124)")
    func extendClippedByMaxRuntime() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "5s", "--max-runtime", "7s", "--grace", "5s", "--json"], code: 0)

        let r = try await f.ctl(["extend", "job", "1m"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("clipped by max-runtime"), "the reply must say it was clipped: \(r)")
        #expect(r.stdout.contains("--past-max"), "the hint names the ctl flag: \(r)")
        let budget = await f.waitSeen("budget", count: 2)
        let remaining = CLIJSON.double(budget?["remaining"]) ?? 99
        #expect(remaining <= 7.01, "clipped at max-runtime (7 s from start); the task read \(f.seen("budget"))")

        let cancel = await f.waitSeen("cancel", timeout: .seconds(15))
        #expect(cancel?["reason"] as? String == "deadline", "\(f.seen("cancel"))")
        let end = try await f.finish()
        #expect(end.status == 124, "\(end)")
        let report = try end.report()
        #expect(report["cancel_reason"] as? String == "deadline", "\(end)")
        #expect(end.wall < .seconds(20), "\(end)")
    }

    @Test("ctl extend --past-max raises max-runtime: the task outlives it and ends on its own")
    func extendPastMax() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "5s", "--max-runtime", "7s", "--grace", "5s", "--json"], code: 0)
        let started = try #require(CLIJSON.double(f.seen("started").first?["t"]))

        let r = try await f.ctl(["extend", "job", "1m", "--past-max"])
        #expect(r.status == 0, "\(r)")
        #expect(!r.stdout.contains("clipped") && r.stdout.hasSuffix("left\n"), "\(r)")
        let budget = await f.waitSeen("budget", count: 2)
        let remaining = CLIJSON.double(budget?["remaining"]) ?? 0
        #expect(remaining > 58 && remaining <= 65.1, "5 s budget + 1 m; the task read \(f.seen("budget"))")

        while CLIBatchClock.now() - started < 8 { try await Task.sleep(for: .milliseconds(50)) }
        let tasks = try await CLICtl.status(f.socket, in: f.scratch)
        #expect(tasks.first?["state"] as? String == "running", "past max-runtime 7 s with --past-max: \(tasks)")
        #expect(f.seen("cancel").isEmpty, "\(f.seen("cancel"))")

        try f.release()
        let end = try await f.finish()
        #expect(end.status == 0, "\(end)")
        #expect(CLIJSON.isNull(try end.report()["cancel_reason"]), "\(end)")
    }

    @Test("ctl watch streams JSON lines, the events of a task that then exits among them, and ends with the run")
    func watch() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--progress", "none"], code: 7)
        let watcher = CLICtlSpawn(["ctl", "--socket", f.socket, "watch"], in: f.scratch)
        try watcher.start()
        defer { watcher.killIfRunning() }

        // Once an operator event shows up in the stream, the watcher is subscribed.
        var subscribed = false
        for _ in 0..<50 where !subscribed {
            let r = try await f.ctl(["extend", "job", "10s"])
            #expect(r.status == 0, "\(r)")
            subscribed = await CLICtl.waitUntil(timeout: .milliseconds(200)) { watcher.stdoutSoFar.contains("\"operator\"") }
        }
        #expect(subscribed, "watch never showed the operator's extend: \(watcher.stdoutSoFar)")

        try f.release()
        let end = try await f.finish()
        #expect(end.status == 7, "\(end)")
        let w = await watcher.finish(timeout: .seconds(10))
        #expect(!w.timedOut, "watch did not end with the run: \(w)")
        #expect(w.status == 0, "\(w)")

        var events: [[String: Any]] = []
        for line in w.stdoutLines {
            do { events.append(try CLIJSON.object(line)) } catch { Issue.record("not a JSON object: \(line)") }
        }
        let kinds = events.compactMap { $0["event"] as? String }
        #expect(kinds.contains("operator"), "\(kinds)")
        #expect(kinds.contains("budget"), "\(kinds)")
        #expect(kinds.last == "exited", "the task's exit is the last event: \(kinds)")
        let operatorEvent = events.first { $0["event"] as? String == "operator" }
        #expect(operatorEvent?["action"] as? String == "extend 10s", "\(operatorEvent ?? [:])")
        #expect(CLIJSON.int(operatorEvent?["uid"]) == Int(geteuid()), "\(operatorEvent ?? [:])")
        let exited = events.last { $0["event"] as? String == "exited" }
        #expect(CLIJSON.int(exited?["exit_code"]) == 7, "\(exited ?? [:])")
        #expect(events.allSatisfy { $0["task"] as? String == "job" }, "\(w.stdout)")
        #expect(Set(events.compactMap { $0["run"] as? String }).count == 1, "one run id: \(w.stdout)")
    }
}

// Signals sent to the overtime process itself (DESIGN §2, §4): SIGINT cancels with `user`,
// SIGTERM with `shutdown`. Every child reports `ready` (a marker file) before the test
// signals, so nothing races start-up.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI signals to overtime", .serialized)
struct CLISignalTests {
    /// A child that handles SIGTERM, says it is ready, waits for the cancel message, writes
    /// "<reason> <grace>" to argv[2], and exits with argv[3].
    static let politeChild = """
    catch_term()
    note(sys.argv[1], str(os.getpid()))
    cancel = None
    while True:
        m = recv(20)
        if m is None:
            break
        if m.get("type") == "cancel":
            cancel = m
            break
    note(sys.argv[2], "%s %s" % (cancel and cancel.get("reason"), cancel and cancel.get("grace")))
    await_term()
    sys.exit(int(sys.argv[3]))
    """

    @Test("a signal to overtime cancels the child with the matching reason; its own exit code is kept",
          arguments: [(SIGINT, "user"), (SIGTERM, "shutdown")])
    func signalCancels(signal: Int32, reason: String) async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("polite.py", Self.politeChild)
        let overtime = CLIProcess(["run", "--json", "--budget", "30s", "--grace", "5s", "--",
                                   "python3", child, scratch.path("ready"), scratch.path("seen"), "5"], in: scratch)
        try await overtime.start()
        let ready = await scratch.waitForFile("ready")
        #expect(ready != nil, "the child never got ready")
        overtime.signal(signal)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 5, "the child's own code after a \(reason) cancel within grace: \(r)")
        let seen = scratch.read("seen")?.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(seen == "\(reason) 5", "the child saw: \(seen ?? "nothing")")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == reason, "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(r)")
        #expect(CLIJSON.int(report["exit_code"]) == 5, "\(r)")
        #expect(r.wall < .seconds(15), "\(r)")
    }

    @Test("SIGINT, and a child that ends with the default SIGTERM action: 130 (as a shell's own Ctrl-C), reason user")
    func sigintDefaultTerm() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let script = "\(CLIChild.shNote(ready, "$$")); exec sleep 30"
        let overtime = CLIProcess(["run", "--json", "--budget", "30s", "--grace", "5s", "--", "sh", "-c", script], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGINT)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 130, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "user", "\(r)")
        #expect(report["signal"] as? String == "SIGTERM", "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("SIGINT, and a child that ignores SIGTERM: SIGKILL after grace, 137")
    func sigintStubbornChild() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let script = "trap '' TERM; \(CLIChild.shNote(ready, "$$")); sleep 30"
        let overtime = CLIProcess(["run", "--json", "--budget", "30s", "--grace", "1s", "--", "sh", "-c", script], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGINT)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 137, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "user", "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == true, "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("a second signal during the grace kills at once (137), without a second cancel")
    func secondSignalKills() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("slow.py", """
        catch_term()
        note(sys.argv[1], "up")
        reasons = []
        while True:
            m = recv(3)
            if m is None:
                break
            if m.get("type") == "cancel":
                reasons.append(m.get("reason"))
                if len(reasons) == 1:
                    note(sys.argv[3], "cancelled")
        note(sys.argv[2], " ".join(reasons))
        sys.exit(6)
        """)
        let overtime = CLIProcess(["run", "--json", "--budget", "30s", "--grace", "20s", "--",
                                   "python3", child, scratch.path("ready"), scratch.path("seen"), scratch.path("cancelled")],
                                  in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGINT)
        #expect(await scratch.waitForFile("cancelled") != nil, "the first cancel never arrived")
        overtime.signal(SIGTERM)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 137, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "user", "the first signal names the reason: \(r)")
        #expect(CLIJSON.bool(report["killed"]) == true, "\(r)")
        #expect(r.wall < .seconds(15), "the 20 s grace was cut short: \(r)")
        #expect(r.stderr.contains("again"), "\(r)")
    }

    @Test("--shutdown-grace (and OVERTIME_SHUTDOWN_GRACE) clips a task's grace so SIGKILL comes first", arguments: [true, false])
    func shutdownGraceClipsGrace(fromOption: Bool) async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let script = "trap '' TERM; \(CLIChild.shNote(ready, "$$")); while :; do sleep 0.1; done"
        var environment = ProcessInfo.processInfo.environment
        var arguments = ["run", "--json", "--budget", "30s", "--grace", "30s"]
        if fromOption { arguments += ["--shutdown-grace", "2s"] } else { environment["OVERTIME_SHUTDOWN_GRACE"] = "2s" }
        let overtime = CLIProcess(arguments + ["--", "sh", "-c", script], environment: environment, in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGTERM)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 137, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "shutdown", "\(r)")
        // A 2 s shutdown grace leaves the task 1 s: SIGKILL well before the 30 s grace.
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("batch: a second SIGTERM kills what still runs at once; exit 143 and a summary")
    func batchSecondSignal() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let job = """
        {"tasks": [{"name": "stubborn", "grace": "30s", "budget": "none",
                    "command": ["sh", "-c", "trap '' TERM; echo up > \(ready); while :; do sleep 0.1; done"]}]}
        """
        try scratch.write("job.json", job)
        let runs = scratch.path("runs")
        let overtime = CLIProcess(["batch", scratch.path("job.json"), "--run-dir", runs, "--progress", "plain"], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the task never got ready")
        overtime.signal(SIGTERM)
        try await Task.sleep(for: .milliseconds(300))
        overtime.signal(SIGTERM)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 143, "\(r)")
        #expect(r.wall < .seconds(15), "the 30 s grace was cut short: \(r)")
        let summary = try #require(FileManager.default.contents(atPath: runs + "/summary.json"))
        let text = String(decoding: summary, as: UTF8.self)
        #expect(text.contains("\"stopped_by\":\"shutdown\"") && text.contains("\"reason\":\"shutdown\""), "\(text)")
    }
}

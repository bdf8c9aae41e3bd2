// The deadline holds whatever the outside world does (issue 10): a signal at start-up, a
// stopped task, `setsid` descendants, a limit of 0.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("CLI hardening", .serialized)
struct CLIHardeningTests {
    /// Live processes whose command line starts with `argv` (NUL-separated in
    /// /proc/PID/cmdline), with the whole command line of each: one look at /proc.
    static func processes(startingWith argv: [String]) -> [(pid: Int32, arguments: [String])] {
        let wanted = argv.joined(separator: "\0")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap(Int32.init).compactMap { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data, as: UTF8.self)
            guard line.hasPrefix(wanted), !CLIProcessTable.isDead(pid) else { return nil }
            return (pid, line.split(separator: "\0").map(String.init))
        }
    }

    @Test("300 SIGTERMs in the first milliseconds of a run: none is acknowledged and then ignored")
    func signalAtStartUp() async throws {
        let scratch = try CLIScratch()
        // Each run's task is `sleep 600.N`: unique, so a task left running is found below.
        // Four at a time, each taking its turn at the shared gate: 300 queued at once would
        // hold up every other test's runs (and their timings) behind them.
        let outcomes = try await withThrowingTaskGroup(of: [(Int, CLIResult)].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var results: [(Int, CLIResult)] = []
                    for i in stride(from: worker, to: 300, by: 4) {
                        let overtime = CLIProcess(["run", "--progress", "plain", "--budget", "none", "--grace", "2s", "--",
                                                   "sleep", "600.\(i)"], in: scratch)
                        try await overtime.start()
                        // Spread over start-up: before the handlers, around the spawn, after it.
                        try await Task.sleep(for: .microseconds(Int.random(in: 0...20_000)))
                        overtime.signal(SIGTERM)
                        results.append((i, await overtime.finish(timeout: .seconds(15))))
                    }
                    return results
                }
            }
            var all: [(Int, CLIResult)] = []
            for try await results in group { all += results }
            return all
        }
        let stuck = outcomes.filter { $0.1.timedOut }
        #expect(stuck.isEmpty, "\(stuck.count) of 300 runs went on after the SIGTERM: \(stuck.first.map { "\($0.1)" } ?? "")")
        for (i, r) in outcomes where !r.timedOut {
            // Either overtime had no handler yet (and died of it: nothing was started), or
            // the task was cancelled (shutdown) and died of the SIGTERM.
            #expect(r.status == 143, "run \(i): \(r)")
        }
        for (pid, arguments) in Self.processes(startingWith: ["sleep", "600."]) where arguments.count == 2 {
            let run = arguments[1].dropFirst("600.".count)
            guard let i = Int(run), i < 300 else { continue }
            Issue.record("the task of run \(i) (pid \(pid)) outlived its supervisor")
            kill(pid, SIGKILL)
        }
    }

    @Test("a stopped task is continued after SIGTERM, runs its handler, and exits 124 in about its budget")
    func stoppedTaskHearsItsCancel() async throws {
        let scratch = try CLIScratch()
        // The task stops itself; only a SIGCONT lets its TERM trap run.
        let r = try await cliRun(["run", "--progress", "none", "--budget", "1s", "--grace", "6s", "--",
                                  "sh", "-c", "trap 'exit 0' TERM; kill -STOP $$; sleep 30"], in: scratch)
        #expect(r.status == 124, "SIGKILLed after grace (137) means it never ran its handler: \(r)")
        #expect(r.wall < .seconds(5), "\(r)")
    }

    /// `setsid` descendants that would outlive the run: the script notes the pid of a
    /// `sleep 1000` in a session of its own, whose parent shell is killed or exits.
    static func setsidScript(_ pidFile: String, thenExit: Bool) -> String {
        let daemon = "setsid sh -c 'sleep 1000 & echo $! > \(pidFile).tmp; mv \(pidFile).tmp \(pidFile); wait' &"
        return thenExit ? "\(daemon) sleep 1; exit 0" : "\(daemon) sleep 60"
    }

    static func expectGone(_ pidFile: String, _ context: String) async {
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            Issue.record("\(context): the daemon never noted its pid")
            return
        }
        let gone = await CLIProcessTable.waitDead(pid, timeout: .seconds(3))
        #expect(gone, "\(context): the setsid descendant \(pid) outlived overtime")
        if !gone { kill(pid, SIGKILL) }
    }

    @Test("run: no setsid descendant is left after the task exits")
    func setsidDescendantsAfterRunExit() async throws {
        let scratch = try CLIScratch()
        let pidFile = scratch.path("daemon")
        let r = try await cliRun(["run", "--progress", "none", "--budget", "none", "--", "sh", "-c", Self.setsidScript(pidFile, thenExit: true)],
                                 in: scratch)
        #expect(r.status == 0, "\(r)")
        await Self.expectGone(pidFile, "run, normal exit")
    }

    @Test("run: no setsid descendant is left after a SIGTERM or SIGINT to overtime", arguments: [(SIGTERM, Int32(143)), (SIGINT, Int32(130))])
    func setsidDescendantsAfterRunSignal(signal: Int32, status: Int32) async throws {
        let scratch = try CLIScratch()
        let pidFile = scratch.path("daemon")
        let overtime = CLIProcess(["run", "--progress", "none", "--budget", "none", "--", "sh", "-c", Self.setsidScript(pidFile, thenExit: false)],
                                  in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("daemon") != nil)
        overtime.signal(signal)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == status, "\(r)")
        await Self.expectGone(pidFile, "run, signal \(signal)")
    }

    @Test("run: no setsid descendant is left after the task is cancelled for its budget")
    func setsidDescendantsAfterTimeout() async throws {
        let scratch = try CLIScratch()
        let pidFile = scratch.path("daemon")
        let r = try await cliRun(["run", "--progress", "none", "--budget", "2s", "--grace", "1s", "--", "sh", "-c", Self.setsidScript(pidFile, thenExit: false)],
                                 in: scratch)
        #expect(r.status == 124, "\(r)")
        await Self.expectGone(pidFile, "run, timeout")
    }

    @Test("batch: no setsid descendant is left after the batch ends or is stopped", arguments: [false, true])
    func setsidDescendantsAfterBatch(signalled: Bool) async throws {
        let batch = try CLIBatchFixture()
        let tasks = (0..<3).map { i in
            ["name": "t\(i)", "budget": "none", "command": ["sh", "-c", Self.setsidScript(batch.path("daemon\(i)"), thenExit: !signalled)]] as [String: Any]
        }
        try batch.writeJob(["tasks": tasks])
        let overtime = try await batch.start(["--progress", "none"])
        for i in 0..<3 { #expect(await batch.scratch.waitForFile("daemon\(i)") != nil) }
        if signalled { overtime.signal(SIGTERM) }
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(r.status == (signalled ? 143 : 0), "\(r)")
        for i in 0..<3 { await Self.expectGone(batch.path("daemon\(i)"), "batch \(signalled ? "SIGTERM" : "end"), task t\(i)") }
    }

    @Test("a task flooding its channel with garbage does not delay another task's cancel")
    func floodDoesNotDelayOthers() async throws {
        let batch = try CLIBatchFixture()
        let noted = batch.path("victim-term")
        try batch.writeJob(["concurrency": 2, "tasks": [
            ["name": "flood", "budget": "60s", "command": ["sh", "-c", "timeout 6 yes '' >&3; exit 0"]],
            // Cancelled for timeout at 2 s; it notes how long after its start the SIGTERM came.
            ["name": "victim", "budget": "2s", "grace": "5s", "command": ["python3", "-c", """
            import signal, time, os, sys
            start = time.monotonic()
            def term(*_):
                open(sys.argv[1], "w").write("%.2f" % (time.monotonic() - start)); os._exit(0)
            signal.signal(signal.SIGTERM, term)
            time.sleep(30)
            """, noted]],
        ]])
        let r = try await batch.run(["--progress", "none"], timeout: .seconds(40))
        let at = (try? String(contentsOfFile: noted, encoding: .utf8)).flatMap { Double($0) }
        #expect(at != nil, "the victim was never cancelled: \(r)")
        #expect((at ?? 99) < 4, "the victim's 2 s deadline was held up by the flood: cancelled at \(at ?? -1) s")
    }

    @Test("a limit of 0 is no limit, as `timeout 0`: --budget 0, --max-runtime 0; --window 0 lifts the deadline at the first report")
    func zeroIsNoLimit() async throws {
        let scratch = try CLIScratch()
        let plain = try await cliRun(["run", "--progress", "none", "--budget", "0", "--max-runtime", "0s", "--", "sleep", "1.5"], in: scratch)
        #expect(plain.status == 0, "cancelled though 0 means no limit: \(plain)")
        // One heartbeat at once, then 2 s of silence under a 1 s budget: with --window 0 the
        // first report took the deadline away.
        let lifted = try await cliRun(["run", "--progress", "none", "--budget", "1s", "--window", "0", "--", "sh", "-c",
                                       #"printf '{"type":"heartbeat"}\n' >&3; sleep 2"#], in: scratch)
        #expect(lifted.status == 0, "\(lifted)")
        // Without a report the budget still holds.
        let silent = try await cliRun(["run", "--progress", "none", "--budget", "1s", "--window", "0", "--", "sleep", "5"], in: scratch)
        #expect(silent.status == 124, "\(silent)")
    }
}

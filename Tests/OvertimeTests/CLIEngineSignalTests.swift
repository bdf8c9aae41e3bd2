// The engine's signals (DESIGN §8), with real processes and real signals: --warn-signal
// turns Slurm's warning into `expiring`, --shutdown-exit-code tells a preemption from
// success, --requeue asks Slurm to run the job again. Slurm itself is not here: `squeue`
// and `scontrol` are mocks on PATH that record their arguments (the tests against a real
// Slurm are separate).

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI engine signals", .serialized)
struct CLIEngineSignalTests {
    /// Says it is ready, then writes every message it gets on fd 3, and every SIGUSR1 it
    /// gets, to argv[2] as lines; exits 0 at the first `expiring` or after 10 s.
    static let listener = """
    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append("SIGUSR1"))
    note(sys.argv[1], str(os.getpid()))
    end = time.monotonic() + 10
    while time.monotonic() < end:
        m = recv(0.2)
        if m is not None:
            got.append(json.dumps(m))
            if m.get("type") == "expiring":
                time.sleep(0.3)  # a SIGUSR1 passed on as well would land by now
                break
        note(sys.argv[2], "\\n".join(got))
        if "SIGUSR1" in got:
            break
    note(sys.argv[2], "\\n".join(got))
    """

    /// Mock `squeue` (the job ends in 45 s; its state is `state`) and `scontrol`, each
    /// appending its arguments to `<name>.args` in the scratch directory.
    static func mockSlurm(in scratch: CLIScratch, state: String = "RUNNING") throws -> [String: String] {
        let bin = scratch.path("bin")
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try scratch.write("bin/squeue", """
        #!/bin/sh
        echo "$@" >> '\(scratch.path("squeue.args"))'
        case "$*" in
            *%T*) echo \(state) ;;
            *) date -d '+45 seconds' +%Y-%m-%dT%H:%M:%S ;;
        esac
        """, mode: 0o755)
        try scratch.write("bin/scontrol", """
        #!/bin/sh
        echo "$@" >> '\(scratch.path("scontrol.args"))'
        """, mode: 0o755)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["SLURM_JOB_ID"] = "4242"
        return environment
    }

    func messages(_ text: String?) -> [[String: Any]] {
        (text ?? "").split(separator: "\n").compactMap { try? CLIJSON.object(String($0)) }
    }

    @Test("a job file's warn-signal and warn-lead: a batch task gets expiring on the batch's SIGUSR1, not the signal; a lead without a signal is refused")
    func jobFileWarnSignal() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("listener.py", Self.listener)
        let job = try scratch.write("job.json", """
        {"warn-signal": "USR1", "warn-lead": "30s",
         "tasks": [{"name": "t", "command": ["\(CLIBatchWorker.python)", "\(child)", "\(scratch.path("ready"))", "\(scratch.path("got"))"]}]}
        """)
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "OVERTIME_WARN_SIGNAL")
        let batch = CLIProcess(["batch", job, "--run-dir", scratch.path("run"), "--progress", "none"], environment: environment, in: scratch)
        try await batch.start()
        #expect(await scratch.waitForFile("ready") != nil, "the task never got ready")
        batch.signal(SIGUSR1)
        _ = await batch.finish(timeout: .seconds(30))
        let got = scratch.read("got") ?? ""
        let expiring = messages(got).first { $0["type"] as? String == "expiring" }
        #expect((28...31).contains(CLIJSON.double(expiring?["remaining"]) ?? -1), "\(got)")
        #expect(!got.contains("SIGUSR1"), "the warning was passed on as a signal: \(got)")
        let bad = try scratch.write("bad.json", #"{"warn-lead": "30s", "warn-signal": "TERM", "tasks": [{"name": "t", "command": ["true"]}]}"#)
        let refused = try await cliRun(["batch", bad, "--run-dir", scratch.path("run2")], in: scratch)
        #expect(refused.status == 125 && refused.stderr.contains("cannot be the engine's warning"), "\(refused)")
    }

    @Test("--warn-signal USR1 --warn-lead 30s: the task gets expiring with 30 s within a second, and no SIGUSR1")
    func warnSignalBecomesExpiring() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("listener.py", Self.listener)
        let overtime = CLIProcess(["run", "--progress", "json", "--budget", "60s", "--warn-signal", "USR1", "--warn-lead", "30s", "--",
                                   "python3", child, scratch.path("ready"), scratch.path("got")], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        let sent = ContinuousClock.now
        overtime.signal(SIGUSR1)
        var expiring: [String: Any]?
        while expiring == nil, ContinuousClock.now - sent < .seconds(3) {
            expiring = messages(scratch.read("got")).first { $0["type"] as? String == "expiring" }
            if expiring == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        let heardAfter = ContinuousClock.now - sent
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(expiring != nil, "no expiring: \(scratch.read("got") ?? "") \(r)")
        #expect(heardAfter < .seconds(1), "expiring came after \(heardAfter)")
        let remaining = CLIJSON.double(expiring?["remaining"]) ?? -1
        #expect(abs(remaining - 30) < 1, "remaining \(remaining)")
        #expect(!(scratch.read("got") ?? "").contains("SIGUSR1"), "SIGUSR1 was passed on too: \(scratch.read("got") ?? "")")
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains(#""event":"engine-expiring""#) && r.stdout.contains(#""source":"warn-lead""#), "\(r)")
    }

    @Test("without --warn-signal, SIGUSR1 is still passed on to the task, and no expiring is sent")
    func withoutTheFlagUSR1IsForwarded() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("listener.py", Self.listener)
        let overtime = CLIProcess(["run", "--budget", "60s", "--", "python3", child, scratch.path("ready"), scratch.path("got")], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGUSR1)
        let r = await overtime.finish(timeout: .seconds(20))
        let got = scratch.read("got") ?? ""
        #expect(got.contains("SIGUSR1"), "\(got) \(r)")
        #expect(!got.contains("expiring"), "\(got)")
        #expect(r.status == 0, "\(r)")
    }

    @Test("in a Slurm job without --warn-lead, the time comes from squeue's end time; --requeue runs scontrol requeue once with the job id")
    func slurmEndTimeAndRequeue() async throws {
        let scratch = try CLIScratch()
        let environment = try Self.mockSlurm(in: scratch)
        let child = try scratch.python("listener.py", Self.listener)
        let overtime = CLIProcess(["run", "--progress", "plain", "--budget", "60s", "--warn-signal", "USR1", "--requeue", "--",
                                   "python3", child, scratch.path("ready"), scratch.path("got")],
                                  environment: environment, in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGUSR1)
        let r = await overtime.finish(timeout: .seconds(20))
        let expiring = messages(scratch.read("got")).first { $0["type"] as? String == "expiring" }
        let remaining = CLIJSON.double(expiring?["remaining"]) ?? -1
        #expect((42...46).contains(remaining), "remaining \(remaining): \(r)")
        #expect(scratch.read("squeue.args") == "-h -j 4242 -o %e\n-h -j 4242 -o %T\n", "\(scratch.read("squeue.args") ?? "none")")
        #expect(scratch.read("scontrol.args") == "requeue 4242\n", "requeue ran as: \(scratch.read("scontrol.args") ?? "never")")
        #expect(r.stderr.contains("requeued Slurm job 4242"), "\(r)")
        #expect(r.status == 0, "\(r)")
    }

    @Test("--requeue leaves a job someone cancelled alone: a scancel is not undone (mock squeue says CANCELLED)")
    func noRequeueOfACancelledJob() async throws {
        let scratch = try CLIScratch()
        let environment = try Self.mockSlurm(in: scratch, state: "CANCELLED")
        let overtime = CLIProcess(["run", "--progress", "plain", "--budget", "60s", "--requeue", "--", "sleep", "30"],
                                  environment: environment, in: scratch)
        try await overtime.start()
        try await Task.sleep(for: .milliseconds(300))
        overtime.signal(SIGTERM)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(scratch.read("scontrol.args") == nil, "requeued a cancelled job: \(scratch.read("scontrol.args") ?? "")")
        #expect(r.stderr.contains("is CANCELLED, not running: not requeued"), "\(r)")
    }

    @Test("a failing squeue (and scontrol): the default 60 s, with a note that says why")
    func failingSqueueFallsBack() async throws {
        let scratch = try CLIScratch()
        var environment = try Self.mockSlurm(in: scratch)
        environment["SLURM_JOB_ID"] = "4243"
        try scratch.write("bin/squeue", "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n", mode: 0o755)
        let child = try scratch.python("listener.py", Self.listener)
        let overtime = CLIProcess(["run", "--progress", "plain", "--budget", "60s", "--warn-signal", "USR1", "--",
                                   "python3", child, scratch.path("ready"), scratch.path("got")],
                                  environment: environment, in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGUSR1)
        let r = await overtime.finish(timeout: .seconds(20))
        let expiring = messages(scratch.read("got")).first { $0["type"] as? String == "expiring" }
        #expect(CLIJSON.double(expiring?["remaining"]) == 60, "\(scratch.read("got") ?? "") \(r)")
        #expect(r.stderr.contains("Invalid job id"), "the note names squeue's complaint: \(r)")
        #expect(r.stderr.contains("the default 1m00s"), "\(r)")
        #expect(scratch.read("scontrol.args") == "show job 4243\n", "scontrol was asked next: \(scratch.read("scontrol.args") ?? "never")")
    }

    @Test("--shutdown-exit-code 143: SIGTERM, the task exits 0 within grace, overtime exits 143")
    func shutdownExitCode() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let script = "trap 'exit 0' TERM; \(CLIChild.shNote(ready, "$$")); while :; do sleep 0.1; done"
        let overtime = CLIProcess(["run", "--json", "--budget", "60s", "--grace", "5s", "--shutdown-exit-code", "143", "--", "sh", "-c", script], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGTERM)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 143, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "shutdown", "\(r)")
        #expect(report["status"] as? String == "exited" && CLIJSON.int(report["code"]) == 0, "it survived, exiting 0: \(r)")
        #expect(CLIJSON.int(report["overtime_exit_code"]) == 143, "the report says what overtime exits with: \(r)")
    }

    @Test("--shutdown-exit-code 143, a task that ignores SIGTERM: killed after grace, 137 as before")
    func shutdownExitCodeKilled() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let script = "trap '' TERM; \(CLIChild.shNote(ready, "$$")); while :; do sleep 0.1; done"
        let overtime = CLIProcess(["run", "--budget", "60s", "--grace", "1s", "--shutdown-exit-code", "143", "--", "sh", "-c", script], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the child never got ready")
        overtime.signal(SIGTERM)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 137, "\(r)")
    }

    @Test("--requeue without SLURM_JOB_ID is said at start; nothing is requeued")
    func requeueOutsideSlurm() async throws {
        let scratch = try CLIScratch()
        var environment = try Self.mockSlurm(in: scratch)
        environment["SLURM_JOB_ID"] = nil
        let r = try await cliRun(["run", "--requeue", "--", "true"], in: scratch, environment: environment)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("SLURM_JOB_ID is not set"), "\(r)")
        #expect(scratch.read("scontrol.args") == nil)
    }

    @Test("bad values are clear errors, exit 125", arguments: [
        (["--warn-signal", "NOPE"], "is not a signal"),
        (["--warn-signal", "TERM"], "cannot be the warning"),
        (["--shutdown-exit-code", "300"], "from 0 to 255"),
        (["--warn-lead", "30s"], "needs --warn-signal"),
    ])
    func badValues(arguments: [String], says: String) async throws {
        let scratch = try CLIScratch()
        for command in [["run"] + arguments + ["--", "true"], ["batch", scratch.path("none.json")] + arguments] {
            let r = try await cliRun(command, in: scratch)
            #expect(r.status == 125, "\(command): \(r)")
            #expect(r.stderr.contains(says), "\(command): \(r)")
        }
    }
}

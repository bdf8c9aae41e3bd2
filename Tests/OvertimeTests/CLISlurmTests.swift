// Overtime under a real Slurm (DESIGN §8): jobs submitted with sbatch whose batch shell
// is `overtime run` (the script `exec`s it, as deploy/slurm/train.sbatch does), signalled
// the ways Slurm signals a job, with a Python task that writes what it hears on fd 3 to
// files in the scratch directory (one node: the job runs on this machine). The mock-Slurm
// tests of the same options are in CLIEngineSignalTests.
//
// The cluster is the one in SLURM_CONF: scripts/test brings one up with scripts/slurm and
// exports it, or sets CLI_SLURM_UP_FAILED to why it could not, and then every test here
// fails with that reason. Only a plain `swift test` with neither set skips the suite.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum CLISlurm {
    static let environment = ProcessInfo.processInfo.environment
    /// Why scripts/test could not bring the cluster up.
    static let upFailure = environment["CLI_SLURM_UP_FAILED"].flatMap { $0.isEmpty ? nil : $0 }
    static let conf = environment["SLURM_CONF"].flatMap { $0.isEmpty ? nil : $0 }
    static var expected: Bool { conf != nil || upFailure != nil }

    /// A Slurm command by path (CLIProcess runs by path, not by lookup).
    static func tool(_ name: String) -> String {
        for directory in (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return "/nonexistent/\(name) (not on PATH)"
    }

    /// Runs a Slurm command to its end; its stdout, or an error with all it said.
    @discardableResult
    static func run(_ name: String, _ arguments: [String], in scratch: CLIScratch, timeout: Duration = .seconds(30)) async throws -> String {
        let process = CLIProcess(arguments, executable: tool(name), in: scratch)
        try await process.start()
        let r = await process.finish(timeout: timeout)
        guard r.status == 0 else { throw CLIFailure("\(name) \(arguments.joined(separator: " ")) failed: \(r)") }
        return r.stdout
    }

    /// Throws, with the reason, unless the cluster answers.
    static func requireCluster(in scratch: CLIScratch) async throws {
        if let upFailure { throw CLIFailure("no Slurm cluster for these tests: \(upFailure)") }
        let state = try await run("sinfo", ["-h", "-N", "-o", "%T"], in: scratch)
        guard !state.isEmpty else { throw CLIFailure("sinfo lists no node (SLURM_CONF=\(conf ?? ""))") }
    }

    /// Submits `script` with `options` (working directory: the scratch directory); the job id.
    static func submit(_ script: String, _ options: [String], in scratch: CLIScratch) async throws -> String {
        let file = try scratch.write("job-\(UUID().uuidString.prefix(8)).sh", script, mode: 0o755)
        let out = try await run("sbatch", ["--parsable", "-D", scratch.url.path, "-o", scratch.path("job-%j.out")] + options + [file], in: scratch)
        guard let id = out.split(separator: ";").first?.trimmingCharacters(in: .whitespacesAndNewlines), Int(id) != nil else {
            throw CLIFailure("sbatch printed no job id: \(out)")
        }
        return id
    }

    /// `scontrol show job -o`: one line of Key=Value fields.
    static func job(_ id: String, in scratch: CLIScratch) async throws -> [String: String] {
        let line = try await run("scontrol", ["show", "job", "-o", id], in: scratch)
        var fields: [String: String] = [:]
        for field in line.split(whereSeparator: \.isWhitespace) {
            guard let equals = field.firstIndex(of: "=") else { continue }
            let key = String(field[..<equals])
            if fields[key] == nil { fields[key] = String(field[field.index(after: equals)...]) }
        }
        return fields
    }

    static let finished: Set<String> = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"]

    /// Polls `scontrol show job` until `done` holds; the last fields seen, or an error
    /// that names them.
    static func waitForJob(_ id: String, _ what: String, timeout: Duration, in scratch: CLIScratch,
                           until done: ([String: String]) -> Bool) async throws -> [String: String] {
        let end = ContinuousClock.now + timeout
        var fields: [String: String] = [:]
        while ContinuousClock.now < end {
            fields = try await job(id, in: scratch)
            if done(fields) { return fields }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw CLIFailure("job \(id): not \(what) within \(timeout): \(fields)")
    }

    /// Runs `body` with a submitted job and cancels the job afterwards, whatever happened,
    /// so no test leaves a job holding the node's CPUs.
    static func withJob(_ script: String, _ options: [String], in scratch: CLIScratch,
                        _ body: (String) async throws -> Void) async throws {
        let id = try await submit(script, options, in: scratch)
        do {
            try await body(id)
        } catch {
            await cancel(id, in: scratch)
            throw error
        }
        await cancel(id, in: scratch)
    }

    /// scancel until the job has ended. Once is not enough for a job whose Overtime has
    /// --requeue: scancel's SIGTERM reaches Overtime first (SIGKILL only follows after
    /// KillWait, also for `scancel --signal=KILL`), which is a shutdown, after which
    /// Overtime requeues the job; the next scancel finds it pending and ends it.
    static func cancel(_ id: String, in scratch: CLIScratch) async {
        let end = ContinuousClock.now + .seconds(60)
        var state = ""
        while ContinuousClock.now < end {
            // No record: the job was never there, or is long gone.
            guard let fields = try? await job(id, in: scratch) else { return }
            state = fields["JobState"] ?? ""
            if finished.contains(state) { return }
            if state != "COMPLETING" { _ = try? await run("scancel", [id], in: scratch) }
            try? await Task.sleep(for: .seconds(1))
        }
        Issue.record("job \(id) still \(state) a minute after the first scancel")
    }

    /// A batch script that becomes `overtime run ARGS -- python3 TASK DIR`.
    static func script(_ arguments: [String], task: String, in scratch: CLIScratch) -> String {
        let words = [CLIBinary.path] + arguments + ["--", "python3", task, scratch.url.path]
        return "#!/bin/sh\nexec " + words.map { "'\($0)'" }.joined(separator: " ") + "\n"
    }

    /// `2026-12-01T15:57:27` (Slurm's times, local), or with `.713` (its log lines).
    static func date(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = text.contains(".") ? "yyyy-MM-dd'T'HH:mm:ss.SSS" : "yyyy-MM-dd'T'HH:mm:ss"
        return formatter.date(from: text)
    }

    /// What the task wrote: a JSON list of {"at": wall time, "message": …} and
    /// {"at": …, "signal": …, "from": the sender's comm} entries.
    static func heard(_ text: String?) -> [[String: Any]] {
        guard let text, let data = text.data(using: .utf8),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return [] }
        return list
    }

    static func message(_ heard: [[String: Any]], type: String) -> (at: Double, message: [String: Any])? {
        for entry in heard {
            if let message = entry["message"] as? [String: Any], message["type"] as? String == type,
               let at = CLIJSON.double(entry["at"]) {
                return (at, message)
            }
        }
        return nil
    }
}

@Suite("CLI under a real Slurm", .serialized,
       .enabled(if: CLISlurm.expected, "SLURM_CONF is not set: eval \"$(sudo scripts/slurm up)\" first (scripts/test does)"))
struct CLISlurmTests {
    /// The task: writes DIR/run-N.ready (N = SLURM_RESTART_COUNT, 0 on the first run), then
    /// keeps in DIR/run-N a JSON list of each message it reads on fd 3 and each SIGTERM or
    /// SIGUSR1 it gets (blocked, taken with sigtimedwait), with the wall time and, for a
    /// signal, who sent it (Overtime, or one of Slurm's daemons). Before it notes a signal
    /// it reads what is already in the pipe, so a message sent before the signal is listed
    /// before it. Exits 0 once it has had a SIGTERM, or half a second after an `expiring`
    /// (time for a SIGUSR1 passed on as well to land).
    static let task = """
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGUSR1])
    restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
    out = os.path.join(sys.argv[1], "run-" + restarts)
    heard = []
    def comm(pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip()
        except OSError:
            return "pid %d, gone" % pid
    note(out + ".ready", json.dumps({"pid": os.getpid(), "SLURM_RESTART_COUNT": os.environ.get("SLURM_RESTART_COUNT")}))
    stop_at = None
    end = time.monotonic() + 150
    while time.monotonic() < end and (stop_at is None or time.monotonic() < stop_at):
        m = recv(0.05)
        if m is not None:
            heard.append({"at": time.time(), "message": m})
            if m.get("type") == "expiring" and stop_at is None:
                stop_at = time.monotonic() + 0.5
        info = signal.sigtimedwait([signal.SIGTERM, signal.SIGUSR1], 0)
        if info is not None:
            while True:
                m = recv(0.001)
                if m is None:
                    break
                heard.append({"at": time.time(), "message": m})
            name = "SIGTERM" if info.si_signo == signal.SIGTERM else "SIGUSR1"
            heard.append({"at": time.time(), "signal": name, "from": comm(info.si_pid)})
            if name == "SIGTERM" and stop_at is None:
                stop_at = time.monotonic() + 0.3  # the messages sent before it are read too
        note(out, json.dumps(heard))
    note(out, json.dumps(heard))
    """

    /// Overtime's `--progress json` lines in the job's output file.
    func events(_ scratch: CLIScratch, job: String) -> [[String: Any]] {
        (scratch.read("job-\(job).out") ?? "").split(separator: "\n").compactMap { try? CLIJSON.object(String($0)) }
    }

    // Why `scancel --batch --signal=TERM` and not `scancel`: a plain `scancel JOBID` is
    // Slurm's own cancel, SIGTERM to every process of the job at once (the task gets it
    // from slurmstepd as Overtime does) and CANCELLED whatever Overtime then exits, so it
    // shows nothing of Overtime. `--batch` signals the batch shell alone, which is
    // Overtime: the same path as `--signal=B:TERM@N` before the time limit, and what
    // deploy.md tells users to run to stop a job early. What the task hears is then
    // Overtime's doing, and the test checks who sent its SIGTERM.
    @Test("scancel --batch --signal=TERM: the task reads shutdown, exits within grace; the job is FAILED with exit code 143")
    func shutdownIsFailedWith143() async throws {
        let scratch = try CLIScratch()
        try await CLISlurm.requireCluster(in: scratch)
        let task = try scratch.python("task.py", Self.task)
        let script = CLISlurm.script(["run", "--progress", "json", "--budget", "none", "--grace", "10s", "--shutdown-exit-code", "143"],
                                     task: task, in: scratch)
        try await CLISlurm.withJob(script, [], in: scratch) { id in
            guard await scratch.waitForFile("run-0.ready", timeout: .seconds(60)) != nil else {
                throw CLIFailure("the task never started: \(try await CLISlurm.job(id, in: scratch))")
            }
            try await CLISlurm.run("scancel", ["--batch", "--signal=TERM", id], in: scratch)
            let job = try await CLISlurm.waitForJob(id, "finished", timeout: .seconds(60), in: scratch) {
                CLISlurm.finished.contains($0["JobState"] ?? "")
            }
            let heard = CLISlurm.heard(scratch.read("run-0"))
            let cancel = CLISlurm.message(heard, type: "cancel")
            #expect(cancel?.message["reason"] as? String == "shutdown", "\(heard)")
            let terms = heard.filter { $0["signal"] as? String == "SIGTERM" }
            #expect(terms.count == 1 && terms.first?["from"] as? String == "overtime",
                    "one SIGTERM, from Overtime after the message, none from Slurm: \(heard)")
            #expect((cancel?.at ?? .infinity) <= CLIJSON.double(terms.first?["at"]) ?? -1, "\(heard)")
            let exited = events(scratch, job: id).first { $0["event"] as? String == "exited" }
            #expect(exited?["cancel_reason"] as? String == "shutdown" && CLIJSON.bool(exited?["killed"]) == false
                    && CLIJSON.int(exited?["code"]) == 0, "exited within grace, 0: \(String(describing: exited))")
            // Overtime's 143, not the task's 0: Slurm records a failure, not COMPLETED.
            #expect(job["JobState"] == "FAILED", "\(job)")
            #expect(job["ExitCode"] == "143:0", "\(job)")
        }
    }

    @Test("sbatch --time=1 --signal=B:USR1@30, overtime run --warn-signal USR1: expiring within a second of Slurm's signal, remaining from the job's end time, no SIGUSR1")
    func warningSignalBecomesExpiring() async throws {
        let scratch = try CLIScratch()
        try await CLISlurm.requireCluster(in: scratch)
        let task = try scratch.python("task.py", Self.task)
        let script = CLISlurm.script(["run", "--progress", "json", "--budget", "none", "--warn-signal", "USR1"], task: task, in: scratch)
        try await CLISlurm.withJob(script, ["--time=1", "--signal=B:USR1@30"], in: scratch) { id in
            guard await scratch.waitForFile("run-0.ready", timeout: .seconds(60)) != nil else {
                throw CLIFailure("the task never started: \(try await CLISlurm.job(id, in: scratch))")
            }
            let running = try await CLISlurm.job(id, in: scratch)
            guard let endTime = running["EndTime"].flatMap(CLISlurm.date) else { throw CLIFailure("no EndTime: \(running)") }
            // Slurm sends it 30 s before the end, or up to a minute earlier; then the task
            // ends itself and with it the job.
            let job = try await CLISlurm.waitForJob(id, "finished", timeout: .seconds(90), in: scratch) {
                CLISlurm.finished.contains($0["JobState"] ?? "")
            }
            let heard = CLISlurm.heard(scratch.read("run-0"))
            guard let expiring = CLISlurm.message(heard, type: "expiring") else {
                throw CLIFailure("no expiring: \(heard) \(job) \(scratch.read("job-\(id).out") ?? "")")
            }
            // When slurmctld sent the warning, from its log (SlurmctldDebug=debug), to the
            // millisecond: the clock the task's time is measured against.
            let config = try await CLISlurm.run("scontrol", ["show", "config"], in: scratch)
            let logFile = config.split(separator: "\n").first { $0.hasPrefix("SlurmctldLogFile") }
                .flatMap { $0.split(separator: "=", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces) } ?? ""
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            let sentLine = log.split(separator: "\n").first { $0.hasSuffix("warning signal \(SIGUSR1) to JobId=\(id)") }
            guard let sentLine, let sent = CLISlurm.date(String(sentLine.dropFirst().prefix { $0 != "]" })) else {
                throw CLIFailure("no 'warning signal' line for job \(id) in '\(logFile)': is SlurmctldDebug at debug (scripts/slurm sets it)?")
            }
            let delay = expiring.at - sent.timeIntervalSince1970
            #expect(delay > -0.05 && delay < 1, "expiring came \(delay) s after Slurm sent SIGUSR1")
            let remaining = CLIJSON.double(expiring.message["remaining"]) ?? -1
            let left = endTime.timeIntervalSince1970 - expiring.at
            #expect(abs(remaining - left) < 2, "remaining \(remaining), the job's EndTime is \(left) s away")
            #expect(remaining > 0 && remaining <= 61, "remaining \(remaining)")
            #expect(!heard.contains { $0["signal"] != nil }, "the task got a signal: \(heard)")
            let warned = events(scratch, job: id).first { $0["event"] as? String == "engine-expiring" }
            #expect(warned?["source"] as? String == "slurm", "\(String(describing: warned))")
            #expect(job["JobState"] == "COMPLETED" && job["ExitCode"] == "0:0", "the task exited 0 after the warning: \(job)")
        }
    }

    @Test("sbatch --requeue, overtime run --requeue, a shutdown: the job runs again (Restarts=1, SLURM_RESTART_COUNT=1)")
    func requeueAfterShutdown() async throws {
        let scratch = try CLIScratch()
        try await CLISlurm.requireCluster(in: scratch)
        let task = try scratch.python("task.py", Self.task)
        let script = CLISlurm.script(["run", "--budget", "none", "--grace", "10s", "--requeue", "--shutdown-exit-code", "143"],
                                     task: task, in: scratch)
        try await CLISlurm.withJob(script, ["--requeue"], in: scratch) { id in
            guard await scratch.waitForFile("run-0.ready", timeout: .seconds(60)) != nil else {
                throw CLIFailure("the task never started: \(try await CLISlurm.job(id, in: scratch))")
            }
            try await CLISlurm.run("scancel", ["--batch", "--signal=TERM", id], in: scratch)
            // A requeued job is held back about 11 s on this cluster (scripts/slurm).
            guard let second = await scratch.waitForFile("run-1.ready", timeout: .seconds(90)) else {
                throw CLIFailure("no second run: \(try await CLISlurm.job(id, in: scratch)) \(scratch.read("job-\(id).out") ?? "")")
            }
            let first = CLISlurm.heard(scratch.read("run-0"))
            #expect(CLISlurm.message(first, type: "cancel")?.message["reason"] as? String == "shutdown", "\(first)")
            #expect((try? CLIJSON.object(second))?["SLURM_RESTART_COUNT"] as? String == "1", "\(second)")
            let job = try await CLISlurm.job(id, in: scratch)
            #expect(job["Restarts"] == "1", "\(job)")
            #expect(job["JobState"] == "RUNNING", "\(job)")
        }
    }
}

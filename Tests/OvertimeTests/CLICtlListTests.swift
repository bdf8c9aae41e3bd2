// Several supervisors of one user at once (issue 15, "Supervisors you can tell apart";
// docs/control.md, "Which supervisor"): `ctl list` shows each with its run id, pid, user,
// start, directory, what it runs and its tasks; a command naming a task reaches the one
// supervisor that has it, and lists the candidates when several do; `status` shows them
// all; sockets left by dead supervisors are removed; a stopped supervisor does not hang
// `ctl list`.
//
// Every supervisor's socket is in the test's own XDG_RUNTIME_DIR, so tests never meet.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI ctl: several supervisors")
struct CLICtlListTests {
    /// A batch of `tasks` (the recording worker, sleeping 60 s each) at concurrency 1, its
    /// socket in `xdg`'s default place; returned once its first task runs.
    static func startBatch(_ f: CLIBatchFixture, xdg: String, tasks: [String]) async throws -> CLIProcess {
        try f.writeJob(["concurrency": 1, "tasks": tasks.map { f.task($0, ["sleep=60"]) }])
        let batch = CLIProcess(["batch", f.jobPath, "--run-dir", f.runDirectory, "--progress", "none"],
                               environment: CLICtl.environment(xdg: xdg), in: f.scratch)
        try await batch.start()
        guard await CLICtl.waitUntil({ f.loadRecords().contains { $0.task == tasks[0] } }) else {
            throw CLIFailure("the batch's first task never started: \(await batch.finish(timeout: .seconds(1)))")
        }
        return batch
    }

    static func runID(_ socket: String) -> String {
        String(socket.split(separator: "/").last!.dropLast(".sock".count))
    }

    /// The socket of the supervisor with process id `pid`, as `ctl list --json` says.
    /// (Run ids begin with the start second, so two started in one second need not sort in
    /// the order they started.)
    static func socket(of pid: Int32, in scratch: CLIScratch, environment: [String: String]) async throws -> String {
        let list = try await CLICtl.ctl(["list", "--json"], in: scratch, environment: environment)
        for line in list.stdoutLines {
            let entry = try CLIJSON.object(line)
            if CLIJSON.int((entry["supervisor"] as? [String: Any])?["pid"]) == Int(pid), let socket = entry["socket"] as? String {
                return socket
            }
        }
        throw CLIFailure("no supervisor with pid \(pid) in \(list)")
    }

    @Test("a run and a batch: list shows both (text and --json); status shows both; cancel TASK reaches the one that has it; stale sockets removed, a fresh one kept")
    func runAndBatch() async throws {
        let f = try CLIBatchFixture()
        let scratch = f.scratch
        let (xdg, env, dir) = try CLICtl.runtimeDirectory(in: scratch)
        let alpha = try await CLICtlDefaultRun.start("alpha", xdg: xdg, in: scratch)
        let batch = try await Self.startBatch(f, xdg: xdg, tasks: ["train", "eval"])
        defer { f.killLeftovers() }
        #expect(await CLICtl.waitUntil { CLICtlSocketTests.liveSockets(dir).count == 2 }, "\(CLICtlFS.entries(dir))")
        let runSocket = try await Self.socket(of: alpha.process.pid, in: scratch, environment: env)
        let batchSocket = try await Self.socket(of: batch.pid, in: scratch, environment: env)
        let dead = dir + "/20000101-000000-deadbeef.sock"
        let justMade = dir + "/20000101-000001-cafef00d.sock"
        try CLICtlFS.makeOldStaleSocket(dead)
        try CLICtlFS.makeStaleSocket(justMade)

        let list = try await CLICtl.ctl(["list"], in: scratch, environment: env)
        #expect(list.status == 0, "\(list)")
        let rows = list.stdoutLines
        #expect(rows.count == 3 && rows[0].hasPrefix("RUN") && rows[0].contains("PID") && rows[0].contains("RUNS"), "a header and two rows: \(list)")
        let runRow = rows.first { $0.hasPrefix(Self.runID(runSocket)) } ?? "none"
        let batchRow = rows.first { $0.hasPrefix(Self.runID(batchSocket)) } ?? "none"
        #expect(runRow.contains(String(alpha.process.pid)) && runRow.contains("recorder.py") && runRow.contains(" 1/1 "), "the run's row: \(runRow)")
        #expect(batchRow.contains(String(batch.pid)) && batchRow.contains(f.jobPath) && batchRow.contains(" 1/2 "), "the batch's row: \(batchRow)")
        #expect(list.stderr.contains("removed a socket left by supervisors no longer running") && list.stderr.contains(dead), "\(list)")
        #expect(CLICtlFS.probe(dead) == .free, "the dead supervisor's socket is gone")
        #expect(CLICtlFS.probe(justMade) == .stale, "a socket made a moment ago may be a supervisor about to listen: kept")

        let json = try await CLICtl.ctl(["list", "--json"], in: scratch, environment: env)
        #expect(json.status == 0 && json.stdoutLines.count == 2, "\(json)")
        let described = try json.stdoutLines.map(CLIJSON.object)
        let kinds = described.compactMap { ($0["supervisor"] as? [String: Any])?["kind"] as? String }
        #expect(Set(kinds) == ["run", "batch"], "\(json.stdout)")
        let runEntry = described.first { $0["socket"] as? String == runSocket }
        if let run = runEntry?["supervisor"] as? [String: Any] {
            #expect(CLIJSON.int(run["pid"]) == Int(alpha.process.pid) && CLIJSON.int(run["uid"]) == Int(geteuid()), "\(run)")
            #expect((run["command"] as? [String])?.contains { $0.hasSuffix("recorder.py") } == true, "\(run)")
            #expect((run["cwd"] as? String).map { !$0.isEmpty } == true && (run["started"] as? String)?.hasSuffix("Z") == true, "\(run)")
        } else {
            Issue.record("no entry for the run's socket: \(json.stdout)")
        }
        if let second = described.first(where: { $0["socket"] as? String == batchSocket })?["supervisor"] as? [String: Any] {
            #expect(second["job_file"] as? String == f.jobPath && second["run_dir"] as? String == f.runDirectory, "\(second)")
            let tasks = second["tasks"] as? [String: Any]
            #expect(CLIJSON.int(tasks?["running"]) == 1 && CLIJSON.int(tasks?["total"]) == 2, "\(second)")
        }

        let status = try await CLICtl.ctl(["status"], in: scratch, environment: env)
        #expect(status.status == 0 && status.stdout.contains("== " + Self.runID(runSocket))
                && status.stdout.contains("== " + Self.runID(batchSocket)), "both, each under its heading: \(status)")
        #expect(status.stdout.contains("alpha") && status.stdout.contains("train") && status.stdout.contains("eval"), "\(status)")

        let nowhere = try await CLICtl.ctl(["cancel", "trian"], in: scratch, environment: env)
        #expect(nowhere.status == 125 && nowhere.stderr.contains("none of the 2 supervisors running has a task named 'trian'")
                && nowhere.stderr.contains("did you mean 'train'?"), "\(nowhere)")

        let cancel = try await CLICtl.ctl(["cancel", "train"], in: scratch, environment: env)
        #expect(cancel.status == 0 && cancel.stdout.contains("cancelling"), "the batch has 'train': \(cancel)")
        #expect(await CLICtl.waitUntil {
            (try? await CLICtl.status(batchSocket, in: scratch))?.first { $0["name"] as? String == "train" }?["state"] as? String != "running"
        }, "train was cancelled")
        #expect(CLICtlRecorder.messages(alpha.log, type: "cancel").isEmpty, "alpha was not touched")

        let cancelRun = try await CLICtl.ctl(["cancel", "alpha"], in: scratch, environment: env)
        #expect(cancelRun.status == 0, "the run has 'alpha': \(cancelRun)")
        let end = await alpha.process.finish()
        #expect(CLICtlRecorder.messages(alpha.log, type: "cancel").first?["reason"] as? String == "user", "\(end)")

        // The batch's only supervisor now: a command goes to it without asking.
        let skip = try await CLICtl.ctl(["cancel", "eval"], in: scratch, environment: env)
        #expect(skip.status == 0, "\(skip)")
        let batchEnd = await batch.finish(timeout: .seconds(30))
        #expect(!batchEnd.timedOut, "\(batchEnd)")
    }

    @Test("none running: list says so (exit 1); two with a task of the same name: cancel lists both (125); --socket RUN_ID picks one")
    func sameNameInTwo() async throws {
        let scratch = try CLIScratch()
        let (xdg, env, dir) = try CLICtl.runtimeDirectory(in: scratch)
        let none = try await CLICtl.ctl(["list"], in: scratch, environment: env)
        #expect(none.status == 1 && none.stdout.isEmpty && none.stderr.contains("no supervisor is running for you"), "an empty list: \(none)")
        let first = try await CLICtlDefaultRun.start("job", xdg: xdg, in: scratch, files: "first")
        let second = try await CLICtlDefaultRun.start("job", xdg: xdg, in: scratch, files: "second")
        #expect(await CLICtl.waitUntil { CLICtlSocketTests.liveSockets(dir).count == 2 }, "\(CLICtlFS.entries(dir))")
        let ids = CLICtlSocketTests.liveSockets(dir).map(Self.runID)
        let secondID = Self.runID(try await Self.socket(of: second.process.pid, in: scratch, environment: env))

        let ambiguous = try await CLICtl.ctl(["cancel", "job"], in: scratch, environment: env)
        #expect(ambiguous.status == 125 && ambiguous.stderr.contains("2 supervisors have a task named 'job'"), "\(ambiguous)")
        for id in ids { #expect(ambiguous.stderr.contains(id), "\(ambiguous)") }
        #expect(CLICtlRecorder.messages(first.log, type: "cancel").isEmpty && CLICtlRecorder.messages(second.log, type: "cancel").isEmpty,
                "nothing was cancelled")

        let chosen = try await CLICtl.ctl(["--socket", secondID, "cancel", "job"], in: scratch, environment: env)
        #expect(chosen.status == 0, "\(chosen)")
        #expect(await CLICtl.waitUntil { !CLICtlRecorder.messages(second.log, type: "cancel").isEmpty }, "the one named by its run id was cancelled")
        #expect(CLICtlRecorder.messages(first.log, type: "cancel").isEmpty, "the first was not")
        _ = await second.process.finish()
        #expect(try await first.finish().status == 0)
    }

    @Test("a stopped supervisor, its backlog full, does not hang ctl list or ctl status: it is named as not answering")
    func stoppedSupervisor() async throws {
        let scratch = try CLIScratch()
        let (xdg, env, _) = try CLICtl.runtimeDirectory(in: scratch)
        let running = try await CLICtlDefaultRun.start("awake", xdg: xdg, in: scratch, files: "awake")
        let stopped = try await CLICtlDefaultRun.start("asleep", xdg: xdg, in: scratch, files: "asleep")
        let stoppedSocket = try await Self.socket(of: stopped.process.pid, in: scratch, environment: env)
        stopped.process.signal(SIGSTOP)
        defer { stopped.process.signal(SIGCONT) }
        // Fill its accept queue (a listen backlog of 64), as clients of a long-stopped
        // supervisor would: a further blocking connect then waits for it.
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for _ in 0..<80 {
            let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { break }
            held.append(fd)
            if CLICtlFS.connect(fd, stoppedSocket) != 0 { break }  // EAGAIN: the queue is full
        }
        let list = try await CLICtl.ctl(["list"], in: scratch, environment: env, timeout: .seconds(30))
        let status = try await CLICtl.ctl(["status"], in: scratch, environment: env, timeout: .seconds(30))
        stopped.process.signal(SIGCONT)
        #expect(!list.timedOut && list.status == 0, "\(list)")
        #expect(list.stdoutLines.contains { $0.hasPrefix(CLICtlListTests.runID(stoppedSocket)) && $0.contains("(") }, "\(list)")
        #expect(list.stdoutLines.contains { $0.contains(String(running.process.pid)) }, "the one awake is described: \(list)")
        #expect(!status.timedOut && status.status == 125 && status.stdout.contains("awake"), "the one awake shows its task; the other is named: \(status)")
        let awakeEnd = try await running.finish()
        #expect(awakeEnd.status == 0, "the one awake: \(awakeEnd)")
        let stoppedEnd = try await stopped.finish()
        #expect(stoppedEnd.status == 0, "the one stopped, then continued: \(stoppedEnd)")
    }
}

// What `overtime run` reports (--json, --progress json|plain|none, --name) and what the
// child finds at exec: its environment and only fds 0–3 (DESIGN §3, §4).

import Foundation
import Testing

@Suite("CLI reports and child environment")
struct CLIReportTests {
    @Test("--json prints one valid report with every field")
    func jsonReport() async throws {
        let scratch = try CLIScratch()
        let script = """
        \(CLIChild.shNote(scratch.path("env"), "$$ $OVERTIME_RUN"))
        printf '{"type":"progress","completed":3,"total":4,"title":"epoch","detail":"loss 0.1"}\\n' >&3
        echo '{"type":"ready"}' >&3
        echo '{"type":"result","value":{"score":0.5}}' >&3
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdoutLines.count == 1, "stdout holds exactly the report: \(r)")
        let report = try r.report()
        for field in ["run", "task", "pid", "exit_code", "status", "cancel_reason", "killed", "elapsed", "progress",
                      "result", "protocol_errors"] {
            #expect(report[field] != nil, "missing field \(field): \(r.stdout)")
        }
        let child = (scratch.read("env") ?? "").split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        #expect(child.count == 2, "the child wrote: \(child)")
        #expect(report["run"] as? String == child.last, "run matches the child's OVERTIME_RUN: \(r.stdout)")
        #expect(CLIJSON.int(report["pid"]).map(String.init) == child.first, "pid is the child's: \(r.stdout)")
        #expect(report["task"] as? String == "sh", "the default name is the command's: \(r.stdout)")
        #expect(CLIJSON.int(report["exit_code"]) == 0)
        #expect(report["status"] as? String == "exited")
        #expect(CLIJSON.isNull(report["cancel_reason"]))
        #expect(CLIJSON.bool(report["killed"]) == false)
        let elapsed = try #require(CLIJSON.double(report["elapsed"]))
        #expect(elapsed >= 0 && elapsed < 10)
        let progress = report["progress"] as? [String: Any]
        #expect(CLIJSON.int(progress?["completed"]) == 3)
        #expect(CLIJSON.int(progress?["total"]) == 4)
        #expect(progress?["title"] as? String == "epoch")
        #expect(progress?["detail"] as? String == "loss 0.1")
        #expect(CLIJSON.double((report["result"] as? [String: Any])?["score"]) == 0.5)
        #expect(CLIJSON.int(report["protocol_errors"]) == 0)
    }

    @Test("--progress json prints events on stdout, each a valid JSON line")
    func progressJSON() async throws {
        let scratch = try CLIScratch()
        let script = """
        printf '{"type":"progress","completed":1,"total":2}\\n' >&3
        sleep 0.3
        printf '{"type":"progress","completed":2,"total":2}\\n' >&3
        exit 3
        """
        let r = try await cliRun(["run", "--progress", "json", "--name", "evjob", "--", "sh", "-c", script],
                                 in: scratch, output: .pipes)
        #expect(r.status == 3, "\(r)")
        var events: [String] = []
        var runs = Set<String>()
        for line in r.stdoutLines {
            let object = try CLIJSON.object(line)
            events.append(object["event"] as? String ?? "?")
            runs.insert(object["run"] as? String ?? "?")
            #expect(object["task"] as? String == "evjob", "\(line)")
            #expect(object["time"] is String, "\(line)")
        }
        for expected in ["started", "budget", "progress", "exited"] {
            #expect(events.contains(expected), "no \(expected) event in \(events)")
        }
        #expect(events.first == "started", "\(events)")
        #expect(events.last == "exited", "\(events)")
        #expect(runs.count == 1, "one run id: \(runs)")
        if let last = r.stdoutLines.last, let exited = try? CLIJSON.object(last) {
            #expect(CLIJSON.int(exited["exit_code"]) == 3, "\(last)")
        }
        #expect(events.filter { $0 == "progress" }.count == 2, "both reports, 0.3 s apart: \(events)")
    }

    @Test("--progress json and --json: events, then the report last")
    func progressJSONWithReport() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--progress", "json", "--json", "--", "sh", "-c", "exit 0"], in: scratch)
        #expect(r.status == 0, "\(r)")
        for line in r.stdoutLines { _ = try CLIJSON.object(line) }
        let report = try r.report()
        #expect(report["event"] == nil, "the last line is the report, not an event: \(r.stdout)")
        #expect(report["exit_code"] != nil, "\(r)")
    }

    @Test("--progress plain prints progress on stderr, nothing on stdout")
    func progressPlain() async throws {
        let scratch = try CLIScratch()
        let script = """
        printf '{"type":"progress","completed":5,"total":10,"title":"epoch 2"}\\n' >&3
        sleep 0.2
        exit 0
        """
        let r = try await cliRun(["run", "--progress", "plain", "--name", "plainjob", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        let line = r.stderrLines.first { $0.contains("5/10") }
        #expect(line != nil, "a progress line on stderr: \(r)")
        #expect(line?.contains("plainjob") == true, "\(r)")
        #expect(line?.contains("50%") == true, "\(r)")
    }

    @Test("--progress none: a timed-out task leaves stderr quiet but for the child's own")
    func progressNone() async throws {
        let scratch = try CLIScratch()
        let script = """
        printf '{"type":"progress","completed":1}\\n' >&3
        echo child-stderr >&2
        sleep 30
        """
        let r = try await cliRun(["run", "--progress", "none", "--budget", "1s", "--grace", "1s", "--", "sh", "-c", script],
                                 in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr == "child-stderr\n", "\(r)")
    }

    @Test("--name shows in the report and in OVERTIME_TASK")
    func nameOption() async throws {
        let scratch = try CLIScratch()
        let script = CLIChild.shNote(scratch.path("task"), "$OVERTIME_TASK")
        let r = try await cliRun(["run", "--json", "--name", "trainer-7", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(try r.report()["task"] as? String == "trainer-7", "\(r)")
        #expect(scratch.read("task") == "trainer-7\n")
    }

    @Test("the child sees OVERTIME_FD=3, OVERTIME_TASK and OVERTIME_RUN, never the supervisor's own")
    func childEnvironment() async throws {
        let scratch = try CLIScratch()
        let script = """
        { echo "FD=$OVERTIME_FD"; echo "TASK=$OVERTIME_TASK"; echo "RUN=$OVERTIME_RUN"; echo "KEEP=$CLI_KEEP_ME"; } > '\(scratch.path("env.tmp"))'
        mv '\(scratch.path("env.tmp"))' '\(scratch.path("env"))'
        """
        var environment = ProcessInfo.processInfo.environment
        // As if this overtime ran under another one: its own OVERTIME_* must not leak through.
        environment["OVERTIME_FD"] = "9"
        environment["OVERTIME_TASK"] = "outer"
        environment["OVERTIME_RUN"] = "outer-run"
        environment["CLI_KEEP_ME"] = "kept"
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", script], in: scratch, environment: environment)
        #expect(r.status == 0, "\(r)")
        let run = try r.report()["run"] as? String
        let lines = (scratch.read("env") ?? "").split(separator: "\n").map(String.init)
        #expect(lines == ["FD=3", "TASK=sh", "RUN=\(run ?? "?")", "KEEP=kept"], "\(lines)")
        #expect(run != nil && run != "outer-run")
    }

    /// A Python child that lists its open descriptors without opening any (fstat on each
    /// number), and whether fd 3 is a socket.
    static let fdLister = """
    import stat, resource
    limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 65536)
    fds = []
    for fd in range(limit):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    targets = {}
    for fd in fds:
        try:
            targets[fd] = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            targets[fd] = "?"
    note(sys.argv[1], json.dumps({"fds": fds, "socket3": stat.S_ISSOCK(os.fstat(3).st_mode) if 3 in fds else False,
                                  "targets": {str(k): v for k, v in targets.items()}}))
    """

    @Test("the child has only fds 0, 1, 2 and 3 open, fd 3 a socket")
    func childDescriptors() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("fds.py", Self.fdLister)
        let r = try await cliRun(["run", "--", "python3", child, scratch.path("fds")], in: scratch)
        #expect(r.status == 0, "\(r)")
        let seen = try CLIJSON.object(try #require(scratch.read("fds"), "\(r)"))
        #expect(seen["fds"] as? [Int] == [0, 1, 2, 3], "open descriptors: \(seen)")
        #expect(CLIJSON.bool(seen["socket3"]) == true, "\(seen)")
    }

    @Test("descriptors overtime inherits do not reach the child")
    func inheritedDescriptorsDoNotLeak() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("fds.py", Self.fdLister)
        // A wrapper opens fds 5 and 7 (not close-on-exec) and execs overtime with them.
        let wrapper = "exec 5</dev/null 7>'\(scratch.path("extra"))'; exec \"$0\" run -- python3 '\(child)' '\(scratch.path("fds"))'"
        let process = CLIProcess(["-c", wrapper, CLIBinary.path], executable: "/bin/sh", in: scratch)
        try await process.start()
        let r = await process.finish()
        #expect(r.status == 0, "\(r)")
        let seen = try CLIJSON.object(try #require(scratch.read("fds"), "\(r)"))
        #expect(seen["fds"] as? [Int] == [0, 1, 2, 3], "open descriptors: \(seen)")
        #expect(CLIJSON.bool(seen["socket3"]) == true, "\(seen)")
    }

    @Test("stdin passes through to the child")
    func stdinPassesThrough() async throws {
        let scratch = try CLIScratch()
        let input = try scratch.write("input.txt", "line one\nline two\n")
        let script = "exec 0<'\(input)'; exec \"$0\" run -- sh -c 'wc -l'"
        let process = CLIProcess(["-c", script, CLIBinary.path], executable: "/bin/sh", in: scratch)
        try await process.start()
        let r = await process.finish()
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "\(r)")
    }
}

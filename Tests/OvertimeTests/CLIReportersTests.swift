// Reporters told apart (docs/protocol.md): processes name themselves with `reporter`, the
// task shows the one furthest behind, a closed bar stays what the task shows, a timeout
// cancel says what went quiet, and colour codes never reach events or reports.

import Foundation
import Testing

/// `text` as a Python string literal.
private func pythonLiteral(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
}

/// A python rank: connects to the task's socket, names itself, and re-sends one count
/// (as a bar refreshes) until GO exists.
private func rankScript(go: String) -> String {
    """
    import json, os, socket, sys, time
    name, completed = sys.argv[1], int(sys.argv[2])
    address = os.environ["OVERTIME_SOCKET"]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\\0" + address[1:] if address.startswith("@") else address)
    first = True
    while not os.path.exists(\(pythonLiteral(go))):
        message = {"type": "progress", "completed": completed, "total": 100, "bar": "tqdm-1"}
        if first:
            message["reporter"] = name
            first = False
        s.sendall((json.dumps(message) + "\\n").encode())
        time.sleep(0.2)
    """
}

@Suite("CLI reporters: named, furthest behind, what went quiet")
struct CLIReportersTests {
    @Test("two ranks on the task's socket: status and the events show the slower one, named, with the count")
    func theSlowerRankIsShown() async throws {
        let scratch = try CLIScratch()
        let go = scratch.path("go"), events = scratch.path("events.jsonl"), socket = scratch.path("ctl.sock")
        let rank = try scratch.write("rank.py", rankScript(go: go))
        let leader = try scratch.write("leader.py", """
        import subprocess, sys
        ranks = [subprocess.Popen([sys.executable, \(pythonLiteral(rank)), "rank 0", "70"]),
                 subprocess.Popen([sys.executable, \(pythonLiteral(rank)), "rank 1", "40"])]
        sys.exit(max(r.wait() for r in ranks))
        """)
        let task = CLIProcess(["run", "--control", socket, "--events", events, "--progress", "none", "--budget", "30s", "--",
                               CLIBatchWorker.python, leader], environment: CLICtl.baseEnvironment, in: scratch)
        try await task.start()
        defer { try? scratch.write("go", "go\n") }
        let shown = await CLICtl.waitUntil(timeout: .seconds(20)) {
            CLICtlRecorder.lines(events).contains {
                $0["event"] as? String == "progress" && $0["reporter"] as? String == "rank 1" && CLIJSON.int($0["reporting"]) == 2
            }
        }
        #expect(shown, "a progress event names rank 1, of 2: \(CLICtlRecorder.lines(events).suffix(5))")
        let status = try #require(try await CLICtl.status(socket, in: scratch).first)
        let progress = status["progress"] as? [String: Any]
        #expect(progress?["reporter"] as? String == "rank 1" && CLIJSON.int(progress?["completed"]) == 40, "\(status)")
        let list = status["by_reporter"] as? [[String: Any]] ?? []
        #expect(Set(list.compactMap { $0["name"] as? String }).isSuperset(of: ["rank 0", "rank 1"]), "\(status)")
        let rank0 = list.first { $0["name"] as? String == "rank 0" }
        #expect(CLIJSON.int((rank0?["progress"] as? [String: Any])?["completed"]) == 70, "each reporter's own bar: \(list)")
        let text = try await CLICtl.ctl(socket: socket, ["status"], in: scratch)
        #expect(text.stdout.contains("rank 1: 40% 40/100") && text.stdout.contains("(2 ranks)"), "the leader, which only waits, is not counted: \(text)")
        try scratch.write("go", "go\n")
        let r = await task.finish()
        #expect(r.status == 0, "\(r)")
    }

    @Test("a task whose only bar closed and then went silent is cancelled with a notice naming that bar and when it closed")
    func aClosedBarThenSilence() async throws {
        let scratch = try CLIScratch()
        let heard = scratch.path("heard")
        let script = try scratch.write("tokenize.py", """
        import json, os, signal, sys
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # to read the cancel that comes with it
        out = os.fdopen(3, "w", buffering=1, closefd=False)
        out.write(json.dumps({"type": "progress", "completed": 10, "total": 10, "title": "Tokenizing", "closed": True}) + "\\n")
        for line in os.fdopen(3, "r", closefd=False):
            message = json.loads(line)
            if message["type"] == "cancel":
                open(\(pythonLiteral(heard)), "w").write(message.get("why", ""))
                sys.exit(0)
        """)
        let r = try await cliRun(["run", "--progress", "plain", "--budget", "1s", "--grace", "5s", "--",
                                  CLIBatchWorker.python, script], in: scratch)
        #expect(r.stderr.contains("no progress within its budget: last progress"), "\(r)")
        #expect(r.stderr.contains("from bar 'Tokenizing' (pid "), "\(r)")
        #expect(r.stderr.contains(", which closed at "), "\(r)")
        #expect(scratch.read("heard")?.contains("bar 'Tokenizing'") == true, "the task heard why: \(r)")
    }

    @Test("a task that never reported progress is told so, with where to look")
    func neverReported() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--progress", "plain", "--budget", "500ms", "--grace", "1s", "--", "sleep", "30"],
                                 in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(r.stderr.contains("it never reported progress; see docs/frameworks.md"), "\(r)")
        let why = try r.report()["cancel_why"] as? String
        #expect(why?.hasPrefix("it never reported progress") == true, "the JSON report says it too: \(r)")
    }

    @Test("a coloured title arrives clean in the events and the report")
    func colouredTitleArrivesClean() async throws {
        let scratch = try CLIScratch()
        let events = scratch.path("events.jsonl")
        let line = #"{"type":"progress","completed":1,"total":2,"title":"\u001b[1;32mgreen\u001b[0m","detail":"\u001b]8;;x\u0007linked"}"#
        let r = try await cliRun(["run", "--json", "--events", events, "--", "sh", "-c", "printf '%s\\n' '\(line)' >&3"], in: scratch)
        #expect(r.status == 0, "\(r)")
        let progress = try r.report()["progress"] as? [String: Any]
        #expect(progress?["title"] as? String == "green" && progress?["detail"] as? String == "linked", "\(r)")
        let event = CLICtlRecorder.lines(events).first { $0["event"] as? String == "progress" }
        #expect(event?["title"] as? String == "green", "\(String(describing: event))")
    }
}

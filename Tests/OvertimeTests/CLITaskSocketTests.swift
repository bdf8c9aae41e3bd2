// Every process of a task may report (DESIGN §3a): the task's OVERTIME_SOCKET takes
// connections from its processes and refuses everyone else's.

import Foundation
import Testing
import OvertimeTestSupport

/// Python that connects to the task's socket (the abstract name starts with '@').
private let socketClient = """
import os, socket, sys, time, json
def connect():
    address = os.environ["OVERTIME_SOCKET"]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\\0" + address[1:] if address.startswith("@") else address)
    return s
def send(s, message):
    s.sendall((json.dumps(message) + "\\n").encode())

"""

/// Runs a process that is not part of any task (Foundation's Process: not one of the
/// test's paced overtime runs) and returns its standard output.
func outsiderRun(_ executable: String, _ arguments: [String], environment: [String: String]) async throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = environment
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = try await offThePool { output.fileHandleForReading.readDataToEndOfFile() }
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

/// `word` as one shell word.
private func shellWord(_ word: String) -> String {
    "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// `text` as a Python string literal.
private func pythonString(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
}

@Suite("CLI task socket: every process reports")
struct CLITaskSocketTests {
    @Test("a subprocess child, with no fd 3, keeps a silent leader alive through OVERTIME_SOCKET; its budget reply is its own")
    func subprocessChildReports() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.write("child.py", socketClient + """
        try:
            os.fstat(3)
            print("fd 3 open in the child", file=sys.stderr)
        except OSError:
            pass
        s = connect()
        reader = s.makefile("r")
        first = json.loads(reader.readline())
        send(s, {"type": "extend", "seconds": 1})
        reply = json.loads(reader.readline())
        with open(\(pythonString(scratch.path("child-saw"))), "w") as f:
            f.write(json.dumps([first, reply]))
        for i in range(1, 11):
            time.sleep(0.35)
            send(s, {"type": "progress", "completed": i, "total": 10, "bar": "child"})
        """)
        let leader = try scratch.write("leader.py", "import subprocess, sys\nsys.exit(subprocess.call([sys.executable, \(pythonString(child))]))\n")
        // Debian's python3, not a version manager's shim that takes most of a second to start
        // (twice here: the leader and its child); the 3 s budget still ends before the
        // child's 3.5 s of progress does.
        let r = try await cliRun(["run", "--json", "--budget", "3s", "--", CLIBatchWorker.python, leader], in: scratch)
        #expect(r.status == 0, "progress from the child alone kept the task alive: \(r)")
        let report = try r.report()
        let progress = report["progress"] as? [String: Any]
        #expect(CLIJSON.int(progress?["completed"]) == 10 && progress?["bar"] as? String == "child", "\(r)")
        #expect(!r.stderr.contains("fd 3 open"), "Python closes fd 3 in its children: \(r)")
        let saw = try #require(scratch.read("child-saw"), "the child wrote what it read: \(r)")
        let messages = try #require(try JSONSerialization.jsonObject(with: Data(saw.utf8)) as? [[String: Any]])
        #expect(messages.first?["type"] as? String == "budget", "a new reporter is told the budget: \(saw)")
        #expect(messages.last?["type"] as? String == "budget" && messages.last?["granted"] as? Bool == true,
                "the reply to its own extend came to it: \(saw)")
    }

    @Test("cancel reaches every reporter with its reason")
    func cancelReachesEveryReporter() async throws {
        let scratch = try CLIScratch()
        // SIGTERM reaches the whole group with the cancel message: a process that cleans up
        // handles it (here: ignores it) and reads why.
        let child = try scratch.write("child.py", socketClient + """
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        s = connect()
        for line in s.makefile("r"):
            message = json.loads(line)
            if message["type"] == "cancel":
                with open(\(pythonString(scratch.path("child-reason"))), "w") as f:
                    f.write(message["reason"])
                break
        """)
        let script = "python3 \(shellWord(child)) & trap 'wait; exit 1' TERM; while :; do sleep 0.1; done"
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "5s", "--", "sh", "-c", script], in: scratch)
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(scratch.read("child-reason") == "timeout", "the grandchild read the reason on its own connection: \(r)")
    }

    @Test("a process outside the task is refused, changes nothing, and is reported")
    func strangerIsRefused() async throws {
        let scratch = try CLIScratch()
        let address = scratch.path("address")
        // A budget with room for the stranger to start on a loaded machine (a full parallel
        // run once took it past 6 s, and it found the task gone); each of its reports, were
        // it heard, would move the deadline 12 s on.
        let task = CLIProcess(["run", "--budget", "12s", "--progress", "json", "--", "sh", "-c",
                               "printf %s \"$OVERTIME_SOCKET\" > \(shellWord(address)); sleep 20"], in: scratch)
        try await task.start()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while scratch.read("address")?.isEmpty ?? true, clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let socketAddress = try #require(scratch.read("address"), "the task never wrote its socket address")
        #expect(socketAddress.hasPrefix("@overtime/"), "\(socketAddress)")
        let stranger = try scratch.write("stranger.py", socketClient + """
        try:
            s = connect()
        except OSError as error:
            print("could not connect:", error)
            sys.exit(1)
        refused = False
        for i in range(20):
            try:
                send(s, {"type": "progress", "completed": i})
            except OSError:
                refused = True
                break
            time.sleep(0.1)
        s.settimeout(2)
        try:
            refused = refused or s.recv(1) == b""
        except OSError:
            refused = True
        print("refused" if refused else "accepted")
        """)
        var environment = ProcessInfo.processInfo.environment
        environment["OVERTIME_SOCKET"] = socketAddress
        // Started at once, outside the test gate that paces overtime runs: it must be there
        // while the task runs.
        let seen = try await outsiderRun("/usr/bin/python3", [stranger], environment: environment)
        // Its last word, exactly: "could not connect: ... Connection refused" (the task gone
        // before the stranger came) is not a refusal of the stranger.
        #expect(seen.split(separator: "\n").last == "refused", "\(seen)")
        let r = await task.finish(timeout: .seconds(30))
        #expect(r.status == 124, "the stranger's progress moved nothing: the task met its budget: \(r)")
        #expect(r.stdout.contains(#""event":"reporter-refused""#), "\(r)")
    }

    @Test("ctl status shows the bar that moved last, the sd_notify status, and how many processes report")
    func statusShowsReporters() async throws {
        let scratch = try CLIScratch()
        let control = scratch.path("control.sock")
        let worker = try scratch.write("worker.py", socketClient + """
        s = connect()
        send(s, {"type": "progress", "completed": 3, "total": 8, "title": "shard", "bar": "shard-1"})
        time.sleep(30)
        """)
        let script = "systemd-notify --status='loading weights'; python3 \(shellWord(worker)) & sleep 30"
        let task = CLIProcess(["run", "--control", control, "--budget", "40s", "--", "sh", "-c", script], in: scratch)
        try await task.start()
        #expect(await CLICtl.waitForSocket(control))
        var seen: [String: Any]?
        let found = try await CLICtl.waitUntil(timeout: .seconds(10)) {
            seen = try await CLICtl.status(control, in: scratch).first
            let live = seen
            return CLIJSON.int(live?["reporters"]) == 2 && (live?["progress"] as? [String: Any])?["bar"] as? String == "shard-1"
        }
        #expect(found, "\(String(describing: seen))")
        let table = try await CLICtl.ctl(socket: control, ["status"], in: scratch)
        #expect(table.stdout.contains("3/8 shard") && table.stdout.contains("(2 reporters)"), "\(table)")
        _ = try await CLICtl.ctl(socket: control, ["cancel", "sh"], in: scratch)
        _ = await task.finish(timeout: .seconds(20))
    }

    @Test("what a reporter wrote before the task ended is all read; one that outlives the leader is waited for 2 s at most")
    func drainedAtTheEnd() async throws {
        let scratch = try CLIScratch()
        // Written and gone at once, and past the bad-line pacing (20,000 a second), so the
        // connection is held back when the leader is reaped: what is left is read to its end.
        let burst = try scratch.write("burst.py", socketClient + """
        s = connect()
        s.sendall(b"garbage\\n" * 60000)
        s.sendall(b"".join(b'{"type":"progress","completed":%d,"total":2000}\\n' % i for i in range(1, 2001)))
        send(s, {"type": "result", "value": "all read"})
        """)
        let r = try await cliRun(["run", "--json", "--", "python3", burst], in: scratch)
        let report = try r.report()
        #expect(r.status == 0 && report["result"] as? String == "all read", "\(r)")
        #expect(CLIJSON.int((report["progress"] as? [String: Any])?["completed"]) == 2000, "\(r)")
        #expect(CLIJSON.int(report["protocol_errors"]) == 60000, "\(r)")

        // A grandchild that keeps its connection open, silent, long after the leader exits.
        let connected = scratch.path("connected")
        let lingering = try scratch.write("linger.py", socketClient + """
        s = connect()
        send(s, {"type": "progress", "completed": 1})
        with open(\(pythonString(connected)), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(30)
        """)
        // The leader leaves once its grandchild has connected and reported.
        let script = "setsid python3 \(shellWord(lingering)) & while [ ! -e \(shellWord(connected)) ]; do sleep 0.05; done; sleep 0.2"
        let lingered = try await cliRun(["run", "--json", "--", "sh", "-c", script], in: scratch)
        #expect(lingered.status == 0, "\(lingered)")
        #expect(lingered.wall < .seconds(15), "the end waited for the lingering reporter: \(lingered)")
        #expect(CLIJSON.int((try lingered.report()["progress"] as? [String: Any])?["completed"]) == 1, "\(lingered)")
        // It left the task's group (setsid), as a daemon does: not the task's to outlive it.
        if let pid = scratch.read("connected").flatMap({ Int32($0) }) { kill(pid, SIGKILL) }
    }
}

// The display modes through the binary, without a terminal: `--progress tty` drawn into a
// file (redraw rate, width, nothing of the task's output lost), `plain` lines timestamped
// the same way in `run` and `batch`, and `--follow` checked against the job file.

import Foundation
import Testing

/// Text as a terminal would leave each line of it: what follows the line's last carriage
/// return, without escape sequences.
private func displaySettled(_ text: String) -> [String] {
    text.components(separatedBy: "\n").map { line in
        let last = line.components(separatedBy: "\r").last ?? ""
        return last.replacingOccurrences(of: "\u{1B}\\[[0-9;?]*[A-Za-z]", with: "", options: .regularExpression)
    }
}

private let displayEnvironment: [String: String] = {
    var env = ProcessInfo.processInfo.environment
    env["NO_COLOR"] = "1"
    env["LANG"] = "C.UTF-8"
    env["LC_ALL"] = nil
    env["TERM"] = "xterm"
    env["COLUMNS"] = "60"
    return env
}()

@Suite("Display through the CLI")
struct DisplayCLITests {
    @Test("tty mode redraws at most ten times a second however fast progress comes, within COLUMNS")
    func redrawRate() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("fast.py", """
        end = time.monotonic() + 1.5
        i = 0
        while time.monotonic() < end:
            i += 1
            send({"type": "progress", "completed": i, "total": 10**7, "title": "Fast"})
        print("sent %d" % i, file=sys.stderr)
        """)
        let r = try await cliRun(["run", "--progress", "tty", "--name", "fast", "--", "python3", child], in: scratch,
                                 environment: displayEnvironment)
        #expect(r.status == 0, "\(r)")
        let sent = r.stderr.range(of: #"sent (\d+)"#, options: .regularExpression).map { Int(r.stderr[$0].dropFirst(5)) ?? 0 } ?? 0
        #expect(sent > 1000, "the child sent many updates: \(sent)")
        // Every frame after the first starts by returning to the first row's column 0.
        let frames = r.stderr.components(separatedBy: "\r\u{1B}[").count
        let limit = Int(r.wall.cliSeconds * 10) + 3
        #expect(frames <= limit, "\(frames) frames in \(r.wall) for \(sent) updates")
        #expect(frames >= 3, "the row was redrawn as it ran: \(frames)")
        // Each frame's row, as drawn (frames are separated by carriage returns in a file).
        let rows = r.stderr.components(separatedBy: CharacterSet(charactersIn: "\r\n"))
            .map { $0.replacingOccurrences(of: "\u{1B}\\[[0-9;?]*[A-Za-z]", with: "", options: .regularExpression) }
            .filter { $0.hasPrefix("fast ") }
        #expect(!rows.isEmpty, "\(r.stderr.suffix(500).debugDescription)")
        for line in rows {
            #expect(line.count <= 59, "COLUMNS=60 leaves 59 for a row: \(line)")
        }
        #expect(r.stderr.hasSuffix("\u{1B}[?25h"), "the cursor is shown at the end")
        #expect(!r.stderr.contains("\u{1B}[J"), "rows are erased line by line")
    }

    @Test("tty mode loses nothing of a task that floods its stderr; every line arrives whole and in order")
    func floodIsComplete() async throws {
        let scratch = try CLIScratch()
        let script = "i=0; while [ $i -lt 20000 ]; do echo \"flood line $i end\" >&2; i=$((i+1)); done"
        let r = try await cliRun(["run", "--progress", "tty", "--name", "flood", "--", "sh", "-c", script], in: scratch,
                                 environment: displayEnvironment, timeout: .seconds(60))
        #expect(r.status == 0, "\(r)")
        let lines = displaySettled(r.stderr).filter { $0.hasPrefix("flood line ") && $0.hasSuffix(" end") }
        var next = 0
        for line in lines where line == "flood line \(next) end" { next += 1 }
        #expect(next == 20000, "lines arrived in order up to \(next): \(r.stderr.prefix(400).debugDescription)")
        #expect(displaySettled(r.stderr).contains { $0.hasPrefix("✓ done: 1 of 1 succeeded") }, "\(r.stderr.suffix(300))")
    }

    @Test("plain lines carry a time of day and 'overtime: NAME:', in run and in batch alike")
    func plainTimestamps() async throws {
        let scratch = try CLIScratch()
        let script = """
        printf '{"type":"progress","completed":1,"total":4,"title":"step"}\\n' >&3
        sleep 0.1
        exit 3
        """
        let run = try await cliRun(["run", "--progress", "plain", "--name", "job", "--", "sh", "-c", script], in: scratch)
        #expect(run.status == 3, "\(run)")
        let pattern = #"^\d\d:\d\d:\d\d overtime: job: "#
        let ours = run.stderrLines.filter { $0.range(of: pattern, options: .regularExpression) != nil }
        #expect(ours.count == run.stderrLines.count, "every line is stamped: \(run.stderr)")
        #expect(ours.contains { $0.hasSuffix("job: 25% (1/4) step") }, "\(run.stderr)")
        #expect(ours.contains { $0.contains("job: started, pid ") }, "\(run.stderr)")
        #expect(ours.contains { $0.hasSuffix("job: failed (exited 3) in " + ($0.components(separatedBy: " in ").last ?? "")) }, "\(run.stderr)")

        let job = try scratch.write("job.json", #"{"tasks": [{"name": "job", "command": ["sh", "-c", "exit 3"]}]}"#)
        let batch = try await cliRun(["batch", job, "--progress", "plain", "--run-dir", scratch.path("run")], in: scratch)
        #expect(batch.status == 1, "\(batch)")
        let stamped = batch.stderrLines.filter { $0.range(of: #"^\d\d:\d\d:\d\d overtime: "#, options: .regularExpression) != nil }
        #expect(stamped.count == batch.stderrLines.count, "\(batch.stderr)")
        #expect(stamped.contains { $0.range(of: pattern + "started, pid ", options: .regularExpression) != nil }, "\(batch.stderr)")
        #expect(stamped.contains { $0.range(of: pattern + #"failed \(exit 3\)"#, options: .regularExpression) != nil }, "\(batch.stderr)")
    }

    @Test("--follow names a task of the job file, or it is a usage error that lists them")
    func followUnknownTask() async throws {
        let scratch = try CLIScratch()
        let job = try scratch.write("job.json", #"{"tasks": [{"name": "alpha", "command": ["true"]}, {"name": "beta", "command": ["true"]}]}"#)
        let r = try await cliRun(["batch", job, "--follow", "alpah", "--run-dir", scratch.path("run")], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderrLines.count == 1, "\(r)")
        #expect(r.stderr.contains("--follow") && r.stderr.contains("alpah") && r.stderr.contains("alpha, beta"), "\(r)")
        #expect(r.stderr.contains("did you mean alpha"), "\(r)")
    }

    @Test("--progress tty is accepted by run and batch; a bad mode names the good ones")
    func modes() async throws {
        let scratch = try CLIScratch()
        let run = try await cliRun(["run", "--progress", "tty", "--", "true"], in: scratch, environment: displayEnvironment)
        #expect(run.status == 0, "\(run)")
        let bad = try await cliRun(["batch", "x.json", "--progress", "fancy"], in: scratch)
        #expect(bad.status == 125 && bad.stderr.contains("auto, tty, plain, json or none"), "\(bad)")
    }
}

/// Whether this machine lets us make a mount namespace (root, or user namespaces).
private let mountNamespacesWork: Bool = {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
    process.arguments = ["--mount", "true"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}()

@Suite("Display without pseudo-terminals", .enabled(if: mountNamespacesWork, "needs `unshare --mount` (root); not available here"))
struct DisplayWithoutPseudoTerminalTests {
    @Test("where no pseudo-terminal can be opened, tty mode captures through a pipe and the task still runs")
    func fallsBackToAPipe() async throws {
        let scratch = try CLIScratch()
        // An empty /dev/pts in a mount namespace of its own: posix_openpt fails there.
        let script = "mount -t tmpfs tmpfs /dev/pts && exec \"$0\" run --progress tty -- sh -c " +
                     "'echo hello >&2; test -t 2 || echo not-a-terminal >&2'"
        let p = CLIProcess(["--mount", "sh", "-c", script, CLIBinary.path], executable: "/usr/bin/unshare",
                           environment: displayEnvironment, in: scratch)
        try await p.start()
        let r = await p.finish(timeout: .seconds(20))
        #expect(r.status == 0, "\(r)")
        let lines = displaySettled(r.stderr)
        #expect(lines.contains("hello") && lines.contains("not-a-terminal"), "\(lines)")
    }

    @Test("plain lines start a line of their own in a file the task left a \\r-drawn bar open in")
    func plainLineAfterOpenBarInFile() async throws {
        let scratch = try CLIScratch()
        // A bar drawn as tqdm draws it, \r and no newline, then progress on fd 3: the line
        // that reports it comes while the bar's line is open, in the same file.
        let task = "printf '\\rbar 10%%' >&2; printf '{\"type\":\"progress\",\"completed\":1,\"total\":10}\\n' >&3; sleep 0.5"
        let log = scratch.path("stderr.log")
        let p = CLIProcess(["-c", "exec \"$0\" run --progress plain --name job -- sh -c \"$1\" 2>\"$2\"", CLIBinary.path, task, log],
                           executable: "/bin/sh", in: scratch)
        try await p.start()
        let r = await p.finish(timeout: .seconds(20))
        #expect(r.status == 0, "\(r)")
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("\rbar 10%\n"), "the bar's line is ended before ours: \(text.debugDescription)")
        #expect(!text.contains("%0"), "no line of ours glued to the bar: \(text.debugDescription)")
        let ours = text.split(separator: "\n").filter { $0.contains(" overtime: job: ") }
        #expect(ours.count >= 2 && ours.allSatisfy { $0.range(of: #"^\d\d:\d\d:\d\d overtime: job: "#, options: .regularExpression) != nil },
                "\(text.debugDescription)")
    }
}

// Where the control socket lives and what guards it (issue 5, "Control socket";
// docs/control.md, "Where it is"): the modes of the directory and the socket, the default
// place under $XDG_RUNTIME_DIR, `ctl list` and `ctl` without --socket, a stale socket
// replaced, a live one refused, a path too long for a Unix socket refused whole.
//
// Every supervisor here has its socket in the test's own scratch directory (--control, or
// XDG_RUNTIME_DIR pointed at the scratch directory), so tests in parallel never meet.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A recorder task under `overtime run` with its socket in the default place. Its budget is
/// long (10 minutes): the tests end it with the go file, and a second supervisor a test
/// starts may wait half a minute for a `CLIGate` permit under the full suite, which a 30 s
/// budget did not outlast (the first then timed out and took its socket with it).
final class CLICtlDefaultRun: @unchecked Sendable {
    let process: CLIProcess
    let log: String
    let go: String

    private init(process: CLIProcess, log: String, go: String) {
        self.process = process
        self.log = log
        self.go = go
    }

    /// Starts task `name` with XDG_RUNTIME_DIR=`xdg` and waits until it has started.
    /// - Parameter files: what its log and go files are named after (default: `name`).
    static func start(_ name: String, xdg: String, in scratch: CLIScratch, files: String? = nil) async throws -> CLICtlDefaultRun {
        let recorder = try CLICtlRecorder.install(in: scratch)
        let log = scratch.path("\(files ?? name).log")
        let go = scratch.path("\(files ?? name).go")
        let p = CLIProcess(["run", "--name", name, "--budget", "10m", "--", CLIBatchWorker.python, recorder, log, go, "0"],
                           environment: CLICtl.environment(xdg: xdg), in: scratch)
        try await p.start()
        guard await CLICtl.waitUntil({ !CLICtlRecorder.messages(log, type: "started").isEmpty }) else {
            throw CLIFailure("\(name) never started: \(await p.finish(timeout: .seconds(1)))")
        }
        return CLICtlDefaultRun(process: p, log: log, go: go)
    }

    func finish() async throws -> CLIResult {
        try Data("go".utf8).write(to: URL(fileURLWithPath: go))
        return await process.finish()
    }
}

@Suite("CLI ctl: where the socket lives")
struct CLICtlSocketTests {
    /// The live sockets in `directory`.
    static func liveSockets(_ directory: String) -> [String] {
        CLICtlFS.entries(directory).filter { $0.hasSuffix(".sock") }.map { directory + "/" + $0 }.filter { CLICtlFS.probe($0) == .live }
    }

    @Test("--control PATH: a socket of mode 0600, ours; removed when the supervisor ends")
    func controlPathModes() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "10m"], code: 0)
        let info = try #require(CLICtlFS.info(f.socket))
        #expect(info.type == UInt32(S_IFSOCK), "not a socket")
        #expect(info.mode == 0o600, "socket mode \(String(info.mode, radix: 8))")
        #expect(info.uid == geteuid(), "socket owner \(info.uid)")
        let status = try await f.ctl(["status"])
        #expect(status.status == 0 && status.stdout.contains("job"), "\(status)")
        try f.release()
        let end = try await f.finish()
        #expect(end.status == 0, "\(end)")
        #expect(CLICtlFS.info(f.socket) == nil, "the socket was left behind")
    }

    @Test("default place: $XDG_RUNTIME_DIR/overtime (0700) holds <run id>.sock (0600); ctl list and ctl without --socket find it; two make a script's status --json choose (125, both listed); none is 125")
    func defaultLocation() async throws {
        let scratch = try CLIScratch()
        let (xdg, env, dir) = try CLICtl.runtimeDirectory(in: scratch)

        let none = try await CLICtl.ctl(["status"], in: scratch, environment: env)
        #expect(none.status == 125, "\(none)")
        #expect(none.stderr.contains("no supervisor is running") && none.stderr.contains(dir), "a clear message naming where it looked: \(none)")

        let a = try await CLICtlDefaultRun.start("alpha", xdg: xdg, in: scratch)
        #expect(await CLICtl.waitUntil { Self.liveSockets(dir).count == 1 }, "no socket in \(dir): \(CLICtlFS.entries(dir))")
        let first = try #require(Self.liveSockets(dir).first)
        let dirInfo = try #require(CLICtlFS.info(dir))
        #expect(dirInfo.mode == 0o700 && dirInfo.uid == geteuid() && dirInfo.type == UInt32(S_IFDIR),
                "\(dir): mode \(String(dirInfo.mode, radix: 8)), uid \(dirInfo.uid)")
        let sockInfo = try #require(CLICtlFS.info(first))
        #expect(sockInfo.mode == 0o600 && sockInfo.type == UInt32(S_IFSOCK), "\(first): mode \(String(sockInfo.mode, radix: 8))")
        let file = String(first.split(separator: "/").last ?? "")
        #expect(file.wholeMatch(of: /[0-9]{8}-[0-9]{6}-[0-9a-f]+\.sock/) != nil, "named after the run id: \(file)")

        // A stale socket beside it (a supervisor that died) is neither listed nor chosen.
        try CLICtlFS.makeStaleSocket(dir + "/20000101-000000-dead.sock")
        let runID = String(file.dropLast(".sock".count))
        let list = try await CLICtl.ctl(["list"], in: scratch, environment: env)
        #expect(list.status == 0 && list.stdoutLines.count == 2 && list.stdoutLines[1].hasPrefix(runID), "a header and its row: \(list)")
        let status = try await CLICtl.ctl(["status"], in: scratch, environment: env)
        #expect(status.status == 0 && status.stdout.contains("alpha"), "the only live supervisor is used: \(status)")

        let b = try await CLICtlDefaultRun.start("beta", xdg: xdg, in: scratch)
        #expect(await CLICtl.waitUntil { Self.liveSockets(dir).count == 2 }, "\(CLICtlFS.entries(dir))")
        let both = Self.liveSockets(dir)
        let runIDs = both.map { String($0.split(separator: "/").last!.dropLast(".sock".count)) }
        let listed = try await CLICtl.ctl(["list"], in: scratch, environment: env)
        #expect(listed.status == 0 && Set(listed.stdoutLines.dropFirst().map { String($0.prefix(runID.count)) }) == Set(runIDs), "\(listed)")
        // A script's `status --json` cannot be one reply for two supervisors: it must choose.
        let ambiguous = try await CLICtl.ctl(["status", "--json"], in: scratch, environment: env)
        #expect(ambiguous.status == 125, "stdin is not a terminal, so ctl cannot ask: \(ambiguous)")
        for id in runIDs {
            #expect(ambiguous.stderr.contains(id), "both supervisors are listed: \(ambiguous)")
        }
        #expect(ambiguous.stderr.contains("--socket"), "it says how to choose: \(ambiguous)")
        let chosen = try await CLICtl.ctl(["--socket", first, "status"], in: scratch, environment: env)
        #expect(chosen.status == 0 && chosen.stdout.contains("alpha") && !chosen.stdout.contains("beta"), "\(chosen)")

        let endA = try await a.finish()
        let endB = try await b.finish()
        #expect(endA.status == 0 && endB.status == 0, "\(endA)\n\(endB)")
        #expect(Self.liveSockets(dir).isEmpty, "\(CLICtlFS.entries(dir))")
        let after = try await CLICtl.ctl(["cancel", "alpha"], in: scratch, environment: env)
        #expect(after.status == 125 && after.stderr.contains("no supervisor is running"), "\(after)")
    }

    @Test("default directory: one open to others is closed to 0700; another user's is not used (a warning naming it, and the task runs without a socket)")
    func defaultDirectoryOwnership() async throws {
        let scratch = try CLIScratch()
        // Open to others: the supervisor closes it.
        let xdgOpen = try CLICtlFS.directory("open", in: scratch, mode: 0o755)
        _ = try CLICtlFS.directory("open/overtime", in: scratch, mode: 0o777)
        let run = try await CLICtlDefaultRun.start("job", xdg: xdgOpen, in: scratch)
        #expect(await CLICtl.waitUntil { Self.liveSockets(xdgOpen + "/overtime").count == 1 })
        let mode = CLICtlFS.info(xdgOpen + "/overtime")?.mode ?? 0
        #expect(mode == 0o700, "an open directory must be closed before a socket goes in it: \(String(mode, radix: 8))")
        #expect(try await run.finish().status == 0)

        // Someone else's: no socket goes in it. Without --control that is a warning, and the
        // task runs all the same (docs/control.md: "the tasks matter more").
        let xdgTheirs = try CLICtlFS.directory("theirs", in: scratch, mode: 0o755)
        let theirs = try CLICtlFS.directory("theirs/overtime", in: scratch, mode: 0o700)
        guard chown(theirs, 65534, 65534) == 0 else {
            Issue.record("cannot chown \(theirs) to 65534: errno \(errno)")
            return
        }
        let marker = scratch.path("ran")
        let r = try await cliRun(["run", "--", "/bin/sh", "-c", "touch '\(marker)'"], in: scratch,
                                 environment: CLICtl.environment(xdg: xdgTheirs))
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("no control socket") && r.stderr.contains(theirs) && r.stderr.contains("65534"),
                "the warning names the directory and its owner: \(r)")
        #expect(FileManager.default.fileExists(atPath: marker), "the task did not run")
        #expect(CLICtlFS.entries(theirs).isEmpty, "a socket went into someone else's directory: \(CLICtlFS.entries(theirs))")
    }

    @Test("a stale socket at --control (nobody listening) is replaced, and ctl works")
    func staleSocketReplaced() async throws {
        let f = try CLICtlRunFixture()
        try CLICtlFS.makeStaleSocket(f.socket)
        #expect(CLICtlFS.probe(f.socket) == .stale)
        let before = try await f.ctl(["status"])
        #expect(before.status == 125 && before.stderr.contains("cannot reach the supervisor at \(f.socket): nobody listens on it"), "\(before)")
        let notASocket = try await CLICtl.ctl(socket: "/etc/passwd", ["status"], in: f.scratch)
        #expect(notASocket.status == 125 && notASocket.stderr.contains("/etc/passwd: it is not a socket"), "\(notASocket)")

        try await f.start(["--budget", "10m"], code: 2)
        let status = try await f.ctl(["status", "--json"])
        #expect(status.status == 0 && status.stdout.contains("\"job\""), "\(status)")
        #expect(CLICtlFS.info(f.socket)?.mode == 0o600)
        try f.release()
        let end = try await f.finish()
        #expect(end.status == 2, "\(end)")
        #expect(!end.stderr.contains("another supervisor"), "\(end)")
    }

    @Test("the socket of a supervisor killed with SIGKILL is left behind, and the next supervisor at that path replaces it")
    func socketOfKilledSupervisor() async throws {
        let f = try CLICtlRunFixture()
        let first = CLIProcess(["run", "--control", f.socket, "--", "sleep", "5"], environment: CLICtl.baseEnvironment, in: f.scratch)
        try await first.start()
        #expect(await CLICtl.waitForSocket(f.socket))
        first.signal(SIGKILL)
        let killed = await first.finish()
        #expect(killed.status == 137, "\(killed)")
        // The kernel closes a killed process's listening socket as it tears the process down,
        // which can trail its exit status by a moment on a loaded machine.
        var probe = CLICtlFS.probe(f.socket)
        for _ in 0..<40 where probe == .live {
            try await Task.sleep(for: .milliseconds(50))
            probe = CLICtlFS.probe(f.socket)
        }
        #expect(probe == .stale, "a SIGKILLed supervisor cannot remove its socket; it is stale now")

        try await f.start(["--budget", "10m"], code: 0)
        let status = try await f.ctl(["status"])
        #expect(status.status == 0 && status.stdout.contains("job"), "\(status)")
        try f.release()
        #expect(try await f.finish().status == 0)
    }

    @Test("a live socket at --control: the second supervisor exits 125 and runs nothing; the first carries on")
    func liveSocketRefused() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "10m"], code: 6)
        let marker = f.scratch.path("second-ran")
        for command in ["run", "batch"] {
            var arguments = ["run", "--control", f.socket, "--", "/bin/sh", "-c", "touch '\(marker)'"]
            if command == "batch" {
                let job = try f.scratch.write("job.json", #"{"tasks":[{"name":"t","command":["/bin/sh","-c","touch '\#(marker)'"]}]}"#)
                arguments = ["batch", job, "--run-dir", f.scratch.path("run"), "--control", f.socket]
            }
            let second = try await cliRun(arguments, in: f.scratch, environment: CLICtl.baseEnvironment)
            #expect(second.status == 125, "\(command): \(second)")
            #expect(second.stderr.contains("another supervisor is listening on \(f.socket)"), "\(command): \(second)")
            #expect(!FileManager.default.fileExists(atPath: marker), "\(command): the second supervisor ran its task")
        }
        #expect(CLICtlFS.probe(f.socket) == .live, "the first supervisor's socket was taken away")
        let status = try await f.ctl(["status"])
        #expect(status.status == 0 && status.stdout.contains("job"), "\(status)")
        try f.release()
        let end = try await f.finish()
        #expect(end.status == 6, "\(end)")
    }

    @Test("a file that is not a socket at --control: 125, and the file is left alone")
    func notASocket() async throws {
        let scratch = try CLIScratch()
        let path = try scratch.write("precious.txt", "keep me\n")
        let r = try await cliRun(["run", "--control", path, "--", "true"], in: scratch, environment: CLICtl.baseEnvironment)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains(path) && r.stderr.contains("not a socket"), "\(r)")
        #expect(scratch.read("precious.txt") == "keep me\n")
    }

    @Test("a --control path longer than 107 bytes: 125, a clear message, nothing created under a cut name",
          arguments: ["run", "batch"], [108, 300])
    func pathTooLong(command: String, length: Int) async throws {
        let scratch = try CLIScratch()
        let directory = scratch.path("long")
        let path = try CLICtlFS.path(length: length, in: directory)
        let marker = scratch.path("ran")
        let arguments: [String]
        if command == "run" {
            arguments = ["run", "--control", path, "--", "/bin/sh", "-c", "touch '\(marker)'"]
        } else {
            let job = try scratch.write("job.json", #"{"tasks":[{"name":"t","command":["/bin/sh","-c","touch '\#(marker)'"]}]}"#)
            arguments = ["batch", job, "--run-dir", scratch.path("run"), "--control", path]
        }
        let r = try await cliRun(arguments, in: scratch, environment: CLICtl.baseEnvironment)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("107") && r.stderr.contains("\(length)"), "the limit and the length: \(r)")
        #expect(r.stderr.contains(path), "the whole path, as given: \(r)")
        #expect(CLICtlFS.entries(directory).isEmpty, "something was created: \(CLICtlFS.entries(directory))")
        #expect(!FileManager.default.fileExists(atPath: marker), "the task ran anyway")
        #expect(r.wall < .seconds(10), "\(r)")

        let ctl = try await CLICtl.ctl(["--socket", path, "status"], in: scratch)
        #expect(ctl.status == 125 && ctl.stderr.contains("too long"), "\(ctl)")
    }

    @Test("a --control path of exactly 107 bytes works, for the supervisor and for ctl")
    func pathOf107Bytes() async throws {
        let f = try CLICtlRunFixture { scratch in try CLICtlFS.path(length: 107, in: scratch.path("long")) }
        #expect(f.socket.utf8.count == 107)
        try await f.start(["--budget", "10m"], code: 0)
        let status = try await f.ctl(["status"])
        #expect(status.status == 0 && status.stdout.contains("job"), "\(status)")
        try f.release()
        #expect(try await f.finish().status == 0)
    }

    @Test("ctl with nothing at --socket, or a bad command: 125 and a clear message")
    func ctlNoSupervisor() async throws {
        let scratch = try CLIScratch()
        let missing = scratch.path("nothing.sock")
        let r = try await CLICtl.ctl(["--socket", missing, "status"], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("cannot reach the supervisor at \(missing)"), "\(r)")
        let usage = try await CLICtl.ctl(["--socket", missing, "extend", "job"], in: scratch)
        #expect(usage.status == 125 && usage.stderr.contains("extend TASK DUR"), "\(usage)")
        let badDuration = try await CLICtl.ctl(["--socket", missing, "extend", "job", "soon"], in: scratch)
        #expect(badDuration.status == 125 && badDuration.stderr.contains("soon"), "\(badDuration)")
    }
}

// What a task inherits (issue 6, "Isolation"): a clean signal state even when Overtime
// itself was started with signals blocked and ignored, and no descriptor beyond 0-3.

import Foundation
import Testing

@Suite("CLI isolation")
struct CLIIsolationTests {
    @Test("the task starts with nothing blocked or ignored, whatever overtime inherited")
    func cleanSignalState() async throws {
        let scratch = try CLIScratch()
        let status = scratch.path("status")
        // The shell ignores HUP, USR1 and PIPE and blocks nothing; CLIProcess blocks USR2 and
        // TERM. Overtime inherits all of that; its task must inherit none of it.
        let inner = "grep -E '^Sig(Blk|Ign)' /proc/self/status > \(status)"
        let script = "trap '' HUP USR1 PIPE; exec \(CLIBinary.path) run -- sh -c \"\(inner)\""
        let process = CLIProcess(["-c", script], executable: "/bin/sh", blockedSignals: [SIGUSR2, SIGTERM], in: scratch)
        try await process.start()
        let r = await process.finish(timeout: .seconds(20))
        #expect(r.status == 0, "\(r)")
        let lines = (scratch.read("status") ?? "").split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(lines)")
        for line in lines {
            let mask = line.split(whereSeparator: { $0 == ":" || $0 == "\t" || $0 == " " }).last.map(String.init) ?? "?"
            #expect(UInt64(mask, radix: 16) == 0, "the task's \(line)")
        }
    }

    @Test("--clean-env starts the task from nothing but --env, the OVERTIME_* variables and its sd_notify socket")
    func cleanEnvironment() async throws {
        let scratch = try CLIScratch()
        var environment = ProcessInfo.processInfo.environment
        environment["OVERTIME_TEST_MARKER"] = "inherited"
        let r = try await cliRun(["run", "--progress", "none", "--clean-env", "--env", "A=1", "--env", "B=x=y", "--", "/usr/bin/env"],
                                 in: scratch, environment: environment)
        #expect(r.status == 0, "\(r)")
        let names = Set(r.stdout.split(separator: "\n").compactMap { $0.split(separator: "=").first.map(String.init) })
        #expect(names == ["A", "B", "OVERTIME_FD", "OVERTIME_SOCKET", "OVERTIME_TASK", "OVERTIME_RUN", "NOTIFY_SOCKET", "WATCHDOG_USEC"],
                "\(r.stdout)")
        #expect(r.stdout.contains("B=x=y\n"))
    }

    @Test("--env sets on top of the inherited environment, and cannot replace OVERTIME_FD")
    func envOnTop() async throws {
        let scratch = try CLIScratch()
        var environment = ProcessInfo.processInfo.environment
        environment["OVERTIME_TEST_MARKER"] = "inherited"
        environment["OVERTIME_TEST_REPLACED"] = "old"
        let r = try await cliRun(["run", "--progress", "none", "--env", "OVERTIME_TEST_REPLACED=new", "--env", "OVERTIME_FD=9",
                                  "--", "/usr/bin/env"], in: scratch, environment: environment)
        #expect(r.status == 0, "\(r)")
        let lines = Set(r.stdout.split(separator: "\n").map(String.init))
        #expect(lines.contains("OVERTIME_TEST_MARKER=inherited"))
        #expect(lines.contains("OVERTIME_TEST_REPLACED=new") && !lines.contains("OVERTIME_TEST_REPLACED=old"))
        #expect(lines.contains("OVERTIME_FD=3") && !lines.contains("OVERTIME_FD=9"))
    }

    @Test("--env without NAME= is a usage error")
    func badEnv() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--env", "=x", "--", "true"], in: scratch)
        #expect(r.status == 125 && r.stderr.contains("NAME=VALUE"), "\(r)")
    }

    @Test("overtime started with stdin, stdout or stderr closed runs the task and exits with its status", arguments: [
        ">&-", "<&- 2>&-", "<&- >&- 2>&-",
    ])
    func closedStandardDescriptors(redirections: String) async throws {
        let scratch = try CLIScratch()
        let marker = scratch.path("ran")
        // The task checks that its stdout is open (on /dev/null, or what overtime had).
        let task = "test -e /proc/self/fd/1 && touch \(marker); exit 3"
        let script = "exec \"$0\" run --progress plain -- sh -c '\(task)' \(redirections)"
        let p = CLIProcess(["-c", script, CLIBinary.path], executable: "/bin/sh", in: scratch)
        try await p.start()
        let r = await p.finish(timeout: .seconds(20))
        #expect(r.status == 3 && !r.diedOfSignal, "\(redirections): \(r)")
        #expect(FileManager.default.fileExists(atPath: marker), "\(redirections): the task did not run with an open stdout")
    }
}

// DESIGN §5 as far as a plain `overtime run` shows it (not as PID 1): signals Overtime does
// not own are forwarded, signals it was started with ignored stay ignored, and the signal
// state Overtime inherits cannot blind it. (A SIGKILLed supervisor: CLISupervisorDeathTests.)

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI as an entrypoint", .serialized)
struct CLIEntrypointTests {
    @Test("a signal Overtime does not own (SIGUSR1, SIGHUP) reaches the child", arguments: [(SIGUSR1, "USR1"), (SIGHUP, "HUP")])
    func forwardsOtherSignals(signal number: Int32, name: String) async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("listener.py", """
        got = []
        signal.signal(signal.SIG\(name), lambda *a: got.append(1))
        note(sys.argv[1], str(os.getpid()))
        end = time.monotonic() + 8
        while not got and time.monotonic() < end:
            time.sleep(0.02)
        note(sys.argv[2], "got" if got else "nothing")
        sys.exit(0 if got else 9)
        """)
        let overtime = CLIProcess(["run", "--budget", "30s", "--grace", "1s", "--",
                                   "python3", child, scratch.path("ready"), scratch.path("seen")], in: scratch)
        try await overtime.start()
        let ready = await scratch.waitForFile("ready")
        #expect(ready != nil, "the child never got ready")
        overtime.signal(number)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 0, "the child got SIG\(name) and exited 0: \(r)")
        #expect(!r.diedOfSignal, "overtime itself died of the signal, leaving its task unsupervised: \(r)")
        // Whatever happened, leave no child behind.
        if let pid = ready.flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
           !(await CLIProcessTable.waitDead(pid, timeout: .seconds(1))) {
            kill(pid, SIGKILL)
        }
    }

    @Test("signals overtime was started with ignored (nohup's SIGHUP, a background job's SIGINT) stay ignored: not acted on, not passed on")
    func inheritedIgnoresAreRespected() async throws {
        let scratch = try CLIScratch()
        let log = scratch.path("heard")
        // The task logs each signal it hears; USR1 (not ignored) is passed on and ends it.
        let task = "trap 'echo HUP >> \(log)' HUP; trap 'echo INT >> \(log)' INT; trap 'echo USR1 >> \(log); exit 0' USR1; " +
                   "touch \(scratch.path("ready")); while :; do sleep 0.05; done"
        let script = "trap '' HUP INT; exec \"$0\" run --progress plain --budget 1m -- sh -c \"$1\""
        let overtime = CLIProcess(["-c", script, CLIBinary.path, task], executable: "/bin/sh", in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil, "the task never got ready")
        overtime.signal(SIGHUP)
        overtime.signal(SIGINT)
        try await Task.sleep(for: .milliseconds(300))
        overtime.signal(SIGUSR1)
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 0 && !r.diedOfSignal, "no user cancel, no forwarded SIGHUP; USR1 ended the task: \(r)")
        #expect(scratch.read("heard") == "USR1\n", "the task heard: \(scratch.read("heard") ?? "nothing")")
    }

    /// Foundation's `Process` on Linux (and other launchers) start children with SIGCHLD
    /// blocked. A supervisor must not depend on the mask it inherits: tini and GNU timeout
    /// set their own.
    @Test("overtime started with SIGCHLD blocked still sees its child exit")
    func inheritedBlockedSIGCHLD() async throws {
        let scratch = try CLIScratch()
        let process = CLIProcess(["run", "--", "sh", "-c", "exit 3"], blockedSignals: [SIGCHLD], in: scratch)
        try await process.start()
        let r = await process.finish(timeout: .seconds(6))
        #expect(!r.timedOut, "overtime hung: it never saw its child exit. \(r)")
        #expect(r.status == 3, "\(r)")
    }

    @Test("overtime started with SIGINT and SIGTERM blocked still cancels on SIGTERM")
    func inheritedBlockedTermination() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        let script = "\(CLIChild.shNote(ready, "$$")); exec sleep 30"
        let process = CLIProcess(["run", "--json", "--budget", "30s", "--grace", "1s", "--", "sh", "-c", script],
                                 blockedSignals: [SIGINT, SIGTERM], in: scratch)
        try await process.start()
        let text = await scratch.waitForFile("ready")
        #expect(text != nil, "the child never got ready")
        process.signal(SIGTERM)
        let r = await process.finish(timeout: .seconds(6))
        #expect(!r.timedOut, "SIGTERM to overtime was never acted on. \(r)")
        if let report = try? r.report() {
            #expect(report["cancel_reason"] as? String == "shutdown", "\(r)")
        }
        if let pid = text.flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
           !(await CLIProcessTable.waitDead(pid, timeout: .seconds(3))) {
            kill(pid, SIGKILL)
        }
    }
}

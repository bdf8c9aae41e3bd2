// Cancellation as a user meets it (DESIGN §2): the reason on fd 3, SIGTERM to the group,
// SIGKILL after grace, nothing of the task left running, nothing it wrote lost.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI cancellation")
struct CLICancelTests {
    @Test("a child that handles SIGTERM sees the cancel reason and grace, exits within grace: 124")
    func cancelMessageThenTerm() async throws {
        let scratch = try CLIScratch()
        let seen = scratch.path("seen")
        let child = try scratch.python("graceful.py", """
        catch_term()
        cancel = None
        while True:
            m = recv(10)
            if m is None:
                break
            if m.get("type") == "cancel":
                cancel = m
                break
        termed = await_term(2)
        note(sys.argv[1], "%s %s %s" % (cancel and cancel.get("reason"), cancel and cancel.get("grace"), "TERM" if termed else "no-TERM"))
        sys.exit(0)
        """)
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "3s", "--", "python3", child, seen], in: scratch)
        #expect(r.status == 124, "\(r)")
        let text = scratch.read("seen")?.trimmingCharacters(in: .whitespacesAndNewlines)
        let words = text?.split(separator: " ").map(String.init) ?? []
        #expect(words.count == 3, "the child wrote: \(text ?? "nothing"); \(r)")
        if words.count == 3 {
            #expect(words[0] == "timeout", "\(text!)")
            #expect(Double(words[1]) == 3.0, "the grace it was given: \(text!)")
            #expect(words[2] == "TERM", "SIGTERM follows the cancel message: \(text!)")
        }
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(r)")
        #expect(report["status"] as? String == "exited", "\(r)")
        #expect(CLIJSON.int(report["code"]) == 0, "\(r)")
        // It exited on its own well before the 3 s grace ran out.
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("a child that ignores SIGTERM is SIGKILLed after grace: 137, killed", arguments: ["sh", "python"])
    func ignoresTerm(language: String) async throws {
        let scratch = try CLIScratch()
        let command: [String]
        if language == "sh" {
            command = ["sh", "-c", "trap '' TERM; sleep 30"]
        } else {
            let child = try scratch.python("stubborn.py", """
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(30)
            """)
            command = ["python3", child]
        }
        // Python needs the time to start and ignore SIGTERM before its budget runs out: under
        // a loaded full suite it once took over a second, and died of the SIGTERM.
        let budget = language == "sh" ? 1.0 : 3.0
        let r = try await cliRun(["run", "--json", "--budget", "\(Int(budget))s", "--grace", "1s", "--"] + command, in: scratch)
        #expect(r.status == 137, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.bool(report["killed"]) == true, "\(r)")
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(report["status"] as? String == "signaled", "\(r)")
        #expect(report["signal"] as? String == "SIGKILL", "\(r)")
        #expect(CLIJSON.int(report["exit_code"]) == 137, "\(r)")
        #expect((CLIJSON.double(report["elapsed"]) ?? 0) >= budget + 0.9, "budget + grace must pass before SIGKILL: \(r)")
        #expect(r.wall < .seconds(10), "\(r)")
        #expect(r.stderr.contains("SIGKILL"), "\(r)")
    }

    @Test("grandchildren in the task's group are gone after cancel")
    func grandchildrenGone() async throws {
        let scratch = try CLIScratch()
        let pids = scratch.path("pids")
        // One plain background sleeper, and one that ignores SIGTERM (only the final
        // sweep of the group can end it). The leader dies of SIGTERM.
        let script = """
        sleep 1000 &
        a=$!
        sh -c "trap '' TERM; exec sleep 1000" &
        b=$!
        \(CLIChild.shNote(pids, "$a $b"))
        sleep 30
        """
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "2s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 124, "\(r)")
        let text = try #require(scratch.read("pids"), "the child wrote no pids: \(r)")
        let list = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
        #expect(list.count == 2, "\(text)")
        for pid in list {
            let dead = await CLIProcessTable.waitDead(pid, timeout: .seconds(5))
            #expect(dead, "grandchild \(pid) still runs after overtime exited")
            if !dead { kill(pid, SIGKILL) }
        }
    }

    @Test("--preserve-status: a timed-out child exiting 3 from its TERM handler", arguments: [true, false])
    func preserveStatus(preserve: Bool) async throws {
        let scratch = try CLIScratch()
        let script = "trap 'exit 3' TERM; while :; do sleep 0.1; done"
        let flags = preserve ? ["--preserve-status"] : []
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "3s"] + flags + ["--", "sh", "-c", script],
                                 in: scratch)
        #expect(r.status == (preserve ? 3 : 124), "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(CLIJSON.int(report["code"]) == 3, "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("--preserve-status: a SIGKILLed child is 137 either way")
    func preserveStatusKilled() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--preserve-status", "--budget", "1s", "--grace", "1s", "--",
                                  "sh", "-c", "trap '' TERM; sleep 30"], in: scratch)
        #expect(r.status == 137, "\(r)")
    }

    @Test("every byte a killed child wrote reaches overtime's stdout and stderr", arguments: [CLIOutputMode.files, .pipes])
    func killedChildOutput(mode: CLIOutputMode) async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("noisy.py", """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        out = b"".join(b"out-line %06d ........................................\\n" % i for i in range(4000))[:200000]
        err = b"".join(b"ERR#%06d|" % i for i in range(10000))[:100000]
        writeall(1, out)
        writeall(2, err)
        time.sleep(30)
        """)
        let r = try await cliRun(["run", "--budget", "1s", "--grace", "1s", "--", "python3", child], in: scratch, output: mode)
        #expect(r.status == 137, "\(r.status) \(r.stderr.suffix(500))")
        var expectedOut = Data()
        var i = 0
        while expectedOut.count < 200_000 {
            expectedOut.append(Data(String(format: "out-line %06d ........................................\n", i).utf8))
            i += 1
        }
        expectedOut = expectedOut.prefix(200_000)
        var expectedErr = Data()
        i = 0
        while expectedErr.count < 100_000 {
            expectedErr.append(Data(String(format: "ERR#%06d|", i).utf8))
            i += 1
        }
        expectedErr = expectedErr.prefix(100_000)
        #expect(r.stdoutData.count == 200_000, "stdout size")
        #expect(r.stdoutData == expectedOut, "stdout content")
        #expect(r.stderrData.count >= 100_000, "stderr size \(r.stderrData.count)")
        #expect(r.stderrData.range(of: expectedErr) != nil, "the child's stderr arrived whole")
        #expect(r.wall < .seconds(10), "wall \(r.wall)")
    }
}

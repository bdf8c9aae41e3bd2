// The budget as a user meets it through `overtime run` (DESIGN §1): progress keeps a task
// alive, a stall is cancelled, max-runtime is a ceiling, require-advance, extend, warn-before.

import Foundation
import Testing

@Suite("CLI budget")
struct CLIBudgetTests {
    @Test("progress keeps a task alive well past its budget")
    func progressKeepsAlive() async throws {
        let scratch = try CLIScratch()
        // 10 reports 0.3 s apart: about 3 s of work under a 1 s budget.
        let script = """
        i=0
        while [ $i -lt 10 ]; do
          printf '{"type":"progress","completed":%d,"total":10}\\n' $i >&3
          sleep 0.3
          i=$((i+1))
        done
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "1s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        let elapsed = CLIJSON.double(report["elapsed"]) ?? 0
        #expect(elapsed > 1.0, "it must have outlived its 1 s budget: \(r)")
        let progress = report["progress"] as? [String: Any]
        #expect(CLIJSON.int(progress?["completed"]) == 9, "\(r)")
        #expect(CLIJSON.int(progress?["total"]) == 10, "\(r)")
        #expect(r.wall < .seconds(15), "\(r)")
    }

    @Test("heartbeats keep a task alive too")
    func heartbeatKeepsAlive() async throws {
        let scratch = try CLIScratch()
        let script = """
        for i in 1 2 3 4 5 6 7; do echo '{"type":"heartbeat"}' >&3; sleep 0.3; done
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "1s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect((CLIJSON.double(report["elapsed"]) ?? 0) > 1.0, "\(r)")
    }

    @Test("a stall is cancelled with timeout: exit 124")
    func stallTimesOut() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--budget", "1s", "--grace", "1s", "--", "sh", "-c", "sleep 30"], in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(r.stderr.contains("timeout"), "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("a stall after some progress is cancelled with timeout; --json says so")
    func stallAfterProgress() async throws {
        let scratch = try CLIScratch()
        let script = """
        printf '{"type":"progress","completed":1,"total":4}\\n' >&3
        sleep 30
        """
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "1s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 124, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(r)")
        #expect(CLIJSON.int(report["exit_code"]) == 124, "\(r)")
        #expect(CLIJSON.int((report["progress"] as? [String: Any])?["completed"]) == 1, "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("--max-runtime cancels with deadline even while progress flows")
    func maxRuntimeWinsOverProgress() async throws {
        let scratch = try CLIScratch()
        let script = """
        i=0
        while [ $i -lt 100 ]; do
          printf '{"type":"progress","completed":%d}\\n' $i >&3
          sleep 0.2
          i=$((i+1))
        done
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--max-runtime", "2s", "--grace", "1s", "--",
                                  "sh", "-c", script], in: scratch)
        #expect(r.status == 124, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "deadline", "\(r)")
        let elapsed = CLIJSON.double(report["elapsed"]) ?? 0
        #expect(elapsed >= 1.9, "not before max-runtime: \(r)")
        #expect(r.wall < .seconds(10), "\(r)")
        #expect(r.stderr.contains("deadline"), "\(r)")
    }

    @Test("--require-advance: repeating the same progress does not keep a task alive")
    func requireAdvanceCatchesRepeats() async throws {
        let scratch = try CLIScratch()
        let script = """
        i=0
        while [ $i -lt 25 ]; do
          printf '{"type":"progress","completed":5,"total":10}\\n' >&3
          sleep 0.2
          i=$((i+1))
        done
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--require-advance", "--budget", "1s", "--grace", "1s", "--",
                                  "sh", "-c", script], in: scratch)
        #expect(r.status == 124, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("--require-advance: advancing progress keeps a task alive")
    func requireAdvanceAllowsAdvance() async throws {
        let scratch = try CLIScratch()
        let script = """
        i=0
        while [ $i -lt 10 ]; do
          printf '{"type":"progress","completed":%d,"total":10}\\n' $i >&3
          sleep 0.3
          i=$((i+1))
        done
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--require-advance", "--budget", "1s", "--grace", "1s", "--",
                                  "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect((CLIJSON.double(report["elapsed"]) ?? 0) > 1.0, "\(r)")
    }

    @Test("--budget none: a silent task runs to its end")
    func budgetNone() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--budget", "none", "--", "sh", "-c", "sleep 1.5; exit 4"], in: scratch)
        #expect(r.status == 4, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
    }

    @Test("a child's extend is granted and answered with budget")
    func childExtend() async throws {
        let scratch = try CLIScratch()
        let seen = scratch.path("seen")
        let child = try scratch.python("extend.py", """
        first = recv(5)
        send({"type": "extend", "seconds": 3, "why": "one more epoch"})
        reply = None
        while True:
            m = recv(5)
            if m is None or m.get("type") == "budget":
                reply = m
                break
        note(sys.argv[1], json.dumps({"first": first, "reply": reply}))
        time.sleep(2)   # past the 1 s budget, within the 3 s granted
        sys.exit(0)
        """)
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--grace", "1s", "--", "python3", child, seen], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect((CLIJSON.double(report["elapsed"]) ?? 0) > 1.0, "\(r)")
        let text = try #require(scratch.read("seen"), "the child wrote nothing: \(r)")
        let seenObject = try CLIJSON.object(text)
        let first = seenObject["first"] as? [String: Any]
        #expect(first?["type"] as? String == "budget", "the first message is the starting budget: \(text)")
        let reply = try #require(seenObject["reply"] as? [String: Any], "no budget reply: \(text)")
        #expect(CLIJSON.bool(reply["granted"]) == true, "\(text)")
        let remaining = CLIJSON.double(reply["remaining"]) ?? -1
        #expect(remaining > 2.5 && remaining <= 3.0, "remaining ≈ 3: \(text)")
    }

    @Test("an extend past --max-runtime is refused and the task ends with deadline")
    func childExtendPastMaxRuntime() async throws {
        let scratch = try CLIScratch()
        let seen = scratch.path("seen")
        let child = try scratch.python("extend.py", """
        catch_term()
        recv(5)
        send({"type": "extend", "seconds": 10})
        reply = None
        while True:
            m = recv(5)
            if m is None or m.get("type") == "budget":
                reply = m
                break
        cancel = None
        while True:
            m = recv(10)
            if m is None or m.get("type") == "cancel":
                cancel = m
                break
        note(sys.argv[1], json.dumps({"reply": reply, "cancel": cancel}))
        await_term()
        sys.exit(0)
        """)
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--max-runtime", "2s", "--grace", "1s", "--",
                                  "python3", child, seen], in: scratch)
        #expect(r.status == 124, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "deadline", "\(r)")
        #expect((CLIJSON.double(report["elapsed"]) ?? 0) >= 1.9, "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
        let text = try #require(scratch.read("seen"), "the child wrote nothing: \(r)")
        let seenObject = try CLIJSON.object(text)
        let reply = try #require(seenObject["reply"] as? [String: Any], "no budget reply: \(text)")
        #expect(CLIJSON.bool(reply["granted"]) == false, "\(text)")
        let remaining = CLIJSON.double(reply["remaining"]) ?? -1
        #expect(remaining > 1.0 && remaining <= 2.0, "what is left up to max-runtime: \(text)")
        let cancel = seenObject["cancel"] as? [String: Any]
        #expect(cancel?["reason"] as? String == "deadline", "\(text)")
    }

    @Test("--warn-before sends exactly one expiring before the cancel")
    func warnBeforeOnce() async throws {
        let scratch = try CLIScratch()
        let seen = scratch.path("seen")
        let child = try scratch.python("warn.py", """
        catch_term()
        expiring = []
        reason = None
        while True:
            m = recv(10)
            if m is None:
                break
            if m.get("type") == "expiring":
                expiring.append(m.get("remaining"))
            if m.get("type") == "cancel":
                reason = m.get("reason")
                break
        note(sys.argv[1], json.dumps({"expiring": expiring, "reason": reason}))
        await_term()
        sys.exit(0)
        """)
        let r = try await cliRun(["run", "--json", "--budget", "2s", "--warn-before", "1s", "--grace", "2s", "--",
                                  "python3", child, seen], in: scratch)
        #expect(r.status == 124, "\(r)")
        let text = try #require(scratch.read("seen"), "the child wrote nothing: \(r)")
        let seenObject = try CLIJSON.object(text)
        let expiring = seenObject["expiring"] as? [Any] ?? []
        #expect(expiring.count == 1, "exactly one expiring: \(text)")
        if let first = expiring.first {
            let remaining = CLIJSON.double(first) ?? -1
            #expect(remaining > 0 && remaining <= 1.05, "about warn-before ahead: \(text)")
        }
        #expect(seenObject["reason"] as? String == "timeout", "\(text)")
        #expect(r.wall < .seconds(10), "\(r)")
    }
}

// Overtime's own output never holds the loop (issue 10): with nobody reading its stdout or
// stderr — a paused pager, `| (sleep 30; cat)`, Ctrl-S on a terminal — deadlines still
// cancel on time and signals are still obeyed. Each run's output is a pipe or a terminal
// the test reads only at the end.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("CLI with a stalled reader", .serialized)
struct CLIStalledOutputTests {
    /// Reports progress with 60 KB titles every 0.2 s for `argv[2]` seconds (far more than a
    /// pipe holds, in any mode), and with argv[3] "loud" prints 100 KB on stderr each time
    /// too; then goes silent. On SIGTERM it notes "<reason> <seconds since start>" in
    /// argv[1] — the reason read from the cancel message — and exits 0.
    static let chattyThenSilent = """
    start = time.monotonic()
    reason = []
    def on_term(*_):
        while not reason:
            m = recv(2)
            if m is None or m.get("type") == "cancel":
                reason.append(m and m.get("reason"))
        note(sys.argv[1], "%s %.2f" % (reason[0], time.monotonic() - start))
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    i = 0
    while time.monotonic() - start < float(sys.argv[2]):
        send({"type": "progress", "completed": i, "total": 1000, "title": "t%d-" % i + "x" * 60000})
        if sys.argv[3:] == ["loud"]:
            writeall(2, (("line %d " % i) + "y" * 1000 + "\\n").encode() * 100)
        i += 1
        time.sleep(0.2)
    note(sys.argv[1] + ".silent", "%.2f" % (time.monotonic() - start))
    time.sleep(60)
    """

    /// The cancel the task noted: its reason and when (seconds since the task started).
    static func cancelSeen(_ scratch: CLIScratch) async -> (reason: String, at: Double)? {
        guard let text = await scratch.waitForFile("cancel", timeout: .seconds(15)) else { return nil }
        let parts = text.split(separator: " ")
        guard parts.count == 2, let at = Double(parts[1]) else { return nil }
        return (String(parts[0]), at)
    }

    @Test("the deadline cancels on time while nobody reads the output", arguments: [
        (["--progress", "plain"], CLIOutputMode.stalledPipes),
        (["--progress", "json"], CLIOutputMode.stalledPipes),
        (["--progress", "tty"], CLIOutputMode.stalledTerminal),
    ])
    func deadlineHoldsWhileTheReaderStalls(mode: [String], output: CLIOutputMode) async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("chatty.py", Self.chattyThenSilent)
        // In tty mode the rows alone are little; the task's own output, relayed above them,
        // is what fills the terminal.
        let loud = output == .stalledTerminal ? ["loud"] : []
        let overtime = CLIProcess(["run"] + mode + ["--budget", "2s", "--grace", "5s", "--",
                                   "python3", child, scratch.path("cancel"), "2"] + loud, output: output, in: scratch)
        try await overtime.start()
        // Silent from about 2 s: the deadline falls near 4 s. With the loop stuck in a write
        // the cancel would come only once the test reads, after the 15 s wait below.
        let seen = await Self.cancelSeen(scratch)
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "timeout", "the task saw no timeout cancel while output was stalled: \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s, not near 4 s: \(r)")
        #expect(r.status == 124, "\(r)")
        if mode == ["--progress", "json"] {
            // What was kept is whole lines, and the task's end is among them.
            let lines = r.stdoutLines
            #expect(lines.allSatisfy { (try? CLIJSON.object($0)) != nil }, "a cut or garbled JSON line: \(r)")
            #expect(lines.contains { $0.contains(#""event":"exited""#) }, "the exited event was dropped: \(r)")
        }
    }

    @Test("a SIGTERM while nobody reads the output is obeyed at once, as a shutdown")
    func signalDuringTheStall() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("chatty.py", Self.chattyThenSilent)
        let overtime = CLIProcess(["run", "--progress", "plain", "--budget", "30s", "--grace", "5s", "--",
                                   "python3", child, scratch.path("cancel"), "2"], output: .stalledPipes, in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("cancel.silent", timeout: .seconds(15)) != nil, "the task never went silent")
        overtime.signal(SIGTERM)
        let seen = await Self.cancelSeen(scratch)
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "shutdown", "the task saw: \(String(describing: seen)); \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s: \(r)")
        #expect(r.status == 0, "the task's own status after a shutdown cancel: \(r)")
        #expect(r.stderr.contains("received SIGTERM; cancelling (shutdown)"), "\(r)")
    }

    @Test("batch: a task's deadline holds while nobody reads the journal lines on stdout")
    func batchDeadlineHoldsWhileTheReaderStalls() async throws {
        let batch = try CLIBatchFixture()
        let child = try batch.scratch.python("chatty.py", Self.chattyThenSilent)
        try batch.writeJob(["tasks": [["name": "chatty", "budget": "2s", "grace": "5s",
                                       "command": ["python3", child, batch.path("cancel"), "3"]]]])
        let overtime = try await batch.start(["--progress", "json"], output: .stalledPipes)
        let seen = await Self.cancelSeen(batch.scratch)
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "timeout", "\(r)")
        #expect((seen?.at ?? 99) < 10, "cancelled at \(seen?.at ?? -1) s, not near 5 s: \(r)")
        #expect(r.status == 1, "\(r)")
    }

}

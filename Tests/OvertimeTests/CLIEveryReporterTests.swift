// --every-reporter: under rank-independent work (each process its own shard, no collective)
// one process that stops reporting is caught while the others keep reporting.

import Foundation
import Testing
import OvertimeTestSupport

/// A leader that reports nothing and forks two ranks that connect to the task's socket and
/// send progress every 0.2 s, naming themselves as the worker libraries do: `rank 1` stops
/// at 6 s but stays connected until 9 s; `rank 0` reports until 9 s. Both exit then, and so
/// does the leader, with 0.
private let twoRanks = """
import json, os, socket, sys, time
def rank(name, stop_after, ready=None):
    address = os.environ["OVERTIME_SOCKET"]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\\0" + address[1:] if address.startswith("@") else address)
    start = time.monotonic()
    step = 0
    while True:
        if time.monotonic() - start < stop_after:
            step += 1
            s.sendall((json.dumps({"type": "progress", "completed": step, "title": "shard", "reporter": name}) + "\\n").encode())
        if ready is not None:
            os.write(ready, b"x")
            os.close(ready)
            ready = None
        if time.monotonic() - start >= 9:
            break
        time.sleep(0.2)
    s.close()
    os._exit(0)

r, w = os.pipe()
quiet = os.fork()
if quiet == 0:
    os.close(r)
    rank("rank 1", 6, ready=w)
os.close(w)
os.read(r, 1)
busy = os.fork()
if busy == 0:
    rank("rank 0", 9)
for pid in (quiet, busy):
    os.waitpid(pid, 0)
sys.exit(0)
"""

@Suite("CLI every-reporter")
struct CLIEveryReporterTests {
    @Test("--every-reporter: a rank that stops reporting but stays connected is cancelled at its own deadline, and named")
    func aQuietRankIsCancelled() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--budget", "5s", "--window", "1s", "--grace", "2s", "--every-reporter",
                                  "--progress", "plain", "--", CLIBatchWorker.python, "-c", twoRanks], in: scratch)
        #expect(r.status == 124, "\(r)")
        let report = try r.report()
        #expect(report["cancel_reason"] as? String == "timeout", "\(r)")
        // Past the 5 s budget (the quiet rank's reports moved its own deadline) and before
        // the other rank's end at 9 s; the upper bound is generous.
        let elapsed = CLIJSON.double(report["elapsed"]) ?? 0
        #expect(elapsed > 5.5 && r.wall < .seconds(30), "\(r)")
        #expect(r.stderr.contains("rank 1 went quiet"), "\(r)")
        // The cancel's why tells of the quiet rank's last progress, not of rank 0's.
        #expect(r.stderr.contains("from bar 'shard' (rank 1)"), "\(r)")
    }

    @Test("without --every-reporter the other rank keeps the task alive to its end")
    func withoutTheFlagTheTaskRunsToItsEnd() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--budget", "5s", "--window", "1s", "--grace", "2s",
                                  "--progress", "plain", "--", CLIBatchWorker.python, "-c", twoRanks], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect(!r.stderr.contains("went quiet"), "\(r)")
    }

    @Test("ctl status: every-reporter is shown on, with each reporter's own time left")
    func statusShowsEachReportersTimeLeft() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--window", "20s", "--every-reporter", "--json"], heartbeat: true)
        _ = await f.waitSeen("budget")
        // The leader's heartbeats every 50 ms keep its own deadline about 20 s ahead.
        var status = try await f.ctl(["status"])
        for _ in 0..<50 where !status.stdout.contains("every-reporter: pid ") {
            try await Task.sleep(for: .milliseconds(100))
            status = try await f.ctl(["status"])
        }
        #expect(status.status == 0, "\(status)")
        let line = status.stdout.split(separator: "\n").first { $0.hasPrefix("job: every-reporter: ") }
        // The leader, unnamed, goes by its pid.
        #expect(line?.hasPrefix("job: every-reporter: pid ") == true && line?.hasSuffix(" left") == true, "\(status)")
        let json = try await f.ctl(["status", "--json"])
        #expect(json.stdout.contains(#""every_reporter":[{"reporter":"pid "#), "\(json)")
        try f.release()
        let end = try await f.finish()
        #expect(end.status == 0, "\(end)")
    }
}

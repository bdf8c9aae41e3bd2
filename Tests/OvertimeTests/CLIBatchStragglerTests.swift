// `overtime batch` with `stragglers` (docs/jobfile.md, Stragglers): an array of four real
// processes, one of which reports at a quarter of the others' pace, is flagged alone; with
// `action: restart` it is cancelled with reason `straggler` and its second attempt runs.

import Foundation
import Testing

@Suite("CLI batch: stragglers")
struct CLIBatchStragglerTests {
    /// Reports 40 steps on fd 3, one each 0.2 s (8 s in all); element 2's first attempt
    /// one each 0.8 s, and it stops after 10 s (done or not) with exit 0, so that a batch
    /// that only warns ends too.
    static let pacedWorker = """
    import os, time
    slow = os.environ["OVERTIME_INDEX"] == "2" and os.environ["OVERTIME_ATTEMPT"] == "1"
    step = 0.8 if slow else 0.2
    channel = os.fdopen(3, "w", buffering=1)
    start = time.monotonic()
    for done in range(1, 41):
        time.sleep(step)
        channel.write('{"type":"progress","completed":%d,"total":40}\\n' % done)
        if time.monotonic() - start > 10:
            break
    """

    static func job(_ f: CLIBatchFixture, action: String?) throws {
        let worker = try f.scratch.python("paced.py", pacedWorker)
        var stragglers: [String: Any] = ["below": 0.5, "warm-up": "2s"]
        if let action { stragglers["action"] = action }
        try f.writeJob(["concurrency": 4, "stragglers": stragglers, "metrics-file": f.path("batch.prom"), "tasks": [
            ["name": "shard", "array": "0-3", "command": [CLIBatchWorker.python, worker]],
        ]])
    }

    @Test("warn: only the element at a quarter of its peers' pace is flagged, once, and the batch goes on to exit 0")
    func warnFlagsTheSlowElementAlone() async throws {
        let f = try CLIBatchFixture()
        try Self.job(f, action: nil)
        let started = ContinuousClock.now
        let result = try await f.run(timeout: .seconds(120))
        #expect(result.status == 0, "\(result)")
        // About 10 s on an idle machine; the bound only says it ended rather than hung.
        #expect(ContinuousClock.now - started < .seconds(100), "a batch of about 10 s")
        let flagged = try f.events().filter { $0["event"] as? String == "straggler" }
        #expect(flagged.count == 1, "\(flagged)")
        let flag = try #require(flagged.first)
        #expect(flag["task"] as? String == "shard[2]", "\(flag)")
        #expect(flag["action"] as? String == "warn" && CLIJSON.double(flag["below"]) == 0.5, "\(flag)")
        let rate = try #require(CLIJSON.double(flag["rate"]))
        let median = try #require(CLIJSON.double(flag["median"]))
        #expect(rate < 0.5 * median, "\(flag)")
        #expect(try f.events(of: "shard[2]", "cancel").isEmpty, "warn never cancels")
        #expect(try f.summaryTasks()["shard[2]"]?["attempts"] as? Int == 1)

        // Counted in the metrics, by its group and (a sweep of at most 100) by the task.
        let metrics = f.scratch.read("batch.prom") ?? ""
        #expect(metrics.contains("overtime_stragglers_total{group=\"shard\"} 1\n"), "\(metrics)")
        #expect(metrics.contains("overtime_task_stragglers_total{task=\"shard[2]\"} 1\n"), "\(metrics)")
        #expect(!metrics.contains("overtime_task_stragglers_total{task=\"shard[0]\"}"), "\(metrics)")

        // The report marks its row, and the attempt where it was flagged.
        let page = f.path("report.html")
        let report = try await cliRun(["report", f.runDirectory, "-o", page], in: f.scratch)
        #expect(report.status == 0, "\(report)")
        let html = f.scratch.read("report.html") ?? ""
        #expect(html.components(separatedBy: "\"straggler\":true").count == 2, "one task marked")
        #expect(html.contains("\"straggler\",\"straggler at "), "the attempt's mark")
    }

    @Test("restart: the straggler is cancelled with reason straggler and run again, without retries, and the batch exits 0")
    func restartRunsTheStragglerAgain() async throws {
        let f = try CLIBatchFixture()
        try Self.job(f, action: "restart")
        let started = ContinuousClock.now
        let result = try await f.run(timeout: .seconds(120))
        #expect(result.status == 0, "\(result)")
        #expect(ContinuousClock.now - started < .seconds(100), "a batch of about 13 s")
        let flagged = try f.events().filter { $0["event"] as? String == "straggler" }
        #expect(flagged.map { $0["task"] as? String } == ["shard[2]"], "\(flagged)")
        #expect(flagged.first?["action"] as? String == "restart", "\(flagged)")
        let cancels = try f.events(of: "shard[2]", "cancel")
        #expect(cancels.map { $0["reason"] as? String } == ["straggler"], "\(cancels)")
        let retries = try f.events(of: "shard[2]", "retry")
        #expect(retries.map { $0["because"] as? String }.first??.hasPrefix("straggler") == true, "\(retries)")
        let attempts = try f.events(of: "shard[2]", "attempt").map { CLIJSON.int($0["attempt"]) }
        #expect(attempts == [1, 2], "\(attempts)")
        let summary = try f.summaryTasks()
        #expect(summary["shard[2]"]?["outcome"] as? String == "succeeded" && summary["shard[2]"]?["attempts"] as? Int == 2, "\(summary)")
        for i in [0, 1, 3] {
            #expect(summary["shard[\(i)]"]?["attempts"] as? Int == 1, "shard[\(i)]")
            #expect(try f.events(of: "shard[\(i)]", "cancel").isEmpty, "shard[\(i)]")
        }
    }
}

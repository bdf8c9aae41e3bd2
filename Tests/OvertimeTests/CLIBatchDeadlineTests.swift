// `overtime batch` with a batch `deadline` (issue 4, "min-start"; DESIGN §1): a task is not
// started with less than its min-start left (skipped, reason deadline), and running tasks
// are cut at the deadline (cancelled, reason deadline).

import Foundation
import Testing

@Suite("CLI batch deadline")
struct CLIBatchDeadlineTests {
    @Test("min-start skips what would start too late; the deadline cuts what runs")
    func deadlineAndMinStart() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob([
            "deadline": "4s",
            "defaults": ["grace": "2s", "budget": "none"],
            "tasks": [
                // Runs past the deadline: cut there, and told why.
                f.task("long", ["wait-cancel=30", "exit=0"], ["min-start": "1s"]),
                f.task("short", ["sleep=1"], ["min-start": "1s"]),
                // Become startable after ~1 s, with ~3 s left:
                f.task("late", [], ["after": ["short"], "min-start": "3.5s"]),
                f.task("squeeze", ["wait-cancel=30", "exit=0"], ["after": ["short"], "min-start": "500ms"]),
                // Startable only once `long` is over, at the deadline: nothing left.
                f.task("after-long", [], ["after": [["task": "long", "when": "done"]], "min-start": "0s"]),
                // The default min-start is 5 s, more than the whole batch has.
                f.task("default-min-start", []),
            ],
        ])
        // From the spawn, not from before it: waiting for a turn at the shared gate of the
        // parallel suite is not the batch's time.
        let process = try await f.start(["--concurrency", "4"])
        let t0 = CLIBatchClock.now()
        let r = await process.finish(timeout: .seconds(40))
        #expect(r.status == 1, "\(r)")
        let summary = try f.summaryTasks()

        for name in ["late", "after-long", "default-min-start"] {
            #expect(f.records(of: name).isEmpty, "\(name) must not start")
            #expect(summary[name]?["outcome"] as? String == "skipped", "\(name): \(summary[name] ?? [:])")
            #expect(summary[name]?["reason"] as? String == "deadline", "\(name): \(summary[name] ?? [:])")
            let finished = try f.finished(name)
            #expect(finished?["state"] as? String == "skipped" && finished?["reason"] as? String == "deadline",
                    "\(name) in events.jsonl: \(String(describing: finished))")
        }
        #expect(summary["short"]?["outcome"] as? String == "succeeded")

        for name in ["long", "squeeze"] {
            let record = try #require(f.records(of: name).first, "\(name) never ran")
            #expect(record.cancel == .some("deadline"), "\(name) saw cancel reason \(String(describing: record.cancel))")
            #expect(summary[name]?["outcome"] as? String == "failed", "\(name): \(summary[name] ?? [:])")
            #expect(summary[name]?["reason"] as? String == "deadline", "\(name): \(summary[name] ?? [:])")
            #expect(try f.events(of: name, "cancel").first?["reason"] as? String == "deadline")
        }
        // The deadline runs from the batch's start, which came after t0: the cut is no earlier
        // than t0 + 4 s (less a little for the clocks). The upper bound only catches a cut
        // that never came: on two shared cores, starting Python workers can take seconds.
        if let long = f.records(of: "long").first, let cancelEnd = long.end {
            #expect(cancelEnd - t0 >= 3.8, "long was cut \(cancelEnd - t0)s after the batch started")
            #expect(cancelEnd - t0 < 20, "long was cut \(cancelEnd - t0)s after the batch started")
        }
        #expect(r.wall < .seconds(25), "\(r)")  // generous: the whole suite shares two cores
    }

    @Test("a retry is not started with less than min-start left")
    func retryRespectsMinStart() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob([
            "deadline": "2s",
            "tasks": [
                f.task("flaky", ["sleep=0.3", "exit=1"],
                       ["min-start": "1s", "retries": ["max": 5, "backoff": "800ms", "on": ["exit"]]]),
            ],
        ])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        // Attempt 1 ends ~0.4 s in; the retry would start ~1.2 s in with ~0.8 s left < 1 s.
        let attempts = f.records(of: "flaky")
        #expect(attempts.count == 1, "the retry started anyway: \(attempts)")
        let summary = try f.summaryTasks()
        #expect(summary["flaky"]?["outcome"] as? String != "succeeded", "\(summary["flaky"] ?? [:])")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("a retry backoff that ends past the batch deadline does not hold the batch past it")
    func backoffPastDeadline() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob([
            "deadline": "2s",
            "tasks": [
                f.task("flaky", ["exit=1"], ["min-start": "0s", "retries": ["max": 3, "backoff": "10s", "on": ["exit"]]]),
            ],
        ])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "flaky").count == 1)
        let summary = try f.summaryTasks()
        #expect(summary["flaky"]?["outcome"] as? String != "succeeded", "\(summary["flaky"] ?? [:])")
        // Nothing can start after the 2 s deadline, so there is nothing to wait 10 s for.
        #expect(r.wall < .seconds(7), "a 2 s batch ran for \(r.wall) waiting out a retry it can never start: \(r)")
    }
}

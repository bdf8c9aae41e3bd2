// `overtime batch` retries, end to end (issue 4, "retries"): attempts and OVERTIME_ATTEMPT,
// the doubling backoff as a lower bound, which outcomes are retried.

import Foundation
import Testing

@Suite("CLI batch retries")
struct CLIBatchRetryTests {
    @Test("fails twice, then succeeds: 3 attempts, OVERTIME_ATTEMPT 1, 2, 3, the backoff waited")
    func failTwiceThenSucceed() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("flaky", ["print=attempt output", "fail-until=2"],
                   ["retries": ["max": 3, "backoff": "300ms", "on": ["exit"]]]),
            f.task("next", [], ["after": ["flaky"]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let attempts = f.records(of: "flaky")
        #expect(attempts.map(\.attempt) == [1, 2, 3], "OVERTIME_ATTEMPT seen: \(attempts.map(\.attempt))")
        #expect(attempts.map(\.exitCode) == [1, 1, 0])
        if attempts.count == 3, let end1 = attempts[0].end, let end2 = attempts[1].end {
            // 300 ms before the first retry, doubled (600 ms) before the second. The worker's
            // own start and end are inside the supervisor's, so these are lower bounds.
            #expect(attempts[1].start - end1 >= 0.3, "retry 1 came \(attempts[1].start - end1)s after attempt 1 ended")
            #expect(attempts[2].start - end2 >= 0.6, "retry 2 came \(attempts[2].start - end2)s after attempt 2 ended")
            #expect(attempts[2].start - end2 < 10, "retry 2 came far too late")
        }
        let next = try #require(f.records(of: "next").first, "next never ran")
        #expect(next.start >= (attempts.last?.end ?? .infinity), "a dependent waits for the last attempt")

        let summary = try f.summaryTasks()
        #expect(summary["flaky"]?["outcome"] as? String == "succeeded")
        #expect(CLIJSON.int(summary["flaky"]?["attempts"]) == 3, "\(summary["flaky"] ?? [:])")
        let retries = try f.events(of: "flaky", "retry")
        #expect(retries.compactMap { CLIJSON.int($0["attempt"]) } == [2, 3], "journal: \(retries)")
        #expect(try f.events(of: "flaky", "attempt").compactMap { CLIJSON.int($0["attempt"]) } == [1, 2, 3])
        #expect(try f.events(of: "flaky", "started").count == 3)
        // One log for all attempts, each attempt's output in it.
        let log = f.log("flaky") ?? ""
        #expect(log.components(separatedBy: "attempt output").count - 1 == 3, "log: \(log)")
    }

    @Test("retries run out: the task fails after max + 1 attempts")
    func retriesExhausted() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [f.task("doomed", ["exit=5"], ["retries": ["max": 2, "backoff": "50ms"]])]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "doomed").map(\.attempt) == [1, 2, 3])
        let summary = try f.summaryTasks()
        #expect(summary["doomed"]?["outcome"] as? String == "failed")
        #expect(CLIJSON.int(summary["doomed"]?["attempts"]) == 3)
        #expect(CLIJSON.int(summary["doomed"]?["exit_code"]) == 5)
    }

    @Test("a timeout is retried when `on` lists it")
    func retryOnTimeout() async throws {
        let f = try CLIBatchFixture()
        // Attempt 1 hangs without reporting and is cancelled for timeout; attempt 2 finds
        // the mark attempt 1 left and exits 0 at once.
        try f.writeJob(["tasks": [
            f.task("stall", ["exit-if-exists=\(f.path("stalled-once"))", "touch=\(f.path("stalled-once"))", "sleep=30"],
                   ["budget": "600ms", "grace": "1s", "retries": ["max": 2, "backoff": "100ms", "on": ["timeout"]]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let attempts = f.records(of: "stall")
        #expect(attempts.map(\.attempt) == [1, 2], "\(attempts)")
        #expect(attempts.first?.end == nil, "attempt 1 was cancelled, not ended")
        let exits = try f.events(of: "stall", "exited")
        #expect(exits.first?["cancel_reason"] as? String == "timeout", "journal: \(exits)")
        let summary = try f.summaryTasks()
        #expect(summary["stall"]?["outcome"] as? String == "succeeded")
        #expect(CLIJSON.int(summary["stall"]?["attempts"]) == 2)
        #expect(r.wall < .seconds(15), "\(r)")
    }

    @Test("an outcome `on` does not list is not retried")
    func notListedNotRetried() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("exits", ["exit=1"], ["retries": ["max": 3, "backoff": "50ms", "on": ["timeout"]]]),
            f.task("stalls", ["sleep=30"], ["budget": "400ms", "grace": "1s",
                                            "retries": ["max": 3, "backoff": "50ms", "on": ["exit"]]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "exits").count == 1)
        #expect(f.records(of: "stalls").count == 1)
        let summary = try f.summaryTasks()
        #expect(summary["exits"]?["reason"] as? String == "exit")
        #expect(summary["stalls"]?["reason"] as? String == "timeout")
        #expect(CLIJSON.int(summary["stalls"]?["exit_code"]) == 124, "\(summary["stalls"] ?? [:])")
        #expect(try f.events(of: "exits", "retry").isEmpty && f.events(of: "stalls", "retry").isEmpty)
    }

    @Test("`exit:3` retries exit status 3 and no other; the journal's retry record says why")
    func retryOnOneExitStatus() async throws {
        let f = try CLIBatchFixture()
        // Both exit non-zero on attempt 1 and would succeed on attempt 2: only the status decides.
        try f.writeJob(["tasks": [
            f.task("transient", ["fail-until=1:3"], ["retries": ["max": 2, "backoff": "50ms", "on": ["exit:3"]]]),
            f.task("bad-input", ["fail-until=1:4"], ["retries": ["max": 2, "backoff": "50ms", "on": ["exit:3"]]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "transient").map(\.attempt) == [1, 2])
        #expect(f.records(of: "transient").map(\.exitCode) == [3, 0])
        #expect(f.records(of: "bad-input").map(\.attempt) == [1])
        let summary = try f.summaryTasks()
        #expect(summary["transient"]?["outcome"] as? String == "succeeded")
        #expect(summary["bad-input"]?["outcome"] as? String == "failed")
        #expect(CLIJSON.int(summary["bad-input"]?["exit_code"]) == 4, "\(summary["bad-input"] ?? [:])")
        let retries = try f.events(of: "transient", "retry")
        #expect(retries.count == 1, "journal: \(retries)")
        #expect(retries.first?["because"] as? String == "exit 3", "journal: \(retries)")
        #expect(retries.first?["outcome"] as? String == "failed", "journal: \(retries)")
        #expect(try f.events(of: "bad-input", "retry").isEmpty)
    }

    @Test("`\"retries\": N` retries a non-zero exit with the default backoff")
    func retriesAsNumber() async throws {
        let f = try CLIBatchFixture()
        // The default backoff is 1 s: one retry keeps this test short.
        try f.writeJob(["tasks": [f.task("once-more", ["fail-until=1"], ["retries": 1])]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let attempts = f.records(of: "once-more")
        #expect(attempts.map(\.attempt) == [1, 2])
        if attempts.count == 2, let end1 = attempts[0].end {
            #expect(attempts[1].start - end1 >= 1.0, "the default backoff is 1 s: \(attempts[1].start - end1)")
        }
    }

    @Test("a command that cannot be started is never retried (127)")
    func notFoundNotRetried() async throws {
        let f = try CLIBatchFixture()
        // "build" was to make it and did not: the file says so, so it is not refused up front.
        try f.writeJob(["tasks": [
            ["name": "build", "command": ["true"]],
            ["name": "missing", "command": [f.path("no-such-program")], "after": ["build"], "command-made-by": "build",
             "retries": ["max": 3, "backoff": "50ms", "on": ["exit", "signal", "timeout"]]],
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        let summary = try f.summaryTasks()["missing"]
        #expect(summary?["outcome"] as? String == "failed")
        #expect(CLIJSON.int(summary?["exit_code"]) == 127, "\(summary ?? [:])")
        #expect(CLIJSON.int(summary?["attempts"]) == 1, "\(summary ?? [:])")
        #expect((summary?["detail"] as? String)?.contains("no-such-program") == true, "\(summary ?? [:])")
        #expect(try f.events(of: "missing", "retry").isEmpty)
    }
}

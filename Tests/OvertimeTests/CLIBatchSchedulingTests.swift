// `overtime batch` scheduling, end to end (issue 4, "Scheduling"): dependency order, the
// concurrency limit, GPU slots and counted pools, transitive skips, --fail-fast. Every
// task is the recording worker (CLIBatchSupport.swift); orders and overlaps are computed
// from the start/end times the tasks themselves recorded on the monotonic clock.

import Foundation
import Testing

@Suite("CLI batch scheduling")
struct CLIBatchSchedulingTests {
    @Test("a dependent starts only after its dependency ended successfully")
    func successDependency() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("second", [], ["after": ["first"]]),
            f.task("first", ["sleep=0.4"]),
            f.task("third", [], ["after": [["task": "second", "when": "success"]]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let first = try #require(f.records(of: "first").first, "first never ran")
        let second = try #require(f.records(of: "second").first, "second never ran")
        let third = try #require(f.records(of: "third").first, "third never ran")
        let firstEnd = try #require(first.end)
        let secondEnd = try #require(second.end)
        #expect(second.start >= firstEnd, "second started \(firstEnd - second.start)s before first ended")
        #expect(third.start >= secondEnd, "third started before second ended")
        #expect(f.loadRecords().count == 3, "each task ran once: \(f.loadRecords())")
        let summary = try f.summaryTasks()
        for name in ["first", "second", "third"] {
            #expect(summary[name]?["outcome"] as? String == "succeeded", "\(name): \(summary[name] ?? [:])")
        }
    }

    @Test("`done` runs after a failed dependency; `success` on the same failure is skipped")
    func doneDependency() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("bad", ["sleep=0.3", "exit=3"]),
            f.task("cleanup", [], ["after": [["task": "bad", "when": "done"]]]),
            f.task("needs-bad", [], ["after": ["bad"]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "a task failed: \(r)")
        let bad = try #require(f.records(of: "bad").first)
        let cleanup = try #require(f.records(of: "cleanup").first, "cleanup never ran")
        #expect(cleanup.start >= (try #require(bad.end)), "cleanup started before bad ended")
        #expect(f.records(of: "needs-bad").isEmpty, "needs-bad must not run")
        let summary = try f.summaryTasks()
        #expect(summary["bad"]?["outcome"] as? String == "failed")
        #expect(summary["bad"]?["reason"] as? String == "exit")
        #expect(CLIJSON.int(summary["bad"]?["exit_code"]) == 3)
        #expect(summary["cleanup"]?["outcome"] as? String == "succeeded")
        #expect(summary["needs-bad"]?["outcome"] as? String == "skipped")
        #expect(summary["needs-bad"]?["reason"] as? String == "dependency")
    }

    @Test("`ready` starts the dependent once the dependency reported ready, while it still runs")
    func readyDependency() async throws {
        let f = try CLIBatchFixture()
        let clientRan = f.path("rec/client.1.start")
        try f.writeJob(["tasks": [
            // The server stays up until its client has started (at most 20 s).
            f.task("server", ["sleep=0.3", "ready", "wait-file=\(clientRan)", "sleep=0.2"]),
            f.task("client", [], ["after": [["task": "server", "when": "ready"]]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let server = try #require(f.records(of: "server").first)
        let client = try #require(f.records(of: "client").first, "client never ran")
        let ready = try #require(server.ready)
        let serverEnd = try #require(server.end)
        #expect(client.start >= ready, "client started before the server was ready")
        #expect(client.start < serverEnd, "client started only after the server ended")
        #expect(serverEnd - server.start < 10, "the server waited for a client that came late: \(r)")
        let readyEvents = try f.events(of: "server", "ready")
        #expect(readyEvents.count == 1, "the journal records the ready message")
    }

    @Test("a `ready` dependency that fails without reporting ready skips its dependent; one that succeeds does not")
    func readyNeverCame() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("crashes", ["sleep=0.2", "exit=1"]),
            f.task("client", [], ["after": [["task": "crashes", "when": "ready"]]]),
            // docs/jobfile.md: `ready` holds once NAME reported ready, "or succeeded".
            f.task("quiet", ["sleep=0.2"]),
            f.task("client2", [], ["after": [["task": "quiet", "when": "ready"]]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "client").isEmpty)
        let summary = try f.summaryTasks()
        #expect(summary["client"]?["outcome"] as? String == "skipped")
        #expect(summary["client"]?["reason"] as? String == "dependency")
        let quiet = try #require(f.records(of: "quiet").first)
        let client2 = try #require(f.records(of: "client2").first, "client2 never ran")
        #expect(client2.start >= (try #require(quiet.end)))
        #expect(summary["client2"]?["outcome"] as? String == "succeeded")
    }

    @Test("never more than `concurrency` tasks at once, and the limit is reached",
          arguments: [(3, nil as Int?), (8, 2 as Int?)])
    func concurrencyLimit(jobConcurrency: Int, option: Int?) async throws {
        let limit = option ?? jobConcurrency
        let f = try CLIBatchFixture()
        let names = (1...8).map { "t\($0)" }
        try f.writeJob(["concurrency": jobConcurrency, "tasks": names.map { f.task($0, ["sleep=0.4"]) }])
        let r = try await f.run(option.map { ["--concurrency", String($0)] } ?? [])
        #expect(r.status == 0, "\(r)")
        let records = f.loadRecords()
        #expect(Set(records.map(\.task)) == Set(names), "every task ran: \(records)")
        #expect(records.count == 8, "once each: \(records)")
        let intervals = records.map { (start: $0.start, end: $0.end(or: .infinity)) }
        let most = CLIBatchIntervals.maxOverlap(intervals)
        #expect(most <= limit, "\(most) tasks ran at once; the limit is \(limit): \(records)")
        #expect(most >= 2, "tasks never overlapped, so the limit was never tested: \(records)")

        // The journal agrees: count started/exited events in file order.
        var running = 0
        var journalMost = 0
        for event in try f.events() {
            switch event["event"] as? String {
            case "started": running += 1
            case "exited": running -= 1
            default: break
            }
            journalMost = max(journalMost, running)
        }
        #expect(journalMost <= limit, "the journal shows \(journalMost) running at once")
        #expect(r.wall < .seconds(20), "\(r)")
    }

    @Test("GPU slots: overlapping tasks never share an id; a counted pool is never over-committed")
    func resources() async throws {
        let f = try CLIBatchFixture()
        let pool = ["0", "1", "2", "3"]
        var tasks: [[String: Any]] = []
        // Four tasks of 2 GPUs (and 2 GB), one of 1 GPU, three of 5 GB with no GPU: with 8 GB
        // no two 5 GB tasks can run together; with 4 GPUs at most two 2-GPU tasks can.
        for i in 1...4 { tasks.append(f.task("g\(i)", ["sleep=0.4"], ["resources": ["gpu": 2, "mem_gb": 2]])) }
        tasks.append(f.task("g5", ["sleep=0.3"], ["resources": ["gpu": 1]]))
        for i in 1...3 { tasks.append(f.task("m\(i)", ["sleep=0.3"], ["resources": ["mem_gb": 5]])) }
        tasks.append(f.task("plain", ["sleep=0.1"]))
        try f.writeJob(["concurrency": 8, "resources": ["gpu": pool, "mem_gb": 8], "tasks": tasks])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let records = f.loadRecords()
        #expect(records.count == 9, "every task ran once: \(records)")

        let requested: [String: Int] = ["g1": 2, "g2": 2, "g3": 2, "g4": 2, "g5": 1]
        var ids: [String: [String]] = [:]
        for record in records {
            if let want = requested[record.task] {
                let got = (record.cuda ?? "").split(separator: ",").map(String.init)
                ids[record.task] = got
                #expect(got.count == want, "\(record.task) asked for \(want) GPUs, got CUDA_VISIBLE_DEVICES=\(record.cuda ?? "unset")")
                #expect(Set(got).count == got.count, "\(record.task) got an id twice: \(got)")
                #expect(Set(got).isSubset(of: pool), "\(record.task) got ids outside the pool: \(got)")
                #expect(record.gpu == record.cuda, "OVERTIME_RESOURCE_GPU=\(record.gpu ?? "unset") differs from CUDA_VISIBLE_DEVICES")
            } else {
                #expect(record.cuda == nil, "\(record.task) asked for no GPU but got CUDA_VISIBLE_DEVICES=\(record.cuda!)")
                #expect(record.gpu == nil, "\(record.task) asked for no GPU but got OVERTIME_RESOURCE_GPU")
            }
            let mem = record.task.hasPrefix("m") ? "5" : (record.task == "g5" || record.task == "plain" ? nil : "2")
            #expect(record.mem == mem, "\(record.task): OVERTIME_RESOURCE_MEM_GB=\(record.mem ?? "unset"), expected \(mem ?? "unset")")
        }

        let end = CLIBatchClock.now()
        var gpuOverlaps = 0
        for (i, a) in records.enumerated() {
            for b in records[(i + 1)...] {
                let ia = (start: a.start, end: a.end(or: end)), ib = (start: b.start, end: b.end(or: end))
                guard CLIBatchIntervals.overlap(ia, ib) else { continue }
                let shared = Set(ids[a.task] ?? []).intersection(ids[b.task] ?? [])
                #expect(shared.isEmpty, "\(a) and \(b) ran together sharing GPU ids \(shared.sorted())")
                if ids[a.task] != nil, ids[b.task] != nil { gpuOverlaps += 1 }
            }
        }
        #expect(gpuOverlaps >= 1, "no two GPU tasks ever ran together, so disjointness was not tested: \(records)")

        // The counted pool, from the recorded intervals: at no instant more than 8 GB.
        var points: [(Double, Int)] = []
        for record in records {
            let amount = Int(record.mem ?? "0") ?? 0
            points.append((record.start, amount))
            points.append((record.end(or: end), -amount))
        }
        points.sort { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }
        var inUse = 0
        var peak = 0
        for (_, delta) in points {
            inUse += delta
            peak = max(peak, inUse)
        }
        #expect(peak <= 8, "\(peak) GB in use at once from a pool of 8: \(records)")

        // The journal's attempt lines say what each task was given, as the task saw it.
        for (name, got) in ids {
            let attempt = try f.events(of: name, "attempt").first
            let resources = attempt?["resources"] as? [String: Any]
            #expect(resources?["gpu"] as? [String] == got, "\(name): the journal says \(String(describing: resources))")
        }
    }

    @Test("a failure skips its dependents transitively (reason dependency); the rest keeps going")
    func transitiveSkip() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("a", ["exit=4"]),
            f.task("b", [], ["after": ["a"]]),
            f.task("c", [], ["after": ["b"]]),
            f.task("independent", ["sleep=0.3"]),
            f.task("after-independent", [], ["after": ["independent"]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "b").isEmpty && f.records(of: "c").isEmpty, "b and c must never start: \(f.loadRecords())")
        #expect(f.records(of: "after-independent").count == 1, "the default keeps going with what can run")

        let summary = try f.summaryTasks()
        #expect(summary["a"]?["outcome"] as? String == "failed")
        for name in ["b", "c"] {
            #expect(summary[name]?["outcome"] as? String == "skipped", "\(name): \(summary[name] ?? [:])")
            #expect(summary[name]?["reason"] as? String == "dependency", "\(name): \(summary[name] ?? [:])")
            #expect(CLIJSON.int(summary[name]?["attempts"]) == 0)
            let finished = try f.finished(name)
            #expect(finished?["state"] as? String == "skipped", "\(name) in events.jsonl: \(String(describing: finished))")
            #expect(finished?["reason"] as? String == "dependency", "\(name) in events.jsonl: \(String(describing: finished))")
            #expect(try f.events(of: name, "started").isEmpty, "\(name) has a started event")
        }
        #expect((summary["b"]?["detail"] as? String)?.contains("'a'") == true, "b names the dependency: \(summary["b"] ?? [:])")
        #expect((summary["c"]?["detail"] as? String)?.contains("'b'") == true, "c names the dependency: \(summary["c"] ?? [:])")
        #expect(summary["after-independent"]?["outcome"] as? String == "succeeded")
        #expect(CLIJSON.bool(try f.summary()["succeeded"]) == false)
    }

    @Test("--fail-fast: the first failure cancels running tasks (reason fail-fast) and skips the queue; exit 1")
    func failFast() async throws {
        let f = try CLIBatchFixture()
        let slowStarted = f.path("rec/slow.1.start")
        try f.writeJob([
            "concurrency": 2,
            "defaults": ["grace": "5s"],
            "tasks": [
                // Retries everything it could: a fail-fast cancel must still not be retried.
                f.task("slow", ["wait-cancel=20", "exit=0"],
                       ["retries": ["max": 3, "backoff": "100ms", "on": ["timeout", "exit", "signal", "deadline"]]]),
                f.task("failer", ["wait-file=\(slowStarted)", "sleep=0.2", "exit=2"]),
                f.task("queued1", []),
                f.task("queued2", [], ["after": ["failer"]]),
            ],
        ])
        let r = try await f.run(["--fail-fast"])
        #expect(r.status == 1, "\(r)")
        let slow = f.records(of: "slow")
        #expect(slow.count == 1, "a fail-fast cancel is never retried: \(slow)")
        #expect(slow.first?.cancel == .some("fail-fast"), "slow saw cancel reason \(String(describing: slow.first?.cancel))")
        #expect(f.records(of: "queued1").isEmpty && f.records(of: "queued2").isEmpty,
                "nothing starts after the failure: \(f.loadRecords())")

        let summary = try f.summaryTasks()
        #expect(summary["failer"]?["outcome"] as? String == "failed")
        // Exiting 0 after a cancel is not a success.
        #expect(summary["slow"]?["outcome"] as? String == "failed", "\(summary["slow"] ?? [:])")
        #expect(summary["slow"]?["reason"] as? String == "fail-fast", "\(summary["slow"] ?? [:])")
        #expect(CLIJSON.int(summary["slow"]?["attempts"]) == 1)
        for name in ["queued1", "queued2"] {
            #expect(summary[name]?["outcome"] as? String == "skipped", "\(name): \(summary[name] ?? [:])")
        }
        #expect(summary["queued1"]?["reason"] as? String == "fail-fast", "\(summary["queued1"] ?? [:])")
        #expect((summary["queued1"]?["detail"] as? String)?.contains("--fail-fast") == true, "\(summary["queued1"] ?? [:])")
        let cancels = try f.events(of: "slow", "cancel")
        #expect(cancels.map { $0["reason"] as? String } == ["fail-fast"], "journal: \(cancels)")
        #expect(try f.events(of: "slow", "retry").isEmpty)
        #expect(r.wall < .seconds(15), "\(r)")
    }

    @Test("without --fail-fast a failure does not cancel what runs")
    func noFailFast() async throws {
        let f = try CLIBatchFixture()
        let failerEnded = f.path("rec/failer.1.end")
        try f.writeJob(["concurrency": 2, "tasks": [
            f.task("steady", ["wait-file=\(failerEnded)", "sleep=0.2"]),
            f.task("failer", ["exit=2"]),
            f.task("later", ["sleep=0.1"]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        let summary = try f.summaryTasks()
        #expect(summary["steady"]?["outcome"] as? String == "succeeded", "\(summary["steady"] ?? [:])")
        #expect(summary["later"]?["outcome"] as? String == "succeeded", "\(summary["later"] ?? [:])")
        #expect(try f.events(of: "steady", "cancel").isEmpty)
    }
}

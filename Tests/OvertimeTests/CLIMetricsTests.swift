// Prometheus metrics (issue 15): `--metrics ADDR:PORT` serves /metrics, checked with the
// real promtool and scraped by a real Prometheus; `--metrics-file` writes the same page.

import Foundation
import Testing
import OvertimeTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI metrics")
struct CLIMetricsTests {
    @Test("/metrics during a batch: a task's progress and memory, promtool finds nothing to lint; HEAD, /, 404, 405, 431, 400, a half-closed client")
    func servedDuringABatch() async throws {
        let batch = try await CLIMetricsBatch(metrics: "127.0.0.1:0")
        let port = batch.port

        var page = ""
        let clock = ContinuousClock()
        let end = clock.now + .seconds(20)
        while clock.now < end {
            page = CLIMetrics.request(port: port, "/metrics")?.body ?? ""
            // The memory comes from the sampler's thread, a moment after the start.
            if page.contains(#"overtime_task_progress_ratio{task="trainer"} 0.25"#), page.contains(#"overtime_task_memory_bytes{task="trainer"} "#) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(page.contains(#"overtime_task_progress_ratio{task="trainer"} 0.25"#), "\(page)")
        #expect(page.contains(#"overtime_tasks{state="running"} 1"#) && page.contains(#"overtime_tasks{state="waiting"} 1"#), "\(page)")
        #expect(page.contains(#"overtime_task_memory_bytes{task="trainer"} "#), "no memory for the running task: \(page)")
        #expect(page.contains(#"overtime_run_info{run=""#) && page.contains(#"command="batch"} 1"#))
        #expect(page.contains("overtime_batch_deadline_timestamp_seconds "), "\(page)")
        #expect(try CLIMetrics.promtoolProblems(page) == nil)

        let metrics = try #require(CLIMetrics.request(port: port, "/metrics"))
        #expect(metrics.status == 200 && metrics.head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"), "\(metrics.head)")
        let head = try #require(CLIMetrics.request(port: port, "/metrics", method: "HEAD"))
        #expect(head.status == 200 && head.body.isEmpty && head.head.contains("Content-Length: "), "\(head)")
        let index = try #require(CLIMetrics.request(port: port, "/"))
        #expect(index.status == 200 && index.body.contains(#"href="/metrics""#), "\(index)")
        #expect(CLIMetrics.request(port: port, "/nothing-here")?.status == 404)
        let post = try #require(CLIMetrics.request(port: port, "/metrics", method: "POST"))
        #expect(post.status == 405 && post.head.contains("Allow: GET, HEAD"), "\(post)")
        let huge = "GET /metrics HTTP/1.1\r\nX-Filler: " + String(repeating: "x", count: 9000) + "\r\n\r\n"
        #expect(CLIMetrics.exchange(port: port, Array(huge.utf8)).flatMap(CLIMetrics.parse)?.status == 431)
        #expect(CLIMetrics.exchange(port: port, Array("NONSENSE\r\n\r\n".utf8)).flatMap(CLIMetrics.parse)?.status == 400)
        let halfClosed = CLIMetrics.exchange(port: port, Array("GET /metrics HTTP/1.0\r\n\r\n".utf8), halfClose: true).flatMap(CLIMetrics.parse)
        #expect(halfClosed?.status == 200 && halfClosed?.body.hasSuffix("\n") == true && halfClosed?.body.contains("overtime_build_info") == true,
                "a client that closed its side after the request: \(String(describing: halfClosed))")

        let result = await batch.finish()
        #expect(result.status == 0, "\(result)")
    }

    @Test("silent clients do not hold up a scrape, are answered 408 and dropped in time; clients at once beside them, up to a host's share, are all answered")
    func slowAndManyClients() async throws {
        let batch = try await CLIMetricsBatch(metrics: ":0")
        let port = batch.port

        // Half a request line, then silence, from several clients at once.
        let silent = Task.detached { () -> [Int?] in
            await withTaskGroup(of: Int?.self) { group in
                for _ in 0..<4 {
                    group.addTask { try? await offThePool { CLIMetrics.exchange(port: port, Array("GET /met".utf8), timeout: 40).flatMap(CLIMetrics.parse)?.status } ?? nil }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let start = clock.now
        let during = try await offThePool { CLIMetrics.request(port: port, "/metrics") }
        #expect(during?.status == 200 && clock.now - start < .seconds(5), "a scrape beside silent clients: \(String(describing: during?.status))")

        // The four silent ones and these four fill this host's share (8) without pushing
        // any out: the silent ones are left to their time (CLIMetricsAttackTests pushes out).
        let statuses = await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<4 {
                group.addTask { try? await offThePool { CLIMetrics.request(port: port, "/metrics")?.status } ?? nil }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.count == 4 && statuses.allSatisfy { $0 == 200 }, "\(statuses)")

        // Each silent client has 10 s to finish its request; then 408, and the connection ends.
        let silentStart = clock.now
        let silentStatuses = await silent.value
        #expect(silentStatuses == [408, 408, 408, 408] && clock.now - silentStart < .seconds(30), "\(silentStatuses)")

        let result = await batch.finish()
        #expect(result.status == 0, "\(result)")
    }

    @Test("a real Prometheus scrapes a batch's /metrics, and its API answers with a task's progress ratio")
    func scrapedByPrometheus() async throws {
        let batch = try await CLIMetricsBatch(metrics: "0")
        let port = batch.port
        let prometheus = try CLIPrometheus(scraping: port, in: batch.scratch)
        defer { prometheus.stop() }

        var value: String?
        let clock = ContinuousClock()
        let end = clock.now + .seconds(60)
        while clock.now < end {
            value = prometheus.instantValue(#"overtime_task_progress_ratio{task="trainer"}"#)
            if value != nil { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(value == "0.25", "Prometheus's log: \(batch.scratch.read("prometheus.log")?.suffix(2000) ?? "")")
        #expect(prometheus.instantValue(#"up{job="overtime"}"#) == "1")
        prometheus.stop()

        let result = await batch.finish()
        #expect(result.status == 0, "\(result)")
    }

    @Test("--metrics-file: written at start and every 5s, valid for promtool, the final values after exit, no temporary file left")
    func metricsFile() async throws {
        let scratch = try CLIScratch()
        let file = scratch.path("overtime.prom")
        let script = #"printf '{"type":"progress","completed":1,"total":2}\n' >&3; while [ ! -e "$0" ]; do sleep 0.1; done; printf '{"type":"progress","completed":2,"total":2}\n' >&3"#
        let process = CLIProcess(["run", "--progress", "none", "--name", "writer", "--metrics-file", file, "--",
                                  "sh", "-c", script, scratch.path("stop")], in: scratch)
        try await process.start()
        defer { FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil) }
        var during = ""
        let clock = ContinuousClock()
        let end = clock.now + .seconds(20)
        while clock.now < end {
            during = scratch.read("overtime.prom") ?? ""
            if during.contains(#"overtime_task_progress_ratio{task="writer"} 0.5"#) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(during.contains(#"overtime_task_progress_ratio{task="writer"} 0.5"#), "the file was not rewritten with the progress: \(during)")
        #expect(during.contains(#"overtime_tasks{state="running"} 1"#))
        #expect(try CLIMetrics.promtoolProblems(during) == nil)

        FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil)
        let result = await process.finish(timeout: .seconds(30))
        #expect(result.status == 0, "\(result)")
        let final = scratch.read("overtime.prom") ?? ""
        #expect(final.contains(#"overtime_task_state{task="writer",state="succeeded"} 1"#), "\(final)")
        #expect(final.contains(#"overtime_task_progress_ratio{task="writer"} 1"#), "\(final)")
        #expect(final.contains(#"overtime_attempts_ended_total{outcome="succeeded"} 1"#))
        #expect(final.contains("\novertime_last_success_timestamp_seconds "), "\(final)")
        #expect(try CLIMetrics.promtoolProblems(final) == nil)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.contains(".tmp") }
        #expect(leftovers.isEmpty, "\(leftovers)")

        // A failed run keeps the last success the file knew (node_exporter's only memory).
        let failed = try await cliRun(["run", "--progress", "none", "--name", "writer", "--metrics-file", file, "--", "false"], in: scratch)
        #expect(failed.status == 1, "\(failed)")
        let after = scratch.read("overtime.prom") ?? ""
        #expect(after.contains(#"overtime_task_state{task="writer",state="failed"} 1"#))
        let line = { (page: String) in page.split(separator: "\n").first { $0.hasPrefix("overtime_last_success_timestamp_seconds ") } }
        #expect(line(after) != nil && line(after) == line(final), "\(after)")
    }

    @Test("a job file's metrics-file, relative to the job file, holds the batch's final page")
    func jobFileMetricsFile() async throws {
        let scratch = try CLIScratch()
        let job = try scratch.write("job.json", #"{"metrics-file": "batch.prom", "tasks": [{"name": "one", "command": ["true"]}]}"#)
        let r = try await cliRun(["batch", job, "--run-dir", scratch.path("run"), "--progress", "none"], in: scratch,
                                 environment: CLIBatchFixture.environment)
        #expect(r.status == 0, "\(r)")
        let page = scratch.read("batch.prom") ?? ""
        #expect(page.contains(#"overtime_task_state{task="one",state="succeeded"} 1"#) && page.contains(#"command="batch"} 1"#), "\(page)")
    }

    @Test("a metrics file that stops being writable during the run is said once; the run goes on and exits as its task")
    func unwritableFile() async throws {
        let scratch = try CLIScratch()
        let directory = scratch.path("metrics")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // The task takes the directory away: the 5 s write and the last one both fail.
        let r = try await cliRun(["run", "--progress", "none", "--metrics-file", directory + "/m.prom", "--",
                                  "/bin/sh", "-c", "rm -rf '\(directory)'; sleep 6"], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.components(separatedBy: "--metrics-file: cannot write \(directory)/m.prom").count == 2, "\(r.stderr)")
    }

    @Test("a metrics file in a directory that does not exist: exit 125 before the task starts")
    func missingDirectoryIsRefused() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--progress", "none", "--metrics-file", "/nonexistent/dir/m.prom", "--",
                                  "/bin/sh", "-c", CLIChild.shNote(scratch.path("ran"), "yes")], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("--metrics-file: cannot write /nonexistent/dir/m.prom"), "\(r.stderr)")
        #expect(scratch.read("ran") == nil, "the task ran before the refusal")
    }

    @Test("bad --metrics values and a port in use: exit 125 with a clear message, before any task starts")
    func refusals() async throws {
        let scratch = try CLIScratch()
        for (value, words) in [("nonsense", "--metrics: 'nonsense': expected PORT"), ("70000", "port from 0 to 65535"),
                               ("[::1", "[ADDR]:PORT"), ("300.1.1.1:0", "cannot serve metrics on 300.1.1.1:0")] {
            let r = try await cliRun(["run", "--metrics", value, "--", "true"], in: scratch)
            #expect(r.status == 125 && r.stderr.contains(words), "\(value): \(r)")
        }
        let (fd, port) = CLIMetrics.occupiedPort()
        defer { close(fd) }
        let marker = scratch.path("started")
        let run = try await cliRun(["run", "--metrics", "\(port)", "--", "touch", marker], in: scratch)
        #expect(run.status == 125 && run.stderr.contains("cannot serve metrics on 127.0.0.1:\(port)") && run.stderr.contains("in use"), "\(run)")
        let job = try scratch.write("touch.json", #"{"tasks":[{"name":"t","command":["touch","\#(marker)"]}]}"#)
        let batch = try await cliRun(["batch", job, "--run-dir", scratch.path("run"), "--metrics", "127.0.0.1:\(port)"], in: scratch,
                                     environment: CLIBatchFixture.environment)
        #expect(batch.status == 125 && batch.stderr.contains("in use"), "\(batch)")
        #expect(!FileManager.default.fileExists(atPath: marker), "a task started")
        let missing = try await cliRun(["batch", job, "--metrics"], in: scratch)
        #expect(missing.status == 125 && missing.stderr.contains("--metrics needs a value"), "\(missing)")
    }
}

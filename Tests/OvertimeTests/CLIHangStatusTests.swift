// Phases and stalls where an operator looks (docs/hangs.md, docs/control.md, docs/metrics.md,
// docs/report.md): a batch task that names phases and stalls under `on-stall: warn` is seen
// in `ctl status` (JSON and text) and on /metrics while it runs, and afterwards in its
// journal lines, its summary row and the report's data.

import Foundation
import Testing

@Suite("CLI hangs: phase and stall in status, metrics, journal and report")
struct CLIHangStatusTests {
    @Test("a stalled task in its phase: ctl status and /metrics while stalled; phase, stalled, resumed in the journal; the report shades them")
    func phaseAndStallEverywhere() async throws {
        let f = try CLIBatchFixture()
        let go = f.path("go")
        // Names a phase, goes quiet past its 1 s window (stalled, not cancelled: warn), and
        // reports again once the test has looked: the next phase resumes it.
        let script = """
            printf '{"type":"phase","name":"warm up"}\\n' >&3
            while [ ! -e '\(go)' ]; do sleep 0.05; done
            printf '{"type":"phase","name":"train"}\\n' >&3
            sleep 0.2
            """
        try f.writeJob(["tasks": [["name": "fit", "command": ["sh", "-c", script],
                                   "budget": "1s", "window": "1s", "on-stall": "warn", "max-runtime": "60s"]]])
        let socket = f.path("ctl.sock")
        let batch = try await f.start(["--control", socket, "--metrics", "127.0.0.1:0"])
        defer { f.killLeftovers() }
        #expect(await CLICtl.waitForSocket(socket), "no control socket")
        let port = try #require(await CLIMetrics.port(of: batch), "no metrics port: \(batch.stderrSoFar)")

        // Stalled once its 1 s passed; a generous bound for a loaded machine.
        var fit: [String: Any] = [:]
        let clock = ContinuousClock(), end = clock.now + .seconds(20)
        while clock.now < end {
            fit = try await CLICtl.status(socket, in: f.scratch).first { $0["name"] as? String == "fit" } ?? [:]
            if fit["stalled"] != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(fit["state"] as? String == "running", "\(fit)")
        #expect(fit["phase"] as? String == "warm up", "\(fit)")
        #expect(CLIJSON.double(fit["window"]) == 1, "\(fit)")
        #expect(fit["window_learned"] == nil, "a set window is not learned: \(fit)")
        #expect((CLIJSON.double(fit["stalled"]) ?? -1) >= 0, "\(fit)")
        #expect((fit["stalled_since"] as? String)?.hasSuffix("Z") == true, "\(fit)")

        let text = try await CLICtl.ctl(socket: socket, ["status"], in: f.scratch)
        #expect(text.stdout.contains("running (stalled)"), "\(text.stdout)")
        #expect(text.stdout.contains("fit: phase warm up, window 1"), "\(text.stdout)")
        #expect(text.stdout.contains(", stalled for "), "\(text.stdout)")

        let metrics = CLIMetrics.request(port: port, "/metrics")?.body ?? ""
        #expect(metrics.contains("overtime_task_phase{task=\"fit\",phase=\"warm up\"} 1\n"), "\(metrics)")
        #expect(metrics.contains("overtime_task_window_seconds{task=\"fit\"} 1\n"), "\(metrics)")
        #expect(metrics.contains("overtime_task_stalled{task=\"fit\"} 1\n"), "\(metrics)")
        #expect(metrics.contains("overtime_stalls_total 1\n"), "\(metrics)")
        #expect(metrics.contains("overtime_checkpoint_advice_total 0\n"), "\(metrics)")

        FileManager.default.createFile(atPath: go, contents: nil)
        let result = await batch.finish(timeout: .seconds(30))
        #expect(result.status == 0, "\(result)")

        let kinds = try f.events(of: "fit").compactMap { $0["event"] as? String }
        let hangKinds = kinds.filter { ["phase", "stalled", "resumed"].contains($0) }
        #expect(hangKinds == ["phase", "stalled", "resumed", "phase"], "\(kinds)")
        let exited = try #require(try f.events(of: "fit", "exited").first)
        #expect(exited["phase"] as? String == "train" && CLIJSON.int(exited["stalls"]) == 1, "\(exited)")
        let finished = try #require(try f.finished("fit"))
        #expect(finished["phase"] as? String == "train" && CLIJSON.int(finished["stalls"]) == 1, "\(finished)")
        let row = try #require(try f.summaryTasks()["fit"])
        #expect(row["phase"] as? String == "train" && CLIJSON.int(row["stalls"]) == 1, "\(row)")

        let html = f.path("report.html")
        let report = try await cliRun(["report", f.runDirectory, "-o", html], in: f.scratch)
        #expect(report.status == 0, "\(report)")
        let page = try String(contentsOfFile: html, encoding: .utf8)
        let open = try #require(page.range(of: #"<script type="application/json" id="run-data">"#))
        let close = try #require(page.range(of: "</script>", range: open.upperBound..<page.endIndex))
        let data = try CLIJSON.object(String(page[open.upperBound..<close.lowerBound]))
        #expect(data["phases"] as? [String] == ["warm up", "train"], "\(data["phases"] ?? "none")")
        let attempt = try #require(((data["tasks"] as? [[String: Any]])?.first?["attempts"] as? [[String: Any]])?.first)
        let phases = attempt["phases"] as? [Any] ?? []
        #expect(phases.count == 4 && CLIJSON.int(phases[1]) == 0 && CLIJSON.int(phases[3]) == 1, "\(attempt)")
        let stalls = attempt["stalls"] as? [Any] ?? []
        #expect(stalls.count == 2 && CLIJSON.int(stalls[1]) != nil, "a stall that resumed has its end: \(attempt)")
    }
}

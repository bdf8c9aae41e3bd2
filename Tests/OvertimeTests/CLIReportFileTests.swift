// The report and the events off stdout (issue 15): `--report FILE` and `--events FILE`, so
// that a task's stdout is the task's alone.

import Foundation
import Testing

@Suite("CLI report and events files")
struct CLIReportFileTests {
    @Test("--report FILE and --events FILE: stdout is the task's alone; the report and the events are in their files")
    func offStdout() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--progress", "none", "--report", scratch.path("report.json"), "--events", scratch.path("events.jsonl"),
                                  "--", "sh", "-c", "echo hi"], in: scratch)
        #expect(r.status == 0 && r.stdout == "hi\n", "\(r)")
        let report = try CLIJSON.object(try #require(scratch.read("report.json"), "no report file").trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(report["outcome"] as? String == "succeeded" && CLIJSON.int(report["overtime_exit_code"]) == 0, "\(report)")
        let events = (scratch.read("events.jsonl") ?? "").split(separator: "\n").compactMap { try? CLIJSON.object(String($0)) }
        #expect(events.first?["event"] as? String == "started" && events.last?["event"] as? String == "exited", "\(events)")
        let dash = try await cliRun(["run", "--progress", "none", "--report", "-", "--", "true"], in: scratch)
        #expect(dash.status == 0 && (try? dash.report())?["outcome"] as? String == "succeeded", "\(dash)")
    }

    @Test("a report or events file that cannot be written is said, with exit 125")
    func unwritable() async throws {
        let scratch = try CLIScratch()
        let events = try await cliRun(["run", "--events", "/nonexistent/dir/e.jsonl", "--", "true"], in: scratch)
        #expect(events.status == 125 && events.stderr.contains("--events: cannot open"), "\(events)")
        let report = try await cliRun(["run", "--progress", "none", "--report", "/nonexistent/dir/r.json", "--", "true"], in: scratch)
        #expect(report.status == 125 && report.stderr.contains("--report: cannot write"), "\(report)")
    }
}

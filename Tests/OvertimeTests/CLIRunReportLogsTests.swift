import Foundation
import Overtime
import OvertimeTestSupport
import Testing

/// `overtime report` of a real batch: what it takes beside the journal (a task's memory-max,
/// its diagnose output from its log, where its log is linked from) as the page's data has it.
@Suite("CLI run report: results, memory-max, diagnosis, logs")
struct CLIRunReportLogsTests {
    static let evil = "</script><img src=x onerror=alert(1)>"

    /// The page's embedded data, parsed as the page's script parses it.
    static func embeddedData(_ html: String) throws -> [String: Any] {
        let start = try #require(html.range(of: #"<script type="application/json" id="run-data">"#))
        let end = try #require(html[start.upperBound...].range(of: "</script>"))
        let json = try JSONSerialization.jsonObject(with: Data(html[start.upperBound..<end.lowerBound].utf8))
        return try #require(json as? [String: Any])
    }

    static func task(_ name: String, in data: [String: Any]) throws -> [String: Any] {
        let tasks = try #require(data["tasks"] as? [[String: Any]])
        return try #require(tasks.first { $0["name"] as? String == name }, "\(name) is not in the page's data")
    }

    @Test("a task's results, its memory-max, a timed-out task's diagnose output and the log links reach the page, escaped")
    func resultsMemoryDiagnosisLogs() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob([
            "tasks": [
                f.task("fit", [#"result={"loss": 0.25, "acc": 0.9, "\#(Self.evil)": "\#(Self.evil)"}"#], ["memory-max": "700M"]),
                f.task("stuck", ["sleep=30"], ["budget": "700ms", "grace": "1s",
                                               "diagnose": "echo diag {pid}; echo '\(Self.evil)'"]),
            ],
        ])
        let batch = try await f.run()
        #expect(batch.status == 1, "\(batch)")

        // Written elsewhere: the logs are linked by an absolute file:// address.
        let page = f.path("report.html")
        let report = try await cliRun(["report", f.runDirectory, "-o", page], in: f.scratch)
        #expect(report.status == 0, "\(report)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(!html.contains("<img src=x"), "no task's text is markup in the page")
        let data = try Self.embeddedData(html)
        let run = try #require(URL(fileURLWithPath: f.runDirectory).resolvingSymlinksInPath().path.removingPercentEncoding)
        #expect(data["logs"] as? String == "file://" + run + "/logs/", "\(data["logs"] ?? "none")")

        let fit = try Self.task("fit", in: data)
        let fields = try #require(fit["fields"] as? [Any])
        #expect(fields.count == 6)
        #expect(fields.first as? String == "loss" && fields[1] as? Double == 0.25)
        #expect(fields.contains { $0 as? String == Self.evil }, "the markup key and value, as text: \(fields)")
        let fitAttempt = try #require((fit["attempts"] as? [[String: Any]])?.first)
        #expect(fitAttempt["max"] as? Int == 700 * 1024 * 1024, "\(fitAttempt)")
        #expect(fit["diagnosed"] == nil && fit["diagnosis"] == nil)

        let stuck = try Self.task("stuck", in: data)
        #expect(stuck["diagnosed"] as? Bool == true)
        let diagnosis = try #require(stuck["diagnosis"] as? String, "\(stuck)")
        let pid = try #require(try f.events(of: "stuck", "started").first?["pid"] as? Int)
        #expect(diagnosis.hasPrefix("overtime: stuck: timeout due; diagnosing first"), "\(diagnosis)")
        #expect(diagnosis.contains("\ndiag \(pid)\n\(Self.evil)\n"), "\(diagnosis)")
        #expect(diagnosis.contains("overtime: stuck: the diagnose command exited 0"), "\(diagnosis)")

        // Written in the run directory (the default): linked beside it.
        let beside = try await cliRun(["report", f.runDirectory], in: f.scratch)
        #expect(beside.status == 0, "\(beside)")
        let besideData = try Self.embeddedData(try String(contentsOfFile: f.runDirectory + "/report.html", encoding: .utf8))
        #expect(besideData["logs"] as? String == "logs/")
        #expect(FileManager.default.fileExists(atPath: f.runDirectory + "/logs/stuck.log"))
    }
}

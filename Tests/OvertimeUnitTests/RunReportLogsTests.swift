import OvertimeProtocol
import Testing
@testable import OvertimeReport

/// What the report takes beside the journal's own lines: each attempt's memory-max, the
/// diagnosis in a task's log, and where the page links the logs from (docs/report.md).
@Suite struct RunReportLogsTests {
    @Test("an attempt's memory-max, a diagnosing line and the log's file name are read for the page")
    func memoryMaxDiagnosedAndLogName() throws {
        var report = try RunReportTests.read([
            RunReportTests.line(0, "big", "attempt", #""attempt":1,"memory_max":734003200"#),
            RunReportTests.line(1, "big", "exited", #""outcome":"succeeded","exit_code":0,"peak_memory":807403520"#),
            RunReportTests.line(2, "big", "finished", #""state":"succeeded""#),
            RunReportTests.line(3, "stuck/1", "attempt", #""attempt":1"#),
            RunReportTests.line(4, "stuck/1", "diagnosing", #""reason":"timeout","limit":10"#),
            RunReportTests.line(9, "stuck/1", "exited", #""outcome":"cancelled","cancel_reason":"timeout""#),
        ])
        #expect(report.tasks[0].attempts[0].memoryMax == 734_003_200)
        #expect(report.tasks[0].attempts[0].peakMemory == 807_403_520)
        #expect(report.tasks[0].diagnosed == false)
        #expect(report.tasks[1].diagnosed)
        #expect(report.tasks[1].attempts[0].memoryMax == nil)
        #expect(report.tasks[0].logFile == "big.log")
        #expect(report.tasks[1].logFile == "stuck%2F1.log")

        var asked: [String] = []
        report.readDiagnoses { name in
            asked.append(name)
            return Array("started\novertime: stuck/1: timeout due; diagnosing first (at most 10s): echo diag {pid}\ndiag 42\novertime: stuck/1: the diagnose command exited 0 after 3ms\nTerminated\n".utf8)
        }
        #expect(asked == ["stuck%2F1.log"], "only the diagnosed task's log is read")
        #expect(report.tasks[1].diagnosis == "overtime: stuck/1: timeout due; diagnosing first (at most 10s): echo diag {pid}\ndiag 42\novertime: stuck/1: the diagnose command exited 0 after 3ms")
        let json = String(decoding: RunReportPage.dataJSON(report), as: UTF8.self)
        #expect(json.contains(#""max":734003200"#))
        #expect(json.contains(#""log":"stuck%2F1.log","diagnosed":true,"diagnosis":"overtime: stuck/1"#))
        #expect(!json.contains(#""log":"big.log""#), "a log named as its task is left for the page to name")
    }

    @Test("the last diagnosis in a log: a retry's, one cut by its limit, one with no end yet, none")
    func lastDiagnosis() {
        let log = """
        overtime: t: timeout due; diagnosing first (at most 10s): first
        one
        overtime: t: the diagnose command exited 0 after 1ms
        --- overtime: attempt 2 ---
        overtime: t: memory due; diagnosing first (at most 1s): sleep 9
        two
        overtime: t: the diagnose command was cut (at its limit) after 1.00s
        after

        """
        #expect(RunReport.lastDiagnosis(inLog: Array(log.utf8)) == "overtime: t: memory due; diagnosing first (at most 1s): sleep 9\ntwo\novertime: t: the diagnose command was cut (at its limit) after 1.00s")
        let open = "x\novertime: t: stalled; diagnosing, and it goes on (at most 10s): dump\nhalf"
        #expect(RunReport.lastDiagnosis(inLog: Array(open.utf8)) == "overtime: t: stalled; diagnosing, and it goes on (at most 10s): dump\nhalf")
        #expect(RunReport.lastDiagnosis(inLog: Array("no diagnosis here\noverrtime: x; diagnosing\n".utf8)) == nil)
        #expect(RunReport.lastDiagnosis(inLog: []) == nil)
    }

    @Test("a long diagnosis is cut to its limit, keeping its last line; bad UTF-8 is replaced")
    func longDiagnosis() throws {
        var log = Array("overtime: t: timeout due; diagnosing first (at most 10s): dump\n".utf8)
        log += Array(repeating: UInt8(ascii: "x"), count: 100_000) + [0xFF, 0x0A]
        log += Array("overtime: t: the diagnose command exited 0 after 1ms\n".utf8)
        let text = try #require(RunReport.lastDiagnosis(inLog: log))
        #expect(text.utf8.count < RunReport.diagnosisLimit + 100)
        #expect(text.hasSuffix("more in the log)\novertime: t: the diagnose command exited 0 after 1ms"))
        #expect(text.hasPrefix("overtime: t: timeout due; diagnosing first"))
    }

    @Test("the page holds diagnoses up to its limit in all; past it the log is linked only")
    func diagnosesBounded() throws {
        var lines: [String] = []
        for i in 0..<400 {
            lines.append(RunReportTests.line(i, "t\(i)", "attempt", #""attempt":1"#))
            lines.append(RunReportTests.line(i, "t\(i)", "diagnosing", #""reason":"timeout","limit":10"#))
        }
        var report = try RunReportTests.read(lines)
        let big = Array("overtime: t: timeout due; diagnosing first: d\n".utf8) + Array(repeating: UInt8(ascii: "y"), count: 20_000)
        report.readDiagnoses { _ in big }
        let shown = report.tasks.compactMap(\.diagnosis)
        #expect(shown.count < 400 && shown.count >= RunReport.diagnosesLimit / RunReport.diagnosisLimit)
        #expect(shown.reduce(0) { $0 + $1.utf8.count } <= RunReport.diagnosesLimit + RunReport.diagnosisLimit + 100)
        #expect(report.tasks.allSatisfy { $0.diagnosed })
    }

    @Test("logs are linked from where the page is: beside them, inside the run directory, or from elsewhere by file://")
    func logLinks() {
        #expect(RunReport.logLink(runDirectory: "/r/run", pageDirectory: "/r/run") == "logs/")
        #expect(RunReport.logLink(runDirectory: "/r/run/", pageDirectory: "/r/run") == "logs/")
        #expect(RunReport.logLink(runDirectory: "/r/run", pageDirectory: "/r/run/a/b") == "../../logs/")
        #expect(RunReport.logLink(runDirectory: "/r/run", pageDirectory: "/r/run2") == "file:///r/run/logs/")
        #expect(RunReport.logLink(runDirectory: "/home/me/runs #1/é", pageDirectory: "/tmp") == "file:///home/me/runs%20%231/%C3%A9/logs/")
        #expect(RunReport.logLink(runDirectory: "/", pageDirectory: "/www") == "../logs/")
    }
}

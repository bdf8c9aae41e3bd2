import OvertimeProtocol
import Testing
import OvertimeCore
@testable import OvertimeReport

/// `overtime report`'s model: a journal read back into tasks, attempts, marks and lanes,
/// from hand-written lines (docs/report.md), and the page's embedding of it.
@Suite struct RunReportTests {
    /// A journal line as the batch writes it, at `ms` milliseconds after 12:00:00.000.
    static func line(_ ms: Int, _ task: String, _ event: String, _ fields: String = "", run: String = "r1") -> String {
        let encoder = EventEncoder(runID: run, wallOffsetNanoseconds: 0)
        let time = encoder.timestamp(MonotonicInstant(nanoseconds: (1_796_040_000_000 + Int64(ms)) * 1_000_000))
        return #"{"time":"\#(time)","run":"\#(run)","task":"\#(task)","event":"\#(event)""# + (fields.isEmpty ? "" : "," + fields) + "}"
    }

    static func read(_ lines: [String], summary: String? = nil, job: String? = nil) throws -> RunReport {
        try RunReport.read(journal: Array(lines.joined(separator: "\n").utf8), summary: summary.map { Array($0.utf8) },
                           jobFile: job.map { Array($0.utf8) })
    }

    @Test("journal timestamps read back to the millisecond the encoder wrote")
    func timestampsRoundTrip() {
        let encoder = EventEncoder(runID: "r", wallOffsetNanoseconds: 0)
        var dice = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let millis = Int64.random(in: -2_208_988_800_000...7_258_118_400_000, using: &dice)
            let text = encoder.timestamp(MonotonicInstant(nanoseconds: millis * 1_000_000))
            #expect(journalTimeMilliseconds(text) == millis, "\(text)")
        }
        #expect(journalTimeMilliseconds("2026-13-01T00:00:00.000Z") == nil)
        #expect(journalTimeMilliseconds("yesterday") == nil)
    }

    @Test("a cancel's why and the reporter shown among several are kept for the page")
    func cancelWhyAndReporter() throws {
        let why = "last progress 10 s ago, from bar 'Tokenizing' (pid 7), which closed at 12:00:00"
        let report = try Self.read([
            Self.line(0, "t", "attempt", #""attempt":1"#),
            Self.line(1, "t", "started", #""pid":7"#),
            Self.line(5, "t", "progress", #""completed":4,"total":10,"reporter":"rank 1","reporting":2"#),
            Self.line(9, "t", "progress", #""completed":1,"total":10,"reporter":"pid 7""#),
            Self.line(10, "t", "cancel", #""reason":"timeout","grace":10,"why":"\#(why)""#),
        ])
        let attempt = try #require(report.tasks.first?.attempts.first)
        #expect(attempt.cancelReason == "timeout" && attempt.cancelWhy == why)
        #expect(attempt.reporter == nil, "one reporter: its name says nothing new")
        let earlier = try Self.read([Self.line(0, "t", "attempt", #""attempt":1"#), Self.line(1, "t", "started", #""pid":7"#),
                                     Self.line(5, "t", "progress", #""completed":4,"total":10,"reporter":"rank 1","reporting":2"#)])
        #expect(earlier.tasks.first?.attempts.first?.reporter == "rank 1")
    }

    @Test("a retry, a timeout cancel, a skip, a running task, a cut line and an unknown event")
    func wholeStory() throws {
        let lines = [
            Self.line(0, "flaky", "attempt", #""attempt":1"#),
            Self.line(0, "stall", "attempt", #""attempt":1,"resources":{"gpu":["1"]}"#),
            Self.line(5, "flaky", "started", #""pid":10"#),
            Self.line(6, "stall", "started", #""pid":11"#),
            Self.line(100, "stall", "progress", #""completed":1,"total":4,"title":"Downloading","detail":"part 1","remaining":2"#),
            Self.line(300, "flaky", "exited", #""exit_code":3,"outcome":"failed","cancel_reason":null,"peak_memory":1048576,"memory_source":"cgroup""#),
            Self.line(300, "flaky", "retry", #""attempt":2,"after":0.1,"because":"exit 3","outcome":"failed""#),
            Self.line(400, "flaky", "attempt", #""attempt":2"#),
            Self.line(401, "flaky", "started", #""pid":12"#),
            Self.line(450, "stall", "something-new", #""wobble":true"#),
            Self.line(500, "flaky", "progress", #""fraction":0.5"#),
            Self.line(2_000, "stall", "cancel", #""reason":"timeout","grace":2"#),
            Self.line(2_050, "stall", "exited", #""exit_code":124,"outcome":"cancelled","cancel_reason":"timeout","progress":{"completed":2,"total":4}"#),
            Self.line(2_050, "stall", "finished", #""state":"failed","reason":"timeout","exit_code":124,"attempts":1"#),
            Self.line(2_050, "after-stall", "finished", #""state":"skipped","reason":"dependency","detail":"'stall' did not succeed","attempts":0"#),
            Self.line(2_500, "flaky", "result", #""value":{"rows":3}"#),
            #"{"time":"2026-11-30T12:00:03.000Z","run":"r1","task":"fla"#,  // cut by a kill
        ]
        let job = #"{"concurrency":2,"tasks":[{"name":"flaky"},{"name":"stall"},{"name":"after-stall"},{"name":"never"}]}"#
        let report = try Self.read(lines, job: job)
        #expect(report.unreadableLines == 1)
        #expect(report.lines == lines.count - 1)
        #expect(report.runID == "r1")
        #expect(!report.complete, "no summary: the run is not known to have ended")
        #expect(report.endedAt == 2_500, "drawn to the last journal line")
        #expect(report.concurrency == 2)
        #expect(report.tasks.map(\.name) == ["flaky", "stall", "after-stall", "never"], "the job file's order")

        let flaky = report.tasks[0]
        #expect(flaky.state == .running && flaky.outcome == .running)
        #expect(flaky.attempts.map(\.number) == [1, 2])
        #expect(flaky.attempts[0].outcome == .failed && flaky.attempts[0].exitCode == 3 && flaky.attempts[0].end == 300)
        #expect(flaky.attempts[0].retryBecause == "exit 3")
        #expect(flaky.attempts[0].peakMemory == 1_048_576 && flaky.attempts[0].memorySource == "cgroup")
        #expect(flaky.attempts[1].end == nil && flaky.attempts[1].outcome == .running, "still open")
        #expect(flaky.attempts[1].progress == [.init(time: 500, fraction: 0.5)])
        #expect(flaky.result == #"{"rows":3}"#)

        let stall = report.tasks[1]
        #expect(stall.state == .failed && stall.outcome == .cancelled, "a failed task counts under its last attempt's colour")
        #expect(stall.reason == "timeout" && stall.exitCode == 124)
        let attempt = try #require(stall.attempts.first)
        #expect(attempt.gpus == ["1"])
        #expect(attempt.marks == [.init(time: 2_000, kind: .cancel, text: "timeout")])
        #expect(attempt.progress.map(\.fraction) == [0.25, 0.5], "the exited line's progress ends the line")
        #expect(attempt.title == "Downloading")

        #expect(report.tasks[2].state == .skipped && report.tasks[2].finishedAt == 2_050 && report.tasks[2].attempts.isEmpty)
        #expect(report.tasks[2].detail == "'stall' did not succeed")
        #expect(report.tasks[3].state == .waiting, "in the job file, never in the journal")
        #expect(report.counts == [.running: 1, .cancelled: 1, .skipped: 1, .waiting: 1])
    }

    @Test("a summary ends the run at its time and says it ended")
    func summaryEndsTheRun() throws {
        let report = try Self.read([
            Self.line(0, "a", "attempt", #""attempt":1"#),
            Self.line(100, "a", "exited", #""exit_code":0,"outcome":"succeeded""#),
            Self.line(100, "a", "finished", #""state":"succeeded","exit_code":0,"attempts":1"#),
        ], summary: #"{"run":"r1","finished":"2026-11-30T12:00:00.250Z","stopped_by":"shutdown","tasks":[]}"#)
        #expect(report.complete && report.stoppedBy == "shutdown")
        #expect(report.endedAt == 250)
        #expect(report.tasks.first?.outcome == .succeeded)
    }

    @Test("a resumed run goes on in the same journal: both runs' attempts, and what the first said of a task it ran")
    func resumed() throws {
        let report = try Self.read([
            Self.line(0, "a", "attempt", #""attempt":1"#),
            Self.line(100, "a", "exited", #""exit_code":0,"outcome":"succeeded""#),
            Self.line(100, "a", "finished", #""state":"succeeded","exit_code":0,"attempts":1"#),
            Self.line(0, "b", "attempt", #""attempt":1"#),
            Self.line(200, "b", "exited", #""exit_code":2,"outcome":"failed""#),
            Self.line(200, "b", "finished", #""state":"failed","reason":"exit","exit_code":2,"attempts":1"#),
            Self.line(60_000, "a", "finished", #""state":"succeeded","resumed":true"#, run: "r2"),
            Self.line(60_000, "b", "attempt", #""attempt":1"#, run: "r2"),
            Self.line(60_300, "b", "exited", #""exit_code":0,"outcome":"succeeded""#, run: "r2"),
            Self.line(60_300, "b", "finished", #""state":"succeeded","exit_code":0,"attempts":1"#, run: "r2"),
        ])
        #expect(report.runs == [.init(id: "r1", start: 0), .init(id: "r2", start: 60_000)])
        #expect(report.runID == "r2")
        let a = report.tasks[0], b = report.tasks[1]
        #expect(a.resumed && a.state == .succeeded && a.exitCode == 0 && a.finishedAt == 100)
        #expect(b.state == .succeeded && b.reason == nil && b.exitCode == 0 && !b.resumed)
        #expect(b.attempts.map(\.number) == [1, 1] && b.attempts.map(\.outcome) == [.failed, .succeeded])
    }

    @Test("lanes: one per GPU id; the rest packed by start time into the fewest slots")
    func lanes() throws {
        var lines: [String] = []
        func attempt(_ task: String, _ start: Int, _ end: Int, gpus: [String] = []) {
            let resources = gpus.isEmpty ? "" : #","resources":{"gpu":[\#(gpus.map { "\"\($0)\"" }.joined(separator: ","))]}"#
            lines.append(Self.line(start, task, "attempt", #""attempt":1"# + resources))
            lines.append(Self.line(end, task, "exited", #""exit_code":0,"outcome":"succeeded""#))
        }
        attempt("a", 0, 100)
        attempt("b", 10, 50)
        attempt("c", 20, 200)
        attempt("d", 50, 90)      // b's slot is free again at 50
        attempt("e", 100, 150)    // a's too, at 100
        attempt("g10", 0, 100, gpus: ["10"])
        attempt("g2", 0, 100, gpus: ["2"])
        attempt("both", 100, 200, gpus: ["2", "10"])
        let report = try Self.read(lines)
        #expect(report.lanes.map(\.label) == ["GPU 2", "GPU 10", "slot 1", "slot 2", "slot 3"])
        let lanes = Dictionary(uniqueKeysWithValues: report.tasks.map { ($0.name, $0.attempts[0].lanes) })
        #expect(lanes["a"] == [2] && lanes["b"] == [3] && lanes["c"] == [4] && lanes["d"] == [3] && lanes["e"] == [2])
        #expect(lanes["g2"] == [0] && lanes["g10"] == [1] && lanes["both"] == [0, 1])
    }

    @Test("an attempt whose exited line was lost ends at its task's next record")
    func lostExit() throws {
        let report = try Self.read([
            Self.line(0, "a", "attempt", #""attempt":1"#),
            Self.line(700, "a", "attempt", #""attempt":2"#),
            Self.line(900, "a", "exited", #""exit_code":0,"outcome":"succeeded""#),
        ])
        #expect(report.tasks[0].attempts.map(\.end) == [700, 900])
        #expect(report.tasks[0].attempts.map(\.outcome) == [.running, .succeeded])
    }

    @Test("long progress is thinned to a bounded line that keeps its ends")
    func progressThinned() throws {
        var lines = [Self.line(0, "long", "attempt", #""attempt":1"#)]
        for i in 1...2_000 { lines.append(Self.line(i * 10, "long", "progress", #""completed":\#(i),"total":2000"#)) }
        let progress = try #require(try Self.read(lines).tasks.first?.attempts.first?.progress)
        #expect(progress.count <= RunReport.progressPointLimit && progress.count > RunReport.progressPointLimit / 2)
        #expect(progress.first == .init(time: 10, fraction: 0.0005) && progress.last == .init(time: 20_000, fraction: 1))
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.time < $1.time })
    }

    @Test("an empty or garbage journal is refused, saying which")
    func refused() {
        #expect(throws: RunReportError.self) { try Self.read([]) }
        do {
            _ = try Self.read(["", "  "])
            Issue.record("an empty journal was read")
        } catch {
            #expect("\(error)".contains("empty"), "\(error)")
        }
        do {
            _ = try Self.read(["not json", #"{"event":"attempt"}"#, "\u{1}\u{2}"])
            Issue.record("garbage was read")
        } catch {
            #expect("\(error)".contains("no line"), "\(error)")
        }
    }

    @Test("an empty journal and one without records are told apart as cases")
    func refusalsAreCases() {
        #expect(throws: RunReportError.emptyJournal) { try RunReport.read(journal: Array("\n  \n".utf8)) }
        #expect(throws: RunReportError.noRecords) { try RunReport.read(journal: Array("not json\n{\"event\":\"attempt\"}".utf8)) }
    }

    @Test("10 MB texts from a journal are cut on the page, at a character, saying how long they are; marks and GPU ids are bounded")
    func longTextsAreCut() throws {
        // "é" as e + a combining accent: two scalars a character.
        let title = String(repeating: "e\u{301}", count: 5_000_000)
        let name = "n" + String(repeating: "a", count: 10_000_000)
        let long = String(repeating: "x", count: 10 * 1024 * 1024)
        var lines = [Self.line(0, "t", "attempt", #""attempt":1,"resources":{"gpu":[\#((0..<1_000).map { "\"\($0)\"" }.joined(separator: ","))]}"#),
                     Self.line(1, name, "attempt", #""attempt":1"#),
                     Self.line(2, name + "b", "attempt", #""attempt":1"#),
                     Self.line(5, "t", "progress", #""fraction":0.5,"title":"\#(title)","detail":"\#(long)""#),
                     Self.line(6, "t", "result", #""value":{"text":"\#(long)"}"#)]
        for i in 0..<1_000 { lines.append(Self.line(10 + i, "t", "operator", #""action":"extend \#(i)""#)) }
        lines += [Self.line(2_000, "t", "cancel", #""reason":"\#(long)""#),
                  Self.line(2_001, "t", "exited", #""exit_code":124,"outcome":"cancelled","memory_source":"\#(long)""#),
                  Self.line(2_002, "t", "finished", #""state":"failed","reason":"timeout","detail":"\#(long)""#)]
        let report = try Self.read(lines)
        #expect(report.tasks.count == 3, "names that differ past the cut are two tasks")
        let task = report.tasks[0]
        let attempt = try #require(task.attempts.first)
        let marker = "… (10 MiB in the journal)"
        for (field, text) in [("name", report.tasks[1].name), ("title", attempt.title), ("detail", attempt.detail), ("cancel", attempt.cancelReason),
                              ("source", attempt.memorySource), ("task detail", task.detail), ("result", task.result)] {
            let shown = try #require(text, "no \(field)")
            #expect(shown.count <= RunReport.textLimit + 30 && shown.hasSuffix(" in the journal)"), "\(field): \(shown.suffix(60))")
        }
        #expect(attempt.detail?.hasSuffix(marker) == true && attempt.memorySource?.hasSuffix(marker) == true)
        let shownTitle = try #require(attempt.title)
        #expect(shownTitle == String(repeating: "e\u{301}", count: RunReport.textLimit / 2) + "… (14.3 MiB in the journal)", "cut at a scalar")
        // One character of two million combining marks is cut too: a limit in characters
        // would let it through whole.
        let oneCharacter = "e" + String(repeating: "\u{301}", count: 2_000_000)
        #expect(RunReport.shown(oneCharacter).utf8.count < 1_000, "\(RunReport.shown(oneCharacter).utf8.count) bytes shown")
        #expect(attempt.marks.count == RunReport.markLimit && attempt.moreMarks == 1_001 - RunReport.markLimit)
        #expect(attempt.gpus.count == RunReport.gpuLimit && report.lanes.filter { $0.gpu != nil }.count == RunReport.gpuLimit)
        let page = RunReportPage.html(report)
        #expect(page.count < 200_000, "a page of \(page.count) bytes")
        // Short texts are left whole.
        #expect(RunReport.shown("timeout") == "timeout" && RunReport.shown(String(repeating: "é", count: RunReport.textLimit)).count == RunReport.textLimit)
    }

    @Test("task text cannot break out of the page's data script")
    func embeddingIsEscaped() throws {
        let name = "</script><script>alert(1)</script><!-- & >"
        let lines = [Self.line(0, name, "attempt", #""attempt":1"#),
                     Self.line(5, name, "progress", #""fraction":0.1,"title":"<\/script>"#)]
        let report = try Self.read(lines)
        let embedded = RunReportPage.embeddedJSON(report)
        let text = String(decoding: embedded, as: UTF8.self)
        #expect(!text.contains("<") && !text.contains(">") && !text.contains("&"))
        // The same JSON still: the browser's JSON.parse reads the \u escapes back.
        let value = try JSONValue.parse(embedded)
        guard case let .array(tasks)? = value["tasks"], let first = tasks.first else {
            Issue.record("no tasks in \(text)")
            return
        }
        #expect(first["name"] == .string(name))
        let page = String(decoding: RunReportPage.html(report), as: UTF8.self)
        #expect(page.components(separatedBy: "</script>").count - 1 == 2, "only the page's own two script ends")
        #expect(!page.contains("<!-- &"))
    }

    @Test("a sweep's and an array's elements are grouped under their sweep, with the parameters their names give and their results' fields")
    func sweeps() throws {
        func element(_ ms: Int, _ name: String, exit: Int, result: String? = nil) -> [String] {
            [Self.line(ms, name, "attempt", #""attempt":1"#)]
                + (result.map { [Self.line(ms + 5, name, "result", #""value":\#($0)"#)] } ?? [])
                + [Self.line(ms + 10, name, "exited", #""exit_code":\#(exit),"outcome":"\#(exit == 0 ? "succeeded" : "failed")""#),
                   Self.line(ms + 10, name, "finished", #""state":"\#(exit == 0 ? "succeeded" : "failed")","exit_code":\#(exit)"#)]
        }
        let lines = element(0, "prep", exit: 0)
            + element(20, "train[lr=0.01,seed=1]", exit: 0, result: #"{"loss":0.5,"acc":0.8,"note":"</script>","nested":{"a":[1]},"loss":0.25}"#)
            + element(20, "shard[7]", exit: 1)
            + element(40, "train[lr=1e-3,seed=2,opt=a,b]", exit: 3, result: "0.125")
            + element(40, "shard[10]", exit: 0, result: "[1,2]")
            + element(60, "adhoc[x=1]", exit: 0)
        let job = #"{"tasks":[{"name":"prep"},{"name":"train","matrix":{"lr":["0.01","1e-3"]}},{"name":"shard","array":"0-99"},"#
            + #"{"name":"untouched","array":[1,2]},{"name":"summary"}]}"#
        let report = try Self.read(lines, job: job)
        #expect(report.tasks.map(\.name) == ["prep", "summary", "train[lr=0.01,seed=1]", "shard[7]", "train[lr=1e-3,seed=2,opt=a,b]", "shard[10]", "adhoc[x=1]"],
                "a sweep's own name is no task")
        #expect(report.groups.map(\.name) == ["train", "shard", "untouched", "adhoc"])
        #expect(report.groups.map(\.kind) == [.matrix, .array, .array, .matrix], "from the job file, else from the elements' names")
        #expect(report.groups.map(\.position) == [1, 1, 1, 6], "the job file's place; an undeclared one's first element's")
        #expect(report.groups[0].elements == [2, 4] && report.groups[1].elements == [3, 5] && report.groups[2].elements.isEmpty)
        #expect(report.groups[0].keys == ["lr", "seed", "opt"] && report.groups[1].keys == ["index"])
        #expect(report.tasks[0].group == nil && report.tasks[1].group == nil && report.tasks[2].group == 0 && report.tasks[3].group == 1)

        let first = report.tasks[2], second = report.tasks[4]
        #expect(first.parameters == [.init(key: "lr", value: "0.01"), .init(key: "seed", value: "1")])
        #expect(second.parameters == [.init(key: "lr", value: "1e-3"), .init(key: "seed", value: "2"), .init(key: "opt", value: "a,b")],
                "a comma no key follows is the value's")
        #expect(report.tasks[3].parameters == [.init(key: "index", value: "7")])
        #expect(first.resultFields == [.init(key: "acc", value: .number(0.8)), .init(key: "note", value: .string("</script>")),
                                       .init(key: "nested", value: .string(#"{"a":[1]}"#)), .init(key: "loss", value: .number(0.25))],
                "a key given twice: the last stands")
        #expect(second.resultFields == [.init(key: "result", value: .number(0.125))], "a scalar result is one field")
        #expect(report.tasks[5].resultFields.isEmpty && report.tasks[5].result == "[1,2]", "a list is shown as JSON only")
        #expect(second.outcome == .failed && report.tasks[3].outcome == .failed)

        let data = String(decoding: RunReportPage.embeddedJSON(report), as: UTF8.self)
        #expect(data.contains(#""groups":[{"name":"train","kind":"matrix","keys":["lr","seed","opt"],"position":1},"#), "\(data.prefix(600))")
        #expect(data.contains(#""group":0,"params":["lr","0.01","seed","1"]"#))
        #expect(data.contains(#""fields":["acc",0.8,"note","\u003c/script\u003e","#), "escaped as every text of the data is")
        #expect(!data.contains("\"reason\":null"), "a field holding its default is left out")
    }

    @Test("an element's name of a thousand pairs gives a bounded number of parameters and keys")
    func wideNames() throws {
        let pairs = (0..<1_000).map { "k\($0)=\($0)" }.joined(separator: ",")
        let report = try Self.read((0..<3).map { Self.line($0, "w[n=\($0)," + pairs + "]", "attempt", #""attempt":1"#) })
        #expect(report.groups.count == 1 && report.groups[0].keys.count == RunReport.fieldLimit)
        #expect(report.tasks.allSatisfy { $0.parameters.count == RunReport.fieldLimit }, "\(report.tasks.map(\.parameters.count))")
        #expect(report.tasks[2].parameters.prefix(2) == [.init(key: "n", value: "2"), .init(key: "k0", value: "0")])
    }

    @Test("a name is an element's only as a plain stem with its brackets at the end")
    func notElements() throws {
        let names = ["[7]", "a b[7]", "x[7]y", "plain", "é[1]"]
        let report = try Self.read(names.map { Self.line(0, $0, "attempt", #""attempt":1"#) })
        #expect(report.groups.isEmpty && report.tasks.allSatisfy { $0.group == nil }, "\(report.groups)")
    }
}

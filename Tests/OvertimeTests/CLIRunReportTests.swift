// `overtime report RUN_DIR` end to end (issue 15, item 4): a real batch with a timeout
// cancel, a retry, a failure and a skip drawn as a page that headless Chromium renders
// without errors, with every task in it and the outcome colours on its timeline; a
// 5,000-task run rendered within a generous bound; a sweep and an array each one row that
// opens to the table comparing its elements; a 100,000-element array's page small and
// quick; a run still going; bad input refused.

import Foundation
import Overtime
import OvertimeTestSupport
import Testing

/// Headless Chromium (Debian's `chromium`, scripts/setup installs it) and the screenshot's
/// pixels (scripts/png-colours).
enum CLIReportBrowser {
    static let chromium: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static let window = "--window-size=1400,900"

    /// The outcome colours of the page (docs/report.md).
    static let colours = ["succeeded": "#2f9e62", "failed": "#d9453d", "cancelled": "#f0a020", "killed": "#8b46c2",
                          "oom": "#d6408f", "skipped": "#9aa3ad", "running": "#3b82f6"]

    static func arguments(_ scratch: CLIScratch, _ more: [String]) -> [String] {
        // A profile of its own: two browsers on one profile refuse each other.
        ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + scratch.path("chromium-\(UUID().uuidString.prefix(8))"),
         window] + more
    }

    /// The page's DOM after its script ran.
    static func dumpDOM(_ page: String, in scratch: CLIScratch, extra: [String] = [], timeout: Duration = .seconds(60)) async throws -> CLIResult {
        let chromium = try #require(chromium, "chromium is not installed (scripts/setup installs it)")
        let process = CLIProcess(arguments(scratch, extra + ["--dump-dom", "file://" + page]), executable: chromium, in: scratch)
        try await process.start()
        return await process.finish(timeout: timeout)
    }

    static func screenshot(_ page: String, to png: String, in scratch: CLIScratch) async throws -> CLIResult {
        let chromium = try #require(chromium, "chromium is not installed (scripts/setup installs it)")
        let process = CLIProcess(arguments(scratch, ["--screenshot=" + png, "file://" + page]), executable: chromium, in: scratch)
        try await process.start()
        return await process.finish(timeout: .seconds(60))
    }

    /// How many pixels of each colour the screenshot has inside `region` (x,y,w,h).
    static func colourCounts(_ png: String, region: String, _ colours: [String], in scratch: CLIScratch) async throws -> [String: Int] {
        let process = CLIProcess([Checkout.path("scripts/png-colours"), png, "--region", region] + colours,
                                 executable: CLIBatchWorker.python, in: scratch)
        try await process.start()
        let result = await process.finish(timeout: .seconds(60))
        #expect(result.status == 0, "\(result)")
        var counts: [String: Int] = [:]
        for line in result.stdout.split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.count == 2, let n = Int(words[1]) { counts[String(words[0])] = n }
        }
        return counts
    }

    /// A script that uses the page as a reader would (events dispatched on its elements)
    /// and writes what it saw into `data-drive`.
    static let driver = #"""
    <script>
    (function () {
      const log = [];
      try {
        const canvas = document.getElementById("timeline");
        const box = canvas.getBoundingClientRect();
        const at = function (type, x, y, more) {
          canvas.dispatchEvent(new MouseEvent(type, Object.assign({ bubbles: true, clientX: box.left + x, clientY: box.top + y }, more || {})));
        };
        const lanes = JSON.parse(document.getElementById("run-data").textContent).lanes.length;
        let found = false;
        for (let lane = 0; lane < lanes && !found; lane++) {
          for (let x = 130; x < box.width && !found; x += 20) {
            at("mousemove", x, 26 + lane * 30 + 15);
            found = !document.getElementById("tooltip").hidden;
            if (found) { at("mousedown", x, 26 + lane * 30 + 15); at("mouseup", x, 26 + lane * 30 + 15); }
          }
        }
        log.push("tooltip " + found, "detail " + !document.getElementById("detail-card").hidden);
        at("mousedown", 600, 60);
        window.dispatchEvent(new MouseEvent("mousemove", { clientX: box.left + 500, clientY: box.top + 60 }));
        window.dispatchEvent(new MouseEvent("mouseup", { clientX: box.left + 500, clientY: box.top + 60 }));
        canvas.dispatchEvent(new WheelEvent("wheel", { bubbles: true, cancelable: true, ctrlKey: true, deltaY: -300, clientX: box.left + 500, clientY: box.top + 60 }));
        ["zoom-in", "zoom-out", "zoom-fit"].forEach(function (id) { document.getElementById(id).click(); });
        canvas.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
        document.querySelectorAll("#table-head [data-column]").forEach(function (c) { c.click(); c.click(); });
        const filter = document.getElementById("filter");
        filter.value = "after-stall"; filter.dispatchEvent(new Event("input"));
        log.push("filtered " + document.querySelectorAll("#table-rows .row").length + " shown");
        filter.value = ""; filter.dispatchEvent(new Event("input"));
        document.querySelectorAll("#counts .chip").forEach(function (c) { c.click(); c.click(); });
        document.querySelector("#table-rows .row").click();
        log.push("row " + document.querySelector("#detail-card .name").textContent);
        document.getElementById("detail-close").click();
        ["table-body", "timeline-scroll"].forEach(function (id) {
          const e = document.getElementById(id); e.scrollTop = 100000; e.dispatchEvent(new Event("scroll"));
        });
        window.dispatchEvent(new Event("resize"));
      } catch (e) { log.push("ERROR " + e + " " + e.stack); }
      setTimeout(function () { document.body.dataset.drive = log.join(" | "); }, 300);
    })();
    </script>
    """#

    /// The `<body>` element's `data-` attributes in a DOM dump.
    static func bodyData(_ dom: String) -> [String: String] {
        guard let start = dom.range(of: "<body"), let end = dom[start.upperBound...].firstIndex(of: ">") else { return [:] }
        var data: [String: String] = [:]
        let tag = dom[start.upperBound..<end]
        var rest = tag[...]
        while let attribute = rest.range(of: "data-") {
            let afterName = rest[attribute.upperBound...]
            guard let equals = afterName.firstIndex(of: "="), afterName[afterName.index(after: equals)] == "\"" else { break }
            let name = String(afterName[..<equals])
            let valueStart = afterName.index(equals, offsetBy: 2)
            guard let quote = afterName[valueStart...].firstIndex(of: "\"") else { break }
            data[name] = String(afterName[valueStart..<quote])
            rest = afterName[afterName.index(after: quote)...]
        }
        return data
    }

    /// The errors the page recorded (its `#errors` element), or nil for none.
    static func recordedErrors(_ dom: String) -> String? {
        guard let start = dom.range(of: "<pre id=\"errors\""), let end = dom[start.upperBound...].range(of: "</pre>") else {
            return "no #errors element in the DOM"
        }
        let element = dom[start.upperBound..<end.lowerBound]
        guard let close = element.firstIndex(of: ">") else { return nil }
        let text = element[element.index(after: close)...]
        return text.isEmpty ? nil : String(text)
    }
}

@Suite("CLI run report")
struct CLIRunReportTests {
    @Test("a real batch (a retry, a timeout cancel, a failure, a skip) renders in Chromium with every task and its colours")
    func realBatch() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob([
            "concurrency": 3,
            "resources": ["gpu": ["0"]],
            "tasks": [
                f.task("prepare", ["progress=5", "sleep=0.3"]),
                f.task("train", ["progress=20", "sleep=0.4"], ["resources": ["gpu": 1]]),
                f.task("flaky", ["sleep=0.2", "fail-until=1"], ["retries": ["max": 1, "backoff": "100ms", "on": ["exit"]]]),
                f.task("stall", ["sleep=30"], ["budget": "700ms", "grace": "1s"]),
                f.task("after-stall", [], ["after": ["stall"]]),
                f.task("broken", ["sleep=0.2", "exit=3"]),
            ],
        ])
        let batch = try await f.run()
        #expect(batch.status == 1, "\(batch)")
        #expect(try f.events(of: "stall", "cancel").first?["reason"] as? String == "timeout")
        #expect(try f.events(of: "flaky", "retry").count == 1)

        let page = f.path("report.html")
        let report = try await cliRun(["report", f.runDirectory, "-o", page], in: f.scratch)
        #expect(report.status == 0, "\(report)")
        #expect(report.stdout == page + "\n")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(!html.contains("http://") && !html.contains("https://"), "the page fetches nothing")

        let dump = try await CLIReportBrowser.dumpDOM(page, in: f.scratch)
        #expect(dump.status == 0 && !dump.timedOut, "\(dump)")
        let dom = dump.stdout
        let data = CLIReportBrowser.bodyData(dom)
        #expect(data["rendered"] == "6", "data attributes: \(data)")
        #expect(data["errors"] == nil && CLIReportBrowser.recordedErrors(dom) == nil, "\(CLIReportBrowser.recordedErrors(dom) ?? "")")
        for name in ["prepare", "train", "flaky", "stall", "after-stall", "broken"] {
            #expect(dom.contains(">\(name)</div>"), "\(name) is not in the table")
        }
        #expect(dom.contains("retried, because") || dom.contains("\"retry\":\"exit 1\""), "the retry is in the data")
        // GPU 0, at most three slots (a GPU task holds no slot lane), and the skipped lane.
        #expect((3...5).contains(data["lanes"].flatMap(Int.init) ?? 0), "lanes: \(data)")

        // The same page, driven as a reader would: hover, click, drag, zoom, sort, filter,
        // scroll. None of it may raise an error.
        let driven = f.path("driven.html")
        try html.replacingOccurrences(of: "</body>", with: CLIReportBrowser.driver + "</body>").write(toFile: driven, atomically: true, encoding: .utf8)
        let drivenDump = try await CLIReportBrowser.dumpDOM(driven, in: f.scratch, extra: ["--virtual-time-budget=2000"])
        let drive = CLIReportBrowser.bodyData(drivenDump.stdout)["drive"] ?? "(the driver did not finish)"
        #expect(CLIReportBrowser.recordedErrors(drivenDump.stdout) == nil, "\(CLIReportBrowser.recordedErrors(drivenDump.stdout) ?? "")")
        #expect(!drive.contains("ERROR") && drive.contains("tooltip true") && drive.contains("detail true"), "\(drive)")
        #expect(drive.contains("filtered 1 shown"), "\(drive)")

        let png = f.path("report.png")
        let shot = try await CLIReportBrowser.screenshot(page, to: png, in: f.scratch)
        #expect(shot.status == 0, "\(shot)")
        let region = try #require(data["timeline"], "the page did not say where its timeline is")
        let wanted = ["succeeded", "failed", "cancelled", "skipped"]
        let counts = try await CLIReportBrowser.colourCounts(png, region: region, wanted.map { CLIReportBrowser.colours[$0]! }, in: f.scratch)
        for outcome in wanted {
            // Bars are tens of pixels wide and 22 high; the skipped task is one small diamond.
            let least = outcome == "skipped" ? 10 : 200
            #expect(counts[CLIReportBrowser.colours[outcome]!] ?? 0 >= least, "\(outcome) on the timeline: \(counts)")
        }
    }

    @Test("5,000 tasks render in Chromium within a generous bound")
    func fiveThousandTasks() async throws {
        // A journal written here rather than by a real batch: 5,000 real tasks take 17 s
        // alone on a 2-core machine, and much more beside the rest of the suite, and this
        // one has what a run of `true` has not: retries, cancels, GPU lanes, progress.
        let scratch = try CLIScratch()
        let directory = scratch.path("run")
        try FileManager.default.createDirectory(atPath: directory + "/logs", withIntermediateDirectories: true)
        let (journal, summary) = Self.bigJournal(tasks: 5_000)
        try journal.write(toFile: directory + "/events.jsonl", atomically: false, encoding: .utf8)
        try summary.write(toFile: directory + "/summary.json", atomically: false, encoding: .utf8)

        let report = try await cliRun(["report", directory], in: scratch)
        #expect(report.status == 0, "\(report)")
        #expect(report.wall < .seconds(20), "report took \(report.wall)")
        let page = directory + "/report.html"
        let dump = try await CLIReportBrowser.dumpDOM(page, in: scratch, timeout: .seconds(90))
        #expect(dump.status == 0 && !dump.timedOut, "\(dump.stderr.suffix(2000))")
        let data = CLIReportBrowser.bodyData(dump.stdout)
        #expect(data["rendered"] == "5000", "data attributes: \(data)")
        #expect(CLIReportBrowser.recordedErrors(dump.stdout) == nil, "\(CLIReportBrowser.recordedErrors(dump.stdout) ?? "")")
        let renderMs = try #require(data["render-ms"].flatMap(Int.init), "no render time: \(data)")
        #expect(renderMs < 10_000, "the page took \(renderMs) ms to draw 5,000 tasks")
        #expect(dump.wall < .seconds(45), "chromium took \(dump.wall)")
    }

    @Test("a real sweep and array: one row each in Chromium, the sweep opening to a table of its parameters and results, sorted, the best marked, nothing a task said run as markup")
    func sweepGroups() async throws {
        let f = try CLIBatchFixture()
        // Element i (lr outer, seed inner) reports loss {seed}.{i} and acc 0.{i}5, and the
        // last one fails: the best loss of those that succeeded is element 0's (1.0), the
        // best acc element 2's (0.25).
        let report = #"{"type":"result","value":{"loss":{seed}.{index},"acc":0.{index}5,"note":"</script><img src=x onerror=alert(1)>"}}"#
        try f.writeJob([
            "concurrency": 2,
            "tasks": [
                f.task("prep", []),
                ["name": "train", "matrix": ["lr": ["1e-2", "1e-3"], "seed": [1, 2]],
                 "command": ["sh", "-c", "printf '%s\\n' '" + report + "' >&3; exit $(( {index} == 3 ))"]],
                ["name": "shard", "array": "8-10", "command": ["sh", "-c", "exit 0"]],
            ],
        ])
        let batch = try await f.run()
        #expect(batch.status == 1, "\(batch)")
        let page = f.path("report.html")
        let made = try await cliRun(["report", f.runDirectory, "-o", page], in: f.scratch)
        #expect(made.status == 0, "\(made)")
        let html = try String(contentsOfFile: page, encoding: .utf8)

        // Open the sweep, sort it by loss, then open the array; say what each row shows
        // (its cells' text, `*` before a value marked best) and what the page made of it.
        let driver = #"""
        <script>
        (function () {
          const out = [];
          try {
            const rows = function () { return Array.prototype.slice.call(document.querySelectorAll("#table-rows .row")); };
            const said = function (r) {
              return Array.prototype.map.call(r.children, function (c) { return (c.classList.contains("best") ? "*" : "") + c.textContent.trim(); }).join(";");
            };
            out.push("closed " + rows().map(said).map(function (s) { return s.split(";")[0]; }).join(","));
            document.querySelector('#table-rows [data-group="0"]').click();
            document.querySelectorAll("#table-rows [data-gcolumn]")[2].click();
            document.querySelector('#table-rows [data-group="1"]').click();
            document.querySelector('#table-rows [data-of="1"][data-gcolumn="0"]').click();
            rows().forEach(function (r) { out.push(said(r)); });
            out.push("img " + document.querySelectorAll("img").length, "scripts " + document.scripts.length);
          } catch (e) { out.push("ERROR " + e); }
          // Written into an attribute: markup characters spelled out, whatever the serializer does with them.
          document.body.dataset.drive = out.join(" | ").replace(/</g, "{lt}").replace(/>/g, "{gt}").replace(/"/g, "'");
        })();
        </script>
        """#
        let driven = f.path("driven.html")
        try html.replacingOccurrences(of: "</body>", with: driver + "</body>").write(toFile: driven, atomically: true, encoding: .utf8)
        let dump = try await CLIReportBrowser.dumpDOM(driven, in: f.scratch)
        #expect(dump.status == 0 && !dump.timedOut, "\(dump)")
        let data = CLIReportBrowser.bodyData(dump.stdout)
        #expect(CLIReportBrowser.recordedErrors(dump.stdout) == nil, "\(CLIReportBrowser.recordedErrors(dump.stdout) ?? "")")
        #expect(data["rendered"] == "8" && data["groups"] == "2", "\(data)")
        let rows = (data["drive"] ?? "(the driver did not run)").components(separatedBy: " | ")
        #expect(rows.first == "closed prep,▸train sweep,▸shard array", "\(rows)")
        let noted = "{lt}/script{gt}{lt}img src=x onerror=alert(1){gt}"
        let wanted = [
            "prep;succeeded", "▾train sweep", "lr;seed;loss ↓;acc ↑;note;Outcome;Attempts;Duration;Peak memory",
            "1e-2;1;*1;0.05;\(noted);succeeded", "1e-3;1;1.2;*0.25;\(noted);succeeded", "1e-2;2;2.1;0.15;\(noted);succeeded",
            "1e-3;2;2.3;0.35;\(noted);failed",
            "▾shard array", "index;Outcome;Attempts;Duration;Peak memory", "8;succeeded", "9;succeeded", "10;succeeded",
            "img 0", "scripts 3",
        ]
        var at = 1
        for want in wanted {
            // Rows are matched by their start: durations and sizes differ from run to run.
            let found = rows[at...].firstIndex { $0.hasPrefix(want) }
            #expect(found == at, "expected a row starting \(want) at \(at): \(rows)")
            at = (found ?? at) + 1
            if at >= rows.count { break }
        }
        #expect(rows.contains { $0.hasPrefix("▾train sweep;") && $0.contains("3 succeeded, 1 failed") }, "\(rows)")
    }

    @Test("an array of 100,000 elements: a page that stays small, drawn in Chromium within a generous bound, its elements listed when opened")
    func hundredThousandElements() async throws {
        let scratch = try CLIScratch()
        let directory = scratch.path("run")
        try FileManager.default.createDirectory(atPath: directory + "/logs", withIntermediateDirectories: true)
        let (journal, summary) = Self.arrayJournal(elements: 100_000)
        try journal.write(toFile: directory + "/events.jsonl", atomically: false, encoding: .utf8)
        try summary.write(toFile: directory + "/summary.json", atomically: false, encoding: .utf8)
        try #"{"concurrency":8,"tasks":[{"name":"shard","array":"0-99999","command":["/bin/true"]}]}"#
            .write(toFile: directory + "/job.json", atomically: false, encoding: .utf8)

        let report = try await cliRun(["report", directory], in: scratch, timeout: .seconds(180))
        #expect(report.status == 0, "\(report)")
        let page = directory + "/report.html"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: page)[.size] as? Int)
        // About 230 bytes an element; each of the data's fields written, null or not, made 440.
        #expect(size < 30_000_000, "a page of \(size) bytes")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        let driver = #"""
        <script>
        (function () {
          const out = [];
          try {
            const start = performance.now();
            out.push("rows " + document.querySelectorAll("#table-rows .row").length);
            document.querySelector('#table-rows [data-group="0"]').click();
            const body = document.getElementById("table-body");
            body.scrollTop = 1e9; body.dispatchEvent(new Event("scroll"));
            requestAnimationFrame(function () {
              const rows = document.querySelectorAll("#table-rows .row");
              out.push("opened " + rows.length, "last " + rows[rows.length - 1].title, "took " + Math.round(performance.now() - start));
              document.body.dataset.drive = out.join(" | ");
            });
          } catch (e) { document.body.dataset.drive = "ERROR " + e; }
        })();
        </script>
        """#
        let driven = directory + "/driven.html"
        try html.replacingOccurrences(of: "</body>", with: driver + "</body>").write(toFile: driven, atomically: true, encoding: .utf8)
        let dump = try await CLIReportBrowser.dumpDOM(driven, in: scratch, extra: ["--virtual-time-budget=5000"], timeout: .seconds(120))
        #expect(dump.status == 0 && !dump.timedOut, "\(dump.stderr.suffix(2000))")
        let data = CLIReportBrowser.bodyData(dump.stdout)
        #expect(data["rendered"] == "100000" && data["groups"] == "1", "data attributes: \(data)")
        #expect(CLIReportBrowser.recordedErrors(dump.stdout) == nil, "\(CLIReportBrowser.recordedErrors(dump.stdout) ?? "")")
        let renderMs = try #require(data["render-ms"].flatMap(Int.init), "no render time: \(data)")
        #expect(renderMs < 15_000, "the page took \(renderMs) ms to draw 100,000 tasks")
        let drive = (data["drive"] ?? "(the driver did not run)").components(separatedBy: " | ")
        #expect(drive.first == "rows 1", "the array is one row until opened: \(drive)")
        #expect(drive.count == 4 && drive[2] == "last shard[99999]", "\(drive)")
        // Only the rows in view are built (about 14, and a margin either side).
        #expect(drive.count == 4 && (Int(drive[1].dropFirst(7)) ?? .max) < 60, "\(drive)")
        #expect(drive.count == 4 && (Int(drive[3].dropFirst(5)) ?? .max) < 5_000, "opening and scrolling to the end: \(drive)")
    }

    @Test("a hand-made journal of 10 MB titles, details, names and results makes a page under 1 MB that says what it cut")
    func longTextsMakeASmallPage() async throws {
        let scratch = try CLIScratch()
        let directory = scratch.path("run")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let long = String(repeating: "x", count: 10 * 1024 * 1024)
        func line(_ second: Int, _ task: String, _ event: String, _ fields: String) -> String {
            #"{"time":"2026-11-30T12:00:0\#(second).000Z","run":"r","task":"\#(task)","event":"\#(event)","# + fields + "}"
        }
        var lines = [line(0, "a", "attempt", #""attempt":1"#),
                     line(1, "a", "progress", #""fraction":0.5,"title":"\#(long)","detail":"\#(long)""#),
                     line(2, "a", "result", #""value":"\#(long)""#),
                     line(3, "a", "exited", #""exit_code":1,"outcome":"failed""#),
                     line(3, "a", "finished", #""state":"failed","reason":"exit","detail":"\#(long)""#)]
        for task in ["b", "n" + long] {
            lines += [line(0, task, "attempt", #""attempt":1"#), line(1, task, "progress", #""fraction":0.5,"title":"\#(long)""#)]
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/events.jsonl", atomically: false, encoding: .utf8)

        let report = try await cliRun(["report", directory], in: scratch, timeout: .seconds(120))
        #expect(report.status == 0, "\(report)")
        let page = directory + "/report.html"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: page)[.size] as? Int)
        #expect(size < 1_000_000, "a page of \(size) bytes from a journal of \(lines.count) lines")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("… (10 MiB in the journal)"), "no cut marker")
        let dump = try await CLIReportBrowser.dumpDOM(page, in: scratch)
        let data = CLIReportBrowser.bodyData(dump.stdout)
        #expect(data["rendered"] == "3" && CLIReportBrowser.recordedErrors(dump.stdout) == nil, "\(data) \(CLIReportBrowser.recordedErrors(dump.stdout) ?? "")")
    }

    @Test("a run still going: its report draws what has no end yet as running")
    func runStillGoing() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("done", []),
            f.task("long", ["progress=3", "sleep=30"], ["budget": "none"]),
        ]])
        let batch = try await f.start()
        let clock = ContinuousClock()
        let end = clock.now + .seconds(20)
        while clock.now < end, !f.eventLines().contains(where: { $0.contains("\"long\"") && $0.contains("\"progress\"") }) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let report = try await cliRun(["report", f.runDirectory], in: f.scratch)
        batch.signal(SIGTERM)
        let stopped = await batch.finish(timeout: .seconds(30))
        #expect(report.status == 0, "\(report)")
        let page = f.runDirectory + "/report.html"
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("\"complete\":false"), "no summary yet")
        #expect(html.contains("\"name\":\"long\",\"state\":\"running\""), "the long task runs")
        let dump = try await CLIReportBrowser.dumpDOM(page, in: f.scratch)
        let data = CLIReportBrowser.bodyData(dump.stdout)
        #expect(data["rendered"] == "2" && CLIReportBrowser.recordedErrors(dump.stdout) == nil, "\(data) \(CLIReportBrowser.recordedErrors(dump.stdout) ?? "")")
        #expect(stopped.status == 143, "\(stopped)")
    }

    @Test("bad input: a clear message and exit 125, never a crash")
    func badInput() async throws {
        let scratch = try CLIScratch()
        func expectRefused(_ arguments: [String], _ words: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let r = try await cliRun(arguments, in: scratch)
            #expect(r.status == 125, "\(arguments): \(r)", sourceLocation: sourceLocation)
            #expect(r.stderr.contains(words), "\(arguments): \(r.stderr)", sourceLocation: sourceLocation)
            #expect(!r.diedOfSignal, sourceLocation: sourceLocation)
        }
        try await expectRefused(["report"], "which run directory")
        try await expectRefused(["report", scratch.path("missing")], "is not a directory")
        let empty = scratch.path("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        try await expectRefused(["report", empty], "no readable events.jsonl")
        try scratch.write("empty/events.jsonl", "")
        try await expectRefused(["report", empty], "the journal is empty")
        try scratch.write("empty/events.jsonl", "garbage\n\u{0}\u{1}{\"x\":1}\n")
        try await expectRefused(["report", empty], "no line of the journal is a journal record")
        let line = #"{"time":"2026-11-30T12:00:00.000Z","run":"r","task":"a","event":"attempt","attempt":1}"#
        try scratch.write("empty/events.jsonl", line + "\n")
        try await expectRefused(["report", empty, "-o", scratch.path("no/such/dir/r.html")], "cannot write")
        try await expectRefused(["report", empty, "--colour"], "unknown option")
        try await expectRefused(["report", empty, empty], "one run directory only")
        let help = try await cliRun(["help", "report"], in: scratch)
        #expect(help.status == 0 && help.stdout.contains("overtime report RUN_DIR"), "\(help)")
        let ok = try await cliRun(["report", empty + "/", "--output=" + scratch.path("r.html")], in: scratch)
        #expect(ok.status == 0 && FileManager.default.fileExists(atPath: scratch.path("r.html")), "\(ok)")
        #expect(!FileManager.default.fileExists(atPath: empty + "/report.html"), "-o is where it goes")
    }

    /// The journal of an array of `count` elements of `/bin/true` at concurrency 8, line
    /// for line as RunJournal writes it (attempt, started, budget, exited, finished; taken
    /// from a real run). Written here rather than run: a real run of 100,000 took 3 min 10 s
    /// on a 2-core machine.
    static func arrayJournal(elements count: Int) -> (journal: String, summary: String) {
        let encoder = EventEncoder(runID: "array-run", wallOffsetNanoseconds: 0)
        let base: Int64 = 1_796_040_000_000
        func time(_ ms: Int64) -> String { encoder.timestamp(MonotonicInstant(nanoseconds: (base + ms) * 1_000_000)) }
        var journal = ""
        journal.reserveCapacity(count * 900)
        // Eight slots, each running one element after the other, 15 ms apiece.
        for i in 0..<count {
            let name = "shard[\(i)]", start = Int64(i / 8) * 15 + Int64(i % 8), end = start + 12
            let head = #"{"time":""#, run = #"","run":"array-run","task":""# + name + #"","event":""#
            let (t0, t1) = (time(start), time(end))
            journal += head + t0 + run + #"attempt","attempt":1}"# + "\n"
            journal += head + t0 + run + #"started","pid":\#(10_000 + i)}"# + "\n"
            journal += head + t0 + run + #"budget","remaining":30,"cause":"start"}"# + "\n"
            journal += head + t1 + run + #"exited","pid":\#(10_000 + i),"exit_code":0,"status":"exited","code":0,"cancel_reason":null,"killed":false,"elapsed":0.012,"progress":null,"result":null,"protocol_errors":0,"ready":false,"outcome":"succeeded","oom_kills":0,"peak_memory":\#(16_000_000 + i % 500_000),"memory_source":"cgroup","cpu_user":0.001,"cpu_system":0.001}"# + "\n"
            journal += head + t1 + run + #"finished","state":"succeeded","exit_code":0,"attempts":1}"# + "\n"
        }
        let last = Int64(count / 8) * 15 + 20
        let summary = #"{"run":"array-run","finished":"\#(time(last + 5))","elapsed":\#(Double(last) / 1000),"succeeded":true,"stopped_by":null,"tasks":[]}"#
        return (journal, summary + "\n")
    }

    /// A journal of `tasks` tasks as a batch of concurrency 16 with 4 GPUs would write it:
    /// every 40th fails, every 37th is cancelled for timeout, every 101st is retried once.
    static func bigJournal(tasks count: Int) -> (journal: String, summary: String) {
        let encoder = EventEncoder(runID: "big-run", wallOffsetNanoseconds: 0)
        let base: Int64 = 1_796_040_000_000
        func time(_ ms: Int64) -> String { encoder.timestamp(MonotonicInstant(nanoseconds: (base + ms) * 1_000_000)) }
        var lines: [(Int64, String)] = []
        var laneFree = [Int64](repeating: 0, count: 16)
        func record(_ ms: Int64, _ task: String, _ event: String, _ fields: String) {
            lines.append((ms, #"{"time":"\#(time(ms))","run":"big-run","task":"\#(task)","event":"\#(event)","# + fields + "}"))
        }
        for i in 0..<count {
            let name = String(format: "shard-%05d", i)
            let lane = laneFree.indices.min { laneFree[$0] < laneFree[$1] }!
            var start = laneFree[lane] + 3
            let attempts = i % 101 == 0 ? 2 : 1
            for attempt in 1...attempts {
                let length = Int64(400 + (i * 7919 + attempt * 31) % 5000)
                let end = start + length
                let gpu = lane < 4 ? #","resources":{"gpu":["\#(lane)"]}"# : ""
                record(start, name, "attempt", #""attempt":\#(attempt)"# + gpu)
                record(start + 2, name, "started", #""pid":\#(10_000 + i)"#)
                for step in 1...8 {
                    record(start + length * Int64(step) / 10, name, "progress", #""completed":\#(step),"total":10,"title":"Shard \#(i)","remaining":30"#)
                }
                let peak = #""peak_memory":\#(1_000_000 + (i * 104_729) % 900_000_000),"memory_source":"cgroup""#
                if attempt < attempts {
                    record(end, name, "exited", #""exit_code":1,"outcome":"failed","cancel_reason":null,"# + peak)
                    record(end, name, "retry", #""attempt":2,"after":0.1,"because":"exit 1","outcome":"failed""#)
                } else if i % 37 == 0 {
                    record(end - 10, name, "cancel", #""reason":"timeout","grace":10"#)
                    record(end, name, "exited", #""exit_code":124,"outcome":"cancelled","cancel_reason":"timeout","# + peak)
                    record(end, name, "finished", #""state":"failed","reason":"timeout","exit_code":124,"attempts":\#(attempts)"#)
                } else if i % 40 == 0 {
                    record(end, name, "exited", #""exit_code":2,"outcome":"failed","cancel_reason":null,"# + peak)
                    record(end, name, "finished", #""state":"failed","reason":"exit","detail":"exit 2","exit_code":2,"attempts":\#(attempts)"#)
                } else {
                    record(end, name, "exited", #""exit_code":0,"outcome":"succeeded","cancel_reason":null,"progress":{"completed":10,"total":10},"# + peak)
                    record(end, name, "finished", #""state":"succeeded","exit_code":0,"attempts":\#(attempts)"#)
                }
                start = end + 100
                laneFree[lane] = end
            }
        }
        lines.sort { $0.0 < $1.0 }
        let last = lines.last?.0 ?? 0
        let summary = #"{"run":"big-run","finished":"\#(time(last + 5))","elapsed":\#(Double(last) / 1000),"succeeded":false,"stopped_by":null,"tasks":[]}"#
        return (lines.map(\.1).joined(separator: "\n") + "\n", summary + "\n")
    }
}

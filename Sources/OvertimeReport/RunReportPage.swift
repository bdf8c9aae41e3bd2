import OvertimeProtocol

/// A `RunReport` as one self-contained HTML page: its style and script inline, the run's
/// data embedded as JSON, nothing fetched from anywhere (docs/report.md).
///
/// The page itself is `Page/page.html`, `page.css` and `page.js`, made into `PageText` at
/// build time (the ReportPage plugin); this puts the run's title and data into it. Its
/// timeline is drawn on a canvas, and only its visible lanes, so 5,000 tasks cost a few
/// thousand rectangles a frame; its task table renders only the rows in view. The outcome
/// colours in page.css and page.js are the ones docs/report.md lists, and the
/// tests look for them in screenshots: change them together.
public enum RunReportPage {
    /// The whole page.
    public static func html(_ report: RunReport) -> [UInt8] {
        let title = "Overtime run " + (report.runID ?? "(no run id)")
        var page: [UInt8] = []
        page.reserveCapacity(64 * 1024 + report.tasks.count * 400)
        page += PageText.beforeTitle.utf8
        page += htmlEscaped(title).utf8
        page += PageText.titleToData.utf8
        page += embeddedJSON(report)
        page += PageText.afterData.utf8
        return page
    }

    /// The run's data as JSON that can sit inside a `<script>` element whatever a task
    /// named itself or printed: every `<`, `>` and `&` (which JSONWriter writes only inside
    /// strings) becomes its `\u` escape, so no `</script>` or `<!--` can appear in it.
    public static func embeddedJSON(_ report: RunReport) -> [UInt8] {
        let json = dataJSON(report)
        var escaped: [UInt8] = []
        escaped.reserveCapacity(json.count + 64)
        for byte in json {
            switch byte {
            case UInt8(ascii: "<"): escaped += Array("\\u003c".utf8)
            case UInt8(ascii: ">"): escaped += Array("\\u003e".utf8)
            case UInt8(ascii: "&"): escaped += Array("\\u0026".utf8)
            default: escaped.append(byte)
            }
        }
        return escaped
    }

    /// The data the page's script draws from. Times are milliseconds after the run's start.
    static func dataJSON(_ report: RunReport) -> [UInt8] {
        var w = JSONWriter(capacity: 1024 + report.tasks.count * 300)
        w.beginObject()
        w.key("run"); optional(report.runID, &w)
        w.key("runs")
        w.beginArray()
        for run in report.runs {
            w.beginObject(); w.key("id"); w.string(run.id); w.key("start"); w.int(Int(run.start)); w.endObject()
        }
        w.endArray()
        w.key("startedAt"); w.int(Int(report.startedAt))
        w.key("end"); w.int(Int(report.endedAt))
        w.key("complete"); w.bool(report.complete)
        w.key("stoppedBy"); optional(report.stoppedBy, &w)
        w.key("concurrency"); optional(report.concurrency, &w)
        w.key("lines"); w.int(report.lines)
        w.key("unreadable"); w.int(report.unreadableLines)
        w.key("lanes")
        w.beginArray()
        for lane in report.lanes {
            w.beginObject()
            w.key("label"); w.string(lane.label)
            w.key("gpu"); optional(lane.gpu, &w)
            w.endObject()
        }
        w.endArray()
        w.key("tasks")
        w.beginArray()
        for task in report.tasks { write(task, into: &w) }
        w.endArray()
        w.endObject()
        return w.bytes
    }

    private static func write(_ task: RunReport.Task, into w: inout JSONWriter) {
        w.beginObject()
        w.key("name"); w.string(task.name)
        w.key("state"); w.string(task.state.rawValue)
        w.key("outcome"); w.string(task.outcome.rawValue)
        w.key("reason"); optional(task.reason, &w)
        w.key("detail"); optional(task.detail, &w)
        w.key("exit"); optional(task.exitCode, &w)
        w.key("finished"); optional(task.finishedAt.map { Int($0) }, &w)
        w.key("result"); optional(task.result, &w)
        w.key("resumed"); w.bool(task.resumed)
        w.key("peak"); optional(task.peakMemory, &w)
        w.key("attempts")
        w.beginArray()
        for attempt in task.attempts {
            w.beginObject()
            w.key("n"); w.int(attempt.number)
            w.key("start"); w.int(Int(attempt.start))
            w.key("end"); optional(attempt.end.map { Int($0) }, &w)
            w.key("outcome"); w.string(attempt.outcome.rawValue)
            w.key("as"); optional(attempt.exitedAs, &w)
            w.key("exit"); optional(attempt.exitCode, &w)
            w.key("cancel"); optional(attempt.cancelReason, &w)
            w.key("why"); optional(attempt.cancelWhy, &w)
            w.key("lanes"); w.beginArray(); for lane in attempt.lanes { w.int(lane) }; w.endArray()
            w.key("gpus"); w.beginArray(); for gpu in attempt.gpus { w.string(gpu) }; w.endArray()
            w.key("peak"); optional(attempt.peakMemory, &w)
            w.key("source"); optional(attempt.memorySource, &w)
            w.key("title"); optional(attempt.title, &w)
            w.key("detail"); optional(attempt.detail, &w)
            w.key("reporter"); optional(attempt.reporter, &w)
            w.key("retry"); optional(attempt.retryBecause, &w)
            // [time, kind, text] and [time, fraction, time, fraction, …]: flat, for size.
            w.key("marks")
            w.beginArray()
            for mark in attempt.marks {
                w.beginArray(); w.int(Int(mark.time)); w.string(mark.kind.rawValue); w.string(mark.text); w.endArray()
            }
            w.endArray()
            w.key("moreMarks"); w.int(attempt.moreMarks)
            w.key("progress")
            w.beginArray()
            for point in attempt.progress { w.int(Int(point.time)); w.seconds(point.fraction) }
            w.endArray()
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    private static func optional(_ value: String?, _ w: inout JSONWriter) {
        if let value { w.string(value) } else { w.null() }
    }

    private static func optional(_ value: Int?, _ w: inout JSONWriter) {
        if let value { w.int(value) } else { w.null() }
    }

    static func htmlEscaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}

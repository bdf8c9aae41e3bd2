import OvertimeProtocol

/// A `RunReport` as one self-contained HTML page: its style and scripts inline, the run's
/// data embedded as JSON, nothing fetched from anywhere (docs/report.md).
///
/// The page itself is `Page/page.html`, `page.css`, `common.js`, `groups.js`, `phases.js` and
/// `page.js`, made into `PageText` at build time (the PageBundle plugin); this puts the run's
/// title and data into it. Its timeline is drawn on a canvas, and only its visible lanes, so 5,000 tasks
/// cost a few thousand rectangles a frame; its task table renders only the rows in view.
/// The outcome colours in page.css and page.js are the ones docs/report.md lists, and the
/// tests look for them in screenshots: change them together.
public enum RunReportPage {
    /// The whole page.
    public static func html(_ report: RunReport) -> [UInt8] {
        let title = "Overtime run " + (report.runID ?? "(no run id)")
        var page: [UInt8] = []
        page.reserveCapacity(64 * 1024 + report.tasks.count * 400)
        page += PageText.pieces[0].utf8
        page += htmlEscaped(title).utf8
        page += PageText.pieces[1].utf8
        page += embeddedJSON(report)
        page += PageText.pieces[2].utf8
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
        w.key("logs"); optional(report.logDirectory, &w)
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
        if !report.phaseNames.isEmpty {
            w.key("phases"); w.beginArray(); for name in report.phaseNames { w.string(name) }; w.endArray()
        }
        w.key("groups")
        w.beginArray()
        for group in report.groups {
            w.beginObject()
            w.key("name"); w.string(group.name)
            w.key("kind"); w.string(group.kind.rawValue)
            w.key("keys"); w.beginArray(); for key in group.keys { w.string(key) }; w.endArray()
            w.key("position"); w.int(group.position)
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

    // A field that holds its default (nil, false, 0, empty, an attempt's outcome word that is
    // its outcome) is left out, and the page's script puts the default back: a run of
    // 100,000 elements of `true` makes a page a third the size it would be.
    private static func write(_ task: RunReport.Task, into w: inout JSONWriter) {
        w.beginObject()
        w.key("name"); w.string(task.name)
        w.key("state"); w.string(task.state.rawValue)
        if task.outcome != task.state { w.key("outcome"); w.string(task.outcome.rawValue) }
        omittable("reason", task.reason, &w)
        omittable("detail", task.detail, &w)
        omittable("exit", task.exitCode, &w)
        omittable("finished", task.finishedAt.map { Int($0) }, &w)
        omittable("result", task.result, &w)
        if !task.resultFields.isEmpty {
            // [key, value, key, value, …]: a task's keys are no object's members in the page.
            w.key("fields")
            w.beginArray()
            for field in task.resultFields { w.string(field.key); w.value(field.value) }
            w.endArray()
        }
        if task.resumed { w.key("resumed"); w.bool(true) }
        // Most logs are named as their tasks are: the page puts that name back.
        if task.logFile != task.name + ".log" { w.key("log"); w.string(task.logFile) }
        if task.diagnosed { w.key("diagnosed"); w.bool(true) }
        omittable("diagnosis", task.diagnosis, &w)
        if task.straggler { w.key("straggler"); w.bool(true) }
        omittable("group", task.group, &w)
        if !task.parameters.isEmpty {
            w.key("params")
            w.beginArray()
            for parameter in task.parameters { w.string(parameter.key); w.string(parameter.value) }
            w.endArray()
        }
        w.key("attempts")
        w.beginArray()
        for attempt in task.attempts {
            w.beginObject()
            w.key("n"); w.int(attempt.number)
            w.key("start"); w.int(Int(attempt.start))
            omittable("end", attempt.end.map { Int($0) }, &w)
            w.key("outcome"); w.string(attempt.outcome.rawValue)
            if attempt.exitedAs != attempt.outcome.rawValue { omittable("as", attempt.exitedAs, &w) }
            omittable("exit", attempt.exitCode, &w)
            omittable("cancel", attempt.cancelReason, &w)
            omittable("why", attempt.cancelWhy, &w)
            w.key("lanes"); w.beginArray(); for lane in attempt.lanes { w.int(lane) }; w.endArray()
            if !attempt.gpus.isEmpty { w.key("gpus"); w.beginArray(); for gpu in attempt.gpus { w.string(gpu) }; w.endArray() }
            omittable("peak", attempt.peakMemory, &w)
            omittable("max", attempt.memoryMax, &w)
            omittable("source", attempt.memorySource, &w)
            omittable("title", attempt.title, &w)
            omittable("detail", attempt.detail, &w)
            omittable("reporter", attempt.reporter, &w)
            omittable("retry", attempt.retryBecause, &w)
            // [time, kind, text] and [time, fraction, time, fraction, …]: flat, for size.
            if !attempt.marks.isEmpty {
                w.key("marks")
                w.beginArray()
                for mark in attempt.marks {
                    w.beginArray(); w.int(Int(mark.time)); w.string(mark.kind.rawValue); w.string(mark.text); w.endArray()
                }
                w.endArray()
            }
            if attempt.moreMarks > 0 { w.key("moreMarks"); w.int(attempt.moreMarks) }
            // [time, name, time, name, …] (a name is a place in `phases`) and
            // [start, end, start, end, …] (end null while it did not resume).
            if !attempt.phases.isEmpty {
                w.key("phases"); w.beginArray(); for p in attempt.phases { w.int(Int(p.time)); w.int(p.name) }; w.endArray()
            }
            if attempt.morePhases > 0 { w.key("morePhases"); w.int(attempt.morePhases) }
            if !attempt.stalls.isEmpty {
                w.key("stalls"); w.beginArray(); for s in attempt.stalls { w.int(Int(s.start)); optional(s.end.map { Int($0) }, &w) }; w.endArray()
            }
            if !attempt.progress.isEmpty {
                w.key("progress")
                w.beginArray()
                for point in attempt.progress { w.int(Int(point.time)); w.seconds(point.fraction) }
                w.endArray()
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    private static func omittable(_ key: String, _ value: String?, _ w: inout JSONWriter) {
        if let value { w.key(key); w.string(value) }
    }

    private static func omittable(_ key: String, _ value: Int?, _ w: inout JSONWriter) {
        if let value { w.key(key); w.int(value) }
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

import Overtime
import OvertimeProtocol

/// One line for the terminal: its text (with SGR sequences when colour is on) and the
/// columns it takes on screen (escape sequences take none).
struct StyledLine: Sendable, Equatable {
    private(set) var text = ""
    private(set) var width = 0
    let color: Bool

    init(color: Bool) {
        self.color = color
    }

    /// Text without escape sequences, as a person reads it.
    var plain: String {
        var out = ""
        var inEscape = false
        for scalar in text.unicodeScalars {
            if inEscape {
                if scalar == "m" { inEscape = false }
            } else if scalar == "\u{1B}" {
                inEscape = true
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Appends `s` (already sanitized and measured to fit) in `style`, an SGR parameter list
    /// such as `"1"` or `"33;1"`.
    mutating func add(_ s: String, _ style: String? = nil) {
        guard !s.isEmpty else { return }
        if color, let style {
            text += "\u{1B}[\(style)m" + s + "\u{1B}[0m"
        } else {
            text += s
        }
        width += TextWidth.columns(s)
    }

    mutating func space(_ n: Int) {
        if n > 0 { add(String(repeating: " ", count: n)) }
    }
}

/// SGR parameters the display uses.
enum SGR {
    static let bold = "1"
    static let dim = "2"
    static let red = "31"
    static let green = "32"
    static let yellow = "33"
    static let cyan = "36"
    static let boldRed = "1;31"
    static let boldYellow = "1;33"
    static let boldGreen = "1;32"
}

/// Turns the display model into lines: the live rows at a given width and time, the notice
/// lines printed above them, the closing summary. Pure: the same inputs give the same
/// lines, which is what the unit tests check.
struct DisplayRenderer: Sendable {
    var capabilities: DisplayCapabilities

    /// Columns a name takes at most in the rows.
    static let maxNameWidth = 24
    static let barMin = 5
    static let barTarget = 20
    static let barMax = 40
    static let textMin = 8
    /// The spinner and sweep advance once per this much time.
    static let frameInterval: Int64 = 100_000_000

    private var unicode: Bool { capabilities.unicode }

    /// Text from a task as a row shows it: without control characters, and without a
    /// UTF-8 locale, with `?` for each character that is not ASCII (its width is anyone's
    /// guess on such a terminal).
    func shown(_ text: String) -> String {
        let safe = TextWidth.sanitize(text)
        guard !unicode, !safe.utf8.allSatisfy({ $0 < 0x80 }) else { return safe }
        return String(safe.map { $0.isASCII ? $0 : "?" })
    }

    // MARK: Live rows

    /// The cells of one row before layout.
    struct Cells: Equatable {
        var name: String
        var title: String
        var detail: String
        var fraction: Double?
        var count: String
        var elapsed: String
        var budget: String
        var budgetStyle: String?
        var barStyle: String
        var eta: String
    }

    /// `2 ranks`, `3 reporters`: how many processes report, when more than one does.
    static func reporting(_ task: LiveTask, _ p: Progress?) -> String? {
        let n = p?.reporting ?? task.reporters
        guard n > 1 else { return nil }
        return ReporterWords.count(n, names: ReporterWords.shownReporter(p).map { [$0] } ?? [])
    }

    func cells(_ task: LiveTask, now: MonotonicInstant) -> Cells {
        let p = task.progress
        var count = ""
        if let c = p?.completed { count = p?.total.map { "\(c)/\($0)" } ?? "\(c)" }
        var budget = ""
        var budgetStyle: String?
        var barStyle = SGR.green
        switch task.budget(at: now) {
        case .unlimited:
            break
        case let .left(d, urgent):
            budget = "left \(DisplayFormat.clock(d, roundingUp: true))"
            if urgent {
                budgetStyle = SGR.boldYellow
                barStyle = SGR.yellow
            }
        case let .cancelling(reason, killIn):
            budget = "cancel: \(reason.rawValue)" + (killIn.map { ", kill in \(DisplayFormat.clock($0, roundingUp: true))" } ?? "")
            budgetStyle = SGR.boldRed
            barStyle = SGR.red
        case .killing:
            budget = "killing"
            budgetStyle = SGR.boldRed
            barStyle = SGR.red
        case let .stalled(d):
            budget = "stalled \(DisplayFormat.clock(d))"
            budgetStyle = SGR.boldYellow
            barStyle = SGR.yellow
        }
        let eta = task.cancelling == nil ? task.rate.eta(at: now).map { "eta \(DisplayFormat.clock($0, roundingUp: true))" } ?? "" : ""
        var name = shown(task.name)
        if task.attempt > 1 { name += " #\(task.attempt)" }
        return Cells(
            name: name,
            title: shown([task.phase, ReporterWords.shownReporter(p), p?.title].compactMap { $0 }.joined(separator: " · ")),
            detail: shown([task.straggler ? "straggler" : nil, p?.detail, Self.reporting(task, p)].compactMap { $0 }.joined(separator: " · ")),
            fraction: p?.fractionCompleted,
            count: count,
            elapsed: DisplayFormat.clock(task.elapsed(at: now)),
            budget: budget,
            budgetStyle: budgetStyle,
            barStyle: barStyle,
            eta: eta
        )
    }

    /// The columns of one frame, shared by every row so that they line up.
    struct Layout: Equatable {
        var gap: Int
        var name: Int
        var text: Int = 0
        var bar: Int = 0
        var percent = 4
        var count: Int = 0
        var elapsed: Int = 0
        var budget: Int = 0
        var eta: Int = 0
    }

    /// Fits the columns into `width`. Name and percent always; then, as room allows, the
    /// budget left, the bar, the elapsed time, the title, the ETA, the count. The columns
    /// that change width from one update to the next (title and detail) come last, so
    /// nothing to their left moves when they do.
    func layout(_ rows: [Cells], width: Int) -> Layout {
        let width = max(1, width)
        let gap = width >= 60 ? 2 : 1
        let widest = { (key: (Cells) -> String) in rows.map { TextWidth.columns(key($0)) }.max() ?? 0 }
        let textWidth = rows.map { TextWidth.columns(Self.text($0)) }.max() ?? 0
        var layout = Layout(gap: gap, name: max(1, min(widest(\.name), Self.maxNameWidth, max(6, width / 4))))
        let barMin = unicode ? Self.barMin : Self.barMin + 2

        enum Field { case budget, bar, elapsed, text, eta, count }
        var wanted: [(Field, Int)] = []
        if widest(\.budget) > 0 { wanted.append((.budget, max(widest(\.budget), 8))) }
        wanted.append((.bar, barMin))
        wanted.append((.elapsed, max(widest(\.elapsed), 2)))
        if textWidth > 0 { wanted.append((.text, min(textWidth, Self.textMin))) }
        // Room for an ETA as soon as a task has a share done, before there is an estimate.
        if rows.contains(where: { $0.fraction != nil }) { wanted.append((.eta, max(widest(\.eta), 6))) }
        if widest(\.count) > 0 { wanted.append((.count, widest(\.count))) }

        var used = layout.name + gap + layout.percent
        var kept: [(Field, Int)] = []
        for (field, need) in wanted where used + gap + need <= width {
            kept.append((field, need))
            used += gap + need
        }
        if used > width { layout.name = max(1, width - gap - layout.percent) }
        for (field, need) in kept {
            switch field {
            case .budget: layout.budget = need
            case .bar: layout.bar = need
            case .elapsed: layout.elapsed = need
            case .text: layout.text = need
            case .eta: layout.eta = need
            case .count: layout.count = need
            }
        }
        var extra = max(0, width - used)
        func grow(_ value: inout Int, upTo limit: Int) {
            let g = min(extra, max(0, limit - value))
            value += g
            extra -= g
        }
        if layout.bar > 0 {
            let target = layout.text > 0 ? min(Self.barTarget + 10, max(barMin, width / 4)) : Self.barMax
            grow(&layout.bar, upTo: target)
        }
        if layout.text > 0 { grow(&layout.text, upTo: .max) }
        return layout
    }

    static func text(_ cells: Cells) -> String {
        switch (cells.title.isEmpty, cells.detail.isEmpty) {
        case (false, false): return cells.title + " - " + cells.detail  // " · " and " - " are as wide
        case (false, true): return cells.title
        case (true, false): return cells.detail
        case (true, true): return ""
        }
    }

    /// `name  ████▌░░░  45%  450/1000  1m05s  left 25s  eta 1m20s  title · detail`
    func row(_ c: Cells, _ layout: Layout, frame: Int) -> StyledLine {
        var line = StyledLine(color: capabilities.color)
        let ellipsis = unicode ? "…" : "~"
        line.add(TextWidth.pad(TextWidth.truncate(c.name, to: layout.name, ellipsis: ellipsis), to: layout.name), SGR.bold)
        if layout.bar > 0 {
            line.space(layout.gap)
            if let f = c.fraction {
                let (filled, empty) = DisplayFormat.bar(f, width: layout.bar, unicode: unicode)
                line.add(filled, c.barStyle)
                line.add(empty, SGR.dim)
            } else {
                let (before, block, after) = DisplayFormat.sweep(frame: frame, width: layout.bar, unicode: unicode)
                line.add(before, SGR.dim)
                line.add(block, c.barStyle)
                line.add(after, SGR.dim)
            }
        }
        line.space(layout.bar > 0 ? 1 : layout.gap)
        let percent = c.fraction.map(DisplayFormat.percent) ?? DisplayFormat.spinner(frame: frame, unicode: unicode)
        line.add(TextWidth.pad(percent, to: layout.percent, alignRight: true), c.fraction == nil ? SGR.cyan : SGR.bold)
        if layout.count > 0 {
            line.space(layout.gap)
            line.add(TextWidth.pad(c.count, to: layout.count, alignRight: true), SGR.dim)
        }
        if layout.elapsed > 0 {
            line.space(layout.gap)
            line.add(TextWidth.pad(c.elapsed, to: layout.elapsed, alignRight: true))
        }
        if layout.budget > 0 {
            line.space(layout.gap)
            line.add(TextWidth.pad(c.budget, to: layout.budget), c.budgetStyle)
        }
        if layout.eta > 0 {
            line.space(layout.gap)
            line.add(TextWidth.pad(c.eta, to: layout.eta), SGR.dim)
        }
        if layout.text > 0, !(c.title.isEmpty && c.detail.isEmpty) {
            line.space(layout.gap)
            let title = TextWidth.truncate(c.title, to: layout.text, ellipsis: ellipsis)
            line.add(title)
            let room = layout.text - TextWidth.columns(title)
            if !c.detail.isEmpty {
                let separator = c.title.isEmpty ? "" : (unicode ? " · " : " - ")
                let separatorWidth = TextWidth.columns(separator)
                if room > separatorWidth {
                    line.add(separator, SGR.dim)
                    line.add(TextWidth.truncate(c.detail, to: room - separatorWidth, ellipsis: ellipsis), SGR.dim)
                }
            }
        }
        return line
    }

    /// The live region: pending partial output lines, one row per running task (as many
    /// as fit in `height`), a batch's status line. Every line is at most `columns - 1`
    /// wide: the last column stays empty, so no terminal wraps a row.
    func rows(_ model: DisplayModel, now: MonotonicInstant, columns: Int, height: Int, partialOutput: [String] = []) -> [StyledLine] {
        let width = max(1, columns - 1)
        let frame = Int(now.nanoseconds / Self.frameInterval)
        var lines: [StyledLine] = []
        for text in partialOutput {
            var line = StyledLine(color: capabilities.color)
            line.add(TextWidth.truncate(shown(text), to: width, ellipsis: unicode ? "…" : "~"))
            lines.append(line)
        }
        let status = model.batch.map { statusLine($0, running: model.running.count, now: now, width: width) }
        let room = max(1, height - 1 - lines.count - (status == nil ? 0 : 1))
        var tasks = model.running
        var hidden = 0
        var sweeps: [StyledLine] = []
        if tasks.count > room {
            // The elements of a sweep fold into one row, the one furthest behind standing
            // for them, before any row is left out.
            let (kept, folded) = Self.fold(tasks)
            tasks = kept
            sweeps = folded.map { foldedRow($0, counts: model.batch?.sweeps[$0.sweep], width: width) }
            let rowsLeft = max(1, room - sweeps.count)
            if tasks.count > rowsLeft {
                hidden = tasks.count - (rowsLeft - 1)
                tasks = Array(tasks.prefix(rowsLeft - 1))
            }
        }
        let all = tasks.map { self.cells($0, now: now) }
        let columnsLayout = self.layout(all, width: width)
        for c in all {
            var line = row(c, columnsLayout, frame: frame)
            if line.width > width {
                // Narrower than a name and a percent: plain text, cut to fit.
                let text = TextWidth.take(line.plain, width)
                line = StyledLine(color: capabilities.color)
                line.add(text)
            }
            lines.append(line)
        }
        lines += sweeps
        if hidden > 0 {
            var more = StyledLine(color: capabilities.color)
            more.add(TextWidth.truncate("… and \(hidden) more running", to: width, ellipsis: unicode ? "…" : "~"), SGR.dim)
            lines.append(more)
        }
        if let status { lines.append(status) }
        return lines
    }

    /// The running elements of one sweep, shown as one row.
    struct FoldedSweep {
        var sweep: String
        var running: [LiveTask]
    }

    /// The running tasks less the elements of each sweep with more than one running, and
    /// those sweeps, in the order their first element started.
    static func fold(_ tasks: [LiveTask]) -> (kept: [LiveTask], folded: [FoldedSweep]) {
        var bySweep: [String: [LiveTask]] = [:]
        for task in tasks {
            if let sweep = LiveTask.sweep(ofElement: task.name) { bySweep[sweep, default: []].append(task) }
        }
        var kept: [LiveTask] = []
        var folded: [FoldedSweep] = []
        for task in tasks {
            guard let sweep = LiveTask.sweep(ofElement: task.name), let elements = bySweep[sweep], elements.count > 1 else {
                kept.append(task)
                continue
            }
            if elements[0].id == task.id { folded.append(FoldedSweep(sweep: sweep, running: elements)) }
        }
        return (kept, folded)
    }

    /// `shard[…]  8 running · 120/1000 done · furthest behind: shard[17] 12%`
    func foldedRow(_ folded: FoldedSweep, counts: DisplayModel.BatchCounts.SweepCount?, width: Int) -> StyledLine {
        var line = StyledLine(color: capabilities.color)
        var text = "\(folded.sweep)[\(unicode ? "…" : "...")]  \(folded.running.count) running"
        if let counts { text += (unicode ? " · " : ", ") + "\(counts.finished)/\(counts.total) done" }
        let behind = folded.running.min { ($0.progress?.fractionCompleted ?? 0) < ($1.progress?.fractionCompleted ?? 0) }
        if let behind, let fraction = behind.progress?.fractionCompleted {
            text += (unicode ? " · " : ", ") + "furthest behind: \(behind.name) \(Int(fraction * 100))%"
        }
        line.add(TextWidth.truncate(shown(text), to: width, ellipsis: unicode ? "…" : "~"))
        return line
    }

    /// `3 running · 4 waiting · 1 to retry · 2 succeeded · 1 failed · 1m05s`
    func statusLine(_ batch: DisplayModel.BatchCounts, running: Int, now: MonotonicInstant, width: Int) -> StyledLine {
        var line = StyledLine(color: capabilities.color)
        let retrying = batch.retrying.count
        let waiting = max(0, batch.total - batch.finished - running - retrying)
        var parts: [(String, String?)] = [("\(running) running", SGR.bold)]
        if waiting > 0 { parts.append(("\(waiting) waiting", nil)) }
        if retrying > 0 { parts.append(("\(retrying) to retry", SGR.yellow)) }
        if batch.succeeded > 0 { parts.append(("\(batch.succeeded) succeeded", SGR.green)) }
        if batch.failed > 0 { parts.append(("\(batch.failed) failed", SGR.red)) }
        if batch.skipped > 0 { parts.append(("\(batch.skipped) skipped", SGR.yellow)) }
        parts.append((DisplayFormat.clock(now - batch.startedAt), SGR.dim))
        let separator = unicode ? " · " : ", "
        var used = 0
        for (i, (text, style)) in parts.enumerated() {
            let piece = (i == 0 ? "" : separator) + text
            let w = TextWidth.columns(piece)
            guard used + w <= width else { break }
            if i > 0 { line.add(separator, SGR.dim) }
            line.add(text, style)
            used += w
        }
        return line
    }

    // MARK: Lines above the rows

    /// A notice as a line above the rows: `✓ name: succeeded in 5.2s`. Long notices are
    /// not cut: they are printed once and the terminal wraps them.
    func notice(_ notice: Notice) -> StyledLine {
        var line = StyledLine(color: capabilities.color)
        let (mark, style): (String, String) = switch notice.tone {
        case .success: (unicode ? "✓" : "+", SGR.boldGreen)
        case .failure: (unicode ? "✗" : "x", SGR.boldRed)
        case .warning: ("!", SGR.boldYellow)
        case .info: (unicode ? "·" : "-", SGR.dim)
        }
        line.add(mark, style)
        line.space(1)
        if let task = notice.task {
            line.add(shown(task), SGR.bold)
            line.add(": ")
        } else if case let .summary(text, _) = notice {
            line.add(text, SGR.bold)
            return line
        } else {
            line.add("overtime: ", SGR.dim)
        }
        line.add(shown(notice.message), notice.tone == .failure ? SGR.red : nil)
        return line
    }

    /// Whether a notice gets a line in `tty` mode: starts are left to the rows.
    static func showsInTTY(_ notice: Notice) -> Bool {
        if case .started = notice { return false }
        return true
    }
}

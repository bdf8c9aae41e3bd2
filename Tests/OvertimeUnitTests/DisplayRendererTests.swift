// The pure parts of the live display (`overtime run|batch --progress tty`): text widths and
// truncation, bars, durations, the ETA, the budget the display models from events, the
// layout of rows at fixed widths, notices, and the choice of mode and capabilities.

import Testing
@testable import Overtime
@testable import OvertimeCLI
import OvertimeProtocol

private func at(_ seconds: Double) -> MonotonicInstant {
    MonotonicInstant(nanoseconds: Int64(seconds * 1e9))
}

private let unicodeColor = DisplayCapabilities(color: true, unicode: true)
private let unicodePlain = DisplayCapabilities(color: false, unicode: true)
private let asciiPlain = DisplayCapabilities(color: false, unicode: false)

private func event(_ id: Int, _ name: String, _ time: Double, _ kind: TaskEvent.Kind) -> TaskEvent {
    TaskEvent(task: TaskRef(id: id, name: name), time: at(time), kind: kind)
}

/// A model with one task started at t=0 under `policy`, with the start budget event.
private func model(_ name: String = "train", policy: BudgetPolicy = .default, id: Int = 1) -> DisplayModel {
    var m = DisplayModel()
    m.policies[name] = policy
    _ = m.apply(event(id, name, 0, .started(pid: 100 + Int32(id))))
    _ = m.apply(event(id, name, 0, .budgetChanged(remaining: policy.budget, cause: .start)))
    return m
}

@Suite("Display: text width and truncation")
struct DisplayTextWidthTests {
    @Test("ASCII, accents, wide CJK, emoji and combining marks take the columns a terminal gives them")
    func widths() {
        #expect(TextWidth.columns("hello") == 5)
        #expect(TextWidth.columns("héllo") == 5)
        #expect(TextWidth.columns("e\u{301}") == 1, "e + combining acute is one column")
        #expect(TextWidth.columns("日本語") == 6)
        #expect(TextWidth.columns("🚀") == 2)
        #expect(TextWidth.columns("👩‍💻") == 2, "a ZWJ sequence is one wide character")
        #expect(TextWidth.columns("█░▏") == 3)
        #expect(TextWidth.columns("") == 0)
    }

    @Test("truncation counts columns, ends in an ellipsis, never splits a character")
    func truncation() {
        #expect(TextWidth.truncate("Resizing images", to: 20) == "Resizing images")
        #expect(TextWidth.truncate("Resizing images", to: 8) == "Resizin…")
        #expect(TextWidth.columns(TextWidth.truncate("Resizing images", to: 8)) == 8)
        // A wide character that would straddle the limit is left out whole.
        #expect(TextWidth.truncate("日本語テキスト", to: 6) == "日本…")
        #expect(TextWidth.truncate("日本語テキスト", to: 5) == "日本…")
        #expect(TextWidth.truncate("日本語テキスト", to: 4) == "日…")
        // Combining marks stay with their base.
        let accented = String(repeating: "e\u{301}", count: 10)
        let cut = TextWidth.truncate(accented, to: 4)
        #expect(cut == String(repeating: "e\u{301}", count: 3) + "…")
        #expect(cut.unicodeScalars.count == 7)
        #expect(TextWidth.truncate("abc", to: 0) == "")
        #expect(TextWidth.truncate("abcdef", to: 3, ellipsis: "~") == "ab~")
        #expect(TextWidth.truncate("🚀🚀🚀", to: 4) == "🚀…")
    }

    @Test("padding aligns by columns, left or right")
    func padding() {
        #expect(TextWidth.pad("ab", to: 4) == "ab  ")
        #expect(TextWidth.pad("ab", to: 4, alignRight: true) == "  ab")
        #expect(TextWidth.pad("日本", to: 5) == "日本 ")
        #expect(TextWidth.pad("abcdef", to: 4) == "abc…")
    }

    @Test("control characters and escape sequences from a task become spaces")
    func sanitize() {
        #expect(TextWidth.sanitize("a\u{1B}[2Jb") == "a [2Jb")
        #expect(TextWidth.sanitize("line\none\r\t") == "line one  ")
        #expect(TextWidth.sanitize("plain") == "plain")
        #expect(TextWidth.sanitize("\u{9B}31m") == " 31m", "C1 CSI too")
    }
}

@Suite("Display: bars, spinners, durations, ETA")
struct DisplayFormatTests {
    @Test("a Unicode bar fills in eighths and keeps its width")
    func unicodeBar() {
        let empty = DisplayFormat.bar(0, width: 10, unicode: true)
        #expect(empty.filled == "" && empty.empty == String(repeating: "░", count: 10))
        let half = DisplayFormat.bar(0.5, width: 10, unicode: true)
        #expect(half.filled == "█████" && half.empty == "░░░░░")
        let bit = DisplayFormat.bar(0.0625, width: 10, unicode: true)  // 5 eighths of a cell
        #expect(bit.filled == "▋" && TextWidth.columns(bit.filled + bit.empty) == 10)
        let full = DisplayFormat.bar(1, width: 10, unicode: true)
        #expect(full.filled == String(repeating: "█", count: 10) && full.empty == "")
        let over = DisplayFormat.bar(7, width: 4, unicode: true)
        #expect(over.filled == "████")
        let nan = DisplayFormat.bar(.nan, width: 4, unicode: true)
        #expect(nan.filled == "" && nan.empty == "░░░░")
    }

    @Test("an ASCII bar is bracketed and keeps its width")
    func asciiBar() {
        let half = DisplayFormat.bar(0.5, width: 12, unicode: false)
        #expect(half.filled + half.empty == "[#####-----]")
        let full = DisplayFormat.bar(1, width: 6, unicode: false)
        #expect(full.filled + full.empty == "[####]")
        #expect((full.filled + full.empty).allSatisfy { $0.isASCII })
    }

    @Test("the sweep for unknown totals moves back and forth within its width")
    func sweep() {
        var positions: [Int] = []
        for frame in 0..<14 {
            let (before, block, after) = DisplayFormat.sweep(frame: frame, width: 10, unicode: true)
            #expect(TextWidth.columns(before + block + after) == 10)
            positions.append(before.count)
        }
        #expect(positions == [0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3, 2, 1])
        let ascii = DisplayFormat.sweep(frame: 3, width: 10, unicode: false)
        #expect((ascii.before + ascii.block + ascii.after) == "[   ===  ]")
    }

    @Test("spinners cycle; percent never shows 100% before the end")
    func spinnerAndPercent() {
        #expect(DisplayFormat.spinner(frame: 0, unicode: true) == "⠋")
        #expect(DisplayFormat.spinner(frame: 10, unicode: true) == "⠋")
        #expect(DisplayFormat.spinner(frame: 5, unicode: false) == "/")
        #expect(DisplayFormat.percent(0.456) == "45%")
        #expect(DisplayFormat.percent(0.9999) == "99%")
        #expect(DisplayFormat.percent(1) == "100%")
        #expect(DisplayFormat.percent(-3) == "0%")
    }

    @Test("compact durations; countdowns round up")
    func clock() {
        #expect(DisplayFormat.clock(.milliseconds(400)) == "0s")
        #expect(DisplayFormat.clock(.milliseconds(400), roundingUp: true) == "1s")
        #expect(DisplayFormat.clock(.seconds(42)) == "42s")
        #expect(DisplayFormat.clock(.seconds(245)) == "4m05s")
        #expect(DisplayFormat.clock(.seconds(7500)) == "2h05m")
        #expect(DisplayFormat.clock(.seconds(120 * 3600)) == "120h")
        #expect(DisplayFormat.clock(.seconds(-5)) == "0s")
    }

    @Test("ETA from the recent rate, counting down between samples")
    func eta() {
        var rate = RateTracker()
        #expect(rate.eta(at: at(0)) == nil)
        rate.add(0, at: at(0))
        rate.add(0.05, at: at(0.5))
        #expect(rate.eta(at: at(0.5)) == nil, "too short a span to tell")
        rate.add(0.1, at: at(1))
        rate.add(0.2, at: at(2))
        // 10% a second: 80% left is 8 s, from the last sample.
        #expect(rate.eta(at: at(2)).map { abs($0.seconds - 8) < 0.01 } == true, "\(String(describing: rate.eta(at: at(2))))")
        #expect(rate.eta(at: at(5)).map { abs($0.seconds - 5) < 0.01 } == true)
        #expect(rate.eta(at: at(100)) == .zero)
        // Going backwards starts over.
        rate.add(0.1, at: at(3))
        #expect(rate.eta(at: at(3)) == nil)
        // No growth, no estimate.
        var flat = RateTracker()
        flat.add(0.3, at: at(0))
        flat.add(0.3, at: at(5))
        #expect(flat.eta(at: at(5)) == nil)
    }

    @Test("old samples fall out of the window, so the ETA follows a change of pace")
    func etaWindow() throws {
        var rate = RateTracker()
        // Slow for a minute (0.5%/s), then faster (2%/s) for half a minute.
        for s in stride(from: 0.0, through: 60, by: 1) { rate.add(s * 0.005, at: at(s)) }
        for s in stride(from: 61.0, through: 90, by: 1) { rate.add(0.3 + (s - 60) * 0.02, at: at(s)) }
        let eta = try #require(rate.eta(at: at(90)))
        // 10% left at 2%/s is 5 s; the whole run's average would say 0.1 / (0.9 / 90) = 10 s.
        #expect(abs(eta.seconds - 5) < 0.5, "\(eta)")
        #expect(rate.samples.count <= 32)
    }
}

@Suite("Display: the budget as the display models it")
struct DisplayBudgetModelTests {
    @Test("time left counts down from the start budget; progress events set the deadline from the time left they carry")
    func countdownAndProgress() {
        var m = model(policy: BudgetPolicy(budget: .seconds(30), window: .seconds(20)))
        #expect(m.running.first?.budget(at: at(10)) == .left(.seconds(20), urgent: false))
        _ = m.apply(event(1, "train", 12, .progress(Progress(completed: 1, total: 10), remaining: .seconds(20))))
        #expect(m.running.first?.deadline == at(32))
        #expect(m.running.first?.budget(at: at(12)) == .left(.seconds(20), urgent: false))
        #expect(m.running.first?.budget(at: at(30)) == .left(.seconds(2), urgent: false), "a tenth of the window is 2 s")
        #expect(m.running.first?.budget(at: at(31)) == .left(.seconds(1), urgent: true), "under a tenth of the window")
        #expect(m.running.first?.budget(at: at(40)) == .left(.zero, urgent: true), "past the deadline, until the cancel comes")
    }

    @Test("a task that only heartbeats shows its time left: each heartbeat event carries it")
    func heartbeats() {
        var m = model(policy: BudgetPolicy(budget: .seconds(5)))
        _ = m.apply(event(1, "train", 4, .heartbeat(remaining: .seconds(5))))
        #expect(m.running.first?.budget(at: at(6)) == .left(.seconds(3), urgent: false))
        _ = m.apply(event(1, "train", 8, .heartbeat(remaining: .seconds(5))))
        #expect(m.running.first?.budget(at: at(12)) == .left(.seconds(1), urgent: false))
        _ = m.apply(event(1, "train", 9, .heartbeat(remaining: nil)))
        #expect(m.running.first?.budget(at: at(1000)) == .unlimited)
    }

    @Test("budget events set the deadline from their own time; after a cancel nothing moves it")
    func budgetEvents() {
        var m = model(policy: BudgetPolicy(budget: .seconds(10)))
        let notices = m.apply(event(1, "train", 4, .budgetChanged(remaining: .seconds(45), cause: .childExtend(asked: .seconds(45), why: "checkpoint", granted: true))))
        #expect(m.running.first?.deadline == at(49))
        #expect(notices.map(\.text) == ["train: asked for 45s more (checkpoint): granted, 45s left"])
        _ = m.apply(event(1, "train", 10, .budgetChanged(remaining: .seconds(3), cause: .revoke(after: .seconds(3)))))
        #expect(m.running.first?.deadline == at(13))
        _ = m.apply(event(1, "train", 14, .cancelSent(reason: .revoked, grace: .seconds(5))))
        _ = m.apply(event(1, "train", 15, .progress(Progress(completed: 5), remaining: .zero)))
        #expect(m.running.first?.budget(at: at(16)) == .cancelling(.revoked, killIn: .seconds(3)))
    }

    @Test("warn-before highlights; expiring re-syncs; cancel and kill show instead of time left")
    func warningAndCancel() {
        var m = model(policy: BudgetPolicy(budget: .seconds(100), warnBefore: .seconds(30)))
        #expect(m.running.first?.budget(at: at(50)) == .left(.seconds(50), urgent: false))
        #expect(m.running.first?.budget(at: at(75)) == .left(.seconds(25), urgent: true), "inside warn-before")
        let warn = m.apply(event(1, "train", 70, .expiring(remaining: .seconds(30))))
        #expect(warn == [.expiring(task: "train", remaining: .seconds(30))])
        let cancel = m.apply(event(1, "train", 100, .cancelSent(reason: .timeout, grace: .seconds(10))))
        #expect(cancel == [.cancelling(task: "train", reason: .timeout, grace: .seconds(10))])
        #expect(m.running.first?.budget(at: at(104)) == .cancelling(.timeout, killIn: .seconds(6)))
        _ = m.apply(event(1, "train", 110, .killSent))
        #expect(m.running.first?.budget(at: at(111)) == .killing)
    }

    @Test("no budget: unlimited; exited removes the row and says how it ended")
    func unlimitedAndExit() {
        var m = model(policy: BudgetPolicy(budget: nil))
        #expect(m.running.first?.budget(at: at(1000)) == .unlimited)
        let outcome = TaskOutcome(task: TaskRef(id: 1, name: "train"), pid: 101, termination: .exited(0), cancelReason: nil, killed: false,
                                  elapsed: .seconds(12), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
        let notices = m.apply(event(1, "train", 12, .exited(outcome)))
        #expect(m.running.isEmpty)
        #expect(notices.map(\.text) == ["train: succeeded in 12s"])
    }

    @Test("protocol errors: the first three shown, then counted")
    func protocolErrors() {
        var m = model()
        var shown: [Notice] = []
        for i in 0..<6 {
            shown += m.apply(event(1, "train", Double(i), .protocolError(ProtocolError(.notJSON, "not JSON"), excerpt: "garbage\u{1B}[31m")))
        }
        #expect(shown.count == 3)
        #expect(shown.last?.text.contains("further protocol errors are counted") == true)
        #expect(shown.allSatisfy { !$0.text.contains("\u{1B}") }, "an excerpt cannot carry escapes to the terminal")
    }

    @Test("a batch: attempts, retries and ends counted for the status line")
    func batchCounts() {
        var m = DisplayModel()
        m.batch = .init(runID: "r", total: 4, startedAt: at(0))
        _ = m.apply(BatchUpdate.taskEvent(event(1, "a", 0, .started(pid: 1))))
        _ = m.apply(BatchUpdate.started(task: "a", attempt: 1, pid: 1))
        _ = m.apply(BatchUpdate.taskEvent(event(2, "b", 0, .started(pid: 2))))
        _ = m.apply(BatchUpdate.started(task: "b", attempt: 1, pid: 2))
        #expect(m.running.map(\.name) == ["a", "b"])
        let failed = TaskOutcome(task: TaskRef(id: 1, name: "a"), pid: 1, termination: .exited(1), cancelReason: nil, killed: false,
                                 elapsed: .seconds(1), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
        let quiet = m.apply(BatchUpdate.taskEvent(event(1, "a", 1, .exited(failed))))
        #expect(quiet.isEmpty, "a batch reports ends with its own final reports")
        let retry = m.apply(BatchUpdate.retrying(task: "a", attempt: 2, after: .seconds(1), because: "exit 1"))
        #expect(retry.map(\.text) == ["a: exit 1; retrying in 1s (attempt 2)"])
        #expect(m.batch?.retrying == ["a"])
        _ = m.apply(BatchUpdate.taskEvent(event(3, "a", 2, .started(pid: 3))))
        _ = m.apply(BatchUpdate.started(task: "a", attempt: 2, pid: 3))
        #expect(m.running.first { $0.name == "a" }?.attempt == 2)
        #expect(m.batch?.retrying.isEmpty == true)
        let report = TaskReport(name: "b", outcome: .succeeded, reason: nil, detail: nil, exitCode: 0, attempts: 1,
                                duration: .seconds(2), result: nil, resumed: false)
        let done = m.apply(BatchUpdate.finished(report))
        #expect(done.map(\.text) == ["b: succeeded in 2s"])
        #expect(m.batch?.succeeded == 1)
    }

    @Test("a batch's task gets its budget rules with its start, not from a table of every task's")
    func batchRulesComeWithTheStart() {
        var m = DisplayModel()
        m.batch = .init(runID: "r", total: 1_000_000, startedAt: at(0))
        var rules = BudgetPolicy.default
        rules.warnBefore = .seconds(7)
        _ = m.apply(BatchUpdate.taskEvent(event(1, "a", 0, .started(pid: 1))))
        _ = m.apply(BatchUpdate.started(task: "a", attempt: 1, pid: 1, policy: rules))
        #expect(m.running.first?.policy == rules)
        #expect(m.policies.isEmpty)
    }
}

@Suite("Display: rows, notices and the status line")
struct DisplayRendererTests {
    /// A task 45% through, with a title and detail, 30 s left of a 30 s window (its last
    /// progress, at 10 s, moved the deadline to 40 s).
    private func busy(_ name: String = "train", id: Int = 1) -> DisplayModel {
        var m = model(name, policy: BudgetPolicy(budget: .seconds(30)), id: id)
        _ = m.apply(event(id, name, 5, .progress(Progress(completed: 100, total: 1000, title: "Epoch 3", detail: "loss 0.12"), remaining: .seconds(30))))
        _ = m.apply(event(id, name, 10, .progress(Progress(completed: 450, total: 1000, title: "Epoch 3", detail: "loss 0.12"), remaining: .seconds(30))))
        return m
    }

    @Test("a wide row has every column, lined up, within the width")
    func wideRow() {
        let renderer = DisplayRenderer(capabilities: unicodePlain)
        let rows = renderer.rows(busy(), now: at(10), columns: 100, height: 30)
        #expect(rows.count == 1)
        let row = rows[0].plain
        #expect(row.hasPrefix("train  "), "\(row)")
        #expect(row.contains("45%"), "\(row)")
        #expect(row.contains("450/1000"), "\(row)")
        #expect(row.contains("10s"), "elapsed: \(row)")
        #expect(row.contains("left 30s"), "\(row)")
        #expect(row.contains("eta 8s"), "7% a second from 10% to 45% over 5 s; 55% left is 7.9 s: \(row)")
        #expect(row.contains("Epoch 3 · loss 0.12"), "\(row)")
        #expect(row.contains("█"), "\(row)")
        #expect(rows[0].width <= 99, "the last column stays empty: \(rows[0].width)")
        #expect(rows[0].width == TextWidth.columns(row))
        #expect(!rows[0].text.contains("\u{1B}"), "no escapes without colour")
    }

    @Test("every row fits, at every width from 1 to 200 columns, and keeps name and percent")
    func fitsEveryWidth() {
        var m = busy()
        _ = m.apply(event(2, "a-task-with-a-very-long-name-indeed", 0, .started(pid: 2)))
        _ = m.apply(event(2, "a-task-with-a-very-long-name-indeed", 1, .progress(Progress(title: "日本語のタイトルがとても長い場合のテスト", detail: "🚀 détail"), remaining: nil)))
        for caps in [unicodeColor, unicodePlain, asciiPlain] {
            let renderer = DisplayRenderer(capabilities: caps)
            for columns in 1...200 {
                let rows = renderer.rows(m, now: at(10), columns: columns, height: 30)
                #expect(rows.count == 2)
                for row in rows {
                    #expect(row.width <= max(1, columns - 1), "\(columns) columns: \(row.plain) is \(row.width)")
                    #expect(TextWidth.columns(row.plain) == row.width)
                }
                if columns >= 20 {
                    #expect(rows[0].plain.contains("45%"), "\(columns): \(rows[0].plain)")
                    #expect(rows[0].plain.hasPrefix("train"), "\(columns): \(rows[0].plain)")
                }
            }
        }
    }

    @Test("a narrow terminal keeps name, percent and time left; drops the count and ETA, then the title")
    func narrow() {
        let renderer = DisplayRenderer(capabilities: unicodePlain)
        let row = renderer.rows(busy(), now: at(10), columns: 40, height: 30)[0].plain
        #expect(row.contains("train") && row.contains("45%") && row.contains("left 30s") && row.contains("█"), "\(row)")
        #expect(!row.contains("450/1000") && !row.contains("eta"), "\(row)")
        #expect(TextWidth.columns(row) <= 39)
        let narrower = renderer.rows(busy(), now: at(10), columns: 30, height: 30)[0].plain
        #expect(narrower.contains("train") && narrower.contains("45%") && narrower.contains("left 30s"), "\(narrower)")
        #expect(!narrower.contains("Epoch"), "\(narrower)")
        #expect(TextWidth.columns(narrower) <= 29)
    }

    @Test("a task several processes report for says how many, after the bar that moved last")
    func reporters() {
        var m = model(policy: BudgetPolicy(budget: .seconds(30)))
        _ = m.apply(event(1, "train", 1, .progress(Progress(completed: 3, total: 8, title: "shard", detail: "part 3", bar: "w1"), remaining: nil)))
        let renderer = DisplayRenderer(capabilities: unicodePlain)
        #expect(!renderer.rows(m, now: at(1), columns: 120, height: 30)[0].plain.contains("reporters"))
        _ = m.apply(event(1, "train", 1, .reporters(count: 3)))
        let row = renderer.rows(m, now: at(1), columns: 120, height: 30)[0].plain
        #expect(row.contains("shard") && row.contains("part 3 · 3 reporters"), "\(row)")
    }

    @Test("a long title is cut with an ellipsis at a character boundary")
    func longTitle() {
        var m = model(policy: BudgetPolicy(budget: .seconds(30)))
        _ = m.apply(event(1, "train", 1, .progress(Progress(fraction: 0.5, title: "Ünïcödé " + String(repeating: "日本", count: 40)), remaining: nil)))
        let row = DisplayRenderer(capabilities: unicodePlain).rows(m, now: at(1), columns: 80, height: 30)[0]
        #expect(row.plain.hasSuffix("…"), "\(row.plain)")
        #expect(row.plain.contains("Ünïcödé"), "\(row.plain)")
        #expect(row.width <= 79)
    }

    @Test("no total: a spinner instead of a percent, and a sweep instead of a bar")
    func spinner() {
        var m = model(policy: BudgetPolicy(budget: .seconds(30)))
        _ = m.apply(event(1, "train", 1, .progress(Progress(completed: 7, title: "Scanning"), remaining: nil)))
        let renderer = DisplayRenderer(capabilities: unicodePlain)
        let a = renderer.rows(m, now: at(1.0), columns: 100, height: 30)[0].plain
        let b = renderer.rows(m, now: at(1.1), columns: 100, height: 30)[0].plain
        #expect(!a.contains("%"), "\(a)")
        #expect(a != b, "the spinner moves from one frame to the next")
        #expect(DisplayFormat.unicodeSpinner.contains { a.contains($0) }, "\(a)")
        #expect(a.contains(" 7 "), "the count without a total: \(a)")
    }

    @Test("ASCII without a UTF-8 locale: bar, spinner and the task's text")
    func ascii() {
        var m = busy()
        _ = m.apply(event(1, "train", 10, .progress(Progress(completed: 450, total: 1000, title: "Époque 3", detail: "日本"), remaining: .seconds(30))))
        let row = DisplayRenderer(capabilities: asciiPlain).rows(m, now: at(10), columns: 100, height: 30)[0].plain
        #expect(row.allSatisfy { $0.isASCII }, "\(row)")
        #expect(row.contains("[####"), "\(row)")
        #expect(row.contains("?poque 3 - ??"), "\(row)")
    }

    @Test("colour: the budget turns yellow when urgent and red when cancelling; none at all without colour")
    func colours() {
        var m = busy()
        let renderer = DisplayRenderer(capabilities: unicodeColor)
        let calm = renderer.rows(m, now: at(10), columns: 100, height: 30)[0].text
        #expect(calm.contains("\u{1B}[32m"), "a green bar")
        #expect(!calm.contains("\u{1B}[1;33mleft"))
        let urgent = renderer.rows(m, now: at(38), columns: 100, height: 30)[0].text
        #expect(urgent.contains("\u{1B}[1;33mleft 2s"), "\(urgent)")
        _ = m.apply(event(1, "train", 40, .cancelSent(reason: .timeout, grace: .seconds(10))))
        let cancelling = renderer.rows(m, now: at(41), columns: 100, height: 30)[0]
        #expect(cancelling.text.contains("\u{1B}[1;31mcancel: timeout, kill in 9s"), "\(cancelling.text)")
        #expect(cancelling.plain.contains("cancel: timeout"))
        let plain = DisplayRenderer(capabilities: unicodePlain).rows(m, now: at(41), columns: 100, height: 30)[0].text
        #expect(!plain.contains("\u{1B}"), "\(plain)")
    }

    @Test("rows line up: the same columns start at the same place in every row")
    func alignment() {
        var m = busy("a", id: 1)
        _ = m.apply(event(2, "longer-name", 0, .started(pid: 2)))
        _ = m.apply(event(2, "longer-name", 0, .budgetChanged(remaining: .seconds(30), cause: .start)))
        _ = m.apply(event(2, "longer-name", 9, .progress(Progress(completed: 3, total: 10), remaining: nil)))
        let rows = DisplayRenderer(capabilities: unicodePlain).rows(m, now: at(10), columns: 120, height: 30).map(\.plain)
        #expect(rows.count == 2)
        let percentColumns = rows.map { row -> Int in
            let range = row.range(of: "%")!
            return row.distance(from: row.startIndex, to: range.lowerBound)
        }
        #expect(percentColumns[0] == percentColumns[1], "\(rows)")
        #expect(rows[0].hasPrefix("a            "), "\(rows[0])")
    }

    @Test("more tasks than lines: the rows that fit, then how many more")
    func tooManyRows() {
        var m = DisplayModel()
        for id in 1...20 { _ = m.apply(event(id, "t\(id)", 0, .started(pid: Int32(id)))) }
        let rows = DisplayRenderer(capabilities: unicodePlain).rows(m, now: at(1), columns: 80, height: 10)
        #expect(rows.count == 9, "one line stays free: \(rows.map(\.plain))")
        #expect(rows.last?.plain == "… and 12 more running")
    }

    @Test("a batch adds a status line: running, waiting, succeeded, failed, elapsed")
    func statusLine() {
        var m = busy()
        m.batch = .init(runID: "r", total: 6, startedAt: at(0), succeeded: 2, failed: 1, retrying: ["x"])
        let rows = DisplayRenderer(capabilities: unicodePlain).rows(m, now: at(65), columns: 100, height: 30)
        #expect(rows.last?.plain == "1 running · 1 waiting · 1 to retry · 2 succeeded · 1 failed · 1m05s", "\(rows.last?.plain ?? "")")
        let ascii = DisplayRenderer(capabilities: asciiPlain).rows(m, now: at(65), columns: 30, height: 30)
        #expect(ascii.last.map { $0.plain.allSatisfy { $0.isASCII } && $0.width <= 29 } == true, "\(ascii.last?.plain ?? "")")
    }

    @Test("an unfinished line of the task's output shows above the rows, cut to fit and made safe")
    func partialOutput() {
        let rows = DisplayRenderer(capabilities: unicodePlain).rows(busy(), now: at(10), columns: 30, height: 30,
                                                                     partialOutput: ["Continue? [y/N] \u{1B}[31m" + String(repeating: "x", count: 50)])
        #expect(rows.count == 2)
        #expect(rows[0].plain.hasPrefix("Continue? [y/N]  [31m"), "\(rows[0].plain)")
        #expect(rows[0].width <= 29)
        #expect(LiveDisplay.liveText(Array("10%\r20%\r30%".utf8)) == "30%", "a task redrawing its own line shows the latest")
    }

    @Test("notices: a mark, the task, what happened; the summary in bold")
    func notices() {
        let outcome = TaskOutcome(task: TaskRef(id: 1, name: "stall"), pid: 9, termination: .exited(1), cancelReason: .timeout,
                                  killed: false, elapsed: .milliseconds(2100), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
        let plain = DisplayRenderer(capabilities: unicodePlain)
        #expect(plain.notice(.ended(outcome)).plain == "✗ stall: cancelled (timeout: no progress within its budget) after 2.1s; exited 1; exit 124")
        #expect(plain.notice(.cancelling(task: "stall", reason: .timeout, grace: .seconds(1))).plain
            == "! stall: cancelling (timeout: no progress within its budget); SIGTERM sent, SIGKILL in 1s")
        #expect(plain.notice(.note("received SIGINT; cancelling (user)")).plain == "· overtime: received SIGINT; cancelling (user)")
        let killed = TaskOutcome(task: TaskRef(id: 1, name: "stuck"), pid: 9, termination: .signaled(.kill), cancelReason: .deadline,
                                 killed: true, elapsed: .seconds(12), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
        #expect(plain.notice(.ended(killed)).plain.hasSuffix("after 12s; killed after grace; exit 137"))
        let ascii = DisplayRenderer(capabilities: asciiPlain)
        #expect(ascii.notice(.summary(text: "done: 1 of 1 succeeded in 3s; exit 0", succeeded: true)).plain == "+ done: 1 of 1 succeeded in 3s; exit 0")
        let colour = DisplayRenderer(capabilities: unicodeColor)
        #expect(colour.notice(.ended(outcome)).text.contains("\u{1B}[1;31m✗\u{1B}[0m"))
        #expect(ProgressOutput.summary(outcome).text == "done: 0 of 1 succeeded in 2.1s (cancelled: timeout); exit 124")
        #expect(!DisplayRenderer.showsInTTY(.started(task: "x", pid: 1, attempt: 1)), "starts are left to the rows")
    }

    @Test("plain lines are timestamped and name the task")
    func plainLine() {
        #expect(PlainOutput.line("train: started, pid 4", time: "14:03:07") == "14:03:07 overtime: train: started, pid 4")
        #expect(EventText.describe(Progress(completed: 5, total: 10, title: "epoch 2", detail: "loss\n0.1")) == "50% (5/10) epoch 2 — loss 0.1")
    }
}

@Suite("Display: mode, capabilities, redraw")
struct DisplayModeTests {
    @Test("auto is tty on a terminal and plain elsewhere or as PID 1; TERM=dumb is always plain")
    func modes() {
        let xterm = ["TERM": "xterm-256color"]
        #expect(ResolvedProgressMode.resolve(.auto, stderrIsTerminal: true, environment: xterm) == .tty)
        #expect(ResolvedProgressMode.resolve(.auto, stderrIsTerminal: false, environment: xterm) == .plain)
        #expect(ResolvedProgressMode.resolve(.auto, stderrIsTerminal: true, environment: ["TERM": "dumb"]) == .plain)
        #expect(ResolvedProgressMode.resolve(.tty, stderrIsTerminal: false, environment: xterm) == .tty)
        #expect(ResolvedProgressMode.resolve(.tty, stderrIsTerminal: true, environment: ["TERM": "dumb"]) == .plain)
        #expect(ResolvedProgressMode.resolve(.json, stderrIsTerminal: true, environment: xterm) == .json)
        #expect(ResolvedProgressMode.resolve(.none, stderrIsTerminal: true, environment: xterm) == .none)
        #expect(ResolvedProgressMode.resolve(.plain, stderrIsTerminal: true, environment: xterm) == .plain)
        // A container's entrypoint leaves the terminal to the task unless asked.
        #expect(ResolvedProgressMode.resolve(.auto, stderrIsTerminal: true, environment: xterm, isInit: true) == .plain)
        #expect(ResolvedProgressMode.resolve(.tty, stderrIsTerminal: true, environment: xterm, isInit: true) == .tty)
    }

    @Test("NO_COLOR (non-empty) turns colour off; the first locale variable set decides Unicode")
    func capabilities() {
        #expect(DisplayCapabilities.detect(environment: ["LANG": "en_US.UTF-8"]) == DisplayCapabilities(color: true, unicode: true))
        #expect(DisplayCapabilities.detect(environment: ["LANG": "en_US.UTF-8", "NO_COLOR": "1"]).color == false)
        #expect(DisplayCapabilities.detect(environment: ["LANG": "en_US.UTF-8", "NO_COLOR": ""]).color == true)
        #expect(DisplayCapabilities.detect(environment: ["LANG": "C"]).unicode == false)
        #expect(DisplayCapabilities.detect(environment: [:]).unicode == false)
        #expect(DisplayCapabilities.detect(environment: ["LC_ALL": "C", "LANG": "en_US.UTF-8"]).unicode == false, "LC_ALL wins")
        #expect(DisplayCapabilities.detect(environment: ["LC_CTYPE": "C.utf8", "LANG": "C"]).unicode == true)
        #expect(DisplayCapabilities.detect(environment: ["LC_ALL": "", "LANG": "de_DE.UTF-8"]).unicode == true, "an empty LC_ALL is unset")
    }

    @Test("erasing the rows: up to the first, each line blanked; rewrapped rows count for more lines")
    func erase() {
        #expect(LiveDisplay.eraseRows(widths: [], columns: 80) == "")
        #expect(LiveDisplay.eraseRows(widths: [40], columns: 80) == "\r\u{1B}[2K")
        #expect(LiveDisplay.eraseRows(widths: [40, 79], columns: 80) == "\r\u{1B}[1A\u{1B}[2K\u{1B}[B\u{1B}[2K\u{1B}[1A")
        // Drawn at 100 columns, now 50: 99 columns take 2 lines, 40 take 1.
        let narrowed = LiveDisplay.eraseRows(widths: [99, 40], columns: 50)
        #expect(narrowed.hasPrefix("\r\u{1B}[2A"), "\(narrowed.debugDescription)")
        #expect(narrowed.components(separatedBy: "\u{1B}[2K").count - 1 == 3)
        #expect(!narrowed.contains("\u{1B}[J"), "no erase-below: tmux pushes a cleared screen into its history")
    }
}

@Suite("ctl status table")
struct CtlStatusTableTests {
    @Test("a task's own title reaches the table without control characters, and wide text keeps the columns lined up")
    func titlesAreSanitized() throws {
        let tasks = [
            TaskStatus(name: "train", state: .running, live: TaskStatus.Live(
                pid: 42, elapsed: 1, remaining: 29.3,
                progress: Progress(completed: 1, total: 4, title: "a\u{1b}[31mRED\nline2"))),
            TaskStatus(name: "日本", state: .running, live: TaskStatus.Live(pid: 43, elapsed: 1, remaining: nil, progress: nil)),
        ]
        let table = CtlCommand.statusTable(tasks)
        let lines = table.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "one line a task: \(table)")
        #expect(!table.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(table)")
        #expect(lines[1].contains("1/4 a [31mRED line2"), "\(lines)")
        let starts = lines.map { line in TextWidth.columns(String(line[..<(line.range(of: "running") ?? line.range(of: "STATE")!).lowerBound])) }
        #expect(Set(starts).count == 1, "the STATE column starts at one place on every line: \(lines)")
    }

    @Test("a task with every-reporter on gets a line under the table with each reporter's time left")
    func everyReporterLine() {
        let tasks = [
            TaskStatus(name: "train", state: .running, live: TaskStatus.Live(
                pid: 42, elapsed: 9, remaining: 0.7, progress: nil, reporters: 3,
                everyReporter: [.init(reporter: "rank 1", remaining: 0.7), .init(reporter: "rank 2", remaining: 1)])),
            TaskStatus(name: "eval", state: .running, live: TaskStatus.Live(pid: 43, elapsed: 1, remaining: 4, progress: nil, everyReporter: [])),
            TaskStatus(name: "plain", state: .running, live: TaskStatus.Live(pid: 44, elapsed: 1, remaining: 4, progress: nil)),
        ]
        let lines = CtlCommand.statusTable(tasks).split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(lines)")
        #expect(lines[4] == "train: every-reporter: rank 1 700ms left, rank 2 1s left", "\(lines)")
        #expect(lines[5] == "eval: every-reporter: no reporter has reported yet", "\(lines)")
    }
}

@Suite("Display: cutting output into lines")
struct DisplayLineCutTests {
    @Test("complete lines are taken with their newlines, an unfinished one is held, an endless one is not held without bound")
    func takeCompleteLines() {
        var buffer = Array("one\ntwo\nthr".utf8)
        #expect(LiveDisplay.takeCompleteLines(&buffer) == Array("one\ntwo\n".utf8))
        #expect(buffer == Array("thr".utf8))
        #expect(LiveDisplay.takeCompleteLines(&buffer) == nil, "nothing complete yet")
        buffer += [UInt8](repeating: UInt8(ascii: "x"), count: LiveDisplay.outputBacklogLimit)
        #expect(LiveDisplay.takeCompleteLines(&buffer)?.count == 3 + LiveDisplay.outputBacklogLimit)
        #expect(buffer.isEmpty)
    }
}

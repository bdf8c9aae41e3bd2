import Overtime
import OvertimeProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `overtime batch FILE [options]`: a queue of tasks from a job file.
struct BatchCommand {
    var jobFile: String?
    var options = BatchOptions()
    var progress: RunCommand.ProgressMode = .auto

    static let help = """
    Usage: overtime batch FILE [options]
           overtime batch --resume DIR [FILE] [options]

    Runs the tasks of a JSON job file (docs/jobfile.md) as a queue: at most `concurrency`
    at once, each when its dependencies allow and its resources (GPU slots, counted pools)
    are free, each under its own budget, with retries. Everything is journaled to a run
    directory: events.jsonl, logs/<task>.log (its stdout and stderr), summary.json.

    Options:
      --concurrency N      run at most N tasks at once (overrides the job file)
      --fail-fast          on the first failure, cancel running tasks (reason 'user') and
                           start nothing more
      --run-dir DIR        the run directory (default: overtime-runs/<run id>)
      --resume DIR         run again only what did not succeed in run directory DIR
                           (its job.json unless FILE is given), journaling into DIR
      --control PATH       the control socket for 'overtime ctl' (default: one per run in
                           $XDG_RUNTIME_DIR/overtime/ or /tmp/overtime-<uid>/)
      --progress MODE      plain (a line per state change, on stderr), json (the journal's
                           lines on stdout as they are written), none; auto (default) is plain

    Exit status: 0 when every task succeeded, 1 otherwise, 125 for an invalid job file or
    option, 130 after SIGINT, 143 after SIGTERM (running tasks are cancelled with reason
    'user' or 'shutdown', nothing new starts, the summary is written).
    """

    static let knownOptions = ["--concurrency", "--fail-fast", "--run-dir", "--resume", "--progress", "--control", "--help"]
    /// The control socket's path (`--control`); nil for the per-user default.
    var controlPath: String?

    static func parse(_ arguments: ArraySlice<String>) throws -> BatchCommand {
        var cursor = ArgumentCursor(arguments, command: "overtime batch")
        var command = BatchCommand()
        var positional: [String] = []
        while let token = cursor.next() {
            switch token {
            case .endOfOptions:
                positional.append(contentsOf: cursor.rest)
                _ = cursor.rest
                cursor = ArgumentCursor([], command: "overtime batch")
            case let .word(word):
                positional.append(word)
            case let .option(option, inline):
                func value() throws(UsageError) -> String { try cursor.value(of: option, inline: inline) }
                switch option {
                case "--help", "-h":
                    throw HelpRequest(text: help)
                case "--concurrency":
                    let text = try value()
                    guard let n = Int(text), n >= 1 else {
                        throw UsageError(message: "overtime batch: --concurrency: '\(text)' is not a whole number ≥ 1")
                    }
                    command.options.concurrency = n
                case "--fail-fast":
                    if inline != nil { throw UsageError(message: "overtime batch: --fail-fast takes no value") }
                    command.options.failFast = true
                case "--run-dir":
                    command.options.runDirectory = try value()
                case "--control":
                    command.controlPath = try value()
                case "--resume":
                    command.options.resume = try value()
                case "--progress":
                    let text = try value()
                    guard let mode = RunCommand.ProgressMode(rawValue: text), mode != .tty else {
                        throw UsageError(message: "overtime batch: --progress: '\(text)' is not a mode; expected auto, plain, json or none")
                    }
                    command.progress = mode
                default:
                    throw UsageError(message: "overtime batch: unknown option '\(option)'\(suggestion(for: option, among: knownOptions)); see 'overtime batch --help'")
                }
            }
        }
        guard positional.count <= 1 else {
            throw UsageError(message: "overtime batch: one job file at a time; got \(positional.joined(separator: " "))")
        }
        command.jobFile = positional.first
        if command.jobFile == nil {
            guard let resume = command.options.resume else {
                throw UsageError(message: "overtime batch: no job file given; usage: overtime batch FILE [options]")
            }
            command.jobFile = resume + "/job.json"
        }
        if command.options.resume != nil, command.options.runDirectory != nil {
            throw UsageError(message: "overtime batch: --resume journals into the directory it resumes; leave out --run-dir")
        }
        return command
    }

    func execute() -> Int32 {
        let path = jobFile!
        let job: JobFile
        let text: [UInt8]
        do {
            (job, text) = try JobFile.loadWithText(path: path)
        } catch {
            Terminal.error(error.description)
            return 125
        }
        let display = BatchDisplay(mode: progress)
        var options = self.options
        options.onUpdate = { update in display.show(update) }
        let runner: BatchRunner
        do {
            runner = try BatchRunner(job: job, jobFileText: text, options: options)
        } catch {
            Terminal.error("overtime batch: \(error)")
            return 125
        }
        display.begin(runID: runner.runID, directory: runner.journal.directory, tasks: job.tasks.count)
        runner.stopOnTerminationSignals { signal in
            display.note("received \(SignalNames.name(signal)); cancelling running tasks, starting nothing new")
        }
        do {
            _ = try runner.serveControl(at: controlPath) { refusal in Terminal.error("overtime batch: \(refusal)") }
        } catch where controlPath == nil {
            // The batch matters more than the default socket (an unwritable /tmp, say).
            Terminal.error("overtime batch: no control socket (\(error)); running without one")
        } catch {
            Terminal.error("overtime batch: \(error)")
            return 125
        }
        runner.start()
        let summary = runner.waitForSummary()
        display.end(summary)
        switch summary.stoppedBy {
        case .user?: return 130
        case .shutdown?: return 143
        default: return summary.succeeded ? 0 : 1
        }
    }
}

/// What `overtime batch` shows: in plain mode a timestamped line per state change on
/// stderr and a final table on stdout; in json mode every event on stdout.
final class BatchDisplay: Sendable {
    let mode: ProgressOutput.Mode
    private let encoder = Mutex<EventEncoder?>(nil)

    init(mode: RunCommand.ProgressMode) {
        switch mode {
        case .json: self.mode = .json
        case .none: self.mode = .none
        case .auto, .tty, .plain: self.mode = .plain
        }
    }

    func begin(runID: String, directory: String, tasks: Int) {
        encoder.withLock { $0 = EventEncoder(runID: runID) }
        if mode == .plain { line("run \(runID): \(tasks) tasks, journal in \(directory)") }
    }

    func note(_ text: String) {
        if mode == .plain { line(text) }
    }

    func show(_ update: BatchUpdate) {
        switch mode {
        case .none: return
        case .json:
            // The journal as it is written: every event, progress throttled.
            if case let .journalLine(line) = update { Terminal.writeOut(line) }
        case .plain:
            switch update {
            case let .started(task, attempt, pid):
                line("\(task): started" + (attempt > 1 ? " (attempt \(attempt))" : "") + (pid.map { ", pid \($0)" } ?? ""))
            case let .retrying(task, attempt, after, because):
                line("\(task): \(because); retrying in \(DurationText.format(after)) (attempt \(attempt))")
            case let .finished(report):
                line("\(report.name): \(Self.describe(report))")
            case let .taskEvent(event):
                if case let .cancelSent(reason, grace) = event.kind {
                    line("\(event.task.name): cancelling (\(reason.rawValue)); SIGKILL in \(DurationText.format(grace))")
                }
            case .journalLine:
                return
            }
        }
    }

    func end(_ summary: BatchSummary) {
        guard mode == .plain else { return }
        let header = ["TASK", "OUTCOME", "REASON", "EXIT", "ATTEMPTS", "DURATION", "RESULT"]
        var rows = [header]
        for r in summary.tasks {
            rows.append([
                r.name,
                r.outcome.rawValue + (r.resumed ? " (earlier run)" : ""),
                r.reason ?? "-",
                r.exitCode.map(String.init) ?? "-",
                String(r.attempts),
                r.duration.map(DurationText.format) ?? "-",
                r.result.map { String($0.jsonText.prefix(40)) } ?? "-",
            ])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        var text = ""
        for row in rows {
            text += row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] + 2 - cell.count)
            }.joined() + "\n"
        }
        let succeeded = summary.tasks.filter { $0.outcome == .succeeded }.count
        text += "\(succeeded) of \(summary.tasks.count) succeeded in \(DurationText.format(summary.elapsed)); journal: \(summary.runDirectory)/events.jsonl\n"
        Terminal.writeOut(Array(text.utf8))
    }

    static func describe(_ report: TaskReport) -> String {
        let time = report.duration.map { " in \(DurationText.format($0))" } ?? ""
        switch report.outcome {
        case .succeeded:
            return report.resumed ? "succeeded in the earlier run; not run again" : "succeeded\(time)"
        case .failed:
            let why = report.reason == "exit" ? (report.detail ?? "exit") : [report.reason, report.detail].compactMap { $0 }.joined(separator: ", ")
            return "failed (\(why))\(time)" + (report.reason == "exit" ? "" : report.exitCode.map { ", exit \($0)" } ?? "")
        case .skipped:
            return "skipped (\(report.reason ?? "?")" + (report.detail.map { ": \($0)" } ?? "") + ")"
        }
    }

    private func line(_ text: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var t = now.tv_sec
        var parts = tm()
        localtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        Terminal.error("\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) \(text)")
    }
}

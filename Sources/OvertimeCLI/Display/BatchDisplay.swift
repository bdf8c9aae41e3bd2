import Overtime
import OvertimeLoop
import OvertimeProtocol
import Synchronization

/// What `overtime batch` shows: the live display (a row per running task, a line per task
/// that ends, a status line), timestamped plain lines on stderr, or the journal's lines on
/// stdout (`json`); in `tty` and `plain` modes a final table on stdout. With `--follow
/// NAME`, that task's output (read back from its log, which stays complete) is shown too.
final class BatchDisplay: Sendable {
    let mode: ResolvedProgressMode
    /// Progress lines per task in plain mode, at most one per this: a batch runs many tasks.
    static let plainInterval = Duration.seconds(5)

    private let job: JobFile
    private let follow: String?
    private let environment: [String: String]
    private let plain: PlainOutput?
    /// The live display, and whether it has started drawing.
    private let live = Mutex<(display: LiveDisplay, started: Bool)?>(nil)
    private let follower = Mutex<LogFollower?>(nil)
    /// Plain mode's reader of the followed log, and its unfinished last line.
    private let plainFollow = Mutex<(ticker: Ticker?, partial: [UInt8])>((nil, []))

    /// - Throws: `UsageError` when `follow` names no task of the job.
    init(mode: RunCommand.ProgressMode, job: JobFile, follow: String? = nil, origin: String = "the job file") throws(UsageError) {
        let environment = ProcessEnvironment.values(of: DisplayCapabilities.environmentNames)
        self.mode = ResolvedProgressMode.resolve(mode, stderrIsTerminal: TerminalDevice.isTerminal(2), environment: environment,
                                                 isInit: TerminalDevice.isInit)
        if let follow, JobElements(job).element(named: follow) == nil {
            let names = job.tasks.map(\.name)
            let shown = names.prefix(8).joined(separator: ", ") + (names.count > 8 ? ", …" : "")
            throw UsageError(message: "overtime batch: --follow: no task named '\(follow)' in \(origin)\(suggestion(for: follow, among: names)); its tasks: \(shown)")
        }
        self.job = job
        self.follow = follow
        self.environment = environment
        plain = self.mode == .plain ? PlainOutput(progressInterval: Self.plainInterval) : nil
    }

    func begin(runID: String, directory: String, tasks: Int) {
        let header = "run \(runID): \(tasks) tasks, journal in \(directory)"
        let follower = follow.map { LogFollower(path: directory + "/logs/" + JobElements.logFileName(for: $0)) }
        self.follower.withLock { $0 = follower }
        switch mode {
        case .tty:
            var model = DisplayModel()
            model.batch = .init(runID: runID, total: tasks, startedAt: .now())
            for task in job.tasks {
                if let sweep = task.sweep { model.batch?.sweeps[task.name] = .init(total: sweep.count) }
            }
            let display = LiveDisplay(model: model, capabilities: DisplayCapabilities.detect(environment: environment),
                                      environment: environment) { [weak self] in self?.pollFollowedLog() }
            display.note(.note(header))
            // Drawing starts with the batch's first update: an error before it (a control
            // socket that cannot be had) then leaves the terminal as it was.
            live.withLock { $0 = (display, false) }
        case .plain:
            plain?.note(header)
            if follower != nil {
                let ticker = Ticker(interval: LiveDisplay.tick) { [weak self] in self?.pollFollowedLog() }
                plainFollow.withLock { $0.ticker = ticker }
                ticker.start()
            }
        case .json, .none:
            return
        }
    }

    /// The live display, started on first use.
    private var display: LiveDisplay? {
        let (display, start) = live.withLock { live -> (LiveDisplay?, Bool) in
            guard let current = live else { return (nil, false) }
            live!.started = true
            return (current.display, !current.started)
        }
        if start { display?.start() }
        return display
    }

    func note(_ text: String) {
        switch mode {
        case .tty: display?.note(.note(text))
        case .plain: plain?.note(text)
        case .json, .none: return
        }
    }

    /// A remark that must be seen in every mode (a refused control client, the task guard
    /// lost): like `note`, and on stderr where `note` shows nothing.
    func warn(_ text: String) {
        switch mode {
        case .tty, .plain: note(text)
        case .json, .none: Terminal.error("overtime batch: \(text)")
        }
    }

    func show(_ update: BatchUpdate) {
        if case let .recordFailed(text) = update {
            // In every mode, at once: the tasks may all succeed, but their record is lost.
            let message = "the run's record is incomplete: \(text)"
            switch mode {
            case .tty: display?.note(.note(message))
            case .plain: plain?.note(message)
            case .json, .none: Terminal.error("overtime batch: \(message)")
            }
            return
        }
        switch mode {
        case .none: return
        case .json:
            // The journal as it is written: every event, progress throttled.
            if case let .journalLine(line, event) = update {
                // The batch's own records (attempts, retries, ends) are few and all kept.
                Terminal.writeOut(line, event.map(QueuedWriter.Importance.of) ?? .kept)
            }
        case .plain:
            plain?.handle(update)
        case .tty:
            if case .journalLine = update { return }
            display?.handle(update)
        }
    }

    /// Moves what the followed task wrote since the last look to the screen.
    private func pollFollowedLog() {
        guard let follower = follower.withLock({ $0 }), let name = follow else { return }
        let bytes = follower.read()
        guard !bytes.isEmpty else { return }
        switch mode {
        case .tty:
            live.withLock { $0?.display }?.output(bytes, fd: 2)
        case .plain:
            let lines = plainFollow.withLock { state -> [String] in
                state.partial += bytes
                guard var complete = LiveDisplay.takeCompleteLines(&state.partial) else { return [] }
                if complete.last == 0x0A { complete.removeLast() }
                return complete.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            }
            for line in lines { Terminal.error("\(name) | \(line)") }
        case .json, .none:
            return
        }
    }

    func end(_ summary: BatchSummary) {
        switch mode {
        case .tty:
            display?.finish()
        case .plain:
            if let ticker = plainFollow.withLock({ $0.ticker }) {
                ticker.stop()
                pollFollowedLog()
                let rest = plainFollow.withLock { state -> [UInt8] in
                    defer { state.partial = [] }
                    return state.partial
                }
                if !rest.isEmpty, let name = follow { Terminal.error("\(name) | \(String(decoding: rest, as: UTF8.self))") }
            }
        case .json, .none:
            return
        }
        Terminal.writeOut(Array(Self.table(summary).utf8))
    }

    /// The final table: a row per task, then `N of M succeeded in T; journal: …`.
    static func table(_ summary: BatchSummary) -> String {
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
        let widths = header.indices.map { column in rows.map { TextWidth.columns($0[column]) }.max() ?? 0 }
        var text = ""
        for row in rows {
            text += row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] + 2 - TextWidth.columns(cell))
            }.joined() + "\n"
        }
        let succeeded = summary.tasks.filter { $0.outcome == .succeeded }.count
        text += "\(succeeded) of \(summary.tasks.count) succeeded in \(DurationText.format(summary.elapsed)); journal: \(summary.runDirectory)/events.jsonl\n"
        return text
    }
}

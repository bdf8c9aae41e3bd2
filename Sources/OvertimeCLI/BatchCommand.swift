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
    /// `--follow NAME`: the task whose output is shown as it is written.
    var follow: String?
    /// `--warn-signal`, `--warn-lead`, `--shutdown-exit-code`, `--requeue`.
    var engine = EngineOptions()
    /// `--metrics`, `--metrics-file`.
    var metrics = MetricsOptions()

    static let help = """
    Usage: overtime batch FILE [options]
           overtime batch --resume DIR [FILE] [options]
           overtime batch --check FILE

    Runs the tasks of a job file, YAML or JSON (docs/jobfile.md), as a queue: at most `concurrency`
    at once, each when its dependencies allow and its resources (GPU slots, counted pools)
    are free, each under its own budget, with retries, and each as its own user with its
    own limits if the file says so (user, group, limits, nice, clean-env). Everything is
    journaled to a run directory: events.jsonl, logs/<task>.log (its stdout and stderr),
    summary.json.

    Options:
      --check              check the job file and run nothing: exit 0 and say what it
                           holds, or 125 with every mistake in it
      --concurrency N      run at most N tasks at once (overrides the job file)
      --fail-fast          on the first failure, cancel running tasks (reason 'fail-fast')
                           and start nothing more
      --run-dir DIR        the run directory (default: overtime-runs/<run id>); it must be
                           new or empty: one that holds a run is refused (exit 125), resume
                           it with --resume DIR instead
      --resume DIR         run again only what did not succeed in run directory DIR
                           (its job.json unless FILE is given), journaling into DIR
      --shutdown-grace DUR the time an orchestrator gives the whole shutdown (default:
                           $OVERTIME_SHUTDOWN_GRACE): on SIGTERM/SIGINT each task's grace
                           is clipped so its SIGKILL lands a second before the orchestrator's
      --control PATH       the control socket for 'overtime ctl' (default: one per run in
                           $XDG_RUNTIME_DIR/overtime/ or /tmp/overtime-<uid>/)
      --progress MODE      tty (live rows on stderr: a bar, the budget left and an ETA per
                           running task, a line per task that ends), plain (a timestamped line
                           per state change on stderr, progress at most every 5s per task),
                           json (the journal's lines on stdout as they are written), none;
                           auto (default) is tty when stderr is a terminal, else plain
      --follow NAME        also show task NAME's output (from its log) as it is written
      --cgroup auto|off    auto (default): each task in a cgroup of its own where this
                           machine allows it (docs/containment.md); off: process groups
      --executor local|srun
                           where the tasks run (default: the job file's "executor", else
                           local); srun, inside a Slurm allocation: each task a job step
                           (srun --exclusive -N1 -n1, its "cpu" and "gpu" resources as
                           --cpus-per-task and --gres=gpu:N), supervised on its node by
                           'overtime run' and heard here; the run directory must be on a
                           filesystem every node shares
      --python-bridge on|off
                           off: no task is handed overtime's bundled Python bridge (on by
                           default where overtime has one; a task's "python-bridge": false
                           turns it off for that task; 'overtime run --help' says more)

    \(MetricsOptions.help)

    \(EngineOptions.help)
                           (in a batch: N replaces 143 as the exit after SIGTERM)

    Exit status: 0 when every task succeeded, 1 otherwise, 125 for an invalid job file or
    option, a run directory that cannot be used, or a run whose record (events.jsonl,
    summary.json) could not be wholly written, whatever its tasks did; 130 after SIGINT, 143 after SIGTERM (running tasks are cancelled with reason
    'user' or 'shutdown', nothing new starts, the summary is written; a second one kills at
    once). SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH are passed on to every running
    task's process group. A signal Overtime was started with ignored stays ignored.
    """

    static let knownOptions = ["--check", "--concurrency", "--fail-fast", "--run-dir", "--resume", "--progress", "--control", "--help", "--follow", "--shutdown-grace", "--cgroup", "--executor", "--python-bridge"] + EngineOptions.names + MetricsOptions.names
    /// `--check`: read and check the job file, run nothing.
    var checkOnly = false
    /// The control socket's path (`--control`); nil for the per-user default.
    var controlPath: String?
    /// The orchestrator's time for the whole shutdown (`--shutdown-grace`).
    var shutdownGrace: Duration?

    static func parse(_ arguments: ArraySlice<String>) throws -> BatchCommand {
        var cursor = ArgumentCursor(arguments, command: "overtime batch")
        var command = BatchCommand()
        var shutdownGraceText: String?
        var positional: [String] = []
        var pythonBridgeOn = true
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
                    throw HelpRequest(text: help + "\nOn this machine: \(Containment.available().summary).\n")
                case "--concurrency":
                    let text = try value()
                    guard let n = Int(text), n >= 1 else {
                        throw UsageError(message: "overtime batch: --concurrency: '\(text)' is not a whole number ≥ 1")
                    }
                    command.options.concurrency = n
                case "--check":
                    if inline != nil { throw UsageError(message: "overtime batch: --check takes no value") }
                    command.checkOnly = true
                case "--fail-fast":
                    if inline != nil { throw UsageError(message: "overtime batch: --fail-fast takes no value") }
                    command.options.failFast = true
                case "--run-dir":
                    command.options.runDirectory = try value()
                case "--control":
                    command.controlPath = try value()
                case "--shutdown-grace":
                    shutdownGraceText = try value()
                case "--resume":
                    command.options.resume = try value()
                case "--executor":
                    let text = try value()
                    guard let executor = JobFile.Executor(rawValue: text.lowercased()) else {
                        throw UsageError(message: "overtime batch: --executor: '\(text)' is not an executor; expected local or srun")
                    }
                    command.options.executor = executor
                case "--cgroup":
                    command.options.containment = try parseContainment(try value(), command: "overtime batch")
                case "--python-bridge":
                    pythonBridgeOn = try parseSwitch(try value(), option: option, command: "overtime batch")
                case "--follow":
                    let name = try value()
                    guard !name.isEmpty else { throw UsageError(message: "overtime batch: --follow needs a task name") }
                    command.follow = name
                case "--progress":
                    let text = try value()
                    guard let mode = RunCommand.ProgressMode(rawValue: text) else {
                        throw UsageError(message: "overtime batch: --progress: '\(text)' is not a mode; expected auto, tty, plain, json or none")
                    }
                    command.progress = mode
                default:
                    let noValue = { () throws(UsageError) in
                        if inline != nil { throw UsageError(message: "overtime batch: \(option) takes no value") }
                    }
                    if try command.engine.parse(option, command: "overtime batch", noValue: noValue, value: value) { continue }
                    if try command.metrics.parse(option, command: "overtime batch", value: value) { continue }
                    throw UsageError(message: "overtime batch: unknown option '\(option)'\(suggestion(for: option, among: knownOptions)); see 'overtime batch --help'")
                }
            }
        }
        guard positional.count <= 1 else {
            throw UsageError(message: "overtime batch: one job file at a time; got \(positional.joined(separator: " "))")
        }
        command.jobFile = positional.first
        command.options.pythonBridge = pythonBridge(on: pythonBridgeOn)
        if command.jobFile == nil {
            guard let resume = command.options.resume else {
                throw UsageError(message: "overtime batch: no job file given; usage: overtime batch FILE [options]")
            }
            command.jobFile = resume + "/job.json"
        }
        if command.options.resume != nil, command.options.runDirectory != nil {
            throw UsageError(message: "overtime batch: --resume journals into the directory it resumes; leave out --run-dir")
        }
        command.shutdownGrace = try parseShutdownGrace(option: shutdownGraceText, command: "overtime batch")
        try command.engine.finish(command: "overtime batch")
        try command.metrics.readEnvironment(command: "overtime batch")
        return command
    }

    func execute() -> Int32 {
        let path = jobFile!
        let job: JobFile
        let text: [UInt8]
        var options = self.options
        do {
            // Resumed from the run directory's copy: relative cwds resolve as they did in
            // the first run, against the original job file's directory.
            let resumedCopy = options.resume.map { $0 + "/job.json" } == path
            let directory = resumedCopy ? RunJournal.jobFileDirectory(in: options.resume!) : nil
            (job, text, options.jobFileDirectory) = try JobFile.loadWithText(path: path, directory: directory)
        } catch {
            Terminal.error(error.description)
            return 125
        }
        if checkOnly {
            Terminal.out(path + ": " + JobElements(job).summary)
            return 0
        }
        let display: BatchDisplay
        do {
            display = try BatchDisplay(mode: progress, job: job, follow: follow, origin: path)
        } catch {
            Terminal.error(error.message)
            return 125
        }
        options.onUpdate = { update in display.show(update) }
        // As `overtime run` does: a signal before the handler waits for it (the run's cgroups
        // are made with the runner).
        Supervisor.holdTerminationSignalsUntilWatched()
        let runner: BatchRunner
        do {
            runner = try BatchRunner(job: job, jobFileText: consume text, options: options)
        } catch {
            Terminal.error("overtime batch: \(error)")
            return 125
        }
        display.begin(runID: runner.runID, directory: runner.journal.directory, tasks: runner.elementCount)
        // The job file's warning and metrics where neither the command line nor the
        // environment gave them.
        var engine = self.engine
        if engine.warnSignal == nil, let signal = job.warnSignal {
            engine.warnSignal = signal
            engine.warnLead = engine.warnLead ?? job.warnLead
        }
        var metrics = self.metrics
        metrics.address = metrics.address ?? job.metrics
        metrics.file = metrics.file ?? job.metricsFile
        if let warning = engine.requeueWarning { display.warn(warning) }
        var setup = engine.setup(shutdownGrace: shutdownGrace, metrics: metrics.settings)
        setup.onTerminationSignal = { signal, first in
            display.note(first
                ? "received \(signal.name); cancelling running tasks, starting nothing new; another one kills at once"
                : "received \(signal.name) again; killing what still runs")
        }
        setup.controlPath = controlPath
        setup.controlDescription = .batch(jobFile: path, runDirectory: runner.journal.directory)
        setup.onRefusedClient = RepeatLimiter.passing(to: display.warn)
        // Through the display: in tty mode it may already be drawing.
        setup.onNote = display.note
        setup.onNotice = display.warn
        setup.livePage = metrics.livePage
        setup.onLivePage = LivePageURL.say
        do {
            try runner.setUp(setup)
        } catch {
            Terminal.error("overtime batch: \(error)")
            runner.abandon()  // its loop thread must not outlive exit()
            return 125
        }
        runner.start()
        let summary = runner.waitForSummary()
        display.end(summary)
        engine.requeueIfAsked(shutdown: summary.stoppedBy == .shutdown, warnings: runner.engineWarningCount,
                              run: runner.runEngineCommand)
        if !summary.recordComplete {
            // The tasks' outcomes are known only from what the run directory kept: a script
            // that trusts a 0 (or a 1) would resume from, or report, a record with holes.
            let lost = summary.lostJournalLines > 0 ? "\(summary.lostJournalLines) journal lines lost; " : ""
            Terminal.error("overtime batch: the record of run \(summary.runID) in \(summary.runDirectory) is incomplete (\(lost)\(summary.recordFailures.joined(separator: "; "))); exit 125")
            return 125
        }
        switch summary.stoppedBy {
        case .user?: return 130
        case .shutdown?: return engine.shutdownExitCode ?? 143
        default: return summary.succeeded ? 0 : 1
        }
    }
}

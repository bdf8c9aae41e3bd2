import Overtime
import OvertimeLoop
import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `overtime run [options] -- CMD [ARG...]`: one task under a budget, stdio passed through.
struct RunCommand {
    enum ProgressMode: String {
        case auto, tty, plain, json, none
    }

    var spec: TaskSpec
    /// The task's settings as its options give them (`spec` has the bridge's directory in
    /// place of whether it is on).
    var settings = TaskSettings()
    var progress: ProgressMode = .auto
    var jsonReport = false
    /// `--report FILE` (`-`: stdout, as `--json`).
    var reportPath: String?
    /// `--events FILE`.
    var eventsPath: String?
    var preserveStatus = false
    /// The control socket's path (`--control`); nil for the per-user default.
    var controlPath: String?
    /// `--control-stdio`: control requests on stdin, replies and events on stdout.
    var controlStdio = false
    /// The orchestrator's time for the whole shutdown (`--shutdown-grace`).
    var shutdownGrace: Duration?
    /// `--cgroup`.
    var containment: Containment.Request = .automatic
    /// `--warn-signal`, `--warn-lead`, `--shutdown-exit-code`, `--requeue`.
    var engine = EngineOptions()
    /// `--metrics`, `--metrics-file`.
    var metrics = MetricsOptions()

    static let help = """
    Usage: overtime run [options] [--] CMD [ARG...]

    Runs CMD under a time budget that its progress extends. CMD reports on fd 3 in JSON
    lines (see docs/protocol.md); a CMD that ignores fd 3 is simply run under the budget.
    When time runs out Overtime writes the reason on fd 3, sends SIGTERM to CMD's process
    group, waits the grace period, then sends SIGKILL.

    Budget (durations: 250ms, 30s, 1.5s, 5m, 1h30m; a bare number is seconds):
    \(TaskSetting.help(.budget))

    Reporting (docs/protocol.md): CMD's fd 3 is its own channel; every process of CMD may
    also connect to $OVERTIME_SOCKET and report there (a subprocess, a worker pool), and
    daemons may speak sd_notify or s6's notification-fd instead:
    \(TaskSetting.help(.reporting))

    Environment (the task inherits Overtime's, plus OVERTIME_FD, OVERTIME_SOCKET,
    OVERTIME_TASK, OVERTIME_RUN, and NOTIFY_SOCKET):
    \(TaskSetting.help(.environment))

    Isolation (set in CMD's process before exec; if one cannot be set, CMD does not run and
    Overtime exits 125):
    \(TaskSetting.help(.isolation))
      If Overtime dies, even by SIGKILL, CMD's process group gets SIGKILL at once.

    Containment and memory (docs/containment.md):
      --cgroup auto|off    auto (default): CMD runs in a cgroup of its own where this
                           machine allows it, so cancel, CMD's end and Overtime's death
                           kill every process of it, setsid or not; off: its process group
    \(TaskSetting.help(.containment))

    Output:
      --name NAME          the task's name in reports and OVERTIME_TASK (default: CMD's name);
                           no control characters
      --progress MODE      tty (a live row on stderr: bar, budget left, ETA; CMD's output
                           passes through above it), plain (timestamped lines on stderr:
                           each state change, progress at most once a second), json (events
                           as JSON lines on stdout), none; auto (default) is tty when stderr
                           is a terminal (and TERM is not dumb, and this is not PID 1), else
                           plain. NO_COLOR turns colour off; without a UTF-8 locale the bar
                           is ASCII. CMD's output passes through a terminal of our size, so
                           it prints as if run directly; for a full-screen CMD, use plain.
      --json               print a final report as JSON on stdout (as --report -)
      --report FILE        write the final JSON report to FILE instead ('-': stdout), so
                           that CMD's own stdout stays CMD's; a file of yours is replaced
                           whole, a symlink, FIFO or /dev/fd/N written through
      --events FILE        write the events of --progress json to FILE (a path, a FIFO,
                           or /dev/fd/N for a descriptor of yours), whatever --progress shows
      --preserve-status    exit with CMD's own status even when it was cancelled
      --shutdown-grace DUR the time an orchestrator gives the whole shutdown (default:
                           $OVERTIME_SHUTDOWN_GRACE): on SIGTERM/SIGINT each task's grace
                           is clipped so its SIGKILL lands a second before the orchestrator's
      --control PATH       the control socket for 'overtime ctl' (default: one per run in
                           $XDG_RUNTIME_DIR/overtime/ or /tmp/overtime-<uid>/)
      --control-stdio      also serve the control protocol on stdin and stdout (for an
                           executor's head that started this run elsewhere, e.g. over srun):
                           requests on stdin, replies and 'watch' events on stdout; CMD's
                           stdin is /dev/null, and its output needs --output; stdin's end
                           cancels CMD with reason 'shutdown'
      --output FILE        append CMD's stdout and stderr to FILE instead of passing them on

    \(MetricsOptions.help)

    \(EngineOptions.help)

    Exit status (as GNU timeout):
      CMD's own status     it exited by itself (or after a user/shutdown cancel)
      N                    --shutdown-exit-code N: after a shutdown cancel it survived
      124                  cancelled for timeout, deadline, revoked or memory; exited within grace
      137                  it had to be SIGKILLed
      128+N                it died of signal N that Overtime did not send
      130                  after Ctrl-C, it died of the SIGTERM of its 'user' cancel
      125                  Overtime failed (bad option, internal error), or could not
                           prepare CMD (working directory, user, group, a limit)
      126 / 127            CMD could not be executed / was not found

    Ctrl-C (SIGINT) cancels CMD with reason 'user'; SIGTERM cancels with 'shutdown'; a
    second one during the grace sends SIGKILL at once.
    SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH are passed on to CMD's process group
    (but the --warn-signal, which becomes 'expiring').
    A signal Overtime was started with ignored (nohup's SIGHUP; SIGINT for a background
    command of a script) stays ignored, and CMD still starts with every signal at default.
    """

    /// Its options: the task's settings (`TaskSetting`), then the run's own.
    static let knownOptions = TaskSetting.optionNames + ["--name", "--progress", "--json", "--preserve-status", "--control", "--shutdown-grace",
                                                         "--cgroup", "--control-stdio", "--output", "--report", "--events", "--help"]
        + EngineOptions.names + MetricsOptions.names

    /// The help, with the containment this machine gives (DESIGN §7: never a silent downgrade).
    static var helpWithContainment: String {
        help + "\nOn this machine: \(Containment.available().summary).\n"
    }

    /// Parses the arguments after `run`.
    /// - Throws: `UsageError` (exit 125) or `HelpRequest` (exit 0).
    static func parse(_ arguments: ArraySlice<String>) throws -> RunCommand {
        var cursor = ArgumentCursor(arguments, command: "overtime run")
        var values = TaskSettingValues()
        var name: String?
        var command = RunCommand(spec: TaskSpec(arguments: []))
        var shutdownGraceText: String?
        var outputFile: String?
        var progressGiven = false

        loop: while let token = cursor.next() {
            switch token {
            case .endOfOptions:
                break loop
            case let .word(word):
                cursor.unread(word)
                break loop
            case let .option(option, inline):
                func value() throws(UsageError) -> String { try cursor.value(of: option, inline: inline) }
                func noValue() throws(UsageError) {
                    if inline != nil { throw UsageError(message: "overtime run: \(option) takes no value") }
                }
                if let setting = TaskSetting.option(named: option) {
                    var text = ""
                    if setting.valueName == nil { try noValue() } else { text = try value() }
                    do {
                        try values.read(setting, text, accounts: .system)
                    } catch {
                        throw UsageError(message: "overtime run: " + error.message(option: option))
                    }
                    continue
                }
                switch option {
                case "--help", "-h":
                    throw HelpRequest(text: helpWithContainment)
                case "--name":
                    let text = try value()
                    guard !text.isEmpty else { throw UsageError(message: "overtime run: --name needs a non-empty name") }
                    // A name the user chose is an identifier typed in `ctl` and shown on one
                    // line: a control character in it is a mistake (or a forged line) to refuse
                    // here, where the output would only be able to blank it out.
                    if let control = text.unicodeScalars.first(where: TextWidth.isControl) {
                        throw UsageError(message: "overtime run: --name \(JobFileText.quote(text)) holds a control character (U+\(String(control.value, radix: 16, uppercase: true))); "
                            + "give a name without line breaks, tabs or escape sequences")
                    }
                    name = text
                case "--progress":
                    let text = try value()
                    guard let mode = ProgressMode(rawValue: text) else {
                        throw UsageError(message: "overtime run: --progress: '\(text)' is not a mode; expected auto, tty, plain, json or none")
                    }
                    command.progress = mode
                    progressGiven = true
                case "--json":
                    try noValue()
                    command.jsonReport = true
                case "--control":
                    command.controlPath = try value()
                case "--shutdown-grace":
                    shutdownGraceText = try value()
                case "--preserve-status":
                    try noValue()
                    command.preserveStatus = true
                case "--report":
                    let text = try value()
                    guard !text.isEmpty else { throw UsageError(message: "overtime run: --report needs a file, or - for stdout") }
                    command.reportPath = text
                case "--events":
                    let text = try value()
                    guard !text.isEmpty else { throw UsageError(message: "overtime run: --events needs a file") }
                    command.eventsPath = text
                case "--control-stdio":
                    try noValue()
                    command.controlStdio = true
                case "--output":
                    let text = try value()
                    guard !text.isEmpty else { throw UsageError(message: "overtime run: --output needs a file") }
                    outputFile = text
                case "--cgroup":
                    command.containment = try parseContainment(try value(), command: "overtime run")
                default:
                    if try command.engine.parse(option, command: "overtime run", noValue: noValue, value: value) { continue }
                    if try command.metrics.parse(option, command: "overtime run", value: value) { continue }
                    throw UsageError(message: "overtime run: unknown option '\(option)'\(suggestion(for: option, among: knownOptions)); see 'overtime run --help'")
                }
            }
        }
        let argv = cursor.rest
        guard let first = argv.first, !first.isEmpty else {
            throw UsageError(message: "overtime run: no command given; usage: overtime run [options] -- CMD [ARG...]")
        }
        switch values.conflict {
        case .memoryWarnWithoutMax(maxIsNone: false)?:
            throw UsageError(message: "overtime run: --memory-warn needs --memory-max (the warning is about the cancel to come)")
        case .memoryWarnWithoutMax(maxIsNone: true)?:
            throw UsageError(message: "overtime run: --memory-warn needs a --memory-max other than none (the warning is about the cancel to come)")
        case .diagnoseLimitWithoutDiagnose?:
            throw UsageError(message: "overtime run: --diagnose-limit needs --diagnose")
        case nil:
            break
        }
        command.settings = values.settings()
        command.spec = TaskSpec(name: name, arguments: argv, settings: command.settings,
                                pythonBridge: command.settings.pythonBridge ? PythonBridge.besideExecutable() : nil)
        if let outputFile {
            command.spec.stdout = .file(path: outputFile, append: true)
            command.spec.stderr = .file(path: outputFile, append: true)
        }
        if command.controlStdio {
            // Stdout is the control stream: nothing else may write there.
            if command.jsonReport || command.reportPath == "-" || (progressGiven && command.progress != .none) || outputFile == nil {
                throw UsageError(message: "overtime run: --control-stdio takes stdin and stdout for the control stream: it needs --output FILE for CMD's output, and neither --json nor --progress other than none")
            }
            command.progress = .none
            command.spec.stdin = .null
        }
        command.shutdownGrace = try parseShutdownGrace(option: shutdownGraceText, command: "overtime run")
        try command.engine.finish(command: "overtime run")
        try command.metrics.readEnvironment(command: "overtime run")
        if command.engine.shutdownExitCode != nil, command.preserveStatus {
            throw UsageError(message: "overtime run: --shutdown-exit-code and --preserve-status disagree (the one exit code after a shutdown, or always CMD's own); choose one")
        }
        return command
    }

    /// Runs the task and returns the exit code.
    func execute() -> Int32 {
        let runID = RunID.generate()
        let output = ProgressOutput(mode: progress, encoder: EventEncoder(runID: runID))
        var sinks: [any EventSink & Sendable] = [output]
        var eventFile: EventFileSink?
        if let eventsPath {
            do {
                eventFile = try EventFileSink(path: eventsPath)
            } catch {
                Terminal.error(error.message)
                return 125
            }
            sinks.append(eventFile!)
        }
        // Every line the file took reaches it before overtime exits.
        defer { eventFile?.finish() }
        var reportFile: OutputFile?
        if let reportPath, reportPath != "-" {
            do {
                reportFile = try OutputFile(path: reportPath)
            } catch {
                Terminal.error("overtime run: --report: cannot write \(reportPath): \(error.reason)")
                return 125
            }
        }
        // A SIGTERM in the first milliseconds waits for its handler, below: killed before it,
        // overtime would leave the cgroups the supervisor makes.
        Supervisor.holdTerminationSignalsUntilWatched()
        let supervisor: Supervisor
        do {
            supervisor = try Supervisor(runID: runID, sinks: sinks, containment: containment)
        } catch {
            Terminal.error("overtime: cannot start the supervisor: \(error)")
            return 125
        }
        if let warning = engine.requeueWarning { output.warn(warning) }
        var setup = engine.setup(shutdownGrace: shutdownGrace, metrics: metrics.settings)
        setup.onTerminationSignal = { signal, first in
            output.note(first
                ? "received \(signal.name); cancelling (\(signal == .interrupt ? "user" : "shutdown")); another one kills at once"
                : "received \(signal.name) again; killing now")
        }
        setup.controlPath = controlPath
        setup.controlDescription = .run(command: spec.arguments)
        setup.onRefusedClient = RepeatLimiter.passing(to: output.warn)
        setup.onNote = output.note
        setup.onNotice = output.warn
        setup.livePage = metrics.livePage
        setup.onLivePage = LivePageURL.say
        do {
            try supervisor.setUp(setup)
        } catch {
            Terminal.error("overtime: \(error)")
            supervisor.shutdown()
            return 125
        }
        if controlStdio {
            do {
                // Stdin's end: the head that started us is gone or done with us.
                try supervisor.serveControlOnStandardStreams { [supervisor] in supervisor.cancelAll(reason: .shutdown) }
            } catch {
                Terminal.error("overtime: \(error)")
                supervisor.shutdown()
                return 125
            }
        }
        let task = supervisor.spawn(output.prepare(spec))
        let outcome = task.waitForOutcome()
        output.finish(outcome)
        let exit: Int32
        // Only a task that ended within the shutdown's grace survived it (not one the OOM
        // killer or anyone's SIGKILL ended meanwhile).
        if let code = engine.shutdownExitCode, outcome.cancelReason == .shutdown, outcome.kind == .cancelled {
            // It survived the preemption: its own status would tell the engine it was done.
            exit = code
        } else {
            exit = preserveStatus ? outcome.preservedStatus : outcome.exitCode
        }
        if jsonReport || reportPath != nil {
            let containment = supervisor.containment
            let report = output.encoder.report(outcome) { w in
                w.key("containment"); containment.write(into: &w)
                // What overtime itself exits with, when an option makes it differ from the
                // task's `exit_code` (`--shutdown-exit-code`, `--preserve-status`).
                w.key("overtime_exit_code"); w.int(Int(exit))
            }
            if jsonReport || reportPath == "-" || reportFile?.inheritedDescriptor == 1 { Terminal.writeOut(report) }
            if reportFile?.inheritedDescriptor == 2 { Terminal.stderr.write(report) }
            if let reportFile, reportFile.inheritedDescriptor != 1, reportFile.inheritedDescriptor != 2, let failure = reportFile.write(report) {
                Terminal.error("overtime: --report: cannot write \(reportFile.path): \(failure.reason)")
                supervisor.shutdown()
                return 125   // the report was asked for and is not there: Overtime failed
            }
        }
        engine.requeueIfAsked(shutdown: outcome.cancelReason == .shutdown, warnings: supervisor.engineWarningCount,
                              run: supervisor.runEngineCommand)
        // The task's last event is on its way to the head: let it be taken before the loop goes.
        if controlStdio { supervisor.flushStandardStreams(within: .seconds(5)) }
        supervisor.shutdown()
        return exit
    }
}

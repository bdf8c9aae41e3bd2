import Overtime
import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The options of `run` and `batch` for the engine Overtime runs in (DESIGN §8): Slurm's
/// warning signal, its requeue, and an exit code that tells a preemption from success.
struct EngineOptions {
    /// `--warn-signal` (or `$OVERTIME_WARN_SIGNAL`): nil forwards every signal as before.
    var warnSignal: Signal?
    /// `--warn-lead`.
    var warnLead: Duration?
    /// `--shutdown-exit-code`.
    var shutdownExitCode: Int32?
    /// `--requeue`.
    var requeue = false
    /// `$SLURM_JOB_ID`, read once.
    var slurmJobID: String? = EngineOptions.environment("SLURM_JOB_ID")

    static let names = ["--warn-signal", "--warn-lead", "--shutdown-exit-code", "--requeue"]

    static let help = """
    Engines (docs/deploy.md: Slurm, Kubernetes):
      --warn-signal SIG    when Overtime receives SIG (USR1, as sbatch --signal=B:USR1@60
                           sends), tell every running task 'expiring' with the time the
                           engine leaves, instead of passing SIG on (default:
                           $OVERTIME_WARN_SIGNAL, else off: SIG is forwarded as before)
      --warn-lead DUR      that time: how long the engine waits after SIG (default: under
                           Slurm the job's end time from squeue or scontrol, minus now; else,
                           or if Slurm does not answer within 3s, 60s, said in the event)
      --shutdown-exit-code N
                           exit N (0-255) after SIGTERM's 'shutdown' cancel when the task
                           ended within grace, instead of its own status, so the engine does
                           not record a preempted task as done (143 is usual); one killed
                           after grace still exits 137
      --requeue            after a shutdown (SIGTERM) or a --warn-signal, once the tasks have
                           ended, run 'scontrol requeue $SLURM_JOB_ID' (at most 10s; a failure
                           is said on stderr). Without SLURM_JOB_ID there is nothing to
                           requeue: Overtime says so at start and runs on
    """

    /// Takes `option` if it is one of these. - Returns: false when it is not.
    mutating func parse(_ option: String, command: String, noValue: () throws(UsageError) -> Void,
                        value: () throws(UsageError) -> String) throws(UsageError) -> Bool {
        switch option {
        case "--warn-signal":
            warnSignal = try Self.signal(try value(), source: "\(command): --warn-signal")
        case "--warn-lead":
            let text = try value()
            do {
                warnLead = try DurationText.parse(text, allowNone: false)
            } catch {
                throw UsageError(message: "\(command): --warn-lead: \(error.message)")
            }
        case "--shutdown-exit-code":
            let text = try value()
            guard let code = Int32(text), (0...255).contains(code) else {
                throw UsageError(message: "\(command): --shutdown-exit-code: '\(text)' is not an exit code from 0 to 255 (143, as after SIGTERM, is usual)")
            }
            shutdownExitCode = code
        case "--requeue":
            try noValue()
            requeue = true
        default:
            return false
        }
        return true
    }

    /// Fills in what the environment says and checks the options together.
    mutating func finish(command: String) throws(UsageError) {
        if warnSignal == nil, let text = Self.environment("OVERTIME_WARN_SIGNAL") {
            warnSignal = try Self.signal(text, source: "\(command): $OVERTIME_WARN_SIGNAL")
        }
        if warnLead != nil, warnSignal == nil {
            throw UsageError(message: "\(command): --warn-lead needs --warn-signal (the lead is the time after that signal)")
        }
    }

    private static func signal(_ text: String, source: String) throws(UsageError) -> Signal {
        guard let signal = Signal(name: text) else {
            throw UsageError(message: "\(source): '\(text)' is not a signal; expected a name such as USR1, SIGUSR2, RTMIN+1, or a number")
        }
        guard !EngineWarning.refusedSignals.contains(signal) else {
            throw UsageError(message: "\(source): \(signal.name) cannot be the warning (INT and TERM are Overtime's own, KILL and STOP cannot be caught, CHLD is for reaping); USR1 is usual")
        }
        return signal
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    /// The signals to pass on: all the usual ones but the warning.
    var forwardedSignals: [Signal] {
        Supervisor.forwardedSignals.filter { $0 != warnSignal }
    }

    var warning: EngineWarning? {
        warnSignal.map { EngineWarning(signal: $0, lead: warnLead, slurmJobID: slurmJobID) }
    }

    /// The supervisor's set-up as these options and `shutdownGrace` make it: the warning,
    /// the signals passed on, the metrics; the caller adds where its notes go.
    func setup(shutdownGrace: Duration?, metrics: MetricsSettings?) -> SupervisorSetup {
        var setup = SupervisorSetup()
        setup.shutdownGrace = shutdownGrace
        setup.engineWarning = warning
        setup.forwardedSignals = forwardedSignals
        setup.metrics = metrics
        return setup
    }

    /// Said once at start: `--requeue` outside a Slurm job does nothing.
    var requeueWarning: String? {
        requeue && slurmJobID == nil ? "--requeue: SLURM_JOB_ID is not set (not a Slurm job); nothing will be requeued" : nil
    }

    /// The longest `scontrol requeue` may take: the exit must not hang on a slurmctld that
    /// does not answer.
    static let requeueLimit = Duration.seconds(10)

    /// After a shutdown or an engine warning, with `--requeue` in a Slurm job: runs
    /// `scontrol requeue JOB` once, and says on stderr what came of it.
    func requeueIfAsked(shutdown: Bool, warnings: Int, run: ([String], Duration) -> EngineCommandResult) {
        guard requeue, let job = slurmJobID, shutdown || warnings > 0 else { return }
        // A job someone cancelled (`scancel`: SIGTERM, as a preemption or the time limit
        // sends) is CANCELLED or COMPLETING by now; requeueing it would undo the cancel.
        // Only a job still RUNNING — its end signalled, not decided — comes back.
        let state = run(["squeue", "-h", "-j", job, "-o", "%T"], Self.requeueLimit)
        let word = state.output.trimmingSpaces
        if state.succeeded, !word.isEmpty, word != "RUNNING" {
            Terminal.error("overtime: --requeue: Slurm job \(job) is \(word), not running: not requeued (a scancel is not undone)")
            return
        }
        let result = run(["scontrol", "requeue", job], Self.requeueLimit)
        if result.succeeded {
            Terminal.error("overtime: requeued Slurm job \(job) (scontrol requeue)")
        } else {
            Terminal.error("overtime: --requeue: could not requeue Slurm job \(job): \(result.problem)")
        }
    }
}

import OvertimeLoop
import OvertimeProtocol

/// How one task of a batch ended.
public struct TaskReport: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        case succeeded, failed, skipped
    }

    public var name: String
    public var outcome: Outcome
    /// Why it failed or was skipped: a cancel reason (`timeout`, …), `exit`, `signal`,
    /// `dependency`, `deadline`, `user`, `shutdown`, `fail-fast`, or nil.
    public var reason: String?
    /// More about the reason: the dependency that failed, the error that stopped a start.
    public var detail: String?
    public var exitCode: Int32?
    public var attempts: Int
    /// Elapsed time of its last attempt.
    public var duration: Duration?
    public var result: JSONValue?
    /// Succeeded in the run being resumed, not run again.
    public var resumed: Bool
    /// Bad lines its last attempt wrote on its channel (the journal keeps only some).
    public var protocolErrors = 0
    /// Its last attempt's peak memory and CPU time.
    public var usage = ResourceUsage()
    /// The phase its last attempt named last, and how often that attempt stalled
    /// (docs/hangs.md).
    public var phase: String?
    public var stalls = 0
}

/// What a batch reports as it goes, on the supervisor's loop thread.
public enum BatchUpdate: Sendable {
    /// An attempt started; `policy` is the task's budget rules, for a display's row (a
    /// display need not hold every task's rules for the few that run at a time).
    case started(task: String, attempt: Int, pid: Int32?, policy: BudgetPolicy = .default)
    case retrying(task: String, attempt: Int, after: Duration, because: String)
    case finished(TaskReport)
    /// A task's own event, as it happens (progress included, unthrottled).
    case taskEvent(TaskEvent)
    /// A line just written to the journal (`events.jsonl`): task events, progress throttled
    /// to one a second per task, and the batch's own (`attempt`, `retry`, `finished`).
    /// `event` is the task event it records (nil for the batch's own records and the
    /// `thinned` counts).
    case journalLine([UInt8], event: TaskEvent?)
    /// Part of the run's record (the journal, the summary, a log marker) could not be
    /// written: the message says which file and why. Said once per file and cause, at
    /// once; the batch goes on, and its summary says the record is incomplete.
    case recordFailed(String)
}

/// The end of a batch.
public struct BatchSummary: Sendable {
    public var runID: String
    public var runDirectory: String
    public var tasks: [TaskReport]
    public var elapsed: Duration
    /// Set when SIGINT/SIGTERM (or `stop`) ended the batch early.
    public var stoppedBy: CancelReason?
    /// What of the run's record could not be written (`RunJournal.failures`), the summary
    /// included; empty when the record is whole.
    public var recordFailures: [String] = []
    /// Journal lines lost to those failures.
    public var lostJournalLines = 0
    /// How the tasks were held whole (DESIGN §7).
    public var containment: Containment?

    public var succeeded: Bool { tasks.allSatisfy { $0.outcome == .succeeded } }
    /// The run directory holds the whole record of the run.
    public var recordComplete: Bool { recordFailures.isEmpty }
}

/// Options of a batch besides its job file.
public struct BatchOptions: Sendable {
    /// The run directory; nil: `overtime-runs/<run id>`.
    public var runDirectory: String?
    /// On the first failure, cancel what runs (reason `fail-fast`) and start nothing more.
    public var failFast: Bool
    /// Resume from this run directory: what succeeded there is not run again, and the
    /// journal goes on in the same directory.
    public var resume: String?
    /// Overrides the job file's concurrency.
    public var concurrency: Int?
    /// The directory the job file's relative `cwd`s were resolved against. Kept in the run
    /// directory (`job-directory`, beside `job.json`) so that `--resume` without the job
    /// file resolves them the same way.
    public var jobFileDirectory: String?
    /// A cgroup per task where the machine allows it, or process groups (`--cgroup off`).
    public var containment: Containment.Request = .automatic
    /// Overrides the job file's `executor` (`--executor`).
    public var executor: JobFile.Executor?
    /// The `overtime` binary the srun executor runs on the nodes (default: this process's own).
    public var overtimeBinary: String?
    /// The Python bridge handed to each task whose `python-bridge` is on (`TaskSpec.pythonBridge`);
    /// nil: none.
    public var pythonBridge: String?
    public var onUpdate: @Sendable (BatchUpdate) -> Void

    public init(runDirectory: String? = nil, failFast: Bool = false, resume: String? = nil, concurrency: Int? = nil,
                onUpdate: @escaping @Sendable (BatchUpdate) -> Void = { _ in }) {
        self.runDirectory = runDirectory
        self.failFast = failFast
        self.resume = resume
        self.concurrency = concurrency
        self.onUpdate = onUpdate
    }
}

/// Runs a job file's tasks as a queue (concurrency, dependencies, resources, retries) on
/// one supervisor, journaling everything to a run directory. The embeddable engine behind
/// `overtime batch`.
public final class BatchRunner: Sendable {
    public let runID: String
    public let journal: RunJournal
    /// How many elements the batch runs: its tasks, a sweep's or array's elements each.
    public let elementCount: Int
    let supervisor: Supervisor
    private let core: LoopBound<BatchState>
    private let completion = Completion<BatchSummary>()

    /// Prepares the run directory and the supervisor; nothing starts until `start()`.
    /// - Throws: `BatchError` when the run directory or the resume source cannot be used.
    /// - Parameter jobFileText: the job file as read, kept in the run directory as
    ///   `job.json` for `--resume`, and let go of then: pass it with `consume` so that a
    ///   large file's text is not held beside its queue.
    public init(job: JobFile, jobFileText: consuming [UInt8]?, options: BatchOptions) throws {
        var job = job
        if let concurrency = options.concurrency { job.concurrency = concurrency }
        var succeeded: Set<String> = []
        let directory: String
        // A resumed run is a new run (its own id, its own control socket) journaling into
        // the directory it resumes.
        let runID = RunID.generate()
        if let resume = options.resume {
            succeeded = try RunJournal.succeededTasks(in: resume)
            directory = resume
        } else {
            directory = options.runDirectory ?? "overtime-runs/\(runID)"
            // A second run appended to a first one's journal would mix two runs in one record
            // and overwrite its summary: a run directory is new (or empty) unless resumed.
            try RunJournal.checkFresh(directory)
        }
        self.runID = runID
        journal = try RunJournal(directory: directory, runID: runID)
        if let text = jobFileText.take(), options.resume == nil {
            // Without them `--resume` has nothing to go on: better to run nothing.
            try journal.writeRequiredFile("job.json", text)
            if let base = options.jobFileDirectory { try journal.writeRequiredFile("job-directory", Array(base.utf8)) }
        }
        // The batch is one of its supervisor's event sinks, as any embedding program's
        // handler is, and steers its tasks through their handles.
        let supervisor = try Supervisor(runID: runID, sinks: [], containment: options.containment)
        self.supervisor = supervisor
        let completion = self.completion
        var launcher: RemoteLauncher?
        if (options.executor ?? job.executor) == .srun {
            launcher = try SrunExecutor.launcher(runDirectory: journal.directory, overtime: options.overtimeBinary)
        }
        let batch = BatchState(job: job, runID: runID, succeeded: succeeded, failFast: options.failFast, supervisor: supervisor,
                              journal: journal, launcher: launcher, pythonBridge: options.pythonBridge, onUpdate: options.onUpdate) { summary in completion.complete(summary) }
        elementCount = batch.elements.count
        core = LoopBound(batch, loop: supervisor.loop)
        let core = self.core
        supervisor.loop.execute { supervisor.addSink(core.value) }
    }

    /// Starts the queue.
    public func start() {
        let core = self.core
        supervisor.loop.execute { core.value.begin() }
    }

    /// Cancels every running task with `reason` and starts nothing more.
    public func stop(reason: CancelReason) {
        let core = self.core
        supervisor.loop.execute { core.value.stop(reason) }
    }

    /// Carries out `setup` for the batch (`SupervisorSetup`): SIGINT stops it with reason
    /// `user`, SIGTERM with `shutdown` (running tasks cancelled, nothing new started; a
    /// second one kills what still runs at once); the control socket and the metrics show
    /// every task of the job, and the metrics its deadline. Call before `start()`: the
    /// metrics file gets its last page once every task has ended (`waitForSummary`).
    /// - Throws: `SupervisorSetup.Failure` when the control socket asked for, or the
    ///   metrics, cannot be had.
    public func setUp(_ setup: SupervisorSetup) throws(SupervisorSetup.Failure) {
        let core = self.core
        let supervisor = self.supervisor
        try setup.carryOut(on: supervisor, SupervisorSetup.Target(
            watchTermination: { grace, onSignal in
                supervisor.onSignals(Supervisor.terminationSignals) { signal in
                    onSignal(signal)
                    core.value.terminationSignal(signal == .interrupt ? .user : .shutdown, shutdownGrace: grace)
                }
            },
            serveControl: { (setup, onListenFailure) throws(ControlSocketError) in
                try supervisor.startControlServer(at: setup.controlPath, describing: setup.controlDescription, onRefused: setup.onRefusedClient,
                                                  onListenFailure: onListenFailure) {
                    (core.value, { server in core.value.control = server })
                }
            },
            serveMetrics: { (settings, onProblem) throws(MetricsError) in
                try supervisor.startMetrics(settings, command: "batch", onProblem: onProblem) {
                    (core.value, core.value.machine.deadline)
                }
            },
            serveLivePage: { [journal] address throws(LivePageError) in
                let url = try supervisor.startLivePage(address) { (core.value, { server in core.value.livePageControl = server }) }
                // Its token is the key to the run's tasks: for the run's own user only.
                if let failure = journal.writeFile("ui-url", Array((url + "\n").utf8), mode: 0o600) { setup.onNotice(failure) }
                return url
            }
        ))
    }

    /// How many engine warnings came so far.
    public var engineWarningCount: Int { supervisor.engineWarningCount }

    /// Runs a short command of the engine's and waits for it (`Supervisor.runEngineCommand`).
    public func runEngineCommand(_ arguments: [String], limit: Duration) -> EngineCommandResult {
        supervisor.runEngineCommand(arguments, limit: limit)
    }

    /// Gives up on a batch that was never started: stops its supervisor's loop.
    public func abandon() {
        supervisor.shutdown()
    }

    /// Blocks until every task has finished, then returns the summary (and shuts the
    /// supervisor down). Not on the loop thread.
    public func waitForSummary() -> BatchSummary {
        let summary = completion.waitBlocking()
        supervisor.shutdown()
        return summary
    }
}

/// The batch on its loop thread: the queue machine, the task handles, the journal. Made
/// before the loop runs anything of it; used on the loop thread only.
final class BatchState: EventSink {
    private(set) var machine: QueueMachine
    /// The job's elements: each task that is no sweep, each element of a sweep or array.
    let elements: JobElements
    /// The list inputs append to, kept between inputs so that none allocates one.
    private var spareActions: [QueueMachine.Action] = []
    let job: JobFile
    /// Where tasks run when not here: each a job step of the allocation (`srun`).
    private let launcher: RemoteLauncher?
    /// For each task whose `python-bridge` is on (`BatchOptions.pythonBridge`).
    private let pythonBridge: String?
    private let runID: String
    let supervisor: Supervisor
    let journal: RunJournal
    private let encoder: EventEncoder
    private let onUpdate: @Sendable (BatchUpdate) -> Void
    private let onDone: @Sendable (BatchSummary) -> Void
    private let startedAt: MonotonicInstant
    // The three maps below hold running (or retrying) tasks only: a finished task keeps
    // nothing here but its compact record in `finished`.
    private var indexByTaskID: [Int: Int] = [:]
    /// The running attempt of each task, steered through its handle as an embedding
    /// program steers its own (`TaskHandle.syncOperations`).
    private(set) var handles: [Int: TaskHandle] = [:]
    /// Tasks the queue started that are not running yet: their log is being made on the
    /// journal's thread (for as long as the run directory stalls), or their runner has yet
    /// to start. What was asked of each meanwhile (a cancel, a stop, an
    /// extend) waits here, in order, and is done to it once it has started.
    private(set) var starting: [Int: [(TaskHandle.SynchronousOperations) -> Void]] = [:]
    private var lastOutcome: [Int: TaskOutcome] = [:]
    private(set) var finished: FinishedTasks
    private var journalThrottle = FrequentEventThrottle(interval: BatchState.journalProgressInterval)
    /// The elements that succeeded in the run being resumed, until `begin` records them.
    private var resumed: [(element: Int, name: String)]
    /// The retry timer, made on the loop thread at its first use.
    private var timer: LoopTimer?
    private var timerClosed = false
    private var armedFor: MonotonicInstant?
    private var stoppedBy: CancelReason?
    private var reported = false
    /// At most this grace for tasks cancelled by a stop (a shutdown grace's share).
    private var stopGrace: Duration?
    /// The batch's control socket; its watchers get the journal's lines.
    var control: ControlServer?
    /// The live page's control server (socketless); its event streams get the journal's lines.
    var livePageControl: ControlServer?
    /// Which running tasks lag their peers (`stragglers`); nil when the job file asks for
    /// none, and then no tick runs.
    var stragglerWatch: StragglerWatch?
    /// Its tick, made at `begin`.
    var stragglerTimer: LoopTimer?

    /// Progress, and the other events a task can cause at any rate (protocol errors past
    /// the first ten, replies to its extends, results, expiring warnings), go to the journal
    /// at most this often per task and kind; what is held back is counted in `thinned` lines.
    static let journalProgressInterval = Duration.seconds(1)

    init(job: JobFile, runID: String, succeeded: Set<String>, failFast: Bool, supervisor: Supervisor, journal: RunJournal,
         launcher: RemoteLauncher? = nil, pythonBridge: String? = nil,
         onUpdate: @escaping @Sendable (BatchUpdate) -> Void, onDone: @escaping @Sendable (BatchSummary) -> Void) {
        self.launcher = launcher
        self.pythonBridge = pythonBridge
        self.job = job
        self.runID = runID
        self.supervisor = supervisor
        self.journal = journal
        self.onUpdate = onUpdate
        self.onDone = onDone
        encoder = EventEncoder(runID: runID)
        startedAt = MonotonicInstant.now()
        journal.onFailure { [loop = supervisor.loop] failure in _ = loop.execute { onUpdate(.recordFailed(failure)) } }
        machine = QueueMachine(job: job, startedAt: startedAt, failFast: failFast, succeeded: succeeded)
        elements = machine.elements
        resumed = elements.elements(named: succeeded)
        finished = FinishedTasks(taskCount: elements.count)
        if job.stragglers != nil || job.tasks.contains(where: { $0.stragglers != nil }) { stragglerWatch = StragglerWatch() }
    }

    func begin() {
        let now = MonotonicInstant.now()
        for (i, name) in resumed {
            let report = TaskReport(name: name, outcome: .succeeded, reason: nil, detail: "succeeded in the resumed run",
                                    exitCode: 0, attempts: 0, duration: nil, result: nil, resumed: true)
            finished.keep(report, at: i)
            record(batchEvent: "finished", task: name, now: now) { w in
                w.key("state"); w.string("succeeded")
                w.key("resumed"); w.bool(true)
            }
            onUpdate(.finished(report))
        }
        resumed = []
        decide(at: now) { machine, actions in machine.schedule(now: now, into: &actions) }
        afterInput(now)
        if stragglerWatch != nil, !reported { scheduleStragglerCheck() }
    }

    /// The first SIGINT/SIGTERM stops the batch; a later one kills what still runs.
    func terminationSignal(_ reason: CancelReason, shutdownGrace: Duration?) {
        if stoppedBy != nil {
            for index in Set(handles.keys).union(starting.keys) { whenStarted(index) { $0.escalate() } }
            return
        }
        stopGrace = shutdownGrace.map(Supervisor.grace(within:))
        stop(reason)
    }

    func stop(_ reason: CancelReason) {
        guard stoppedBy == nil else { return }
        stoppedBy = reason
        let now = MonotonicInstant.now()
        decide(at: now) { machine, actions in machine.stop(reason: reason, now: now, into: &actions) }
        afterInput(now)
    }

    func receive(_ encoded: inout EncodedEvent) {
        let event = encoded.event
        guard let index = indexByTaskID[event.task.id] else { return }
        onUpdate(.taskEvent(event))
        if stragglerWatch != nil { watchPace(index, event) }
        let lines = encoded.lines(through: &journalThrottle)
        guard !lines.isEmpty else { return }
        // Progress and heartbeats (and the counts of thinned lines before an event's own) are
        // what a stalled journal may hold back; every other event is kept.
        let importance: QueuedWriter.Importance = if case .latest = QueuedWriter.Importance.of(event) { .event } else { .kept }
        for (i, line) in lines.enumerated() {
            writeJournal(line, i == lines.count - 1 ? importance : .event)
            // The last line is the event's own; any before it are `thinned` counts.
            onUpdate(.journalLine(line, event: i == lines.count - 1 ? event : nil))
            broadcast(line)
        }
        let now = event.time
        switch event.kind {
        case let .started(pid):
            onUpdate(.started(task: elements.name(index), attempt: machine.attempts(of: index), pid: pid, policy: elements.task(index).policy))
        case .ready:
            decide(at: now) { machine, actions in machine.taskReady(index, now: now, into: &actions) }
        case let .exited(outcome):
            // Nothing more comes from this attempt's runner.
            indexByTaskID[event.task.id] = nil
            handles[index] = nil
            starting[index] = nil
            lastOutcome[index] = outcome
            if case .failedToStart = outcome.termination {
                onUpdate(.started(task: elements.name(index), attempt: machine.attempts(of: index), pid: nil, policy: elements.task(index).policy))
            }
            decide(at: now) { machine, actions in machine.attemptEnded(index, QueueMachine.AttemptResult(outcome), now: now, into: &actions) }
        default:
            return
        }
        afterInput(now)
    }

    /// Feeds the machine one input, then carries out what it decided, in order. The list is
    /// the spare one, kept between inputs; an action that brings another input back here (a
    /// start whose task fails at once) gets a list of its own, the machine settled by then.
    @discardableResult
    func decide<Answer>(at now: MonotonicInstant, _ input: (inout QueueMachine, inout [QueueMachine.Action]) -> Answer) -> Answer {
        var actions: [QueueMachine.Action] = []
        swap(&actions, &spareActions)
        let answer = input(&machine, &actions)
        for action in actions { carryOut(action, at: now) }
        actions.removeAll(keepingCapacity: true)
        spareActions = actions
        return answer
    }

    private func carryOut(_ action: QueueMachine.Action, at now: MonotonicInstant) {
        switch action {
        case let .start(index, attempt, slots, amounts, endsBy):
            launch(index, attempt: attempt, slots: slots, amounts: amounts, endsBy: endsBy)
        case let .cancel(index, reason):
            let grace = stopGrace.map { min(elements.task(index).policy.grace, $0) }
            whenStarted(index) { $0.cancel(reason: reason, grace: grace) }
        case let .retry(index, nextAttempt, at):
            let name = elements.name(index)
            let because = lastOutcome[index].map(Self.failureReason) ?? "failed"
            record(batchEvent: "retry", task: name, now: now) { w in
                w.key("attempt"); w.int(nextAttempt)
                w.key("after"); w.seconds((at - now).seconds)
                w.key("because"); w.string(because)
                if let outcome = lastOutcome[index] { w.key("outcome"); w.string(outcome.kind.rawValue) }
            }
            onUpdate(.retrying(task: name, attempt: nextAttempt, after: at - now, because: because))
        case let .finished(index, state, attempts):
            let report = makeReport(index, state, attempts: attempts)
            finished.keep(report, at: index)
            lastOutcome[index] = nil
            record(batchEvent: "finished", task: report.name, now: now) { w in
                w.key("state"); w.string(report.outcome.rawValue)
                if let reason = report.reason { w.key("reason"); w.string(reason) }
                if let detail = report.detail { w.key("detail"); w.string(detail) }
                if let code = report.exitCode { w.key("exit_code"); w.int(Int(code)) }
                w.key("attempts"); w.int(report.attempts)
                Self.writeHangFields(report, into: &w)
            }
            onUpdate(.finished(report))
        }
    }

    /// Does `request` to task `index`'s attempt now if it runs, or once it has started.
    func whenStarted(_ index: Int, _ request: @escaping (TaskHandle.SynchronousOperations) -> Void) {
        if starting[index] != nil {
            starting[index]!.append(request)
        } else if let handle = handles[index] {
            request(handle.syncOperations)
        }
    }

    /// Starts an attempt the queue decided on: its log is made off the loop, then it is
    /// spawned here. The queue counts it as running from now (its resources are taken), so a
    /// cancel or a stop that comes while its log is made is done to it once it has started
    /// (`starting`), a process that then ends at once: the journal gets its attempt, start
    /// and end, the summary its cancel's reason, and `--resume` runs it again, as for any
    /// task cancelled just after its start. Not starting it would leave an attempt with
    /// neither.
    private func launch(_ index: Int, attempt: Int, slots: [String: [String]], amounts: [String: Int], endsBy: MonotonicInstant?) {
        let task = elements.task(index)
        var environment = task.environment
        environment["OVERTIME_ATTEMPT"] = String(attempt)
        let entry = elements.entry(of: index)
        if let sweep = job.tasks[entry].sweep {
            environment["OVERTIME_SWEEP"] = job.tasks[entry].name
            environment["OVERTIME_INDEX"] = String(sweep.index(at: elements.position(of: index)))
        }
        for (pool, ids) in slots {
            environment[JobFile.resourceVariable(forPool: pool)] = ids.joined(separator: ",")
            // Under srun the engine binds the step's GPUs and sets this itself.
            if pool == "gpu", launcher == nil { environment["CUDA_VISIBLE_DEVICES"] = ids.joined(separator: ",") }
        }
        for (pool, amount) in amounts {
            environment[JobFile.resourceVariable(forPool: pool)] = String(amount)
        }
        var policy = task.policy
        policy.endsBy = endsBy
        let log = journal.logPath(for: task.name)
        var spec = TaskSpec(name: task.name, arguments: task.command, settings: task.settings, pythonBridge: pythonBridge,
                            stdin: .null, stdout: .file(path: log, append: true), stderr: .file(path: log, append: true))
        spec.environment = environment
        spec.policy = policy
        starting[index] = []
        let core = LoopBound(self, loop: supervisor.loop)
        journal.prepareLog(task.name, attempt: attempt) { [spec] failure in
            _ = core.loop.execute { core.value.spawn(index, spec, attempt: attempt, slots: slots, amounts: amounts, log: log, failure) }
        }
    }

    /// Does what was asked of an attempt while it was starting, now that its runner takes it.
    private func runnerStarted(_ index: Int, _ handle: TaskHandle) {
        guard handles[index] === handle, let asked = starting.removeValue(forKey: index) else { return }
        for request in asked { request(handle.syncOperations) }
    }

    /// Spawns an attempt whose log is ready (marked, or not: `failure` says why).
    private func spawn(_ index: Int, _ spec: TaskSpec, attempt: Int, slots: [String: [String]], amounts: [String: Int], log: String,
                       _ failure: String?) {
        if let failure { onUpdate(.recordFailed(failure)) }
        let name = spec.name
        let handle: TaskHandle
        if let launcher {
            var step = launcher
            step.prefix += SrunExecutor.stepOptions(task: name, gpus: slots["gpu"]?.count, cpus: amounts["cpu"])
            handle = supervisor.spawn(spec, via: step, log: SrunExecutor.absolute(log))
        } else {
            handle = supervisor.spawn(spec)
        }
        indexByTaskID[handle.ref.id] = index
        handles[index] = handle
        // The supervisor starts the runner on the loop's next turn, queued just now; the loop
        // runs what it is given in order, so this comes right after.
        let core = LoopBound(self, loop: supervisor.loop)
        _ = supervisor.loop.execute { core.value.runnerStarted(index, handle) }
        let memoryMax = spec.memory.max
        record(batchEvent: "attempt", task: name, now: MonotonicInstant.now()) { w in
            w.key("attempt"); w.int(attempt)
            // The report shows a task's peak against the max in force, whichever scope gave it.
            if let memoryMax { w.key("memory_max"); w.int(Int(clamping: memoryMax)) }
            if !slots.isEmpty || !amounts.isEmpty {
                w.key("resources")
                w.beginObject()
                for (pool, ids) in slots.sorted(by: { $0.key < $1.key }) {
                    w.key(pool)
                    w.beginArray()
                    for id in ids { w.string(id) }
                    w.endArray()
                }
                for (pool, amount) in amounts.sorted(by: { $0.key < $1.key }) {
                    w.key(pool); w.int(amount)
                }
                w.endObject()
            }
        }
    }

    static func failureReason(_ outcome: TaskOutcome) -> String {
        if outcome.kind == .oom { return "oom" }
        if let reason = outcome.cancelReason { return outcome.killed ? "\(reason.rawValue), killed" : reason.rawValue }
        switch outcome.termination {
        case let .exited(code): return "exit \(code)"
        case let .signaled(signal): return signal.name
        case let .failedToStart(failure): return failure.message
        }
    }

    private func makeReport(_ index: Int, _ state: QueueMachine.State, attempts: Int) -> TaskReport {
        let outcome = lastOutcome[index]
        var report = TaskReport(name: elements.name(index), outcome: .failed, reason: nil, detail: nil, exitCode: outcome?.exitCode,
                                attempts: attempts, duration: outcome?.elapsed, result: outcome?.result, resumed: false,
                                protocolErrors: outcome?.protocolErrors ?? 0, usage: outcome?.usage ?? ResourceUsage(),
                                phase: outcome?.phase, stalls: outcome?.stalls ?? 0)
        switch state {
        case .succeeded:
            report.outcome = .succeeded
        case .failed:
            if let outcome {
                if outcome.kind == .oom {
                    report.reason = "oom"
                    let kills = outcome.oomKills ?? 0
                    report.detail = "the kernel's OOM killer killed \(kills == 1 ? "a process" : "\(kills) processes") of it"
                } else if let reason = outcome.cancelReason {
                    report.reason = reason.rawValue
                    if outcome.killed { report.detail = "killed after grace" }
                } else {
                    switch outcome.termination {
                    case let .exited(code): report.reason = "exit"; report.detail = "exit \(code)"
                    case let .signaled(signal):
                        report.reason = "signal"
                        report.detail = signal.name + (outcome.signalSender == .outside ? ", not sent by Overtime" : "")
                    case let .failedToStart(failure): report.reason = "exit"; report.detail = failure.message
                    }
                }
            }
        case let .skipped(reason):
            report.outcome = .skipped
            report.exitCode = nil
            switch reason {
            case let .dependency(name):
                report.reason = "dependency"
                report.detail = "'\(name)' did not succeed"
            case .deadline:
                report.reason = "deadline"
                report.detail = "less than its min-start left before the batch deadline"
            case let .stopped(stoppedBy):
                report.reason = stoppedBy.rawValue
                report.detail = stoppedBy == .failFast
                    ? "the batch stopped at the first failure (--fail-fast)" : "the batch was stopped"
            case .cancelled:
                report.reason = CancelReason.user.rawValue
                report.detail = "cancelled by an operator before it started"
            }
        case .waiting, .retryWait, .running:
            break
        }
        return report
    }

    func record(batchEvent name: String, task: String, now: MonotonicInstant, _ fields: (inout JSONWriter) -> Void) {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.key("time"); w.string(encoder.timestamp(now))
        w.key("run"); w.string(runID)
        w.key("task"); w.string(task)
        w.key("event"); w.string(name)
        fields(&w)
        w.endObject()
        w.raw("\n")
        writeJournal(w.bytes)
        onUpdate(.journalLine(w.bytes, event: nil))
        broadcast(w.bytes)
    }

    /// A journal line to the control socket's watchers, who see what the journal gets.
    private func broadcast(_ line: [UInt8]) {
        if let control, control.hasWatchers { control.broadcast(line) }
        if let livePageControl, livePageControl.hasWatchers { livePageControl.broadcast(line) }
    }

    /// Appends to the journal, never waiting on its filesystem; a failure to write is said
    /// when the journal's thread finds it (`BatchUpdate.recordFailed`).
    private func writeJournal(_ line: [UInt8], _ importance: QueuedWriter.Importance = .kept) {
        journal.append(line, importance)
    }

    /// After each input: re-arm the retry timer, or wrap up when everything is final.
    func afterInput(_ now: MonotonicInstant) {
        if machine.isDone {
            finish(now)
            return
        }
        if let wake = machine.nextWake, armedFor.map({ wake < $0 }) ?? true, !timerClosed {
            armedFor = wake
            let timer = self.timer ?? LoopTimer(loop: supervisor.loop)
            self.timer = timer
            timer.schedule(inNanoseconds: max(0, (wake - now).nanoseconds)) { [weak self] in
                guard let self else { return }
                self.armedFor = nil
                let now = MonotonicInstant.now()
                self.decide(at: now) { machine, actions in machine.schedule(now: now, into: &actions) }
                self.afterInput(now)
            }
        }
    }

    private func finish(_ now: MonotonicInstant) {
        guard !reported else { return }
        reported = true
        timer?.close()
        timer = nil
        timerClosed = true
        stragglerTimer?.close()
        stragglerTimer = nil
        control?.close()
        control = nil
        // Every task has ended: nothing waits on the journal's last lines but the summary,
        // which says what could not be written.
        journal.drain()
        var summary = BatchSummary(runID: runID, runDirectory: journal.directory,
                                   tasks: (0..<elements.count).compactMap { finished.report(at: $0, name: elements.name($0)) },
                                   elapsed: now - startedAt, stoppedBy: stoppedBy)
        summary.recordFailures = journal.failures
        summary.lostJournalLines = journal.lostLines
        summary.containment = supervisor.containment
        if let failure = journal.writeFile("summary.json", Self.summaryJSON(summary, encoder: encoder, now: now)) {
            onUpdate(.recordFailed(failure))
            summary.recordFailures = journal.failures
        }
        onDone(summary)
    }

    /// `phase` and `stalls` of a task's `finished` line and summary row, when it named a
    /// phase or stalled: a run of tasks that do neither reads as before.
    static func writeHangFields(_ report: TaskReport, into w: inout JSONWriter) {
        if let phase = report.phase { w.key("phase"); w.string(phase) }
        if report.stalls > 0 { w.key("stalls"); w.int(report.stalls) }
    }

    static func summaryJSON(_ summary: BatchSummary, encoder: EventEncoder, now: MonotonicInstant) -> [UInt8] {
        var w = JSONWriter(capacity: 1024)
        w.beginObject()
        w.key("run"); w.string(summary.runID)
        w.key("finished"); w.string(encoder.timestamp(now))
        w.key("elapsed"); w.seconds(summary.elapsed.seconds)
        w.key("succeeded"); w.bool(summary.succeeded)
        w.key("stopped_by")
        if let reason = summary.stoppedBy { w.string(reason.rawValue) } else { w.null() }
        if let containment = summary.containment { w.key("containment"); containment.write(into: &w) }
        // Written only when the journal failed and the summary still could be: it says the
        // journal beside it is not the whole story.
        if !summary.recordFailures.isEmpty {
            w.key("record_errors")
            w.beginArray()
            for failure in summary.recordFailures { w.string(failure) }
            w.endArray()
            w.key("lost_journal_lines"); w.int(summary.lostJournalLines)
        }
        w.key("tasks")
        w.beginArray()
        for report in summary.tasks {
            w.beginObject()
            w.key("name"); w.string(report.name)
            w.key("outcome"); w.string(report.outcome.rawValue)
            w.key("reason"); if let r = report.reason { w.string(r) } else { w.null() }
            w.key("detail"); if let d = report.detail { w.string(d) } else { w.null() }
            w.key("exit_code"); if let c = report.exitCode { w.int(Int(c)) } else { w.null() }
            w.key("attempts"); w.int(report.attempts)
            w.key("duration"); if let d = report.duration { w.seconds(d.seconds) } else { w.null() }
            w.key("result"); if let r = report.result { w.value(r) } else { w.null() }
            w.key("resumed"); w.bool(report.resumed)
            w.key("protocol_errors"); w.int(report.protocolErrors)
            EventEncoder.writeUsage(report.usage, into: &w)
            writeHangFields(report, into: &w)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        w.raw("\n")
        return w.bytes
    }
}

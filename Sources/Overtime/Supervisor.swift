import OvertimeLoop
import OvertimeProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs tasks as child processes under their budgets, on one event loop.
///
/// The supervisor is the embeddable engine behind `overtime run` (and later the queue):
/// it spawns each task in a session of its own with the channel on fd 3, applies the
/// budget of DESIGN §1, cancels as DESIGN §2 says, and reports every event to its sinks
/// (`EventSink`: the handler given here, a control socket's watchers, a batch's journal).
/// It prints nothing and installs no signal handlers unless asked.
///
/// ```swift
/// let supervisor = try Supervisor { event in print(event.kind) }
/// let task = supervisor.spawn(TaskSpec(arguments: ["python3", "train.py"],
///                                      policy: BudgetPolicy(budget: .seconds(60))))
/// let outcome = await task.outcome
/// ```
public final class Supervisor: Sendable {
    /// Called for every event, in order, on the supervisor's loop thread: keep it quick.
    public typealias EventHandler = @Sendable (TaskEvent) -> Void

    /// Names this run; given to every task as `OVERTIME_RUN`.
    public let runID: String
    /// How its tasks are held whole (DESIGN §7).
    public let containment: Containment
    private let cgroupDirectories: [String]
    private let cgroupDirectoriesRemoved = Atomic<Bool>(false)
    let loop: EventLoop
    private let nextTaskID = Atomic<Int>(1)
    /// Loop-thread state: the running tasks and the signal watchers.
    let core: LoopBound<SupervisorState>

    /// Starts a supervisor with its own loop thread.
    /// - Parameters:
    ///   - runID: the run's id (default: a fresh one such as `20261130-050315-3fa2c9d1`).
    ///   - onEvent: receives every event on the loop thread.
    /// - Throws: `SystemError` when the loop cannot start.
    public convenience init(runID: String = RunID.generate(), onEvent: @escaping EventHandler = { _ in }) throws {
        try self.init(runID: runID, sinks: [HandlerSink(onEvent)])
    }

    /// Starts a supervisor with its own loop thread whose events go to `sinks`, in order
    /// (a sink that wants the JSON lines gets them encoded once for all).
    /// - Throws: `SystemError` when the loop cannot start.
    /// - Parameter containment: `.automatic` for a cgroup per task where the machine
    ///   allows it (see `containment` for what it got), `.off` for process groups only.
    public init(runID: String = RunID.generate(), sinks: [any EventSink & Sendable],
                containment request: Containment.Request = .automatic) throws {
        self.runID = runID
        _ = Self.signalsIgnoredAtStart  // read before any watcher of ours replaces a disposition
        let loop = try EventLoop()
        self.loop = loop
        let core = SupervisorState(runID: runID)
        core.sinks = sinks
        if request == .automatic {
            let (tree, notes) = CgroupTree.make(probe: CgroupProbe.probe(), runID: runID)
            core.cgroups = tree
            containment = Containment(tree: tree, notes: notes)
        } else {
            containment = Containment.off
        }
        cgroupDirectories = core.cgroups?.directories ?? []
        self.core = LoopBound(core, loop: loop)
        if let trees = core.cgroups?.directories {
            // Before any spawn (the loop runs jobs in order): the guard starts with them and
            // knows what to empty, even if the supervisor dies before its first task.
            loop.execute { loop.guardCgroupTrees(trees) }
        }
    }

    /// Starts a task. Spawn failures (command not found, not executable) are not thrown:
    /// they arrive as the task's outcome, with exit code 127 or 126, like any other ending.
    public func spawn(_ spec: TaskSpec) -> TaskHandle {
        start(spec) { [self] handle, core in TaskRunner(spec: spec, handle: handle, supervisor: self, core: core).start() }
    }

    /// A handle for a new task, and its runner started on the loop by `begin`.
    private func start(_ spec: TaskSpec, _ begin: @escaping @Sendable (TaskHandle, SupervisorState) -> Void) -> TaskHandle {
        let ref = TaskRef(id: nextTaskID.add(1, ordering: .relaxed).oldValue, name: spec.name)
        let handle = TaskHandle(ref: ref, supervisor: self)
        let core = self.core
        let accepted = loop.execute { begin(handle, core.value) }
        if !accepted {
            // Never started: its outcome says so at once, rather than never coming.
            handle.complete(TaskOutcome(task: ref, pid: nil,
                                        termination: .failedToStart(SpawnFailure(errno: 0, message: "the supervisor has shut down", beforeExec: true)),
                                        cancelReason: nil, killed: false, elapsed: .zero, lastProgress: nil, result: nil,
                                        protocolErrors: 0, wasReady: false))
        }
        return handle
    }

    /// Starts a task elsewhere through an executor (DESIGN §8): the launcher runs `overtime
    /// run --control-stdio` there, whose events come back as this task's and which takes this
    /// task's requests; the task's output is appended to `log`, a file the remote side
    /// reaches at the same path (a shared filesystem). Failures come as the outcome.
    public func spawn(_ spec: TaskSpec, via launcher: RemoteLauncher, log: String) -> TaskHandle {
        start(spec) { [self] handle, core in
            RemoteTaskRunner(spec: spec, launcher: launcher, log: log, handle: handle, supervisor: self, core: core).start()
        }
    }

    /// Cancels every running task with `reason`.
    public func cancelAll(reason: CancelReason, grace: Duration? = nil) {
        let core = self.core
        loop.execute {
            for runner in core.value.runners.values { _ = runner.cancel(reason: reason, grace: grace) }
        }
    }

    /// Holds SIGINT and SIGTERM on the calling thread (and the threads it starts, the loop's
    /// among them), so that one arriving before `cancelAllOnTerminationSignals` (or a
    /// batch's `stopOnTerminationSignals`) has its handler installed waits for it rather
    /// than killing the process with its default action, leaving the run's cgroups behind
    /// (they are made when the supervisor is). The loop thread takes each signal it watches
    /// whatever mask it inherited; the calling thread keeps these blocked. For a program
    /// whose main thread does nothing else with signals (Overtime's CLI): call first, before
    /// making the supervisor.
    public static func holdTerminationSignalsUntilWatched() {
        var held = sigset_t()
        sigemptyset(&held)
        for signal in terminationSignals { sigaddset(&held, signal.rawValue) }
        pthread_sigmask(SIG_BLOCK, &held, nil)
    }

    /// The signals that end a run (SIGINT: the user; SIGTERM: a shutdown), watched by
    /// `cancelAllOnTerminationSignals` and a batch's `stopOnTerminationSignals`. One list,
    /// since each signal `holdTerminationSignalsUntilWatched` holds must be watched, or it
    /// stays blocked for good.
    static let terminationSignals: [Signal] = [.interrupt, .terminate]

    /// Turns the supervisor's own SIGINT into a `user` cancel and SIGTERM into a `shutdown`
    /// cancel of every task (tasks live in sessions of their own, so a terminal's Ctrl-C
    /// reaches them only this way). A second SIGINT or SIGTERM during the grace kills them
    /// at once. Installed before any spawn that follows this call.
    /// - Parameters:
    ///   - shutdownGrace: the time an orchestrator gives the whole shutdown (Kubernetes'
    ///     terminationGracePeriodSeconds): each task's grace is clipped to fit inside it.
    ///   - onSignal: also told of each signal, on the loop thread.
    public func cancelAllOnTerminationSignals(shutdownGrace: Duration? = nil, _ onSignal: @escaping @Sendable (Signal) -> Void = { _ in }) {
        let core = self.core
        onSignals(Self.terminationSignals) { signal in
            onSignal(signal)
            let core = core.value
            core.terminationSignals += 1
            if core.termination == nil {
                core.termination = (signal == .interrupt ? .user : .shutdown, shutdownGrace)
                core.interrupted = signal == .interrupt
            }
            for runner in core.runners.values { core.applyTermination(to: runner) }
        }
    }

    /// The longest task grace that fits in an orchestrator's shutdown grace: SIGKILL must
    /// land, and Overtime exit, before the orchestrator's own SIGKILL. A second is kept in
    /// hand (half, for a shutdown grace under two seconds).
    public static func grace(within shutdownGrace: Duration) -> Duration {
        let margin = min(.seconds(1), shutdownGrace / 2)
        return max(.zero, shutdownGrace - margin)
    }

    /// Of the signals a supervisor acts on, those the process was started with ignored: the
    /// caller's way of saying "not this one" (`nohup` ignores SIGHUP; a non-interactive
    /// shell ignores SIGINT and SIGQUIT for a command run in the background, so that the
    /// terminal's Ctrl-C does not reach it). They stay ignored: neither acted on nor passed
    /// on. Tasks still start with every signal at its default.
    public static let signalsIgnoredAtStart: Set<Signal> = {
        Set((terminationSignals + forwardedSignals).filter { signal in
            var current = sigaction()
            guard sigaction(signal.rawValue, nil, &current) == 0, let handler = current.__sigaction_handler.sa_handler else { return false }
            return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
        })
    }()

    /// Runs `handler` on the loop thread for each of `signals` the supervisor receives
    /// (except those ignored at start, `signalsIgnoredAtStart`).
    func onSignals(_ signals: [Signal], _ handler: @escaping @Sendable (Signal) -> Void) {
        let core = self.core
        loop.execute { [self] in
            for signal in signals where !Self.signalsIgnoredAtStart.contains(signal) {
                do {
                    core.value.signalWatchers.append(try SignalWatcher(loop: loop, signal: signal.rawValue) { handler(Signal(rawValue: $0)) })
                } catch {
                    // uv_signal_start fails only for invalid signal numbers.
                    assertionFailure("\(error)")
                }
            }
        }
    }

    /// The runner of a task still running, for the task's own handle (`TaskHandle`), on
    /// the loop thread.
    func runner(of handle: TaskHandle) -> (any SupervisedTask)? {
        core.value.runners[handle.ref.id]
    }

    /// Adds a sink after those given at start (a control socket's watchers, a batch), on the
    /// loop thread; it sees the events from then on.
    func addSink(_ sink: any EventSink) {
        core.value.sinks.append(sink)
    }

    /// Takes a sink out, on the loop thread.
    func removeSink(_ sink: any EventSink) {
        core.value.sinks.removeAll { $0 === sink }
    }

    /// Makes this process a child subreaper (PID 1 is one already): orphans of the tasks
    /// (a daemon that called setsid, a grandchild whose parent died) are reparented to it
    /// and reaped when they exit, and those still running when the supervisor shuts down
    /// are killed. For a program whose only children are its tasks — the `overtime` CLI;
    /// it takes any exited child that is not a task.
    public func adoptOrphans() {
        loop.execute { [loop] in _ = loop.adoptOrphans() }
    }

    /// Tells `handler`, on the loop thread, of what befalls the supervisor itself rather than
    /// a task: today, that the task guard (which kills the tasks' groups should the
    /// supervisor be killed) died, and whether a new one took its place.
    public func onNotice(_ handler: @escaping @Sendable (String) -> Void) {
        loop.execute { [loop] in
            loop.onGuardLost { replaced in
                handler(replaced
                    ? "the task guard died; a new one guards every running task"
                    : "the task guard died and no new one could be started: if Overtime is killed now, tasks' children may outlive it")
            }
        }
    }

    /// The signals an entrypoint passes on rather than acting on: SIGHUP, SIGQUIT, SIGUSR1,
    /// SIGUSR2, SIGWINCH.
    public static let forwardedSignals: [Signal] = [.hangup, .quit, .user1, .user2, .windowChange]

    /// Passes each of `signals` that the supervisor receives on to every running task's
    /// process group, instead of letting it end the supervisor and orphan the tasks.
    public func forwardSignals(_ signals: [Signal] = Supervisor.forwardedSignals) {
        let core = self.core
        onSignals(signals) { signal in
            for runner in core.value.runners.values { runner.forward(signal: signal) }
        }
    }

    /// Turns `warning.signal` into an `expiring` message to every running task (DESIGN §8)
    /// with the time the engine leaves: `warning.lead`, else, in a Slurm job, its end time
    /// minus now (asked of `squeue`, then `scontrol`, each a child with a time limit, so the
    /// loop goes on meanwhile), else `EngineTimeSource.defaultLead`. Leave the signal out of
    /// `forwardSignals`: the tasks hear the warning, not the signal.
    /// - Parameter onNote: told, on the loop thread, of each warning and of a Slurm query
    ///   that failed.
    public func expireOnEngineSignal(_ warning: EngineWarning, _ onNote: @escaping @Sendable (String) -> Void = { _ in }) {
        let core = self.core
        let loop = self.loop
        let warned = engineWarnings
        onSignals([warning.signal]) { signal in
            warned.count.add(1, ordering: .relaxed)
            func tell(_ remaining: Duration, _ source: EngineTimeSource) {
                for runner in core.value.runners.values { runner.engineExpiring(remaining: remaining, source: source) }
            }
            if let lead = warning.lead {
                onNote("received \(signal.name): the engine ends in \(DurationText.format(lead)) (--warn-lead); telling every task (expiring)")
                tell(lead, .warnLead)
                return
            }
            guard let job = warning.slurmJobID else {
                onNote("received \(signal.name): no --warn-lead and no Slurm job; telling every task (expiring) the default \(DurationText.format(EngineTimeSource.defaultLead))")
                tell(EngineTimeSource.defaultLead, .fallback)
                return
            }
            let core = core.value
            func ask(_ queries: ArraySlice<(arguments: [String], parse: (String) -> Int?)>, problems: [String]) {
                guard let query = queries.first else {
                    onNote("received \(signal.name): the Slurm job's end time is unknown (\(problems.joined(separator: "; "))); telling every task (expiring) the default \(DurationText.format(EngineTimeSource.defaultLead))")
                    tell(EngineTimeSource.defaultLead, .fallback)
                    return
                }
                EngineCommand.run(query.arguments, limit: SlurmEndTime.queryLimit, loop: loop,
                                  environment: core.inheritedEnvironment, input: core.nullInput) { result in
                    guard result.succeeded, let end = query.parse(result.output) else {
                        let problem = result.succeeded ? "\(query.arguments[0]): no end time in '\(result.output.prefix(80).split(separator: "\n").first ?? "")'" : result.problem
                        ask(queries.dropFirst(), problems: problems + [problem])
                        return
                    }
                    let remaining = Duration.seconds(max(0, end - SlurmEndTime.wallNow()))
                    onNote("received \(signal.name): Slurm job \(job) ends in \(DurationText.format(remaining)); telling every task (expiring)")
                    tell(remaining, .slurm)
                }
            }
            ask([(["squeue", "-h", "-j", job, "-o", "%e"], SlurmEndTime.parse),
                 (["scontrol", "show", "job", job], SlurmEndTime.parseScontrol)], problems: [])
        }
    }

    /// How many engine warnings (`expireOnEngineSignal`) came so far.
    public var engineWarningCount: Int { engineWarnings.count.load(ordering: .relaxed) }
    /// A box, so that the signal handler holds the counter and not the supervisor.
    private final class WarningCount: Sendable { let count = Atomic<Int>(0) }
    private let engineWarnings = WarningCount()

    /// Runs a short command of the engine's (`scontrol requeue`) as a child of the loop, cut
    /// at `limit`, and waits for it. Not on the loop thread.
    public func runEngineCommand(_ arguments: [String], limit: Duration) -> EngineCommandResult {
        let done = Completion<EngineCommandResult>()
        let core = self.core
        let accepted = loop.execute { [loop] in
            EngineCommand.run(arguments, limit: limit, loop: loop, environment: core.value.inheritedEnvironment,
                              input: core.value.nullInput) { done.complete($0) }
        }
        guard accepted else {
            return EngineCommandResult(arguments: arguments, exit: nil, output: "", errorOutput: "", failure: "the supervisor has shut down")
        }
        return done.waitBlocking()
    }

    /// Stops the loop: any task still running is killed (SIGKILL to its group) and its
    /// outcome (killed) delivered, watchers close, and the loop thread ends. Call it when
    /// done with the supervisor.
    public func shutdown() {
        let core = self.core
        // Queued before the loop's own shutdown, so it runs first, while handles are open.
        loop.execute {
            for runner in Array(core.value.runners.values) { runner.endForShutdown() }
            // The emptied cgroups waiting for a task go now; those still emptying are the
            // task guard's (it removes every cgroup in the run's directories).
            core.value.cgroups?.removeFreeSlots()
            core.value.memoryWatch.stop()
            core.value.memoryJoins.stop()
            // The tasks have ended: the metrics file gets its final values.
            core.value.metrics?.finish()
            core.value.livePage?.finish()
            core.value.usageSampling?.stop()
        }
        loop.shutdown()
        removeCgroupDirectories()
    }

    deinit {
        // Nothing may run on unsupervised: a supervisor dropped without `shutdown()` still
        // kills what it started.
        loop.shutdown()
        removeCgroupDirectories()
    }

    /// The run's cgroup directories, once the loop has stopped: the task guard, closed with
    /// the loop, removed them where they were empty, and empties the rest; this is for a
    /// guard that never started. Once: a `shutdown()` and then the deinit would each have
    /// tried every directory again, for nothing.
    private func removeCgroupDirectories() {
        guard !cgroupDirectoriesRemoved.exchange(true, ordering: .relaxed) else { return }
        CgroupTree.remove(cgroupDirectories)
    }

    /// Passes `event` to every sink, in order.
    func emit(_ event: consuming TaskEvent) {
        core.value.emit(event)
    }

    /// Listens on a control socket (docs/control.md) so `overtime ctl` can see and steer the
    /// running tasks. Returns the socket's path.
    /// - Parameters:
    ///   - path: the socket; nil for `<per-user directory>/<run id>.sock`.
    ///   - description: what this supervisor runs, for `overtime ctl list`.
    ///   - onRefused: told (on the loop thread) of each connection refused for its user.
    ///   - onListenFailure: when given, the call does not wait for the loop to listen: a
    ///     failure to listen is handed to it (on the loop thread) instead of thrown. The
    ///     socket still listens before anything the caller asks of the loop afterwards (its
    ///     jobs run in order), so a task spawned next can reach it from its first instruction.
    /// - Throws: `ControlSocketError` when the path cannot be used.
    public func serveControl(at path: String? = nil, describing description: SupervisorDescription? = nil,
                             onRefused: @escaping @Sendable (String) -> Void = { _ in },
                             onListenFailure: (@Sendable (ControlSocketError) -> Void)? = nil) throws(ControlSocketError) -> String {
        let core = self.core
        return try startControlServer(at: path, describing: description, onRefused: onRefused, onListenFailure: onListenFailure) { [self] in
            (core.value, { server in self.addSink(ControlWatchers(server)) })
        }
    }

    /// Serves the control protocol (docs/control.md) on this process's own stdin and stdout:
    /// how an executor's head steers and hears an `overtime run` it started on another node
    /// over the step's standard streams (`overtime run --control-stdio`). The head asks to
    /// `watch` and gets every event on stdout, and its requests are answered there too, so
    /// nothing else may write to stdout. `onInputEnd` is told (on the loop thread) when stdin
    /// ends: the head is gone or done.
    /// - Throws: `ControlSocketError` when the streams cannot be used (a terminal, say).
    public func serveControlOnStandardStreams(onInputEnd: @escaping @Sendable () -> Void) throws(ControlSocketError) {
        let core = self.core
        let containment = self.containment
        let runID = self.runID
        let done = Completion<Result<Void, ControlSocketError>>()
        let accepted = loop.execute { [loop, self] in
            do throws(SystemError) {
                let input = try ByteStream(loop: loop, fd: try Descriptors.duplicate(0))
                let output = try ByteStream(loop: loop, fd: try Descriptors.duplicate(1))
                let server = try ControlServer(loop: loop, path: nil, target: core.value) { _ in }
                server.containment = containment
                server.runID = runID
                server.attach(reading: input, writing: output, onEnd: onInputEnd)
                core.value.standardStreamsOutput = output
                self.addSink(ControlWatchers(server))
                done.complete(.success(()))
            } catch {
                done.complete(.failure(.cannotServeStandardStreams(error)))
            }
        }
        guard accepted else { throw .supervisorShutDown }
        try done.waitBlocking().get()
    }

    /// Waits, at most `limit`, until what was written to the control stream on stdout has been
    /// taken (the last event of a task, before the supervisor shuts down). Not on the loop thread.
    public func flushStandardStreams(within limit: Duration) {
        let end = ContinuousClock.now + limit
        let core = self.core
        while ContinuousClock.now < end {
            let pending = Completion<Int>()
            guard loop.execute({ pending.complete(core.value.standardStreamsOutput?.pendingOutput ?? 0) }) else { return }
            if pending.waitBlocking() == 0 { return }
            usleep(10_000)
        }
    }

    /// Prepares the path, then creates the server on the loop thread and waits for it (unless
    /// `onListenFailure` is given to hear of a failure there).
    /// - Parameter attach: run on the loop thread: what the server acts on, and what to do
    ///   with it once it listens (make its watchers a sink).
    func startControlServer(at path: String?, describing description: SupervisorDescription?, onRefused: @escaping @Sendable (String) -> Void,
                            onListenFailure: (@Sendable (ControlSocketError) -> Void)? = nil,
                            attach: @escaping @Sendable () -> (target: any ControlTarget, install: (ControlServer) -> Void)) throws(ControlSocketError) -> String {
        let socketPath: String
        if let path {
            socketPath = path
        } else {
            try ControlSocketPath.prepareDirectory(ControlSocketPath.defaultDirectory())
            socketPath = ControlSocketPath.defaultPath(runID: runID)
        }
        try ControlSocketPath.claim(socketPath)
        let done = Completion<Result<Void, ControlSocketError>>()
        let containment = self.containment
        let identity = description?.info(runID: runID)
        let runID = self.runID
        let accepted = loop.execute { [loop] in
            let (target, install) = attach()
            do throws(SystemError) {
                let server = try ControlServer(loop: loop, path: socketPath, target: target) { peer in
                    onRefused(peer.map { "refused a control connection from uid \($0.uid) (pid \($0.pid))" } ?? "refused a control connection with unknown credentials")
                }
                server.containment = containment
                server.identity = identity
                server.runID = runID
                install(server)
                done.complete(.success(()))
            } catch {
                let failure = ControlSocketError.cannotListen(path: socketPath, error)
                if let onListenFailure { onListenFailure(failure) } else { done.complete(.failure(failure)) }
            }
        }
        guard accepted else { throw .supervisorShutDown }
        // Waiting is a hand-over to the loop thread and back, a wake-up each way, on the path
        // of every `overtime run`'s start; a caller that can take a failure later skips it.
        if onListenFailure == nil { try done.waitBlocking().get() }
        return socketPath
    }

    /// Runs `body` on the loop thread and returns its answer; `ifGone` when the loop has
    /// stopped.
    func onLoop<R: Sendable>(ifGone: R, _ body: @escaping @Sendable () -> R) async -> R {
        await withCheckedContinuation { continuation in
            let accepted = loop.execute { continuation.resume(returning: body()) }
            // The loop has stopped: the job will never run, and nothing runs any more.
            if !accepted { continuation.resume(returning: ifGone) }
        }
    }
}

/// State that lives on the loop thread.
final class SupervisorState {
    let runID: String
    var runners: [Int: any SupervisedTask] = [:]
    /// The run's cgroups; nil for process groups (DESIGN §7).
    var cgroups: CgroupTree?
    /// The control stream on stdout, when the supervisor serves one there.
    var standardStreamsOutput: ByteStream?
    /// The metrics endpoint and file (`Supervisor.serveMetrics`), when asked for.
    var metrics: MetricsExporter?
    /// The live page (`Supervisor.serveLivePage`), when asked for.
    var livePage: LivePageServer?
    /// Reads the tasks' memory and CPU off the loop while metrics or the live page are on;
    /// `status` then takes its readings.
    private(set) var usageSampling: UsageSampling?
    var usageSampler: UsageSampler? { usageSampling?.sampler }

    /// Starts `usageSampling` for this supervisor's task runners, its passes taking up to
    /// `share` of a core (`UsageSampler.metricsShare`, `pageShare`); started already, it
    /// may take the larger share.
    func sampleUsage(loop: EventLoop, share: Double) {
        if let usageSampling { return usageSampling.sampler.allow(share: share) }
        usageSampling = UsageSampling(loop: loop, share: share) { [unowned self] in
            runners.compactMapValues { ($0 as? TaskRunner)?.usageSource }
        }
    }
    /// The last pass over /proc for the tasks measured by their session (no cgroup), and when.
    private var sessionMemory: (taken: MonotonicInstant, bySession: [Int32: UInt64])?

    /// Each session's resident memory, from one pass over /proc shared for a moment by every
    /// task that asks: `ctl status` or a metrics page of a thousand tasks asks for all of
    /// them at once, and a pass each would read /proc a thousand times.
    func residentBySession(at now: MonotonicInstant) -> [Int32: UInt64] {
        if let sessionMemory, now - sessionMemory.taken < MemoryWatch.interval { return sessionMemory.bySession }
        let bySession = ProcessMemory.residentBySession()
        sessionMemory = (now, bySession)
        return bySession
    }
    /// Samples the memory of the tasks that have a `memory-max`.
    lazy var memoryWatch = MemoryWatch(core: self)
    lazy var memoryJoins = MemoryJoins(core: self)
    /// Task cgroups whose last processes were still dying when the task ended: removed
    /// as they empty.
    lazy var retiredCgroups = CgroupRetirement()
    var signalWatchers: [SignalWatcher] = []
    /// SIGINTs and SIGTERMs received: the second one escalates.
    var terminationSignals = 0
    /// The cancel the first of them asked for, with the orchestrator's shutdown grace. It
    /// holds for every task, also one whose spawn was under way when the signal came: a
    /// signal answered and then forgotten would leave that task running unsupervised.
    var termination: (reason: CancelReason, shutdownGrace: Duration?)?
    /// The first of them was SIGINT (its `user` cancel is a Ctrl-C: exit 130).
    var interrupted = false

    /// Cancels `runner` as the termination signals so far ask (nothing before the first;
    /// SIGKILL now after the second). Called for the running tasks when a signal comes and
    /// for each task as it starts.
    func applyTermination(to runner: any SupervisedTask) {
        guard let (reason, shutdownGrace) = termination else { return }
        if runner.cancel(reason: reason, grace: shutdownGrace.map { min(runner.grace, Supervisor.grace(within: $0)) }) == .cancelling {
            runner.interrupted = interrupted
        }
        if terminationSignals > 1 { runner.escalate() }
    }
    /// Where every event goes, in order (`Supervisor.emit`).
    var sinks: [any EventSink] = []
    /// Makes an event's JSON line, once, for the sinks that want it.
    let encoder: EventEncoder
    /// Events that arose while one was being passed round (a sink cancelled a task, and
    /// the cancel's event came back here): they go out after it, so that every sink sees
    /// one order, the cause before its effect.
    private var queued: [TaskEvent] = []
    private var emitting = false

    func emit(_ event: consuming TaskEvent) {
        if emitting {
            queued.append(event)
            return
        }
        emitting = true
        deliver(event)
        if !queued.isEmpty { deliverQueued() }
        emitting = false
    }

    /// The common case, kept lean (an event per progress line): one pass over the sinks.
    @inline(__always)
    private func deliver(_ event: consuming TaskEvent) {
        var encoded = EncodedEvent(event, encoder: encoder)
        for sink in sinks { sink.receive(&encoded) }
    }

    private func deliverQueued() {
        var index = 0
        while index < queued.count {
            deliver(queued[index])
            index += 1
        }
        queued.removeAll(keepingCapacity: true)
    }
    /// Variables a supervisor sets for its own tasks; a value inherited from an outer
    /// supervisor (Overtime run under Overtime) must not leak through. Others, such as
    /// `OVERTIME_TQDM`, are the user's settings and pass on.
    static let supervisorOwned = ["OVERTIME_FD=", "OVERTIME_SOCKET=", "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "OVERTIME_TASK=", "OVERTIME_RUN=", "OVERTIME_ATTEMPT=", "OVERTIME_RESOURCE_"]

    /// `supervisorOwned` as bytes, to test the C environment's entries against.
    private static let supervisorOwnedPrefixes: [[CChar]] = supervisorOwned.map { $0.utf8.map { CChar(bitPattern: $0) } }

    /// The environment every task inherits, read once, without the `supervisorOwned` ones.
    /// Tested and copied as the C strings they are: as Strings, each tested with `hasPrefix`
    /// and then made C strings again, they were a large share of the start of `overtime
    /// run`'s supervisor.
    lazy var inheritedEnvironment: EnvironmentBlock = {
        var kept: [UnsafePointer<CChar>] = []
        var p = environ
        while let entry = p.pointee {
            let owned = Self.supervisorOwnedPrefixes.contains { prefix in
                prefix.withUnsafeBufferPointer { strncmp(entry, $0.baseAddress!, $0.count) == 0 }
            }
            if !owned { kept.append(UnsafePointer(entry)) }
            p += 1
        }
        return EnvironmentBlock(copying: kept)
    }()

    /// `/dev/null`, opened at first use and kept, for every task whose stdin is null or
    /// whose output is discarded (nil: it could not be opened).
    var nullInput: Int32? { Self.nullDevice(&openedNullInput, forWriting: false) }
    var nullOutput: Int32? { Self.nullDevice(&openedNullOutput, forWriting: true) }
    // Outer nil: not opened yet. Not lazy properties: reading one in the deinit, to close
    // it, opened /dev/null there just to close it again (two opens at every run's end).
    private var openedNullInput: Int32??
    private var openedNullOutput: Int32??

    private static func nullDevice(_ opened: inout Int32??, forWriting: Bool) -> Int32? {
        if let known = opened { return known }
        let fd = try? Descriptors.openNull(forWriting: forWriting)
        opened = .some(fd)
        return fd
    }

    deinit {
        if case let fd?? = openedNullInput { Descriptors.close(fd) }
        if case let fd?? = openedNullOutput { Descriptors.close(fd) }
    }

    init(runID: String) {
        self.runID = runID
        encoder = EventEncoder(runID: runID)
    }
}

/// Run ids: the UTC start time and eight random hex digits, sortable and unique enough for
/// one machine (each names a control socket, and many supervisors may start in one second):
/// `20261130-050315-3fa2c9d1`.
public enum RunID {
    public static func generate() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var t = now.tv_sec
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ n: Int32, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        let date = pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1, 2) + pad(parts.tm_mday, 2)
        let time = pad(parts.tm_hour, 2) + pad(parts.tm_min, 2) + pad(parts.tm_sec, 2)
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return "\(date)-\(time)-\(String(repeating: "0", count: 8 - suffix.count))\(suffix)"
    }
}

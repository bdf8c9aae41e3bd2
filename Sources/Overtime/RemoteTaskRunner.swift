import OvertimeLoop
import OvertimeProtocol

/// Starts a supervised task somewhere else: the launcher's argv, to which the remote
/// `overtime run --control-stdio …` command is appended (`srun --exclusive -N1 -n1 …`).
public struct RemoteLauncher: Sendable, Equatable {
    /// The launcher's words before the remote command, e.g. `["srun", "--exclusive", …]`.
    public var prefix: [String]
    /// The `overtime` binary as the remote side finds it (a shared path).
    public var overtime: String

    public init(prefix: [String], overtime: String) {
        self.prefix = prefix
        self.overtime = overtime
    }

    /// The whole command for `spec`: the launcher, then `overtime run` with the task's
    /// settings as options (`TaskSetting`: its environment as `--env`, for a remote supervisor
    /// takes no `OVERTIME_*` variable from its own environment), its output appended to
    /// `log`, then the command.
    public func command(for spec: TaskSpec, log: String) -> [String] {
        var words = prefix + [overtime, "run", "--control-stdio", "--output", log, "--name", spec.name]
        words += TaskSetting.options(for: spec.settings)
        return words + ["--"] + spec.arguments
    }
}

/// A task that an executor runs elsewhere (DESIGN §8): a local launcher process (`srun`)
/// whose stdin and stdout are one end of a socket pair carrying the control protocol to an
/// `overtime run --control-stdio` on the task's node. That run holds the task's machine
/// (budget, cancel, grace, containment, memory); this runner watches it (every event is
/// re-reported here as the task's own) and passes requests on (cancel with its reason,
/// extend, revoke, the engine's warning). Loop-thread only.
final class RemoteTaskRunner {
    let ref: TaskRef
    private let spec: TaskSpec
    private let launcher: RemoteLauncher
    private let log: String
    private let handle: TaskHandle
    private unowned let supervisor: Supervisor
    private unowned let core: SupervisorState
    private var process: ChildProcess?
    private var stream: ByteStream?
    private var framer = LineFramer()
    private let startedAt = MonotonicInstant.now()
    /// What the remote run said last, for `status` and the answers to requests.
    private var remotePid: Int32?
    private var remaining: (Duration?, at: MonotonicInstant)?
    private var progress: Progress?
    private var reporters: Int?
    /// The phase, its window and the stall, as the remote run's events told them.
    private var phase: (name: String, window: Duration?, learned: Bool)?
    private var stalledSince: MonotonicInstant?
    private var cancelling: CancelReason?
    /// The remote run's own report of the task's end.
    private var remoteOutcome: TaskOutcome?
    private var launcherExit: ChildExit?
    /// Requests made before the remote run reported its task started: it could not find the
    /// task yet, so they wait for its `started` event.
    private var heldRequests: [ControlRequest.Op] = []
    private var remoteStarted = false
    private var finished = false
    var interrupted = false

    init(spec: TaskSpec, launcher: RemoteLauncher, log: String, handle: TaskHandle, supervisor: Supervisor, core: SupervisorState) {
        self.spec = spec
        self.launcher = launcher
        self.log = log
        self.handle = handle
        ref = handle.ref
        self.supervisor = supervisor
        self.core = core
    }

    var grace: Duration { spec.policy.grace }

    func start() {
        var passed: [Int32] = []
        defer { passed.forEach(Descriptors.close) }
        do {
            let (ours, theirs) = try Descriptors.socketPair()
            passed.append(theirs)
            // The launcher's own complaints (srun's "Unable to allocate", a node failure) go
            // into the task's log beside what the task writes there.
            let errors = try Descriptors.openForWriting(log, append: true)
            passed.append(errors)
            let request = SpawnRequest(arguments: launcher.command(for: spec, log: log), baseEnvironment: core.inheritedEnvironment,
                                       environment: [], workingDirectory: spec.workingDirectory, descriptors: [theirs, theirs, errors])
            let stream = try ByteStream(loop: supervisor.loop, fd: ours)
            self.stream = stream
            process = try ChildProcess(loop: supervisor.loop, request: request) { [weak self] exit in
                self?.launcherExited(exit)
            }
            // No `watch` to ask for: a run serving its standard streams watches from the start.
            stream.startReading(
                onData: { [unowned self] bytes in self.framer.feed(bytes) { item in self.line(item) } },
                onEnd: { [unowned self] _ in self.streamEnded() }
            )
        } catch {
            stream?.close()
            stream = nil
            let message = (error as? SpawnError).map { TaskLaunch.spawnFailure($0, spec: TaskSpec(arguments: launcher.prefix)).message } ?? "\(error)"
            finish(TaskOutcome(task: ref, pid: nil, termination: .failedToStart(SpawnFailure(errno: 0, message: "cannot start the executor: \(message)", beforeExec: true)),
                               cancelReason: nil, killed: false, elapsed: .zero, lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false))
            return
        }
        core.runners[ref.id] = self
        core.applyTermination(to: self)
    }

    // MARK: The remote run's stream

    private func line(_ item: LineFramer.Item) {
        guard case let .line(bytes) = item, let value = try? JSONValue.parse(Array(bytes)) else { return }
        if case .bool? = value["ok"] { return }   // a reply: what it did shows in the events
        guard let decoded = try? EventDecoder.decode(value) else { return }
        let now = MonotonicInstant.now()
        switch decoded.kind {
        case let .exited(outcome):
            var own = outcome
            own.task = ref
            own.interrupted = interrupted
            remoteOutcome = own
            return   // reported once the launcher has ended too, as a local task's end is
        case .operatorRequest:
            return   // the head records its own requests (`recordOperator`)
        case let .started(pid):
            remotePid = pid
            remoteStarted = true
            let held = heldRequests
            heldRequests.removeAll()
            held.forEach(send)
        case let .progress(p, left):
            progress = p
            remaining = (left, now)
        case let .heartbeat(left):
            remaining = (left, now)
        case let .budgetChanged(left, _):
            remaining = (left, now)
        case let .cancelSent(reason, _, _):
            cancelling = reason
        case let .reporters(count):
            reporters = count
        case let .phase(name, window):
            phase = (name, window, false)
        case let .windowLearned(name, window) where phase?.name == name:
            phase = (name, window, true)
        case .stalled:
            stalledSince = now
        case .resumed:
            stalledSince = nil
        default:
            break
        }
        supervisor.emit(TaskEvent(task: ref, time: now, kind: decoded.kind))
    }

    private func send(_ op: ControlRequest.Op) {
        if !remoteStarted {
            heldRequests.append(op)
            return
        }
        stream?.write(ControlRequest(op).encoded())
    }

    private func streamEnded() {
        stream?.close()
        stream = nil
        finishIfOver()
    }

    private func launcherExited(_ exit: ChildExit) {
        launcherExit = exit
        finishIfOver()
    }

    /// Over once the launcher has ended and its stream with it (a launcher that leaves the
    /// stream open, a step still draining, is not waited for beyond its exit).
    private func finishIfOver() {
        guard let exit = launcherExit else { return }
        stream?.close()
        stream = nil
        if let remoteOutcome {
            finish(remoteOutcome)
            return
        }
        // The remote run never said how the task ended: the launcher failed (no allocation,
        // a node lost), or was killed.
        let how = switch exit {
        case let .exited(code): "exited \(code)"
        case let .signaled(signal): "died of \(Signal(rawValue: signal).name)"
        }
        finish(TaskOutcome(task: ref, pid: remotePid,
                           termination: .failedToStart(SpawnFailure(errno: 0, message: "the executor (\(launcher.prefix.first ?? "?")) \(how) before the task's end was reported; see its log", beforeExec: true)),
                           cancelReason: cancelling, killed: false, elapsed: MonotonicInstant.now() - startedAt, lastProgress: progress,
                           result: nil, protocolErrors: 0, wasReady: false))
    }

    private func finish(_ outcome: TaskOutcome) {
        guard !finished else { return }
        finished = true
        core.runners[ref.id] = nil
        supervisor.emit(TaskEvent(task: ref, time: MonotonicInstant.now(), kind: .exited(outcome)))
        handle.complete(outcome)
    }
}

extension RemoteTaskRunner: SupervisedTask {
    func cancel(reason: CancelReason, grace: Duration?) -> TaskMachine.CancelResult {
        if let cancelling { return .alreadyCancelling(cancelling) }
        guard !finished else { return .alreadyFinished }
        cancelling = reason
        send(.cancel(task: spec.name, reason: reason, grace: grace.map { ControlDuration.seconds($0.seconds) }))
        // Not started there yet (srun still waiting for the step's resources): nothing
        // there to cancel, so the launcher goes instead.
        if !remoteStarted { process?.signalGroup(Signal.terminate.rawValue) }
        return .cancelling
    }

    /// The launcher's SIGKILL: the engine kills the step, and the remote run's guard what ran.
    func escalate() {
        guard cancelling != nil else { return }
        process?.signalGroup(Signal.kill.rawValue)
    }

    /// Passed on; the answer is the remote run's, and shows in its `budget` event. What is
    /// returned here is the time left as last heard, moved by `amount`.
    func operatorExtend(by amount: Duration, pastMax: Bool) -> TaskMachine.OperatorResult {
        if let cancelling { return .notRunning(.cancelling(cancelling)) }
        send(.extend(task: spec.name, by: .seconds(amount.seconds), pastMax: pastMax))
        return .applied(remaining: left(at: MonotonicInstant.now()).map { $0 + amount }, clipped: false)
    }

    func revoke(after: Duration) -> TaskMachine.OperatorResult {
        if let cancelling { return .notRunning(.cancelling(cancelling)) }
        send(.revoke(task: spec.name, after: .seconds(after.seconds)))
        return .applied(remaining: after, clipped: false)
    }

    private func left(at now: MonotonicInstant) -> Duration? {
        guard let (left, at) = remaining, let left else { return nil }
        return max(.zero, left - (now - at))
    }

    func status(now: MonotonicInstant) -> TaskStatus {
        let state: TaskStatus.State = cancelling.map { .cancelling($0) } ?? (remoteOutcome != nil ? .exiting : .running)
        var live = TaskStatus.Live(pid: remotePid, elapsed: (now - startedAt).seconds, remaining: left(at: now)?.seconds,
                                   progress: progress, reporters: reporters)
        if let phase { (live.phase, live.window, live.windowLearned) = (phase.name, phase.window?.seconds, phase.learned) }
        live.stall(since: stalledSince, now: now, clock: .local())
        return TaskStatus(name: ref.name, state: state, live: live)
    }

    func recordOperator(_ action: String, uid: UInt32) {
        supervisor.emit(TaskEvent(task: ref, time: MonotonicInstant.now(), kind: .operatorRequest(action: action, uid: uid)))
    }

    /// To the launcher, which passes it to the step (srun forwards the signals it gets).
    func forward(signal: Signal) {
        process?.signalGroup(signal.rawValue)
    }

    func engineExpiring(remaining: Duration, source: EngineTimeSource) {
        send(.expiring(task: spec.name, remaining: remaining.seconds))
    }

    func endForShutdown() {
        guard !finished else { return }
        process?.signalGroup(Signal.kill.rawValue)
        stream?.close()
        stream = nil
        finish(remoteOutcome ?? TaskOutcome(task: ref, pid: remotePid, termination: .signaled(.kill), cancelReason: cancelling ?? .shutdown,
                                            killed: true, elapsed: MonotonicInstant.now() - startedAt, lastProgress: progress, result: nil,
                                            protocolErrors: 0, wasReady: false))
    }
}

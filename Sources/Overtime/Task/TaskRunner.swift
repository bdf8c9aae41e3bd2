import OvertimeLoop
import OvertimeProtocol

/// One task on the loop: feeds its `TaskMachine` what the process, its channels and its
/// timer report, carries out what the machine decides, re-arms the timer, and finishes with
/// the outcome. What the task holds lives in parts that own their handles: `TaskLaunch`,
/// `TaskChannels`, `TaskOutput`, `TaskUsage`, `TaskDiagnosis`. Loop-thread only.
final class TaskRunner {
    let ref: TaskRef
    private let spec: TaskSpec
    private let handle: TaskHandle
    private unowned let supervisor: Supervisor
    private unowned let core: SupervisorState
    private var machine: TaskMachine
    private var process: ChildProcess?
    /// What the child processes' exit callbacks reach this runner by: they may come after
    /// it is gone (a task ended by the supervisor's shutdown is freed before its reaping).
    /// Not a weak reference, which would give the runner a side table and put every retain
    /// of it (one a progress line, through its streams' callbacks) on the runtime's slow path.
    private var link: RunnerLink {
        if let madeLink { return madeLink }
        let made = RunnerLink(self)
        madeLink = made
        return made
    }
    private var madeLink: RunnerLink?
    private lazy var channels = TaskChannels(runner: self, loop: supervisor.loop,
                                             taskUserID: spec.isolation.user?.uid ?? ProcessTree.currentUserID)
    private lazy var output = TaskOutput(loop: supervisor.loop) { [unowned self] in self.finishIfDrained() }
    private let usage: TaskUsage
    private lazy var diagnosis = TaskDiagnosis(spec: spec, core: core, output: output)
    private let timer: LoopTimer
    private var armedFor: MonotonicInstant?
    private var exit: ChildExit?
    private var exitedAt: MonotonicInstant?
    private var finished = false
    /// Cancelled by Ctrl-C (see `TaskOutcome.interrupted`).
    var interrupted = false
    /// SIGKILLed because the supervisor shut down with the task still running.
    private var killedAtShutdown = false
    /// The task's own cgroup (DESIGN §7); nil where the run has none.
    private(set) var cgroup: TaskCgroup?
    /// The signals Overtime sent the task, and those it passed on, to say who sent the one
    /// it died of.
    private var sentSignals: Set<Int32> = []
    private var forwardedSignals: Set<Int32> = []

    /// After the leader exits, how long to wait for its channel and pipes to reach end of
    /// file. Whatever it wrote before dying is already buffered and read at once; this only
    /// bounds the wait for a descendant outside its group that still holds them open.
    static let drainLimit = Duration.seconds(2)
    /// While a consumer holds the task's output back (a terminal slower than the task),
    /// the drain limit starts again, up to this long after the leader's exit.
    static let heldDrainLimit = Duration.seconds(30)

    deinit {
        madeLink?.runner = nil
    }

    init(spec: TaskSpec, handle: TaskHandle, supervisor: Supervisor, core: SupervisorState) {
        self.spec = spec
        self.handle = handle
        self.ref = handle.ref
        self.supervisor = supervisor
        self.core = core
        machine = TaskMachine(policy: Self.machinePolicy(spec), memory: spec.memory, startedAt: MonotonicInstant.now())
        usage = TaskUsage(core: core)
        timer = LoopTimer(loop: supervisor.loop)
    }

    /// The task's time rules with its diagnose command's limit.
    private static func machinePolicy(_ spec: TaskSpec) -> BudgetPolicy {
        var policy = spec.policy
        policy.diagnoseLimit = spec.diagnose?.limit
        return policy
    }

    var leaderPID: Int32? { process?.pid }
    var hasExited: Bool { exit != nil }

    // MARK: Start

    func start() {
        guard !spec.arguments.isEmpty else {
            // Before anything is opened: a log file must not be truncated for it.
            failToStart(SpawnError(.exec, errno: ErrorNumber.ENOENT))
            return
        }
        var launch = TaskLaunch(spec: spec, core: core)
        defer { launch.closePassed() }
        do {
            var request = try launch.request(channels: channels, output: output, socketName: "@overtime/\(core.runID)/\(ref.id)")
            cgroup = try launch.cgroup(for: &request)
            defer { cgroup?.spawned() }
            process = try ChildProcess(loop: supervisor.loop, request: request) { [link] exit in
                link.runner?.processExited(exit)
            }
        } catch {
            failToStart(error)
            return
        }
        core.runners[ref.id] = self
        usage.watch(ref.id, memory: spec.memory, cgroup: cgroup, loop: supervisor.loop) { [unowned self] cgroup in
            if let used = cgroup.memoryInUse(exactFrom: self.memoryCheckLevel) { self.memorySample(used) }
        }
        let now = MonotonicInstant.now()
        machine = TaskMachine(policy: Self.machinePolicy(spec), memory: spec.memory, startedAt: now)
        machine.timeOfDay = .local()
        channels.startReading()
        let pid = process!.pid
        decide(at: now) { machine, actions in machine.start(pid: pid, now: now, into: &actions) }
        rearm(now: now)
        // A SIGTERM or SIGINT that came while this task was being spawned.
        core.applyTermination(to: self)
    }

    private func failToStart(_ error: any Error) {
        if let cgroup, let tree = core.cgroups { core.retiredCgroups.retire(cgroup, from: tree, loop: supervisor.loop) }
        cgroup = nil
        channels.close()
        output.close()
        exit = nil
        finish(termination: .failedToStart(TaskLaunch.failure(error, spec: spec)))
    }

    // MARK: Inputs

    /// A message from one of the task's reporters. Not through `decide`'s closure, which
    /// would copy the message once more: this is the path every progress line takes.
    func receive(_ message: ChildMessage, from reporter: ReporterID, now: MonotonicInstant) {
        var actions = takeActionList()
        machine.receive(message, from: reporter, now: now, into: &actions)
        carryOut(&actions, at: now)
    }

    func rejectLine(_ error: ProtocolError, excerpt: String, now: MonotonicInstant) {
        decide(at: now) { machine, actions in machine.rejectLine(error, excerpt: excerpt, into: &actions) }
    }

    private func timerFired() {
        armedFor = nil
        let now = MonotonicInstant.now()
        if exit != nil {
            if output.heldBack, let exitedAt, now - exitedAt < Self.heldDrainLimit {
                // Held back by our own consumer (a terminal that does not take our output),
                // not by a descendant holding the pipe: what is in the kernel is the task's
                // output, still to be shown. Wait on, within bounds.
                output.resetHeldBack()
                timer.schedule(inNanoseconds: Self.drainLimit.nanoseconds) { [unowned self] in self.timerFired() }
                return
            }
            // The drain limit passed: finish with what was read.
            output.close()
            channels.endAll()
            finishIfDrained()
            return
        }
        decide(at: now) { machine, actions in machine.tick(now: now, into: &actions) }
        rearm(now: now)
    }

    private func processExited(_ status: ChildExit) {
        let now = MonotonicInstant.now()
        exit = status
        exitedAt = now
        output.resetHeldBack()
        cgroup?.abandonMemoryJoin()
        channels.leaderExited()
        decide(at: now) { machine, actions in machine.exited(into: &actions) }
        timer.cancel()
        timer.schedule(inNanoseconds: Self.drainLimit.nanoseconds) { [unowned self] in self.timerFired() }
        finishIfDrained()
    }

    private func diagnosisExited(_ exit: ChildExit) {
        if diagnosis.exited(exit) { diagnosisOver() }
    }

    private func diagnosisOver() {
        decideNow { machine, actions, now in machine.diagnosisEnded(now: now, into: &actions) }
    }

    // MARK: Requests

    func cancel(reason: CancelReason, grace: Duration?) -> TaskMachine.CancelResult {
        decideNow { machine, actions, now in machine.cancel(reason: reason, grace: grace, now: now, into: &actions) }
    }

    /// SIGKILL now if the task is being cancelled.
    func escalate() {
        decideNow { machine, actions, now in machine.escalate(now: now, into: &actions) }
    }

    /// The task's own grace, for clipping it to a shutdown's.
    var grace: Duration { spec.policy.grace }

    func operatorExtend(by amount: Duration, pastMax: Bool) -> TaskMachine.OperatorResult {
        decideNow { machine, actions, now in machine.operatorExtend(by: amount, pastMax: pastMax, now: now, into: &actions) }
    }

    func revoke(after: Duration) -> TaskMachine.OperatorResult {
        decideNow { machine, actions, now in machine.revoke(after: after, now: now, into: &actions) }
    }

    /// The engine warned of its end: `expiring` to every reporter (`TaskMachine.engineExpiring`).
    func engineExpiring(remaining: Duration, source: EngineTimeSource) {
        decideNow { machine, actions, now in machine.engineExpiring(remaining: remaining, source: source, now: now, into: &actions) }
    }

    /// Passes a signal the supervisor received on to the task's group (while it runs).
    func forward(signal: Signal) {
        if signal == .windowChange { output.followWindowSize() }
        forwardedSignals.insert(signal.rawValue)
        process?.signalGroup(signal.rawValue)
    }

    /// The task as `overtime ctl status` shows it.
    func status(now: MonotonicInstant) -> TaskStatus {
        TaskStatus(ref: ref, machine: machine, pid: process?.pid, usage: usage.reading(memoryMeasure, cgroup: cgroup, id: ref.id), now: now)
    }

    /// Records an operator's request in the event stream (and so in journals), with the uid
    /// of whoever asked.
    func recordOperator(_ action: String, uid: UInt32) {
        emit(.operatorRequest(action: action, uid: uid), at: MonotonicInstant.now())
    }

    // MARK: Memory

    /// How the memory watchdog measures this task (DESIGN §7).
    var memoryMeasure: TaskUsage.MemoryMeasure {
        TaskUsage.measure(cgroup: cgroup, runningLeader: exit == nil ? process?.pid : nil)
    }

    /// Where the metrics' sampler reads this task's memory and CPU (`memoryMeasure`'s
    /// sources, off the loop); nil once nothing measures it.
    var usageSource: UsageSampler.Source? { memoryMeasure.samplerSource }

    /// Its time to join its v1 memory cgroup has come (`MemoryJoins`): while it runs.
    func joinMemoryCgroup() {
        if exit == nil { cgroup?.joinMemory() }
    }

    /// The level from which a sample must be exact: the warning level (or the max).
    var memoryCheckLevel: UInt64 {
        spec.memory.warnBytes ?? spec.memory.max ?? 0
    }

    /// A sample from the watchdog.
    func memorySample(_ used: UInt64) {
        guard exit == nil else { return }
        decideNow { machine, actions, now in machine.memorySample(used, now: now, into: &actions) }
    }

    // MARK: Carrying out

    /// The list inputs append to, kept between inputs so that none allocates one.
    private var spareActions: [TaskMachine.Action] = []

    /// Feeds the machine one input, then carries out what it decided, in order, stamping
    /// events with the input's time.
    @discardableResult
    func decide<Answer>(at now: MonotonicInstant, _ input: (inout TaskMachine, inout [TaskMachine.Action]) -> Answer) -> Answer {
        var actions = takeActionList()
        let answer = input(&machine, &actions)
        carryOut(&actions, at: now)
        return answer
    }

    /// `decide` now, then the timer kept armed for what that changed.
    @discardableResult
    private func decideNow<Answer>(_ input: (inout TaskMachine, inout [TaskMachine.Action], MonotonicInstant) -> Answer) -> Answer {
        let now = MonotonicInstant.now()
        let answer = decide(at: now) { machine, actions in input(&machine, &actions, now) }
        rearm(now: now)
        return answer
    }

    /// The spare list, for the length of one input: an action whose effects bring another
    /// input back here (an event whose sink cancels the task) gets a list of its own, and
    /// the machine is settled by then.
    @inline(__always)
    private func takeActionList() -> [TaskMachine.Action] {
        var actions: [TaskMachine.Action] = []
        swap(&actions, &spareActions)
        return actions
    }

    /// Carries out `actions` in order and keeps the emptied list for the next input. Each
    /// action is moved out of the list (reversed, then popped), so a progress event's
    /// strings are not retained and released once more per message, and nothing is left
    /// to clear.
    @inline(__always)
    private func carryOut(_ actions: inout [TaskMachine.Action], at now: MonotonicInstant) {
        var diagnosisFailed = false
        actions.reverse()
        while let action = actions.popLast() {
            switch consume action {
            case let .send(message, recipient):
                channels.send(message, to: recipient)
            case let .signalGroup(signal):
                signalWhole(signal)
            case .killLeftovers:
                process?.killLeftoverGroup()
                cgroup?.killAll()
            case let .emit(kind):
                supervisor.emit(TaskEvent(task: ref, time: now, kind: kind))
            case .diagnose:
                diagnosisFailed = !startDiagnosis()
            case let .endDiagnosis(end):
                diagnosis.cut(end)
            }
        }
        spareActions = actions
        // A diagnosis that could not start ends once the list that began it is carried
        // out: its `diagnosing` event goes before the cancel that follows.
        if diagnosisFailed { diagnosisOver() }
    }

    /// The diagnose command against the still-running leader; false when it did not start.
    private func startDiagnosis() -> Bool {
        guard let process, !process.isReaped else { return false }
        return diagnosis.start(pid: process.pid, due: machine.cancelReason, loop: supervisor.loop) { [link] exit in
            link.runner?.diagnosisExited(exit)
        }
    }

    func emit(_ kind: TaskEvent.Kind, at now: MonotonicInstant) {
        supervisor.emit(TaskEvent(task: ref, time: now, kind: kind))
    }

    /// A signal of Overtime's own to the whole task: every process in its cgroup where it
    /// has one (`setsid` or not; SIGKILL through `cgroup.kill`), else its process group.
    private func signalWhole(_ signal: Signal) {
        guard let process, !process.isReaped else { return }
        sentSignals.insert(signal.rawValue)
        guard let cgroup else {
            process.signalGroup(signal.rawValue)
            return
        }
        if signal == .kill {
            cgroup.killAll()
            process.signalGroup(signal.rawValue)
        } else if cgroup.signalAll(signal.rawValue) == 0 {
            process.signalGroup(signal.rawValue)  // not listed (yet, or any more): its group
        }
    }

    /// Keeps the timer armed at the machine's next wake-up or earlier. A later wake-up
    /// (a deadline moved by progress) leaves the timer alone: it fires, finds nothing due,
    /// and re-arms.
    func rearm(now: MonotonicInstant) {
        guard exit == nil, let wake = Self.nextWake(of: &machine) else { return }
        if let armed = armedFor, armed <= wake { return }
        armedFor = wake
        timer.schedule(inNanoseconds: max(0, (wake - now).nanoseconds)) { [unowned self] in self.timerFired() }
    }

    /// The machine's next wake, read in place. A plain read of `machine` (a struct of
    /// another module, in a class's property) copies it whole, retaining each of its
    /// fields, on every progress line.
    private static func nextWake(of machine: inout TaskMachine) -> MonotonicInstant? {
        machine.nextWake
    }

    // MARK: End

    /// The task ends once its leader is reaped and what it and its other reporters wrote
    /// has been read to the end (or the drain limit has passed).
    func finishIfDrained() {
        guard let exit, channels.isDrained, output.isDrained else { return }
        finish(termination: Self.termination(exit))
    }

    /// The supervisor is shutting down with this task not yet finished: SIGKILL to its
    /// group now if it still runs, and its outcome at once (killed, or how it exited if it
    /// only waited for its output to drain), so that nobody awaits it forever. What it
    /// wrote and was read is in the outcome; the loop closes the rest.
    func endForShutdown() {
        guard !finished else { return }
        // Nothing of this runner may be called back once it is gone: its streams close now
        // (what was read is in the outcome).
        channels.close()
        output.close()
        if let exit {
            finish(termination: Self.termination(exit))
            return
        }
        sentSignals.insert(Signal.kill.rawValue)
        cgroup?.killAll()
        process?.signalGroup(Signal.kill.rawValue)
        killedAtShutdown = true
        exitedAt = MonotonicInstant.now()
        finish(termination: .signaled(.kill))
    }

    private static func termination(_ exit: ChildExit) -> Termination {
        switch exit {
        case let .exited(code): .exited(code)
        case let .signaled(signal): .signaled(Signal(rawValue: signal))
        }
    }

    private func finish(termination: Termination) {
        guard !finished else { return }
        finished = true
        timer.close()
        channels.close()
        core.runners[ref.id] = nil
        diagnosis.cut(.taskEnded)
        usage.close(ref.id)
        let killed = (machine.killSent || killedAtShutdown) && termination == .signaled(.kill)
        var outcome = TaskOutcome(
            task: ref,
            pid: process?.pid,
            termination: termination,
            cancelReason: machine.cancelReason,
            killed: killed,
            elapsed: (exitedAt ?? machine.startedAt) - machine.startedAt,
            lastProgress: machine.lastProgress,
            result: machine.result,
            protocolErrors: machine.protocolErrors,
            wasReady: machine.isReady,
            interrupted: interrupted
        )
        outcome.cancelWhy = machine.cancelWhy
        outcome.phase = machine.phaseName
        outcome.stalls = machine.stalls
        outcome.usage = TaskUsage.final(cgroup: cgroup, reaped: process?.usage, sampledPeak: machine.peakMemory)
        outcome.oomKills = cgroup?.oomKills()
        if case let .signaled(signal) = termination {
            outcome.signalSender = sentSignals.contains(signal.rawValue) ? .overtime
                : forwardedSignals.contains(signal.rawValue) ? .forwarded : .outside
            // Without a counter to ask: a SIGKILL from nobody here while the task's memory
            // was within a tenth of its max is most likely the kernel's.
            if outcome.oomKills == nil, signal == .kill, outcome.signalSender == .outside, let max = spec.memory.max,
               machine.lastMemory >= max - max / 10 {
                outcome.likelyOOM = true
            }
        }
        if let cgroup, let tree = core.cgroups {
            self.cgroup = nil
            core.retiredCgroups.retire(cgroup, from: tree, loop: supervisor.loop)
        }
        emit(.exited(outcome), at: MonotonicInstant.now())
        handle.complete(outcome)
    }
}

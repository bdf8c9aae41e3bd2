import OvertimeProtocol

/// The lifecycle and budget of one task as a pure state machine (DESIGN §1 and §2).
///
/// It performs no I/O and reads no clock: every input carries `now` and hands back the
/// `Action`s to carry out (appended to the executor's list; an operator's request also
/// returns its answer), decided once the machine has changed, so an executor that calls
/// back in while carrying them out finds it settled. Unit tests drive it with a fake clock. docs/design.md has its table of
/// stages × inputs.
///
/// Timers are lazy: extending a deadline only moves a number. The executor keeps one timer
/// per task armed at `nextWake` or earlier; a wake-up that finds the deadline moved does
/// nothing but report the new `nextWake`. A chatty child therefore costs no timer work.
public struct TaskMachine: Sendable {
    public enum Phase: Sendable, Equatable {
        /// Running under its budget.
        case running
        /// The cancel message and SIGTERM went out; SIGKILL follows at the end of grace.
        case cancelling(CancelReason)
        /// The process has exited and been reaped; nothing more may be signalled.
        case exited
    }

    public enum Action: Sendable, Equatable {
        /// Write this message to one reporter, or to every one (DESIGN §3a: a `budget`
        /// answer goes to the one that asked; `expiring` and `cancel` to all).
        case send(SupervisorMessage, to: Recipient)
        /// Send this signal to the task's process group (the leader is alive or a zombie).
        case signalGroup(Signal)
        /// The leader was just reaped: kill whatever is left in its group, so nothing of the
        /// task runs unsupervised.
        case killLeftovers
        /// Report this event.
        case emit(TaskEvent.Kind)
        /// Run the task's diagnose command (its time limit is the machine's: `tick` ends the
        /// diagnosis at `policy.diagnoseLimit`); tell `diagnosisEnded` when it is over.
        case diagnose
        /// The diagnosis is over (ended or cut at its limit): stop the command if it runs.
        case endDiagnosis(DiagnosisEnd)
    }

    /// Why a diagnosis is over, for the line that closes its output.
    public enum DiagnosisEnd: Sendable, Equatable {
        /// The command ended by itself.
        case finished
        /// Its limit passed: the command is cut.
        case limitReached
        /// A cancel that cannot wait came (a shutdown, an operator, a second signal).
        case preempted
        /// The task ended by itself meanwhile.
        case taskEnded
    }

    /// Who a message from the supervisor is for.
    public enum Recipient: Sendable, Equatable {
        case reporter(ReporterID)
        case everyReporter
    }

    /// What an operator's extend or revoke did.
    public enum OperatorResult: Sendable, Equatable {
        /// Done; `remaining` is the new time left (nil: unlimited).
        case applied(remaining: Duration?, clipped: Bool)
        /// The task is being cancelled or has ended; nothing changed.
        case notRunning(Phase)
    }

    /// What a cancel request did.
    public enum CancelResult: Sendable, Equatable {
        case cancelling
        case alreadyCancelling(CancelReason)
        case alreadyFinished
    }

    /// The time rules in force. Moved while running; kept as they were once a cancel
    /// begins (a status still shows the time that was left).
    struct Budget: Sendable, Equatable {
        /// The soft deadline that progress moves; nil when the budget is `none` (or an
        /// unlimited window lifted it).
        var deadline: MonotonicInstant?
        /// What no report may bring the soft deadline below: start + budget, and whatever
        /// an extend asked for. (A report sets the deadline to now + the window in force,
        /// which may be shorter than before in another phase.)
        var floor: MonotonicInstant?
        /// start + max-runtime; only an operator may raise it.
        var hardLimit: MonotonicInstant?
        var revoked = false
        /// `expiring` went out for the deadline in force.
        var warned = false
    }

    /// A cancel under way or done: why, and when grace ends.
    struct Cancellation: Sendable, Equatable {
        var reason: CancelReason
        var killAt: MonotonicInstant
        /// What the `cancel` message said beyond the reason (for a `timeout`, what went quiet).
        var why: String? = nil
        var killSent = false
    }

    /// A cancel decided but not yet sent: the diagnose command runs first.
    struct Diagnosis: Sendable, Equatable {
        var reason: CancelReason
        var until: MonotonicInstant
    }

    /// Where the task is, each stage with its own data: a kill without a cancel, or a
    /// cancel without a reason, cannot be written.
    enum Stage: Sendable, Equatable {
        case running
        case diagnosing(Diagnosis)
        case cancelling(Cancellation)
        case exited(Cancellation?)

        /// Asked on every report: a pattern match, not the synthesized `==`, which compares
        /// payloads.
        var isRunning: Bool {
            if case .running = self { true } else { false }
        }
    }

    public let policy: BudgetPolicy
    /// The window of a task whose window never varies (nil: a report lifts the deadline),
    /// read once: every report of such a task uses it.
    private let fixedWindow: Duration?
    public let memory: MemoryPolicy
    public let startedAt: MonotonicInstant
    private(set) var budget: Budget
    private(set) var stage: Stage = .running
    /// What the task shows: the merged progress of the bar that moved last, or, while
    /// several reporters have open bars with a fraction, of the one furthest behind
    /// (named by `Progress.reporter`, with `Progress.reporting`).
    public var lastProgress: Progress? { bars.shown }
    public private(set) var result: JSONValue?
    public private(set) var protocolErrors = 0
    public private(set) var isReady = false
    /// Each reporter's bars, for require-advance and for what the task shows.
    private var bars = BarTable()
    /// The reporters connected now (the leader's fd 3 among them while it is open).
    public private(set) var reporters: Set<ReporterID> = [.leader]
    /// How `timeout` cancels write the time a quiet bar closed; the executor sets it from
    /// the clocks it reads.
    public var timeOfDay = TimeOfDay(wallOffsetNanoseconds: 0, utcOffsetSeconds: 0)
    /// Under every-reporter, the deadline of each connected reporter that has reported.
    private var perReporter = ReporterDeadlines()
    /// Under every-reporter, the reporter whose own deadline passed: the cancel's `why`
    /// tells of its last report, not of the others', which kept coming.
    private var quietReporter: ReporterID?
    /// The last heartbeat that counted, for the `why` of a timeout (a progress message that
    /// counted is marked on its bar, with no work here on the hot path); under
    /// every-reporter, each reporter's.
    private var lastHeartbeat: (reporter: ReporterID, at: MonotonicInstant)?
    private var lastHeartbeatBy: [ReporterID: MonotonicInstant] = [:]
    /// The task's phases and learned windows; nil while it has one fixed window, which
    /// then costs a report nothing more.
    var phases: PhaseWatch?
    /// Under `--on-stall warn`, when the stall began; nil while not stalled.
    public internal(set) var stalledSince: MonotonicInstant?
    /// Times it was marked stalled.
    public internal(set) var stalls = 0
    /// The stall's diagnose command may run until then.
    var stallDiagnosisUntil: MonotonicInstant?
    /// The advice to checkpoint before the hard end (TaskMachineHangs.swift).
    var advice = CheckpointAdvice()

    /// The highest and the latest memory sample (bytes), 0 before the first.
    public private(set) var peakMemory: UInt64 = 0
    public private(set) var lastMemory: UInt64 = 0
    /// The memory `warning` went out.
    public private(set) var memoryWarned = false

    public init(policy: BudgetPolicy, memory: MemoryPolicy = .none, startedAt: MonotonicInstant) {
        self.policy = policy
        self.memory = memory
        self.startedAt = startedAt
        let hardLimit = earlier(policy.maxRuntime.map { startedAt + $0 }, policy.endsBy)
        fixedWindow = policy.reportsLiftDeadline ? nil : policy.effectiveWindow
        let deadline = policy.budget.map { startedAt + $0 }
        budget = Budget(deadline: deadline, floor: deadline, hardLimit: hardLimit)
        if policy.windowVaries { phases = PhaseWatch(learning: policy.learnedWindows, startedAt: startedAt) }
        advice.watchesPace = policy.checkpointLead != nil || phases != nil
    }

    // MARK: What it holds

    public var phase: Phase {
        switch stage {
        case .running: .running
        case let .diagnosing(diagnosis): .cancelling(diagnosis.reason)
        case let .cancelling(cancel): .cancelling(cancel.reason)
        case .exited: .exited
        }
    }

    /// The cancel, under way or done; nil when the task was never cancelled.
    private var cancellation: Cancellation? {
        switch stage {
        case .running: nil
        case let .diagnosing(diagnosis): Cancellation(reason: diagnosis.reason, killAt: diagnosis.until)
        case let .cancelling(cancel): cancel
        case let .exited(cancel): cancel
        }
    }

    /// The soft deadline in force: under every-reporter, once a reporter has reported, the
    /// earliest of the connected reporters' own.
    public var deadline: MonotonicInstant? { perReporter.earliest?.deadline ?? budget.deadline }
    public var hardLimit: MonotonicInstant? { budget.hardLimit }
    public var revoked: Bool { budget.revoked }
    public var cancelReason: CancelReason? { cancellation?.reason }
    /// What the cancel said beyond its reason (a timeout's: what went quiet).
    public var cancelWhy: String? { cancellation?.why }
    public var killAt: MonotonicInstant? { cancellation?.killAt }
    public var killSent: Bool { cancellation?.killSent ?? false }
    /// The phase the task named last; nil before it named one.
    public var phaseName: String? { phases?.declared == true ? phases?.name : nil }
    /// The window a report would set now (nil: none, the soft deadline is lifted or there
    /// is no budget), and whether it was learned from the task's pace.
    public var windowInForce: (window: Duration?, learned: Bool) {
        guard policy.budget != nil else { return (nil, false) }
        let window = phases?.window(policy: policy) ?? (policy.window ?? policy.budget!)
        return (window == BudgetPolicy.unlimitedWindow ? nil : window, phases?.windowIsLearned(policy: policy) ?? false)
    }

    /// The deadline in force: the earlier of the soft deadline and the hard limit.
    public var effectiveDeadline: MonotonicInstant? {
        switch (deadline, budget.hardLimit) {
        case let (d?, h?): return min(d, h)
        case let (d?, nil): return d
        case let (nil, h?): return h
        case (nil, nil): return nil
        }
    }

    /// Time left before the effective deadline (never negative); nil when unlimited.
    public func remaining(at now: MonotonicInstant) -> Duration? {
        effectiveDeadline.map { max(.zero, $0 - now) }
    }

    /// Under every-reporter, each reporter that has reported and its time left before its
    /// own deadline (or the hard limit, when that is earlier), the least first; empty
    /// otherwise.
    public func reporterRemaining(at now: MonotonicInstant) -> [(reporter: ReporterID, remaining: Duration)] {
        perReporter.sorted.map { entry in
            let due = budget.hardLimit.map { min($0, entry.deadline) } ?? entry.deadline
            return (entry.reporter, max(.zero, due - now))
        }
    }

    /// When the executor must next call `tick`; nil when nothing is pending.
    public var nextWake: MonotonicInstant? {
        switch stage {
        case .running:
            var due: MonotonicInstant?
            if stalledSince != nil {
                due = earlier(budget.hardLimit, stallDiagnosisUntil)
            } else if let deadline = effectiveDeadline {
                due = policy.warnBefore > .zero && !budget.warned ? deadline - policy.warnBefore : deadline
            }
            if advice.watchesPace, let adviceDue = adviceWake { due = min(due ?? adviceDue, adviceDue) }
            return due
        case let .diagnosing(diagnosis):
            return diagnosis.until
        case let .cancelling(cancel):
            return cancel.killSent ? nil : cancel.killAt
        case .exited:
            return nil
        }
    }

    // MARK: Inputs
    //
    // Each input appends what it decided to `actions`, the executor's list, in order, and
    // changes nothing after that: the executor carries the list out once the input has
    // returned. (Appending to the caller's list, not returning a new one, lets the executor
    // reuse one buffer: a progress message, the hottest input, then allocates nothing.)
    //
    // Events come last in each input's list. A sink that hears one may call back in (an
    // embedder that cancels on `started`); what that call makes the executor do must come
    // after everything this input had it send or signal, not before the rest of it.

    /// The process is running: tell it its budget.
    public mutating func start(pid: Int32, now: MonotonicInstant, into actions: inout [Action]) {
        bars.nameUnnamed(.leader, "pid \(pid)")
        let remaining = remaining(at: now)
        actions.append(.send(.budget(remaining: remaining?.seconds, granted: nil), to: .reporter(.leader)))
        actions.append(.emit(.started(pid: pid)))
        actions.append(.emit(.budgetChanged(remaining: remaining, cause: .start)))
    }

    /// A message from one of the task's reporters (the leader's fd 3 unless said).
    public mutating func receive(_ message: ChildMessage, from reporter: ReporterID = .leader, now: MonotonicInstant,
                                 into actions: inout [Action]) {
        switch message {
        case let .progress(progress):
            let first = actions.endIndex
            let advanced = bars.record(progress, from: reporter, now: now)
            if advanced || !policy.requireAdvance {
                bars.markCounted(at: now)
                heartbeat(from: reporter, now: now, boundary: progress.closed, into: &actions)
            }
            if advice.watchesPace {
                watchPace(now: now, into: &actions)
                if advice.state == .sent { Self.moveEventsLast(&actions, from: first) }
            }
            actions.append(.emit(.progress(bars.shown!, remaining: remaining(at: now))))
        case .heartbeat:
            // Under require-advance a heartbeat proves nothing moved, so it extends nothing.
            if !policy.requireAdvance {
                if stage.isRunning {
                    lastHeartbeat = (reporter, now)
                    if policy.everyReporter { lastHeartbeatBy[reporter] = now }
                }
                heartbeat(from: reporter, now: now, into: &actions)
            }
            actions.append(.emit(.heartbeat(remaining: remaining(at: now))))
        case let .extend(seconds, why):
            childExtend(seconds: seconds, why: why, from: reporter, now: now, into: &actions)
        case .ready:
            guard !isReady else { return }
            isReady = true
            actions.append(.emit(.ready))
        case let .result(value):
            result = value
            actions.append(.emit(.result(value)))
        case let .phase(name, window):
            enterPhase(name, window: window, from: reporter, now: now, into: &actions)
        }
    }

    /// A notification on the task's sd_notify socket (DESIGN §3b). `barrier` is the
    /// executor's (it holds the descriptor).
    public mutating func notify(_ notification: Notification, now: MonotonicInstant, into actions: inout [Action]) {
        switch notification {
        case .ready:
            receive(.ready, from: .notifySocket, now: now, into: &actions)
        case .watchdog:
            receive(.heartbeat, from: .notifySocket, now: now, into: &actions)
        case let .extendTimeout(microseconds):
            receive(.extend(seconds: Double(microseconds) / 1_000_000, why: "EXTEND_TIMEOUT_USEC"), from: .notifySocket,
                    now: now, into: &actions)
        case let .status(text):
            // A status is news, not proof of life: it moves no deadline (systemd's watchdog
            // is petted by WATCHDOG=1 alone).
            bars.nameUnnamed(.notifySocket, "sd_notify")
            _ = bars.record(Progress(detail: text), from: .notifySocket, now: now)
            actions.append(.emit(.progress(bars.shown!, remaining: remaining(at: now))))
        case .watchdogTrigger:
            _ = cancelDiagnosingFirst(.timeout, now: now, into: &actions)
        case let .recorded(key, value):
            actions.append(.emit(.notified(key: key, value: value)))
        case let .phase(name):
            receive(.phase(name: name, window: nil), from: .notifySocket, now: now, into: &actions)
        case .barrier:
            break
        }
    }

    /// Another process of the task connected (`OVERTIME_SOCKET`): it is told the budget,
    /// or, when the task is being cancelled already, the cancel with the grace left.
    /// - Parameter pid: the peer's pid, when the kernel told it: the reporter is `pid N`
    ///   until it names itself.
    public mutating func reporterJoined(_ reporter: ReporterID, pid: Int32? = nil, now: MonotonicInstant, into actions: inout [Action]) {
        reporters.insert(reporter)
        if let pid, pid > 0 { bars.nameUnnamed(reporter, "pid \(pid)") }
        switch stage {
        case .running:
            actions.append(.send(.budget(remaining: remaining(at: now)?.seconds, granted: nil), to: .reporter(reporter)))
        case let .cancelling(cancel):
            actions.append(.send(.cancel(reason: cancel.reason, grace: max(.zero, cancel.killAt - now).seconds, why: cancel.why),
                                 to: .reporter(reporter)))
        case .diagnosing, .exited:
            break  // a diagnosed task hears of its cancel with every other reporter
        }
        actions.append(.emit(.reporters(count: reporters.count)))
    }

    /// A reporter named itself (`reporter` on any message): the name sticks to its
    /// connection until it closes or names itself again.
    public mutating func reporterNamed(_ reporter: ReporterID, _ name: String) {
        bars.name(reporter, name)
    }

    /// The name a reporter goes by: its own, `pid N`, or `reporter N`.
    public func name(of reporter: ReporterID) -> String { bars.name(of: reporter) }

    /// Each connected reporter with its own latest bar, in the order they connected.
    public func reporterSummaries(now: MonotonicInstant) -> [ReporterSummary] {
        reporters.sorted { $0.number < $1.number }.map { reporter in
            let bar = bars.latestBar(of: reporter)
            return ReporterSummary(name: bars.name(of: reporter), progress: bar?.progress,
                                   sinceReport: bar.map { now - $0.movedAt }, closed: bar?.closedAt != nil)
        }
    }

    /// What went quiet, as a `timeout` cancel tells it.
    public func progressSilence(now: MonotonicInstant) -> ProgressSilence {
        let bar = bars.lastCounted(of: quietReporter)
        let heartbeat: (reporter: ReporterID, at: MonotonicInstant)? = if let quiet = quietReporter {
            lastHeartbeatBy[quiet].map { (quiet, $0) }
        } else {
            lastHeartbeat
        }
        if let heartbeat, bar.map({ heartbeat.at > $0.countedAt! }) ?? true {
            return .heartbeat(ago: now - heartbeat.at, reporter: bars.name(of: heartbeat.reporter))
        }
        guard let bar else { return .neverReported }
        return .quiet(ago: now - bar.countedAt!, bar: bar.progress.title ?? bar.progress.bar,
                      reporter: bar.progress.reporter ?? bars.name(of: quietReporter ?? .leader), closedAt: bar.closedAt)
    }

    /// A reporter's connection closed: its bars go (a bar it started again elsewhere is new),
    /// and under every-reporter its deadline stops counting: a finished rank is no hang.
    /// The leader's fd 3 closing is told too, but the leader stays counted among the
    /// reporters, as it always was, until the task ends.
    public mutating func reporterLeft(_ reporter: ReporterID, into actions: inout [Action]) {
        perReporter.remove(reporter)
        lastHeartbeatBy[reporter] = nil
        bars.forget(reporter)
        guard reporter != .leader else { return }
        reporters.remove(reporter)
        actions.append(.emit(.reporters(count: reporters.count)))
    }

    /// The task's memory as the executor measured it (its cgroup's usage, or the sum of
    /// its processes' resident sets): past the warning level the one `warning` to every
    /// reporter, at `memory-max` a cancel with reason `memory` (DESIGN §7).
    public mutating func memorySample(_ used: UInt64, now: MonotonicInstant, into actions: inout [Action]) {
        lastMemory = used
        peakMemory = Swift.max(peakMemory, used)
        guard stage.isRunning, let max = memory.max else { return }
        let first = actions.endIndex
        if !memoryWarned, let warn = memory.warnBytes, used >= warn {
            memoryWarned = true
            actions.append(.send(.warning(resource: "memory", used: used, limit: max), to: .everyReporter))
            actions.append(.emit(.memoryWarning(used: used, limit: max)))
        }
        if used >= max {
            _ = cancelDiagnosingFirst(.memory, now: now, into: &actions)
            Self.moveEventsLast(&actions, from: first)
        }
    }

    /// The engine Overtime runs in warned that it will end (DESIGN §8, `--warn-signal`):
    /// every reporter is told `expiring` with `remaining`, the time the engine leaves, so
    /// the task can checkpoint. Only while it runs: a task being cancelled has heard its
    /// cancel, which says more.
    ///
    /// The task's own deadline stays as it is. The engine's end is not the task's budget:
    /// moving the deadline to it would cancel a task with `timeout` for a limit it never
    /// had, and the engine's own SIGTERM at its end already arrives as a `shutdown` cancel,
    /// with its grace. Nor does the warning count against `warn-before`: the task may still
    /// be warned of its own deadline.
    public mutating func engineExpiring(remaining: Duration, source: EngineTimeSource, now: MonotonicInstant,
                                        into actions: inout [Action]) {
        guard stage.isRunning else { return }
        let remaining = max(.zero, remaining)
        let first = actions.endIndex
        actions.append(.send(.expiring(remaining: remaining.seconds), to: .everyReporter))
        actions.append(.emit(.engineExpiring(remaining: remaining, source: source)))
        advice.engineEndsAt = now + remaining
        adviseIfDue(now: now, into: &actions)
        Self.moveEventsLast(&actions, from: first)
    }

    /// A line on the channel that was not a valid message.
    public mutating func rejectLine(_ error: ProtocolError, excerpt: String, into actions: inout [Action]) {
        protocolErrors += 1
        actions.append(.emit(.protocolError(error, excerpt: excerpt)))
    }

    /// The timer fired (or the executor is checking): expire, warn or kill as due.
    public mutating func tick(now: MonotonicInstant, into actions: inout [Action]) {
        switch stage {
        case .running:
            if stalledSince != nil {
                tickStalled(now: now, into: &actions)
                return
            }
            // After the deadline's work: a task cancelled now needs no advice.
            defer { adviseIfDue(now: now, into: &actions) }
            guard let due = effectiveDeadline else { return }
            if due <= now {
                let reason = expiryReason
                quietReporter = reason == .timeout ? perReporter.earliest?.reporter : nil
                if reason == .timeout, policy.onStall == .warn {
                    stall(now: now, into: &actions)
                } else {
                    _ = cancelDiagnosingFirst(reason, now: now, into: &actions)
                }
                if let quiet = quietReporter { actions.append(.emit(.reporterQuiet(name: bars.name(of: quiet)))) }
            } else if policy.warnBefore > .zero, !budget.warned, due - now <= policy.warnBefore {
                budget.warned = true
                let remaining = due - now
                actions.append(.send(.expiring(remaining: remaining.seconds), to: .everyReporter))
                actions.append(.emit(.expiring(remaining: remaining)))
            }
        case let .diagnosing(diagnosis):
            // The diagnose command's time is up: the cancel goes out whatever it is doing.
            guard diagnosis.until <= now else { return }
            diagnosisEnded(.limitReached, now: now, into: &actions)
        case var .cancelling(cancel):
            guard !cancel.killSent, cancel.killAt <= now else { return }
            cancel.killSent = true
            stage = .cancelling(cancel)
            actions.append(.signalGroup(.kill))
            actions.append(.emit(.killSent))
        case .exited:
            return
        }
    }

    /// A limit's cancel (`timeout`, `memory`): with a diagnose command, that runs first
    /// (DESIGN §7), and the cancel follows when it ends or at its limit.
    private mutating func cancelDiagnosingFirst(_ reason: CancelReason, now: MonotonicInstant, into actions: inout [Action]) -> CancelResult {
        guard stage.isRunning, let limit = policy.diagnoseLimit, reason == .timeout || reason == .memory else {
            return cancel(reason: reason, now: now, into: &actions)
        }
        stage = .diagnosing(Diagnosis(reason: reason, until: now + limit))
        actions.append(.diagnose)
        actions.append(.emit(.diagnosing(reason: reason, limit: limit)))
        return .cancelling
    }

    /// The diagnose command ended (or its limit passed): now the cancel it held back.
    public mutating func diagnosisEnded(_ end: DiagnosisEnd = .finished, now: MonotonicInstant, into actions: inout [Action]) {
        if stallDiagnosisUntil != nil {
            stallDiagnosisUntil = nil
            actions.append(.endDiagnosis(end))
            return
        }
        guard case let .diagnosing(diagnosis) = stage else { return }
        actions.append(.endDiagnosis(end))
        stage = .running
        _ = cancel(reason: diagnosis.reason, now: now, into: &actions)
    }

    /// Cancels the task: the reason on the channel, SIGTERM to the group, SIGKILL after grace.
    /// - Parameter grace: overrides the policy's grace (a shutdown may have less time).
    public mutating func cancel(reason: CancelReason, grace: Duration? = nil, now: MonotonicInstant, into actions: inout [Action]) -> CancelResult {
        switch stage {
        case .exited: return .alreadyFinished
        case let .cancelling(existing): return .alreadyCancelling(existing.reason)
        case let .diagnosing(diagnosis) where diagnosis.reason == reason && grace == nil:
            return .alreadyCancelling(diagnosis.reason)
        case .diagnosing:
            // Another reason (a shutdown, an operator, Ctrl-C) or a grace of its own (a
            // shutdown's, fitted into the engine's): no time for the diagnosis, the cancel
            // goes out now with that reason.
            actions.append(.endDiagnosis(.preempted))
            stage = .running
        case .running:
            stalledSince = nil
            if stallDiagnosisUntil != nil {
                stallDiagnosisUntil = nil
                actions.append(.endDiagnosis(.preempted))
            }
        }
        let grace = max(.zero, grace ?? policy.grace)
        let why = reason == .timeout ? progressSilence(now: now).text(clock: timeOfDay) : nil
        stage = .cancelling(Cancellation(reason: reason, killAt: now + grace, why: why))
        actions.append(.send(.cancel(reason: reason, grace: grace.seconds, why: why), to: .everyReporter))
        actions.append(.signalGroup(.terminate))
        // A stopped process keeps a caught SIGTERM pending until it runs again: without
        // this its handler never runs and grace always ends in SIGKILL (as GNU timeout and
        // systemd do).
        actions.append(.signalGroup(.continue))
        actions.append(.emit(.cancelSent(reason: reason, grace: grace, why: why)))
        return .cancelling
    }

    /// Cuts the grace short: SIGKILL now (a second Ctrl-C or SIGTERM to the supervisor).
    /// - Returns: false when the task was not being cancelled or was killed already.
    @discardableResult
    public mutating func escalate(now: MonotonicInstant, into actions: inout [Action]) -> Bool {
        let first = actions.endIndex
        if case .diagnosing = stage {
            // No time for the diagnosis: the cancel goes out, and SIGKILL right after it.
            diagnosisEnded(.preempted, now: now, into: &actions)
        }
        guard case var .cancelling(cancel) = stage, !cancel.killSent else { return false }
        cancel.killSent = true
        cancel.killAt = now
        stage = .cancelling(cancel)
        actions.append(.signalGroup(.kill))
        actions.append(.emit(.killSent))
        Self.moveEventsLast(&actions, from: first)
        return true
    }

    /// An operator gives the task `amount` more time, counted from its current deadline (or
    /// from now, if that is already past). Past `max-runtime` only when `pastMax` is true.
    public mutating func operatorExtend(by amount: Duration, pastMax: Bool, now: MonotonicInstant, into actions: inout [Action]) -> OperatorResult {
        guard stage.isRunning else { return .notRunning(phase) }
        guard let current = effectiveDeadline else {
            return .applied(remaining: nil, clipped: false)  // unlimited already
        }
        let target = max(current, now) + amount
        if let d = budget.deadline { budget.deadline = max(d, target) }
        budget.floor = max(budget.floor ?? target, target)
        perReporter.raise(to: target)
        if pastMax, let h = budget.hardLimit { budget.hardLimit = max(h, target) }
        leaveWarningZoneIfClear(now: now)
        let remaining = remaining(at: now)
        let clipped = (effectiveDeadline ?? target) < target
        actions.append(.send(.budget(remaining: remaining?.seconds, granted: nil), to: .everyReporter))
        actions.append(.emit(.budgetChanged(remaining: remaining, cause: .operatorExtend(amount: amount, pastMax: pastMax, clipped: clipped))))
        resumeIfClear(now: now, into: &actions)
        return .applied(remaining: remaining, clipped: clipped)
    }

    /// An operator (or a policy) takes the extension back: the deadline becomes now +
    /// `after`, and progress no longer moves it.
    public mutating func revoke(after: Duration = .zero, now: MonotonicInstant, into actions: inout [Action]) -> OperatorResult {
        guard stage.isRunning else { return .notRunning(phase) }
        let first = actions.endIndex
        budget.revoked = true
        budget.deadline = now + max(.zero, after)
        perReporter.removeAll()
        // A revoked budget is the operator's decision: it ends in a cancel, stalled or not.
        stalledSince = nil
        budget.warned = false
        let remaining = remaining(at: now)
        actions.append(.send(.budget(remaining: remaining?.seconds, granted: nil), to: .everyReporter))
        actions.append(.emit(.budgetChanged(remaining: remaining, cause: .revoke(after: after))))
        if let remaining, remaining <= .zero {
            tick(now: now, into: &actions)
            Self.moveEventsLast(&actions, from: first)
        }
        return .applied(remaining: remaining, clipped: false)
    }

    /// The process was reaped. From here on nothing is signalled except the leftovers sweep.
    public mutating func exited(into actions: inout [Action]) {
        if case .exited = stage { return }
        if stallDiagnosisUntil != nil {
            stallDiagnosisUntil = nil
            actions.append(.endDiagnosis(.taskEnded))
        }
        if case .diagnosing = stage {
            // It ended on its own before its cancel went out: no cancel to report (the
            // `diagnosing` event says what was due), its own status stands.
            actions.append(.endDiagnosis(.taskEnded))
            stage = .exited(nil)
            actions.append(.killLeftovers)
            return
        }
        stage = .exited(cancellation)
        actions.append(.killLeftovers)
    }

    /// For an input made of others (a sample that warns and then cancels, a revoke that
    /// expires at once), each with its events last: moves the events among `actions[first...]`
    /// after the other actions there, both in their order. In place: the lists are short.
    static func moveEventsLast(_ actions: inout [Action], from first: Int) {
        var nextEffect = first
        for index in first..<actions.endIndex {
            if case .emit = actions[index] { continue }
            if index != nextEffect { actions.insert(actions.remove(at: index), at: nextEffect) }
            nextEffect += 1
        }
    }

    // MARK: Rules

    /// Why the deadline passed, if it has: the hard limit is `deadline`, a revoked budget is
    /// `revoked`, anything else is `timeout`.
    public var expiryReason: CancelReason {
        if let h = budget.hardLimit, h <= (deadline ?? h) { return .deadline }
        return budget.revoked ? .revoked : .timeout
    }

    /// A report that counts: deadline = max(floor, now + the window in force), unless
    /// revoked. With one fixed window that is max(deadline, now + window), as it always
    /// was; by phase, a shorter window takes over at once. With an unlimited window the
    /// soft deadline goes (max-runtime still holds). Under every-reporter the reporter's own
    /// deadline moves the same way, from the task's when it first reports.
    /// - Parameter boundary: the report closed a bar or entered a phase (`PhaseWatch`).
    mutating func heartbeat(from reporter: ReporterID, now: MonotonicInstant, boundary: Bool = false, learn: Bool = true,
                            into actions: inout [Action]) {
        guard stage.isRunning, !budget.revoked, policy.budget != nil else { return }
        let window: Duration?
        if phases != nil {
            // In place: a copy would copy the learner's intervals on every report.
            let report = phases!.reported(at: now, boundary: boundary, learn: learn, endedStall: stalledSince != nil, policy: policy)
            if let learned = report.learned { actions.append(.emit(.windowLearned(phase: phases!.name, window: learned))) }
            window = report.window == BudgetPolicy.unlimitedWindow ? nil : report.window
        } else {
            // Once lifted, a fixed window's deadline stays lifted.
            guard budget.deadline != nil else { return }
            window = fixedWindow
        }
        let previous = budget.deadline
        guard let window else {
            budget.deadline = nil
            perReporter.removeAll()
            // The warning for the old deadline does not stand for the hard limit's.
            leaveWarningZoneIfClear(now: now)
            resumeIfClear(now: now, into: &actions)
            return
        }
        let candidate = now + window
        budget.deadline = max(budget.floor ?? candidate, candidate)
        if policy.everyReporter { perReporter.reported(reporter, candidate: candidate, start: max(previous ?? candidate, candidate)) }
        if budget.warned { leaveWarningZoneIfClear(now: now) }
        if stalledSince != nil { resumeIfClear(now: now, into: &actions) }
    }

    private mutating func childExtend(seconds: Double, why: String?, from reporter: ReporterID, now: MonotonicInstant,
                                      into actions: inout [Action]) {
        let asked = Duration.seconds(fromDouble: min(seconds, DurationText.maximum.seconds))
        var granted = false
        if stage.isRunning, !budget.revoked {
            let target = now + asked
            if let d = budget.deadline { budget.deadline = max(d, target) }
            budget.floor = max(budget.floor ?? target, target)
            perReporter.raise(to: target)
            granted = (effectiveDeadline ?? target) >= target
            leaveWarningZoneIfClear(now: now)
        }
        let remaining: Duration? = switch stage {
        case .running: remaining(at: now)
        case let .diagnosing(diagnosis): max(.zero, diagnosis.until - now)
        case let .cancelling(cancel): max(.zero, cancel.killAt - now)
        case .exited: .zero
        }
        actions.append(.send(.budget(remaining: remaining?.seconds, granted: granted), to: .reporter(reporter)))
        actions.append(.emit(.budgetChanged(remaining: remaining, cause: .childExtend(asked: asked, why: why, granted: granted))))
        if stage.isRunning { resumeIfClear(now: now, into: &actions) }
    }

    /// A warning already sent may be sent again once the deadline has moved out of range.
    private mutating func leaveWarningZoneIfClear(now: MonotonicInstant) {
        if budget.warned, let due = effectiveDeadline, due - now > policy.warnBefore { budget.warned = false }
    }
}


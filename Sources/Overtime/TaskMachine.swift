import OvertimeProtocol

/// The lifecycle and budget of one task as a pure state machine (DESIGN §1 and §2).
///
/// It performs no I/O and reads no clock: every input carries `now`, and what should
/// happen is handed to a `perform` closure as `Action`s, which the supervisor carries out
/// on its event loop. Unit tests drive it with a fake clock.
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
        /// Write this message on the task's channel.
        case send(SupervisorMessage)
        /// Send this signal to the task's process group (the leader is alive or a zombie).
        case signalGroup(Int32)
        /// The leader was just reaped: kill whatever is left in its group, so nothing of the
        /// task runs unsupervised.
        case killLeftovers
        /// Report this event.
        case emit(TaskEvent.Kind)
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

    public let policy: BudgetPolicy
    public let startedAt: MonotonicInstant
    public private(set) var phase: Phase = .running
    /// The soft deadline that progress moves; nil when the budget is `none`.
    public private(set) var deadline: MonotonicInstant?
    /// start + max-runtime; only an operator may raise it.
    public private(set) var hardLimit: MonotonicInstant?
    public private(set) var revoked = false
    public private(set) var cancelReason: CancelReason?
    public private(set) var killAt: MonotonicInstant?
    public private(set) var killSent = false
    public private(set) var lastProgress: Progress?
    public private(set) var result: JSONValue?
    public private(set) var protocolErrors = 0
    public private(set) var isReady = false
    private var warned = false
    private var bestCompleted: Int?
    private var bestFraction: Double?

    public init(policy: BudgetPolicy, startedAt: MonotonicInstant) {
        self.policy = policy
        self.startedAt = startedAt
        deadline = policy.budget.map { startedAt + $0 }
        hardLimit = policy.maxRuntime.map { startedAt + $0 }
    }

    /// The deadline in force: the earlier of the soft deadline and the hard limit.
    public var effectiveDeadline: MonotonicInstant? {
        switch (deadline, hardLimit) {
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

    /// When the executor must next call `tick`; nil when nothing is pending.
    public var nextWake: MonotonicInstant? {
        switch phase {
        case .running:
            guard let due = effectiveDeadline else { return nil }
            if policy.warnBefore > .zero, !warned {
                return due - policy.warnBefore
            }
            return due
        case .cancelling:
            return killSent ? nil : killAt
        case .exited:
            return nil
        }
    }

    // MARK: Inputs

    /// The process is running: tell it its budget.
    public mutating func start(pid: Int32, now: MonotonicInstant, _ perform: (Action) -> Void) {
        perform(.emit(.started(pid: pid)))
        let remaining = remaining(at: now)
        perform(.send(.budget(remaining: remaining?.seconds, granted: nil)))
        perform(.emit(.budgetChanged(remaining: remaining, cause: .start)))
    }

    /// A message from the task.
    public mutating func receive(_ message: ChildMessage, now: MonotonicInstant, _ perform: (Action) -> Void) {
        switch message {
        case let .progress(progress):
            let advanced = recordAdvance(progress)
            if lastProgress == nil { lastProgress = progress } else { lastProgress!.merge(progress) }
            if advanced || !policy.requireAdvance { heartbeat(now: now) }
            perform(.emit(.progress(lastProgress!, remaining: remaining(at: now))))
        case .heartbeat:
            // Under require-advance a heartbeat proves nothing moved, so it extends nothing.
            if !policy.requireAdvance { heartbeat(now: now) }
            perform(.emit(.heartbeat(remaining: remaining(at: now))))
        case let .extend(seconds, why):
            childExtend(seconds: seconds, why: why, now: now, perform)
        case .ready:
            if !isReady {
                isReady = true
                perform(.emit(.ready))
            }
        case let .result(value):
            result = value
            perform(.emit(.result(value)))
        }
    }

    /// A line on the channel that was not a valid message.
    public mutating func rejectLine(_ error: ProtocolError, excerpt: String, _ perform: (Action) -> Void) {
        protocolErrors += 1
        perform(.emit(.protocolError(error, excerpt: excerpt)))
    }

    /// The timer fired (or the executor is checking): expire, warn or kill as due.
    public mutating func tick(now: MonotonicInstant, _ perform: (Action) -> Void) {
        switch phase {
        case .running:
            guard let due = effectiveDeadline else { return }
            if due <= now {
                _ = cancel(reason: expiryReason, now: now, perform)
            } else if policy.warnBefore > .zero, !warned, due - now <= policy.warnBefore {
                warned = true
                let remaining = due - now
                perform(.send(.expiring(remaining: remaining.seconds)))
                perform(.emit(.expiring(remaining: remaining)))
            }
        case .cancelling:
            if !killSent, let killAt, killAt <= now {
                killSent = true
                perform(.signalGroup(SIGKILL_NUMBER))
                perform(.emit(.killSent))
            }
        case .exited:
            return
        }
    }

    /// Cancels the task: the reason on the channel, SIGTERM to the group, SIGKILL after grace.
    /// - Parameter grace: overrides the policy's grace (a shutdown may have less time).
    public mutating func cancel(reason: CancelReason, grace: Duration? = nil, now: MonotonicInstant, _ perform: (Action) -> Void) -> CancelResult {
        switch phase {
        case .exited: return .alreadyFinished
        case let .cancelling(existing): return .alreadyCancelling(existing)
        case .running: break
        }
        let grace = max(.zero, grace ?? policy.grace)
        phase = .cancelling(reason)
        cancelReason = reason
        killAt = now + grace
        perform(.send(.cancel(reason: reason, grace: grace.seconds)))
        perform(.signalGroup(SIGTERM_NUMBER))
        // A stopped process keeps a caught SIGTERM pending until it runs again: without
        // this its handler never runs and grace always ends in SIGKILL (as GNU timeout and
        // systemd do).
        perform(.signalGroup(SIGCONT_NUMBER))
        perform(.emit(.cancelSent(reason: reason, grace: grace)))
        return .cancelling
    }

    /// Cuts the grace short: SIGKILL now (a second Ctrl-C or SIGTERM to the supervisor).
    /// - Returns: false when the task was not being cancelled or was killed already.
    public mutating func escalate(now: MonotonicInstant, _ perform: (Action) -> Void) -> Bool {
        guard case .cancelling = phase, !killSent else { return false }
        killSent = true
        killAt = now
        perform(.signalGroup(SIGKILL_NUMBER))
        perform(.emit(.killSent))
        return true
    }

    /// An operator gives the task `amount` more time, counted from its current deadline (or
    /// from now, if that is already past). Past `max-runtime` only when `pastMax` is true.
    public mutating func operatorExtend(by amount: Duration, pastMax: Bool, now: MonotonicInstant, _ perform: (Action) -> Void) -> OperatorResult {
        guard phase == .running else { return .notRunning(phase) }
        guard let current = effectiveDeadline else {
            return .applied(remaining: nil, clipped: false)  // unlimited already
        }
        let target = max(current, now) + amount
        if let d = deadline { deadline = max(d, target) }
        if pastMax, let h = hardLimit { hardLimit = max(h, target) }
        leaveWarningZoneIfClear(now: now)
        let remaining = remaining(at: now)
        let clipped = (effectiveDeadline ?? target) < target
        perform(.send(.budget(remaining: remaining?.seconds, granted: nil)))
        perform(.emit(.budgetChanged(remaining: remaining, cause: .operatorExtend(amount: amount, pastMax: pastMax, clipped: clipped))))
        return .applied(remaining: remaining, clipped: clipped)
    }

    /// An operator (or a policy) takes the extension back: the deadline becomes now +
    /// `after`, and progress no longer moves it.
    public mutating func revoke(after: Duration = .zero, now: MonotonicInstant, _ perform: (Action) -> Void) -> OperatorResult {
        guard phase == .running else { return .notRunning(phase) }
        revoked = true
        deadline = now + max(.zero, after)
        warned = false
        let remaining = remaining(at: now)
        perform(.send(.budget(remaining: remaining?.seconds, granted: nil)))
        perform(.emit(.budgetChanged(remaining: remaining, cause: .revoke(after: after))))
        if let remaining, remaining <= .zero {
            tick(now: now, perform)
        }
        return .applied(remaining: remaining, clipped: false)
    }

    /// The process was reaped. From here on nothing is signalled except the leftovers sweep.
    public mutating func exited(_ perform: (Action) -> Void) {
        guard phase != .exited else { return }
        phase = .exited
        perform(.killLeftovers)
    }

    // MARK: Rules

    /// Why the deadline passed, if it has: the hard limit is `deadline`, a revoked budget is
    /// `revoked`, anything else is `timeout`.
    public var expiryReason: CancelReason {
        if let h = hardLimit, h <= (deadline ?? h) { return .deadline }
        return revoked ? .revoked : .timeout
    }

    /// Did this report move forward (for require-advance)? Records the best seen.
    private mutating func recordAdvance(_ progress: Progress) -> Bool {
        var advanced = false
        if let c = progress.completed, c > (bestCompleted ?? -1) {
            bestCompleted = c
            advanced = true
        }
        if let f = progress.fraction, f > (bestFraction ?? -1) {
            bestFraction = f
            advanced = true
        }
        return advanced
    }

    /// Progress or heartbeat: deadline = max(deadline, now + window), unless revoked; with an
    /// unlimited window the soft deadline goes (max-runtime still holds).
    private mutating func heartbeat(now: MonotonicInstant) {
        guard phase == .running, !revoked, let d = deadline else { return }
        if policy.reportsLiftDeadline {
            deadline = nil
            // The warning for the old deadline does not stand for the hard limit's.
            leaveWarningZoneIfClear(now: now)
            return
        }
        guard let window = policy.effectiveWindow else { return }
        let candidate = now + window
        if candidate > d {
            deadline = candidate
            if warned { leaveWarningZoneIfClear(now: now) }
        }
    }

    private mutating func childExtend(seconds: Double, why: String?, now: MonotonicInstant, _ perform: (Action) -> Void) {
        let asked = Duration.seconds(fromDouble: min(seconds, DurationText.maximum.seconds))
        var granted = false
        if phase == .running, !revoked {
            let target = now + asked
            if let d = deadline { deadline = max(d, target) }
            granted = (effectiveDeadline ?? target) >= target
            leaveWarningZoneIfClear(now: now)
        }
        let remaining: Duration? = switch phase {
        case .running: remaining(at: now)
        case .cancelling: killAt.map { max(.zero, $0 - now) }
        case .exited: .zero
        }
        perform(.send(.budget(remaining: remaining?.seconds, granted: granted)))
        perform(.emit(.budgetChanged(remaining: remaining, cause: .childExtend(asked: asked, why: why, granted: granted))))
    }

    /// A warning already sent may be sent again once the deadline has moved out of range.
    private mutating func leaveWarningZoneIfClear(now: MonotonicInstant) {
        if warned, let due = effectiveDeadline, due - now > policy.warnBefore { warned = false }
    }
}

// Signal numbers are Linux's; spelled here so the pure machine needs no C module.
let SIGTERM_NUMBER: Int32 = 15
let SIGKILL_NUMBER: Int32 = 9
let SIGWINCH_NUMBER: Int32 = 28
let SIGCONT_NUMBER: Int32 = 18

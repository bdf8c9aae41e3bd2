import OvertimeProtocol

/// The state of the advice to checkpoint before a task's hard end (docs/hangs.md).
struct CheckpointAdvice: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// Not yet due: the machine wakes when it is.
        case pending
        /// Due, but the task's pace said it will be done in time (or it was checkpointing):
        /// looked at again at each report, with no wake of its own.
        case watching
        case sent
    }

    var state = State.pending {
        didSet { if state == .sent { watchesPace = false } }
    }
    /// Whether a report must look at the task's pace for the advice: only while one could
    /// still be given (a lead is set, or phases could teach one). Kept, not computed: every
    /// progress report reads it.
    var watchesPace = false
    /// When the engine Overtime runs in ends, from its warning (`--warn-signal`).
    var engineEndsAt: MonotonicInstant?
    /// Where the task's pace is measured from: the first share done seen, and when (again
    /// once the share falls: another bar).
    var paceFrom: MonotonicInstant?
    var fractionFrom = 0.0
    /// The latest share done, and when it came.
    var paceTo: MonotonicInstant?
    var fractionTo = 0.0
    /// The share done fell since the start: the work comes in several bars (one an epoch),
    /// and one bar's pace does not tell when the whole is done.
    var startedOver = false

    /// How much longer than the longest checkpoint seen the lead is.
    static let checkpointMargin = 1.5
}

/// Phases, stalls and the checkpoint advice: the parts of the machine that know the job's
/// shape (DESIGN §1, docs/hangs.md).
extension TaskMachine {
    // MARK: Phases

    /// The task entered `name`: a report that counts, and from now on that phase's window.
    mutating func enterPhase(_ name: String, window: Double?, from reporter: ReporterID, now: MonotonicInstant,
                             into actions: inout [Action]) {
        if phases == nil {
            phases = PhaseWatch(learning: policy.learnedWindows, startedAt: startedAt)
            if advice.state != .sent { advice.watchesPace = true }
        }
        let changed = phases!.enter(name, window: window, now: now)
        // Under require-advance only a move to another phase is a sign of work.
        if changed || !policy.requireAdvance {
            heartbeat(from: reporter, now: now, boundary: changed, learn: !changed, into: &actions)
        }
        if changed { actions.append(.emit(.phase(name: name, window: windowInForce.window))) }
    }

    // MARK: Stalls

    /// Under `--on-stall warn` the soft deadline passed: the task is marked stalled, its
    /// diagnose command runs once, and it goes on.
    mutating func stall(now: MonotonicInstant, into actions: inout [Action]) {
        stalledSince = now
        stalls += 1
        let silence = progressSilence(now: now)
        let quiet: Duration = switch silence {
        case let .quiet(ago, _, _, _), let .heartbeat(ago, _): ago
        case .neverReported: now - startedAt
        }
        if let limit = policy.diagnoseLimit {
            stallDiagnosisUntil = now + limit
            actions.append(.diagnose)
        }
        actions.append(.emit(.stalled(quiet: quiet, why: silence.text(clock: timeOfDay))))
    }

    /// While stalled only the hard end stops the task; the stall's diagnosis is cut at its
    /// limit.
    mutating func tickStalled(now: MonotonicInstant, into actions: inout [Action]) {
        if let until = stallDiagnosisUntil, until <= now {
            stallDiagnosisUntil = nil
            actions.append(.endDiagnosis(.limitReached))
        }
        if let hard = budget.hardLimit, hard <= now {
            stalledSince = nil
            _ = cancel(reason: .deadline, now: now, into: &actions)
            return
        }
        adviseIfDue(now: now, into: &actions)
    }

    /// A stalled task whose deadline is ahead again (it reported, it or an operator
    /// extended) is running again.
    mutating func resumeIfClear(now: MonotonicInstant, into actions: inout [Action]) {
        guard let since = stalledSince else { return }
        if let due = effectiveDeadline, due <= now { return }
        stalledSince = nil
        actions.append(.emit(.resumed(after: now - since)))
    }

    // MARK: The checkpoint advice

    /// How long before the hard end the task is advised to checkpoint: `--checkpoint-lead`,
    /// or a margin over its longest `checkpoint` phase, whichever is longer; nil when
    /// neither is known.
    var checkpointLead: Duration? {
        later(policy.checkpointLead, phases?.longestCheckpoint.map { Duration.seconds(fromDouble: $0.seconds * CheckpointAdvice.checkpointMargin) })
    }

    /// The end no progress passes: max-runtime or the batch's deadline, or the engine's.
    var hardEnd: MonotonicInstant? {
        earlier(budget.hardLimit, advice.engineEndsAt)
    }

    /// When the advice falls due, while the machine must wake for it.
    var adviceWake: MonotonicInstant? {
        guard advice.state == .pending, let end = hardEnd, let lead = checkpointLead else { return nil }
        return end - lead
    }

    /// A progress report: where the pace is measured from, and whether the advice, once
    /// declined, is due after all.
    mutating func watchPace(now: MonotonicInstant, into actions: inout [Action]) {
        if let fraction = lastProgress?.fractionCompleted {
            if advice.paceFrom == nil || fraction < advice.fractionTo {
                advice.startedOver = advice.paceFrom != nil
                advice.paceFrom = now
                advice.fractionFrom = fraction
            }
            advice.paceTo = now
            advice.fractionTo = fraction
        }
        if advice.state == .watching { adviseIfDue(now: now, into: &actions) }
    }

    /// When the time left to the hard end has fallen to the lead and the task's pace does
    /// not bring it to its end before then: the advice, once, to every reporter.
    mutating func adviseIfDue(now: MonotonicInstant, into actions: inout [Action]) {
        guard stage.isRunning, advice.state != .sent, let end = hardEnd, let lead = checkpointLead, end - lead <= now else { return }
        let left = max(.zero, end - now)
        let needed = workLeft(now: now)
        if phases?.name == PhaseWatch.checkpoint || needed.map({ now + $0 <= end }) == true {
            advice.state = .watching
            return
        }
        advice.state = .sent
        let endName = if let engine = advice.engineEndsAt, engine <= (budget.hardLimit ?? engine) {
            "the engine's end"
        } else if let endsBy = policy.endsBy, endsBy == budget.hardLimit {
            "the batch's deadline"
        } else {
            "max-runtime"
        }
        let pace = if let needed {
            "at its pace the work needs about \(DurationText.format(needed)) more"
        } else if advice.startedOver {
            "how much work is left is not known (its share done started over: a bar for each part)"
        } else {
            "how much work is left is not known (no share done reported)"
        }
        let why = "\(endName) is \(DurationText.format(left)) away; \(pace); a checkpoint takes about \(DurationText.format(lead))"
        actions.append(.send(.advice(action: "checkpoint", remaining: left.seconds, why: why), to: .everyReporter))
        actions.append(.emit(.advice(action: "checkpoint", remaining: left, why: why)))
    }

    /// The time the task's work still needs from `now`, at its pace from its first share
    /// done to its latest; nil when unknown (none reported, or it started over).
    func workLeft(now: MonotonicInstant) -> Duration? {
        guard !advice.startedOver, let from = advice.paceFrom, let to = advice.paceTo, advice.fractionTo > advice.fractionFrom, to > from else { return nil }
        let perSecond = (advice.fractionTo - advice.fractionFrom) / (to - from).seconds
        let finish = to + .seconds(fromDouble: (1 - advice.fractionTo) / perSecond)
        return max(.zero, finish - now)
    }
}

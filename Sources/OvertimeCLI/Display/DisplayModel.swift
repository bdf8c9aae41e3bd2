import Overtime
import OvertimeProtocol

/// What the live display knows about one running task. Built from the task's events alone:
/// the budget rules live in the task's machine, which puts the time left on every event
/// that moves the deadline.
struct LiveTask: Sendable, Equatable {
    let id: Int
    var name: String
    var policy: BudgetPolicy
    var startedAt: MonotonicInstant
    var attempt = 1
    var progress: Progress?
    var ready = false
    /// The deadline in force: the time of the newest event that tells it (budget, progress,
    /// heartbeat, expiring) plus the time left it carries; nil when unlimited.
    var deadline: MonotonicInstant?
    /// An `expiring` warning came for the current deadline.
    var warned = false
    var cancelling: CancelReason?
    var killAt: MonotonicInstant?
    var killSent = false
    var rate = RateTracker()
    /// The phase the task named last, and the window that rules there (nil: the policy's).
    var phase: String?
    var window: Duration?
    /// Under `--on-stall warn`, since when it is stalled.
    var stalledSince: MonotonicInstant?
    /// Its batch found it far slower than its peers.
    var straggler = false
    var protocolErrors = 0
    var refusedReporters = 0
    var notifications = 0
    /// How many of the task's processes report (1: the leader alone).
    var reporters = 1
    /// Replies to the task's own extends: a task may ask in a loop, so the first few are
    /// shown, then one per interval.
    var extendReplies = RepeatAllowance(shownFreely: EventText.shownExtendReplies, interval: EventText.extendReplyInterval)

    /// The sweep or array a task named `name` is an element of (`shard` for `shard[7]`).
    static func sweep(ofElement name: String) -> String? {
        guard name.last == "]", let open = name.firstIndex(of: "[") else { return nil }
        return String(name[..<open])
    }

    init(id: Int, name: String, policy: BudgetPolicy, startedAt: MonotonicInstant) {
        self.id = id
        self.name = name
        self.policy = policy
        self.startedAt = startedAt
        // The deadline comes with the start's budget event, which follows at once.
    }

    /// How the budget column reads at a moment.
    enum Budget: Sendable, Equatable {
        case unlimited
        /// Time left; `urgent` inside warn-before or under a tenth of the window.
        case left(Duration, urgent: Bool)
        case cancelling(CancelReason, killIn: Duration?)
        case killing
        /// Past its soft deadline under `--on-stall warn`, for this long.
        case stalled(Duration)
    }

    func budget(at now: MonotonicInstant) -> Budget {
        if killSent { return .killing }
        if let reason = cancelling { return .cancelling(reason, killIn: killAt.map { max(.zero, $0 - now) }) }
        if let since = stalledSince { return .stalled(max(.zero, now - since)) }
        guard let deadline else { return .unlimited }
        let left = max(.zero, deadline - now)
        var urgent = warned || (policy.warnBefore > .zero && left <= policy.warnBefore)
        if let reference = window ?? policy.effectiveWindow ?? policy.maxRuntime, reference > .zero {
            urgent = urgent || left.nanoseconds < reference.nanoseconds / 10
        }
        return .left(left, urgent: urgent)
    }

    func elapsed(at now: MonotonicInstant) -> Duration {
        max(.zero, now - startedAt)
    }

    mutating func apply(progress newer: Progress, remaining: Duration?, at time: MonotonicInstant) {
        // The event carries the merged progress; keep it whole.
        progress = newer
        if let f = newer.fractionCompleted { rate.add(f, at: time) }
        apply(remaining: remaining, at: time)
    }

    /// A budget, progress or heartbeat event's time left.
    mutating func apply(remaining: Duration?, at time: MonotonicInstant) {
        guard cancelling == nil else { return }
        deadline = remaining.map { time + $0 }
        if warned, let d = deadline, d - time > policy.warnBefore { warned = false }
    }

    mutating func apply(budget remaining: Duration?, cause: BudgetChange, at time: MonotonicInstant) {
        apply(remaining: remaining, at: time)
        if case .revoke = cause { warned = false }
    }
}

/// Everything the live display shows, as a value: the running tasks and, for a batch, the
/// counts. The event handlers turn events into changes here plus the notices to print;
/// the renderer turns it into rows. No I/O, no clock: every input carries its time.
struct DisplayModel: Sendable, Equatable {
    /// Running tasks by the supervisor's task id (ids grow in spawn order).
    private(set) var tasks: [Int: LiveTask] = [:]
    /// Budget rules by task name (the run's one task); a batch's come with each start.
    var policies: [String: BudgetPolicy] = [:]
    /// Set for `overtime batch`.
    var batch: BatchCounts?
    /// Attempt numbers by task name, from the batch's `started` updates.
    private var attempts: [String: Int] = [:]

    struct BatchCounts: Sendable, Equatable {
        var runID: String
        var total: Int
        var startedAt: MonotonicInstant
        var succeeded = 0
        var failed = 0
        var skipped = 0
        /// Tasks waiting to be tried again.
        var retrying: Set<String> = []
        /// Each sweep's and array's elements: how many in all, how many finished.
        var sweeps: [String: SweepCount] = [:]

        struct SweepCount: Sendable, Equatable {
            var total: Int
            var finished = 0
        }

        var finished: Int { succeeded + failed + skipped }
    }

    /// Running tasks in the order they started.
    var running: [LiveTask] {
        tasks.values.sorted { $0.id < $1.id }
    }

    /// Applies one task event; returns the notices it makes. When `standalone` is false a
    /// task's start and end make no notice (a batch reports them with its own updates,
    /// which know the attempt and the final outcome).
    mutating func apply(_ event: TaskEvent, standalone: Bool = true) -> [Notice] {
        let id = event.task.id
        let name = event.task.name
        let t = event.time
        if case .exited = event.kind {} else if tasks[id] == nil {
            // The first event of a task (normally `started`) opens its row.
            var task = LiveTask(id: id, name: name, policy: policies[name] ?? .default, startedAt: t)
            task.attempt = attempts[name] ?? 1
            tasks[id] = task
        }
        switch event.kind {
        case let .started(pid):
            return standalone ? [.started(task: name, pid: pid, attempt: 1)] : []
        case let .progress(progress, remaining):
            tasks[id]?.apply(progress: progress, remaining: remaining, at: t)
            return []
        case let .heartbeat(remaining):
            tasks[id]?.apply(remaining: remaining, at: t)
            return []
        case .ready:
            tasks[id]?.ready = true
            return []
        case .result:
            return []
        case let .budgetChanged(remaining, cause):
            tasks[id]?.apply(budget: remaining, cause: cause, at: t)
            if case .start = cause { return [] }
            if case .childExtend = cause, var task = tasks[id] {
                let shown = task.extendReplies.admit(at: t) != nil
                tasks[id] = task
                if !shown { return [] }
            }
            return [.budget(task: name, remaining: remaining, cause: cause)]
        case let .expiring(remaining):
            tasks[id]?.deadline = t + remaining
            tasks[id]?.warned = true
            return [.expiring(task: name, remaining: remaining)]
        case let .engineExpiring(remaining, source):
            // The task's own deadline is unchanged: the row's budget stays as it was.
            return [.engineExpiring(task: name, remaining: remaining, source: source)]
        case let .cancelSent(reason, grace, why):
            tasks[id]?.cancelling = reason
            tasks[id]?.killAt = t + grace
            return [.cancelling(task: name, reason: reason, grace: grace, why: why)]
        case .killSent:
            tasks[id]?.killSent = true
            return [.killSent(task: name)]
        case let .protocolError(error, excerpt):
            tasks[id]?.protocolErrors += 1
            let shown = tasks[id]?.protocolErrors ?? 1
            guard shown <= EventText.shownProtocolErrors else { return [] }
            return [.protocolError(task: name, error: "\(error)", excerpt: TextWidth.sanitize(excerpt), shown: shown)]
        case let .operatorRequest(action, uid):
            return [.operatorRequest(task: name, action: action, uid: uid)]
        case let .reporters(count):
            tasks[id]?.reporters = count
            return []
        case let .notified(key, value):
            tasks[id]?.notifications += 1
            guard (tasks[id]?.notifications ?? 1) <= EventText.shownNotifications else { return [] }
            return [.notified(task: name, key: key, value: value)]
        case let .diagnosing(reason, limit):
            return [.diagnosing(task: name, reason: reason, limit: limit)]
        case let .memoryWarning(used, limit):
            return [.memoryWarning(task: name, used: used, limit: limit)]
        case let .reporterQuiet(reporter):
            return [.reporterQuiet(task: name, reporter: reporter)]
        case let .phase(phase, window):
            tasks[id]?.phase = phase
            tasks[id]?.window = window
            return []
        case let .windowLearned(phase, window):
            if tasks[id]?.phase ?? PhaseNames.initial == phase { tasks[id]?.window = window }
            return [.windowLearned(task: name, phase: phase, window: window)]
        case let .stalled(quiet, why):
            tasks[id]?.stalledSince = t - quiet
            return [.stalled(task: name, quiet: quiet, why: why)]
        case let .resumed(after):
            tasks[id]?.stalledSince = nil
            return [.resumed(task: name, after: after)]
        case let .advice(action, remaining, why):
            return [.advice(task: name, action: action, remaining: remaining, why: why)]
        case let .straggler(rate, median, below, restart):
            tasks[id]?.straggler = true
            return [.straggler(task: name, rate: rate, median: median, below: below, restart: restart)]
        case let .reporterRefused(pid, uid, count):
            let before = tasks[id]?.refusedReporters ?? 0
            tasks[id]?.refusedReporters = before + count
            // Said for the first few refusals; a count of many is one notice.
            guard before < EventText.shownProtocolErrors else { return [] }
            return [.reporterRefused(task: name, pid: pid, uid: uid, count: count, shown: before + 1)]
        case let .exited(outcome):
            tasks[id] = nil
            var notices: [Notice] = []
            if outcome.protocolErrors > EventText.shownProtocolErrors {
                notices.append(.protocolErrorTotal(task: name, count: outcome.protocolErrors))
            }
            if standalone { notices.append(.ended(outcome)) }
            return notices
        }
    }

    /// Applies one batch update (task events go through `apply(_:)`); returns its notices.
    mutating func apply(_ update: BatchUpdate) -> [Notice] {
        switch update {
        case let .started(task, attempt, pid, policy):
            attempts[task] = attempt
            if let id = tasks.values.first(where: { $0.name == task })?.id {
                tasks[id]?.attempt = attempt
                // A batch's rules come with each start (its row was opened by the task's own
                // `started` event just before), not as a table of every task's.
                if policies[task] == nil { tasks[id]?.policy = policy }
            }
            batch?.retrying.remove(task)
            return [.started(task: task, pid: pid, attempt: attempt)]
        case let .retrying(task, attempt, after, because):
            batch?.retrying.insert(task)
            return [.retrying(task: task, attempt: attempt, after: after, because: because)]
        case let .finished(report):
            batch?.retrying.remove(report.name)
            attempts[report.name] = nil
            if let sweep = LiveTask.sweep(ofElement: report.name) { batch?.sweeps[sweep]?.finished += 1 }
            switch report.outcome {
            case .succeeded: batch?.succeeded += 1
            case .failed: batch?.failed += 1
            case .skipped: batch?.skipped += 1
            }
            return [.finished(report)]
        case let .taskEvent(event):
            return apply(event, standalone: false)
        case .journalLine, .recordFailed:
            return []
        }
    }
}

import OvertimeProtocol

/// Which task an event or outcome belongs to.
public struct TaskRef: Sendable, Hashable, CustomStringConvertible {
    /// Unique within one supervisor, in spawn order.
    public let id: Int
    /// The task's name, as given to it in `OVERTIME_TASK`.
    public let name: String

    public init(id: Int, name: String) {
        self.id = id
        self.name = name
    }

    public var description: String { name }
}

/// Where the time an engine leaves (`--warn-signal`) came from.
public enum EngineTimeSource: String, Sendable, Equatable, CaseIterable {
    /// `--warn-lead`: the user said how long the engine waits after its signal.
    case warnLead = "warn-lead"
    /// The Slurm job's end time (`squeue`, or `scontrol show job`), minus now.
    case slurm
    /// Neither: `EngineTimeSource.defaultLead`.
    case fallback = "default"
    /// The head of an executor that started this run passed on its own engine's warning.
    case head

    /// The time assumed when nobody says: Slurm's own default for `--signal` without
    /// `@N` is 60 s before the end.
    public static let defaultLead = Duration.seconds(60)
}

/// Why a budget changed.
public enum BudgetChange: Sendable, Equatable {
    /// The task started with its first budget.
    case start
    /// The task asked for `asked` more time; `granted` is false when refused or clipped.
    case childExtend(asked: Duration, why: String?, granted: Bool)
    /// An operator extended it (past `max-runtime` when `pastMax`).
    case operatorExtend(amount: Duration, pastMax: Bool, clipped: Bool)
    /// An operator or a policy revoked it.
    case revoke(after: Duration)
}

/// Something that happened to a task. The supervisor hands every event to its event
/// handler, on its loop thread, in order; the CLI, the display, the journal and the control
/// socket are all consumers of this one stream.
public struct TaskEvent: Sendable {
    public enum Kind: Sendable, Equatable {
        case started(pid: Int32)
        /// The task reported progress (merged with what it reported before). `remaining` is
        /// the budget left once it moved the deadline (nil: unlimited), so no consumer has to
        /// know the budget rules.
        case progress(Progress, remaining: Duration?)
        /// The task sent a heartbeat; `remaining` as for progress.
        case heartbeat(remaining: Duration?)
        case ready
        case result(JSONValue)
        case budgetChanged(remaining: Duration?, cause: BudgetChange)
        case expiring(remaining: Duration)
        /// The engine Overtime runs in (Slurm, a container platform) warned of its own end
        /// (`--warn-signal`): the task was sent `expiring` with `remaining`, the time the
        /// engine leaves, found as `source` says. The task's own deadline is unchanged.
        case engineExpiring(remaining: Duration, source: EngineTimeSource)
        /// The cancel went out; `why` is what it said beyond the reason (for a `timeout`,
        /// what went quiet: `ProgressSilence`).
        case cancelSent(reason: CancelReason, grace: Duration, why: String? = nil)
        case killSent
        case protocolError(ProtocolError, excerpt: String)
        /// An operator asked for `action` (cancel, extend, revoke) over the control socket.
        case operatorRequest(action: String, uid: UInt32)
        /// A process that is not part of the task connected to its socket and was turned
        /// away (its pid and uid, when the kernel told them); `count` datagrams of one sender
        /// refused within a second are one event.
        case reporterRefused(pid: Int32?, uid: UInt32?, count: Int = 1)
        /// A process of the task connected to its socket, or its connection closed: how
        /// many report now (the leader's fd 3 among them).
        case reporters(count: Int)
        /// A daemon said `STOPPING=1`, `ERRNO=…`, `MAINPID=…` (and the like) on its
        /// sd_notify socket.
        case notified(key: String, value: String)
        /// The task's memory first passed its warning level: `used` bytes of the `limit`
        /// (its `memory-max`) at which it is cancelled. Once per task.
        case memoryWarning(used: UInt64, limit: UInt64)
        /// A `reason` cancel is due: the task's diagnose command runs first, for at most
        /// `limit`, and the cancel follows.
        case diagnosing(reason: CancelReason, limit: Duration)
        /// Under every-reporter, the deadline that passed was this reporter's own: it went
        /// quiet while others kept reporting. Comes right after the `timeout` cancel it
        /// explains (with a diagnose command, after the `diagnosing` that comes first).
        case reporterQuiet(name: String)
        /// The task entered the phase `name`; `window` is the one that rules there (nil: no
        /// soft limit in it).
        case phase(name: String, window: Duration?)
        /// Under `--window auto`, the window of `phase` learned from the task's pace, when
        /// first learned and each time it moves by a fifth or more.
        case windowLearned(phase: String, window: Duration)
        /// Under `--on-stall warn`, the soft deadline passed: the task is stalled, quiet for
        /// `quiet`, and goes on.
        case stalled(quiet: Duration, why: String)
        /// A stalled task reported again, `after` its stall began.
        case resumed(after: Duration)
        /// The task was advised to `action` (`checkpoint`): its hard end is `remaining`
        /// away and its pace says its work will not be done by then.
        case advice(action: String, remaining: Duration, why: String)
        /// In a batch, the task's rate is below `below` × `median`, its peers' (a sweep's
        /// running elements, a peer group); `restart`: it is cancelled and retried.
        case straggler(rate: Double, median: Double, below: Double, restart: Bool)
        /// The task is over: exited, killed, or never started. Always the last event.
        // Boxed: an outcome is several times the size of any other kind, and every event
        // (a progress message's too) would otherwise be copied at that size.
        indirect case exited(TaskOutcome)
    }

    public let task: TaskRef
    /// When it happened, on the monotonic clock.
    public let time: MonotonicInstant
    public let kind: Kind

    public init(task: TaskRef, time: MonotonicInstant, kind: Kind) {
        self.task = task
        self.time = time
        self.kind = kind
    }
}

extension TaskEvent.Kind {
    /// The kinds a task can cause as often as it writes lines, and so that a consumer
    /// writing events out thins (nil: bounded by nature, always written: a start, a cancel,
    /// an operator's request, the end).
    public var thinnedKind: ThinnedKind? {
        switch self {
        case .progress, .heartbeat, .reporters: .progress
        case .protocolError: .protocolError
        case let .budgetChanged(_, cause):
            if case .childExtend = cause { .extendReply } else { nil }
        case .result: .result
        case .expiring: .expiring
        case .reporterRefused: .reporterRefused
        case .notified: .notified
        case .phase: .phase
        default: nil
        }
    }
}

/// What a consumer thins, by the word it is reported under.
public enum ThinnedKind: String, Sendable, CaseIterable, Hashable {
    /// Progress and heartbeats (summarised only in the task's totals: thinning them is
    /// the normal case, not news).
    case progress
    /// Bad lines on the channel.
    case protocolError = "protocol-error"
    /// `budget` replies to the task's own `extend` requests.
    case extendReply = "extend"
    /// `result` messages (the last one is in the task's `exited` record whatever happens).
    case result
    /// `expiring` warnings (a task that keeps extending just past `warn-before` gets one
    /// each time).
    case expiring
    /// Connections to the task's socket from processes outside it.
    case reporterRefused = "reporter-refused"
    /// sd_notify keys recorded as events (`STOPPING=1`, `ERRNO=…`).
    case notified = "notify"
    /// Phases entered (a task that names one for every step would otherwise write a line
    /// each).
    case phase

    /// The kind's place in `allCases`, where the throttle keeps its counts.
    var index: Int {
        switch self {
        case .progress: 0
        case .protocolError: 1
        case .extendReply: 2
        case .result: 3
        case .expiring: 4
        case .reporterRefused: 5
        case .notified: 6
        case .phase: 7
        }
    }
}

/// Thins what a consumer writes out of the events a task can cause at any rate (progress,
/// heartbeats, protocol errors, replies to its extends, results, expiring warnings): per
/// task and kind, the first `burst` pass, then at most one per `interval`. Every other event
/// passes. It counts what it held back, so the consumer can say so: before the next event
/// of a kind that is written, and in the task's end (`Admission`). A task is forgotten once
/// it has exited.
public struct FrequentEventThrottle: Sendable {
    public let interval: Duration
    /// Events of each kind written freely at a task's start before the interval applies
    /// (progress has none: its first event each interval is the one that counts).
    public let burst: Int
    private var tasks: [Int: TaskCounts] = [:]

    private struct Counts: Sendable {
        var lastAdmitted: MonotonicInstant?
        var admitted = 0
        /// Held back since the last one admitted.
        var pending = 0
        var total = 0
    }

    /// One task's counts, by kind: an array indexed by the kind's place in `allCases`, since
    /// every progress line of every task comes through here (one hash, the task's, per event).
    private struct TaskCounts: Sendable {
        var byKind = [Counts](repeating: Counts(), count: ThinnedKind.allCases.count)

        subscript(kind: ThinnedKind) -> Counts { byKind[kind.index] }
    }

    /// What to write for one event.
    public struct Admission: Sendable, Equatable {
        /// Write the event.
        public var write: Bool
        /// Write, before it, a `thinned` line for each of these: how many events of the
        /// kind were held back since the last one written (for a task's end: every kind
        /// still owed one). Never progress.
        public var summaries: [(kind: ThinnedKind, count: Int)]
        /// For a task's end: everything held back over its life, by kind (empty: nothing).
        public var totals: [ThinnedKind: Int]

        public static func == (a: Admission, b: Admission) -> Bool {
            a.write == b.write && a.totals == b.totals
                && a.summaries.map(\.kind) == b.summaries.map(\.kind) && a.summaries.map(\.count) == b.summaries.map(\.count)
        }
    }

    /// Phases written freely: a phase is a state, and a fit names a few an epoch (the last
    /// ones, a teardown and a test, in quick succession); only a task that names one every
    /// step is thinned.
    public static let phaseBurst = 1000

    public init(interval: Duration, burst: Int = 10) {
        self.interval = interval
        self.burst = burst
    }

    /// Whether to write `event` out (and nothing to say about what was thinned).
    public mutating func admits(_ event: TaskEvent) -> Bool {
        admit(event).write
    }

    /// Whether to write `event` out, and what to say first about what was held back.
    public mutating func admit(_ event: TaskEvent) -> Admission {
        let id = event.task.id
        if case .exited = event.kind {
            guard let counts = tasks.removeValue(forKey: id) else { return Admission(write: true, summaries: [], totals: [:]) }
            let summaries = ThinnedKind.allCases.compactMap { kind -> (kind: ThinnedKind, count: Int)? in
                let c = counts[kind]
                guard kind != .progress, c.pending > 0 else { return nil }
                return (kind, c.pending)
            }
            var totals: [ThinnedKind: Int] = [:]
            for kind in ThinnedKind.allCases where counts[kind].total > 0 { totals[kind] = counts[kind].total }
            return Admission(write: true, summaries: summaries, totals: totals)
        }
        guard let kind = event.kind.thinnedKind else { return Admission(write: true, summaries: [], totals: [:]) }
        let free = switch kind {
        case .progress: 0
        case .phase: Self.phaseBurst
        default: burst
        }
        let (interval, time) = (self.interval, event.time)
        // In place, through the dictionary's modify accessor: one lookup of the task.
        return Self.admit(kind, at: time, free: free, interval: interval, into: &tasks[id, default: TaskCounts()].byKind[kind.index])
    }

    private static func admit(_ kind: ThinnedKind, at time: MonotonicInstant, free: Int, interval: Duration, into c: inout Counts) -> Admission {
        if c.admitted >= free, let last = c.lastAdmitted, time - last < interval {
            c.pending += 1
            c.total += 1
            return Admission(write: false, summaries: [], totals: [:])
        }
        var summaries: [(kind: ThinnedKind, count: Int)] = []
        if c.pending > 0, kind != .progress { summaries.append((kind, c.pending)) }
        c.pending = 0
        c.admitted += 1
        c.lastAdmitted = time
        return Admission(write: true, summaries: summaries, totals: [:])
    }
}

/// The time rules of one task (DESIGN §1). Values, not behaviour: `TaskMachine` applies them.
public struct BudgetPolicy: Sendable, Equatable {
    /// The first deadline, measured from start; nil (`none`) disables every limit but
    /// `maxRuntime`.
    public var budget: Duration?
    /// How far each progress or heartbeat message moves the deadline ahead of now; nil
    /// means "the same as `budget`", and `unlimitedWindow` (zero, as the CLI's `--window 0`
    /// or `none`) that the first report lifts the soft deadline: only `maxRuntime` is left,
    /// the shape of a start-up timeout.
    public var window: Duration?
    /// A hard ceiling from start that no progress and no child request passes.
    public var maxRuntime: Duration?
    /// An instant the task must end by, whenever it started: a batch's deadline. The hard
    /// limit is the earlier of this and start + `maxRuntime`. (What was left of the
    /// deadline when the queue decided to start a task, made its max-runtime, counted from
    /// its spawn, later by however long the spawns before it took: a thousand tasks started
    /// together missed a common deadline by up to seconds.)
    public var endsBy: MonotonicInstant?
    /// Time between SIGTERM and SIGKILL.
    public var grace: Duration
    /// Send `expiring` this long before the deadline (zero: never).
    public var warnBefore: Duration
    /// When true, progress extends the deadline only if `completed` grew or `fraction` rose.
    public var requireAdvance: Bool
    /// When true, each reporter that has reported keeps a deadline of its own, and the
    /// earliest among those still connected is the one in force: one quiet rank of work
    /// split among processes is caught while the others keep reporting.
    public var everyReporter: Bool
    /// In a queue with an overall deadline, a task is not started with less than this left.
    public var minStart: Duration
    /// When set, a `timeout` or `memory` cancel first runs the task's diagnose command
    /// (`--diagnose`, DESIGN §7) for at most this long, then sends the cancel. The executor
    /// sets it from the task's `DiagnoseCommand`.
    public var diagnoseLimit: Duration?
    /// Windows of named phases, set from outside (`--phase-window NAME=DUR`); they rule over
    /// what the task's own phase message says. `unlimitedWindow`: no soft limit in it.
    public var phaseWindows: [String: Duration] = [:]
    /// `--window auto`: each phase's window is learned from the task's pace (`PaceLearner`),
    /// within this range; nil: the window is fixed.
    public var learnedWindows: LearnedWindows?
    /// What a passed soft deadline does: cancel (`timeout`), or mark the task stalled.
    public var onStall: StallAction = .cancel
    /// The time a checkpoint is said to take, for the advice to checkpoint before the hard
    /// end (`--checkpoint-lead`); the task's own `checkpoint` phases may make it longer.
    public var checkpointLead: Duration?

    public init(
        budget: Duration? = .seconds(30),
        window: Duration? = nil,
        maxRuntime: Duration? = nil,
        grace: Duration = .seconds(10),
        warnBefore: Duration = .zero,
        requireAdvance: Bool = false,
        everyReporter: Bool = false,
        minStart: Duration = .seconds(5)
    ) {
        self.budget = budget
        self.window = window
        self.maxRuntime = maxRuntime
        self.grace = grace
        self.warnBefore = warnBefore
        self.requireAdvance = requireAdvance
        self.everyReporter = everyReporter
        self.minStart = minStart
    }

    /// The defaults of DESIGN §1: 30 s budget, window = budget, 10 s grace.
    public static let `default` = BudgetPolicy()

    /// The window that means "no limit once the task has reported".
    public static let unlimitedWindow = Duration.zero

    /// The window in force: the explicit one, else the budget; nil when progress lifts the
    /// deadline instead of moving it (an unlimited window, or a budget of `none`).
    public var effectiveWindow: Duration? {
        let window = self.window ?? budget
        return window == Self.unlimitedWindow ? nil : window
    }

    /// Whether a report takes the soft deadline away (an explicit unlimited window).
    public var reportsLiftDeadline: Bool { window == Self.unlimitedWindow && budget != nil }

    /// Whether the window can change while the task runs: by phase, or as it is learned.
    /// Without either, every report moves the deadline by the same window.
    public var windowVaries: Bool { learnedWindows != nil || !phaseWindows.isEmpty }
}

/// What a passed soft deadline does (`--on-stall`).
public enum StallAction: String, Sendable, Equatable, CaseIterable {
    /// Cancel the task with reason `timeout` (the default).
    case cancel
    /// Mark it stalled, run the diagnose command once, and let it go on: it is running
    /// again at its next report; only its hard end stops it.
    case warn
}

/// The bounds of a learned window (`--window auto:MIN..MAX`).
public struct LearnedWindows: Sendable, Equatable {
    public var minimum: Duration
    public var maximum: Duration

    public init(minimum: Duration, maximum: Duration) {
        self.minimum = minimum
        self.maximum = maximum
    }

    /// `--window auto`: from 1 second (a step's report is seldom later than that after a
    /// real hang is caught) to 6 hours.
    public static let `default` = LearnedWindows(minimum: .seconds(1), maximum: .seconds(6 * 3600))
}

/// The time rules of one task (DESIGN §1). Values, not behaviour: `TaskMachine` applies them.
public struct BudgetPolicy: Sendable, Equatable {
    /// The first deadline, measured from start; nil (`none`) disables every limit but
    /// `maxRuntime`.
    public var budget: Duration?
    /// How far each progress or heartbeat message moves the deadline ahead of now; nil
    /// means "the same as `budget`".
    public var window: Duration?
    /// A hard ceiling from start that no progress and no child request passes.
    public var maxRuntime: Duration?
    /// Time between SIGTERM and SIGKILL.
    public var grace: Duration
    /// Send `expiring` this long before the deadline (zero: never).
    public var warnBefore: Duration
    /// When true, progress extends the deadline only if `completed` grew or `fraction` rose.
    public var requireAdvance: Bool
    /// In a queue with an overall deadline, a task is not started with less than this left.
    public var minStart: Duration

    public init(
        budget: Duration? = .seconds(30),
        window: Duration? = nil,
        maxRuntime: Duration? = nil,
        grace: Duration = .seconds(10),
        warnBefore: Duration = .zero,
        requireAdvance: Bool = false,
        minStart: Duration = .seconds(5)
    ) {
        self.budget = budget
        self.window = window
        self.maxRuntime = maxRuntime
        self.grace = grace
        self.warnBefore = warnBefore
        self.requireAdvance = requireAdvance
        self.minStart = minStart
    }

    /// The defaults of DESIGN §1: 30 s budget, window = budget, 10 s grace.
    public static let `default` = BudgetPolicy()

    /// The window in force: the explicit one, else the budget.
    public var effectiveWindow: Duration? { window ?? budget }
}

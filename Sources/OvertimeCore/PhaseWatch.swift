/// The part of its work a task says it is in, and the window that rules there (DESIGN §1,
/// docs/hangs.md). Held by `TaskMachine` once the task names a phase or the policy's
/// window varies (by phase, or learned); a task with one fixed window never has one.
///
/// The window of a phase is, first found:
/// 1. the one set from outside (`--phase-window NAME=DUR`): the person running the job has
///    the last word over a library's default;
/// 2. the task's own (its last phase message for that phase with a `window`);
/// 3. the one learned from its pace (`--window auto`), except for the first report after a
///    boundary;
/// 4. the task's window (`--window`, else its budget).
///
/// A boundary is a phase entered or a bar closed: what comes after it is not a step of the
/// same pace (an evaluation after the training steps, the next epoch's first batch), so
/// that interval is neither learned from nor held to the learned window.
struct PhaseWatch: Sendable, Equatable {
    static let initial = PhaseNames.initial

    private(set) var name = Self.initial
    /// The task has named a phase: the display and status show it from then on.
    private(set) var declared = false
    private(set) var enteredAt: MonotonicInstant
    /// The longest `checkpoint` phase seen: how long the task's checkpoint takes.
    private(set) var longestCheckpoint: Duration?
    /// The task's own windows, by phase (`unlimitedWindow`: none).
    private var taskWindows: [String: Duration] = [:]
    private var learner: PaceLearner?
    private var lastReport: MonotonicInstant
    /// The last report was a boundary: the interval that ends at the next is not learned.
    private var afterBoundary = true

    static let checkpoint = PhaseNames.checkpoint

    init(learning: LearnedWindows?, startedAt: MonotonicInstant) {
        learner = learning.map(PaceLearner.init(bounds:))
        enteredAt = startedAt
        lastReport = startedAt
    }

    /// What a report changed, for the machine to tell.
    struct Report: Sendable, Equatable {
        /// The window in force from this report on (`unlimitedWindow`: no soft limit).
        var window: Duration
        /// A window newly learned for the phase, when it rules there.
        var learned: Duration?
    }

    /// A report that counts (progress, a heartbeat) in the current phase.
    /// - Parameters:
    ///   - boundary: it closed a bar.
    ///   - learn: false when the interval it ends is no step (it ended a stall).
    mutating func reported(at now: MonotonicInstant, boundary: Bool, learn: Bool, policy: BudgetPolicy) -> Report {
        var learned: Duration?
        if learn, !afterBoundary, var learner {
            learned = learner.record(now - lastReport, in: name)
            self.learner = learner
            if explicitWindow(for: name, policy: policy) != nil { learned = nil }
        }
        lastReport = now
        afterBoundary = boundary
        return Report(window: window(policy: policy), learned: learned)
    }

    /// The task entered `phase` (with its own `window` for it, in seconds, if it gave one).
    /// Returns whether it is another phase than the one it was in.
    mutating func enter(_ phase: String, window: Double?, now: MonotonicInstant) -> Bool {
        if let window { taskWindows[phase] = .seconds(fromDouble: min(window, DurationText.maximum.seconds)) }
        declared = true
        guard phase != name else { return false }
        if name == Self.checkpoint {
            let length = now - enteredAt
            longestCheckpoint = max(longestCheckpoint ?? .zero, length)
        }
        name = phase
        enteredAt = now
        return true
    }

    /// The window in force now.
    func window(policy: BudgetPolicy) -> Duration {
        if let explicit = explicitWindow(for: name, policy: policy) { return explicit }
        if !afterBoundary, let learned = learner?.window(for: name) { return learned }
        return policy.window ?? policy.budget ?? BudgetPolicy.unlimitedWindow
    }

    /// Whether the window in force was learned.
    func windowIsLearned(policy: BudgetPolicy) -> Bool {
        explicitWindow(for: name, policy: policy) == nil && !afterBoundary && learner?.window(for: name) != nil
    }

    private func explicitWindow(for phase: String, policy: BudgetPolicy) -> Duration? {
        policy.phaseWindows[phase] ?? taskWindows[phase]
    }
}

/// The phase names Overtime itself gives a meaning to.
public enum PhaseNames {
    /// The phase a task is in before it names one.
    public static let initial = "main"
    /// The phase whose length says how long a checkpoint takes (`--checkpoint-lead`).
    public static let checkpoint = "checkpoint"
}

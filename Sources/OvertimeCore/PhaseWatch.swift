/// The part of its work a task says it is in, and the window that rules there (DESIGN §1,
/// docs/hangs.md). Held by `TaskMachine` once the task names a phase or the policy's
/// window varies (by phase, or learned); a task with one fixed window never has one.
///
/// The window of a phase is, first found:
/// 1. the one set from outside (`--phase-window NAME=DUR`): the person running the job has
///    the last word over a library's default;
/// 2. the task's own (its last phase message for that phase with a `window`);
/// 3. the one learned from its pace (`--window auto`);
/// 4. the task's window (`--window`, else its budget).
///
/// A boundary is a phase entered or a bar closed: what comes after it is not a step of the
/// same pace (an evaluation after the training steps, the next epoch's first batch). The
/// silences after a phase's boundaries are learned apart from its steps: once two were
/// seen, the next is held to `boundaryMargin` × the longest (within the learned bounds);
/// before, to the task's window.
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
    /// The last report was a boundary (or none came since the start): the interval that
    /// ends at the next is no step.
    private var afterBoundary = true
    /// The phase whose boundary that was; nil for the start, which is not learned from.
    private var boundaryPhase: String?
    /// Under `--window auto`, the silences after each phase's boundaries.
    private var boundaries: [String: BoundarySilences] = [:]

    struct BoundarySilences: Sendable, Equatable {
        var seen = 0
        var longest = Duration.zero
    }

    /// Boundary silences seen before the next is held to them.
    static let boundariesNeeded = 2
    /// How far above the longest boundary silence the window after a boundary sits: fewer
    /// of them are seen than of steps, so a wider margin.
    static let boundaryMargin = 2.0

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

    /// A report that counts (progress, a heartbeat, a phase entered) in the current phase.
    /// - Parameters:
    ///   - boundary: it closed a bar or entered a phase.
    ///   - learn: false when the interval it ends is no step of this phase (a phase was
    ///     entered with it).
    ///   - endedStall: it ended a stall (`--on-stall warn`).
    mutating func reported(at now: MonotonicInstant, boundary: Bool, learn: Bool, endedStall: Bool, policy: BudgetPolicy) -> Report {
        var learned: Duration?
        if learner != nil {
            if afterBoundary {
                if let phase = boundaryPhase {
                    var silences = boundaries[phase] ?? BoundarySilences()
                    silences.seen += 1
                    silences.longest = max(silences.longest, now - lastReport)
                    boundaries[phase] = silences
                }
            } else if learn {
                learned = learner?.record(now - lastReport, in: name, endedStall: endedStall) ?? nil
                if explicitWindow(for: name, policy: policy) != nil { learned = nil }
            }
        }
        lastReport = now
        afterBoundary = boundary
        boundaryPhase = boundary ? name : nil
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
        explicitWindow(for: name, policy: policy) ?? learnedWindow ?? policy.window ?? policy.budget ?? BudgetPolicy.unlimitedWindow
    }

    /// Whether the window in force was learned.
    func windowIsLearned(policy: BudgetPolicy) -> Bool {
        explicitWindow(for: name, policy: policy) == nil && learnedWindow != nil
    }

    /// The learned window that rules now, if one does: after a boundary, the phase's
    /// boundary silences'; else its steps'.
    private var learnedWindow: Duration? {
        guard let learner else { return nil }
        guard afterBoundary else { return learner.window(for: name) }
        guard boundaryPhase != nil, let silences = boundaries[name], silences.seen >= Self.boundariesNeeded else { return nil }
        let window = Duration.seconds(fromDouble: silences.longest.seconds * Self.boundaryMargin)
        return min(max(window, learner.bounds.minimum), learner.bounds.maximum)
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

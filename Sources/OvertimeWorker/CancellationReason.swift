/// Why the supervisor is cancelling the task, with the grace it has left to clean up
/// before SIGKILL.
///
/// Switch on it as on any reason: `case .timeout:` matches whatever the grace.
public enum CancellationReason: Sendable, Equatable, CustomStringConvertible {
    /// The budget ran out because progress stopped (or never came).
    case timeout(grace: Duration)
    /// The hard `max-runtime` was reached.
    case deadline(grace: Duration)
    /// An operator revoked the budget and the revoked time ran out.
    case revoked(grace: Duration)
    /// Someone cancelled it (Ctrl-C, `overtime ctl cancel`).
    case userCancelled(grace: Duration)
    /// The supervisor itself is stopping (a container stop, SIGTERM to Overtime).
    case shutdown(grace: Duration)
    /// Another task of the batch failed under `overtime batch --fail-fast`.
    case failFast(grace: Duration)
    /// The task's memory reached `--memory-max` (a `Worker.onMemoryWarning` handler heard
    /// of it first, at `--memory-warn`).
    case memory(grace: Duration)
    /// In a batch, its pace fell far below its peers' (`stragglers` with `action: restart`):
    /// it is cancelled to be run again.
    case straggler(grace: Duration)

    /// Time left before SIGKILL, as the supervisor said when it cancelled.
    public var grace: Duration {
        switch self {
        case let .timeout(g), let .deadline(g), let .revoked(g), let .userCancelled(g), let .shutdown(g), let .failFast(g),
             let .memory(g), let .straggler(g): g
        }
    }

    /// The reason's word on the wire: `timeout`, `deadline`, `revoked`, `user`, `shutdown`,
    /// `fail-fast`, `memory`, `straggler`.
    public var wireName: String {
        switch self {
        case .timeout: "timeout"
        case .deadline: "deadline"
        case .revoked: "revoked"
        case .userCancelled: "user"
        case .shutdown: "shutdown"
        case .failFast: "fail-fast"
        case .memory: "memory"
        case .straggler: "straggler"
        }
    }

    public var description: String { wireName }

    init?(wireName: String, grace: Duration) {
        switch wireName {
        case "timeout": self = .timeout(grace: grace)
        case "deadline": self = .deadline(grace: grace)
        case "revoked": self = .revoked(grace: grace)
        case "user": self = .userCancelled(grace: grace)
        case "shutdown": self = .shutdown(grace: grace)
        case "fail-fast": self = .failFast(grace: grace)
        case "memory": self = .memory(grace: grace)
        case "straggler": self = .straggler(grace: grace)
        default: return nil
        }
    }
}

/// What the supervisor answered to a request for more time.
public struct Budget: Sendable, Equatable {
    /// Time left before the deadline; nil when there is no limit (or no supervisor).
    public var remaining: Duration?
    /// True when the whole request was granted; false when refused or clipped (by
    /// `max-runtime`, a revoke, or a cancel already under way).
    public var granted: Bool

    public init(remaining: Duration?, granted: Bool) {
        self.remaining = remaining
        self.granted = granted
    }
}

/// What the supervisor said when the task's memory first passed its warning level
/// (`--memory-warn`, by default 90% of `--memory-max`).
public struct MemoryWarning: Sendable, Equatable {
    /// The task's memory then, in bytes: all of its processes (its cgroup's usage, or the
    /// sum of their resident sets).
    public var used: UInt64
    /// `--memory-max` in bytes: where the task is cancelled with reason `memory`.
    public var limit: UInt64

    public init(used: UInt64, limit: UInt64) {
        self.used = used
        self.limit = limit
    }
}

/// The supervisor's advice to checkpoint now: the task's hard end is `remaining` away, about
/// as long as a checkpoint takes, and at its pace its work will not be done by then.
public struct CheckpointAdvice: Sendable, Equatable {
    /// What the supervisor advises, as the `advice` message says it (`do`): `checkpoint`.
    public var action: String
    /// Time left before the hard end, when the advice was sent.
    public var remaining: Duration
    /// Why, in words: which end, how far, the pace, how long a checkpoint takes.
    public var why: String

    public init(action: String = "checkpoint", remaining: Duration, why: String) {
        self.action = action
        self.remaining = remaining
        self.why = why
    }
}

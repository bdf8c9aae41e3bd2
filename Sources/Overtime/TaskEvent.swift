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
        case cancelSent(reason: CancelReason, grace: Duration)
        case killSent
        case protocolError(ProtocolError, excerpt: String)
        /// An operator asked for `action` (cancel, extend, revoke) over the control socket.
        case operatorRequest(action: String, uid: UInt32)
        /// The task is over: exited, killed, or never started. Always the last event.
        case exited(TaskOutcome)
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
    /// Progress and heartbeats: as often as the task sends them, so every consumer that
    /// writes them out (the journal, `--progress json`, control-socket watchers) thins them.
    public var isFrequent: Bool {
        switch self {
        case .progress, .heartbeat: true
        default: false
        }
    }
}

/// Thins what a consumer writes out of progress and heartbeats: at most one per task per
/// `interval`; every other event passes. A task is forgotten once it has exited.
public struct FrequentEventThrottle: Sendable {
    public let interval: Duration
    private var lastAdmitted: [Int: MonotonicInstant] = [:]

    public init(interval: Duration) {
        self.interval = interval
    }

    /// Whether to write `event` out.
    public mutating func admits(_ event: TaskEvent) -> Bool {
        if case .exited = event.kind {
            lastAdmitted[event.task.id] = nil
            return true
        }
        guard event.kind.isFrequent else { return true }
        if let last = lastAdmitted[event.task.id], event.time - last < interval { return false }
        lastAdmitted[event.task.id] = event.time
        return true
    }
}

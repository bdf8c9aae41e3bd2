import OvertimeLoop
import OvertimeProtocol

/// A task handed to a `Supervisor`: await its outcome, or cancel, extend or revoke it.
/// Safe to use from any thread or task.
public final class TaskHandle: Sendable {
    public let ref: TaskRef
    let supervisor: Supervisor
    private let completion = Completion<TaskOutcome>()

    init(ref: TaskRef, supervisor: Supervisor) {
        self.ref = ref
        self.supervisor = supervisor
    }

    public var name: String { ref.name }

    /// How the task ended; waits until it has, its output drained.
    public var outcome: TaskOutcome {
        get async { await completion.wait() }
    }

    /// How the task ended, blocking the calling thread until it has. For programs without
    /// an async context (the `overtime` CLI uses it to start faster). Never call it on the
    /// supervisor's own loop thread, from inside an event handler.
    public func waitForOutcome() -> TaskOutcome {
        precondition(!supervisor.loop.inLoopThread, "waitForOutcome() on the loop thread would wait forever")
        return completion.waitBlocking()
    }

    /// The outcome if the task has ended, without waiting.
    public var finishedOutcome: TaskOutcome? {
        completion.value
    }

    func complete(_ outcome: TaskOutcome) {
        completion.complete(outcome)
    }

    /// Cancels the task: the reason on its channel, SIGTERM to its group, SIGKILL after
    /// grace. Cancelling twice, or a finished task, is harmless and says so.
    /// - Parameter grace: overrides the task's grace (a shutdown may have less time).
    @discardableResult
    public func cancel(reason: CancelReason = .user, grace: Duration? = nil) async -> TaskMachine.CancelResult {
        await onLoop(ifGone: .alreadyFinished) { $0.cancel(reason: reason, grace: grace) }
    }

    /// Gives the task `amount` more time, counted from its current deadline; past its
    /// `max-runtime` only when `pastMax`.
    @discardableResult
    public func extend(by amount: Duration, pastMax: Bool = false) async -> TaskMachine.OperatorResult {
        await onLoop(ifGone: .notRunning(.exited)) { $0.extend(by: amount, pastMax: pastMax) }
    }

    /// Takes the budget back: the deadline becomes now + `after`, progress no longer moves
    /// it, and when it passes the task is cancelled with reason `revoked`.
    @discardableResult
    public func revoke(after: Duration = .zero) async -> TaskMachine.OperatorResult {
        await onLoop(ifGone: .notRunning(.exited)) { $0.revoke(after: after) }
    }

    private func onLoop<R: Sendable>(ifGone: R, _ body: @escaping @Sendable (SynchronousOperations) -> R) async -> R {
        if finishedOutcome != nil { return ifGone }
        return await supervisor.onLoop(ifGone: ifGone) { [self] in body(syncOperations) }
    }

    /// The same requests, answered at once, for code that runs on the supervisor's loop
    /// thread: an event sink or handler (a batch steers its tasks this way). Using them on
    /// any other thread is a bug (checked in debug builds).
    public var syncOperations: SynchronousOperations { SynchronousOperations(handle: self) }

    public struct SynchronousOperations {
        let handle: TaskHandle

        private var runner: (any SupervisedTask)? { handle.supervisor.runner(of: handle) }

        @discardableResult
        public func cancel(reason: CancelReason = .user, grace: Duration? = nil) -> TaskMachine.CancelResult {
            runner?.cancel(reason: reason, grace: grace) ?? .alreadyFinished
        }

        @discardableResult
        public func extend(by amount: Duration, pastMax: Bool = false) -> TaskMachine.OperatorResult {
            runner?.operatorExtend(by: amount, pastMax: pastMax) ?? .notRunning(.exited)
        }

        @discardableResult
        public func revoke(after: Duration = .zero) -> TaskMachine.OperatorResult {
            runner?.revoke(after: after) ?? .notRunning(.exited)
        }

        /// SIGKILL to the task's group now, if it is being cancelled (a second Ctrl-C).
        public func escalate() {
            runner?.escalate()
        }

        /// The task as `overtime ctl status` shows it; nil once it has ended.
        public func status() -> TaskStatus? {
            runner?.status(now: MonotonicInstant.now())
        }
    }
}

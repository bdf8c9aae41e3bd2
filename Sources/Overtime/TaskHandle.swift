import Dispatch
import OvertimeLoop
import OvertimeProtocol
import Synchronization

/// A task handed to a `Supervisor`: await its outcome, or cancel, extend or revoke it.
/// Safe to use from any thread or task.
public final class TaskHandle: Sendable {
    public let ref: TaskRef
    let supervisor: Supervisor
    private struct Completion {
        var outcome: TaskOutcome?
        var waiters: [CheckedContinuation<TaskOutcome, Never>] = []
        var blockedThreads: [DispatchSemaphore] = []
    }

    private let completion = Mutex(Completion())

    init(ref: TaskRef, supervisor: Supervisor) {
        self.ref = ref
        self.supervisor = supervisor
    }

    public var name: String { ref.name }

    /// How the task ended; waits until it has, its output drained.
    public var outcome: TaskOutcome {
        get async {
            await withCheckedContinuation { continuation in
                let ready: TaskOutcome? = completion.withLock { state in
                    if let outcome = state.outcome { return outcome }
                    state.waiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }

    /// How the task ended, blocking the calling thread until it has. For programs without
    /// an async context (the `overtime` CLI uses it to start faster). Never call it on the
    /// supervisor's own loop thread, from inside an event handler.
    public func waitForOutcome() -> TaskOutcome {
        precondition(!supervisor.loop.inLoopThread, "waitForOutcome() on the loop thread would wait forever")
        let semaphore = DispatchSemaphore(value: 0)
        let ready: TaskOutcome? = completion.withLock { state in
            if let outcome = state.outcome { return outcome }
            state.blockedThreads.append(semaphore)
            return nil
        }
        if let ready { return ready }
        semaphore.wait()
        return completion.withLock { $0.outcome! }
    }

    /// The outcome if the task has ended, without waiting.
    public var finishedOutcome: TaskOutcome? {
        completion.withLock { $0.outcome }
    }

    func complete(_ outcome: TaskOutcome) {
        let (waiters, blocked) = completion.withLock { state -> ([CheckedContinuation<TaskOutcome, Never>], [DispatchSemaphore]) in
            guard state.outcome == nil else { return ([], []) }
            state.outcome = outcome
            defer {
                state.waiters.removeAll()
                state.blockedThreads.removeAll()
            }
            return (state.waiters, state.blockedThreads)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
        for semaphore in blocked { semaphore.signal() }
    }

    /// Cancels the task: the reason on its channel, SIGTERM to its group, SIGKILL after
    /// grace. Cancelling twice, or a finished task, is harmless and says so.
    /// - Parameter grace: overrides the task's grace (a shutdown may have less time).
    @discardableResult
    public func cancel(reason: CancelReason = .user, grace: Duration? = nil) async -> TaskMachine.CancelResult {
        await supervisor.onRunner(self, ifGone: .alreadyFinished) { runner in
            runner.cancel(reason: reason, grace: grace)
        }
    }

    /// Gives the task `amount` more time, counted from its current deadline; past its
    /// `max-runtime` only when `pastMax`.
    @discardableResult
    public func extend(by amount: Duration, pastMax: Bool = false) async -> TaskMachine.OperatorResult {
        await supervisor.onRunner(self, ifGone: .notRunning(.exited)) { runner in
            runner.operatorExtend(by: amount, pastMax: pastMax)
        }
    }

    /// Takes the budget back: the deadline becomes now + `after`, progress no longer moves
    /// it, and when it passes the task is cancelled with reason `revoked`.
    @discardableResult
    public func revoke(after: Duration = .zero) async -> TaskMachine.OperatorResult {
        await supervisor.onRunner(self, ifGone: .notRunning(.exited)) { runner in
            runner.revoke(after: after)
        }
    }
}

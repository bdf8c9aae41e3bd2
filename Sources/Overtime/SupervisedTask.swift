import OvertimeProtocol

/// What the supervisor, the batch and the control socket ask of a running task, wherever it
/// runs: here (`TaskRunner`, with its own machine) or elsewhere through an executor
/// (`RemoteTaskRunner`, whose machine is the remote run's). Loop-thread only.
protocol SupervisedTask: AnyObject {
    var ref: TaskRef { get }
    /// The task's own grace, for clipping it to a shutdown's.
    var grace: Duration { get }
    /// Cancelled by Ctrl-C (see `TaskOutcome.interrupted`).
    var interrupted: Bool { get set }
    func cancel(reason: CancelReason, grace: Duration?) -> TaskMachine.CancelResult
    /// SIGKILL now if the task is being cancelled.
    func escalate()
    func operatorExtend(by amount: Duration, pastMax: Bool) -> TaskMachine.OperatorResult
    func revoke(after: Duration) -> TaskMachine.OperatorResult
    /// The task as `overtime ctl status` shows it.
    func status(now: MonotonicInstant) -> TaskStatus
    /// Records an operator's request in the event stream, with the uid of whoever asked.
    func recordOperator(_ action: String, uid: UInt32)
    /// Passes a signal the supervisor received on to the task.
    func forward(signal: Signal)
    /// The engine's warning came (`--warn-signal`): tell the task.
    func engineExpiring(remaining: Duration, source: EngineTimeSource)
    /// The supervisor is shutting down with the task not yet finished: end it now.
    func endForShutdown()
}

extension TaskRunner: SupervisedTask {}

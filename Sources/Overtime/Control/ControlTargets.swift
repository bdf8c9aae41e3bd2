import OvertimeProtocol

extension ControlDuration {
    /// The duration a request gave, read as `overtime ctl` reads its arguments; nil when it
    /// is not one (negative, too long, not finite, not duration text).
    var duration: Duration? {
        switch self {
        case let .seconds(seconds):
            seconds >= 0 && seconds.isFinite && seconds <= DurationText.maximum.seconds ? .seconds(fromDouble: seconds) : nil
        case let .text(text):
            (try? DurationText.parse(text)) ?? nil
        }
    }
}

/// Turns the engine's answers into the words a control reply carries, and an operator's
/// requests into the words their `operator` event records.
enum ControlWords {
    static func extendAction(_ amount: Duration, pastMax: Bool) -> String {
        (pastMax ? "extend --past-max " : "extend ") + DurationText.format(amount)
    }

    static func revokeAction(_ after: Duration) -> String {
        "revoke " + DurationText.format(after)
    }

    static func cancel(_ result: TaskMachine.CancelResult) -> Result<String, ControlFailure> {
        switch result {
        case .cancelling: .success("cancelling")
        case let .alreadyCancelling(reason): .success("already cancelling (\(reason.rawValue))")
        case .alreadyFinished: .success("already finished")
        }
    }

    static func budget(_ result: TaskMachine.OperatorResult) -> Result<String, ControlFailure> {
        switch result {
        case let .applied(remaining, clipped):
            let left = remaining.map { "\(DurationText.format($0)) left" } ?? "no limit"
            // In the words of the ctl user most replies reach (`past_max` on the wire).
            return .success(clipped ? "clipped by max-runtime (ctl extend --past-max goes past it), \(left)" : left)
        case .notRunning(.cancelling):
            return .failure(.alreadyCancelling)
        case .notRunning:
            return .failure(.finished)
        }
    }
}

/// `overtime run`'s control target: the supervisor's running tasks, found by name.
extension SupervisorState: ControlTarget {
    func controlStatus(now: MonotonicInstant) -> [TaskStatus] {
        runners.values.sorted { $0.ref.id < $1.ref.id }.map { $0.status(now: now) }
    }

    private func runner(named name: String) -> Result<any SupervisedTask, ControlFailure> {
        if let runner = runners.values.sorted(by: { $0.ref.id < $1.ref.id }).first(where: { $0.ref.name == name }) {
            return .success(runner)
        }
        return .failure(.noRunningTask(name, closest: Spelling.closest(to: name, among: runners.values.map(\.ref.name))))
    }

    func controlCancel(task: String, reason: CancelReason, grace: Duration?, uid: UInt32) -> Result<String, ControlFailure> {
        runner(named: task).flatMap { runner in
            runner.recordOperator(reason == .user ? "cancel" : "cancel (\(reason.rawValue))", uid: uid)
            return ControlWords.cancel(runner.cancel(reason: reason, grace: grace))
        }
    }

    func controlExtend(task: String, by amount: Duration, pastMax: Bool, uid: UInt32) -> Result<String, ControlFailure> {
        runner(named: task).flatMap { runner in
            runner.recordOperator(ControlWords.extendAction(amount, pastMax: pastMax), uid: uid)
            return ControlWords.budget(runner.operatorExtend(by: amount, pastMax: pastMax))
        }
    }

    func controlExpiring(task: String, remaining: Duration) -> Result<String, ControlFailure> {
        runner(named: task).map { runner in
            runner.engineExpiring(remaining: remaining, source: .head)
            return "told"
        }
    }

    func controlRevoke(task: String, after: Duration, uid: UInt32) -> Result<String, ControlFailure> {
        runner(named: task).flatMap { runner in
            runner.recordOperator(ControlWords.revokeAction(after), uid: uid)
            return ControlWords.budget(runner.revoke(after: after))
        }
    }
}

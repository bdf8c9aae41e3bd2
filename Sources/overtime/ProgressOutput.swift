import Overtime
import OvertimeProtocol
import Synchronization

/// What `overtime run` shows while a task runs: `plain` lines on stderr (progress at most
/// once a second, every state change at once), `json` events on stdout, or nothing.
/// Failures to start are always shown. Called on the supervisor's loop thread.
final class ProgressOutput: Sendable {
    enum Mode {
        case plain, json, none
    }

    /// Progress lines per task per second, at most, in each mode.
    static let plainInterval = Duration.seconds(1)
    static let jsonInterval = Duration.milliseconds(100)
    /// Protocol errors shown one by one before they are only counted.
    static let shownProtocolErrors = 3

    private struct TaskState {
        var lastProgressShown: MonotonicInstant?
        var protocolErrorsShown = 0
    }

    let mode: Mode
    let encoder: EventEncoder
    private let tasks = Mutex<[Int: TaskState]>([:])

    init(mode: RunCommand.ProgressMode, encoder: EventEncoder) {
        switch mode {
        case .json: self.mode = .json
        case .none: self.mode = .none
        case .auto, .tty, .plain: self.mode = .plain
        }
        self.encoder = encoder
    }

    func handle(_ event: TaskEvent) {
        if case let .exited(outcome) = event.kind, case let .failedToStart(failure) = outcome.termination {
            Terminal.error("overtime: \(failure.message)")
        }
        switch mode {
        case .none: return
        case .json: json(event)
        case .plain: plain(event)
        }
    }

    /// A supervisor-level remark (a signal received), shown in plain mode.
    func note(_ text: String) {
        if mode == .plain { Terminal.error("overtime: \(text)") }
    }

    private func json(_ event: TaskEvent) {
        if case .progress = event.kind, !progressDue(event, interval: Self.jsonInterval) { return }
        Terminal.writeOut(encoder.line(for: event))
    }

    private func progressDue(_ event: TaskEvent, interval: Duration) -> Bool {
        tasks.withLock { tasks in
            if let last = tasks[event.task.id]?.lastProgressShown, event.time - last < interval { return false }
            tasks[event.task.id, default: TaskState()].lastProgressShown = event.time
            return true
        }
    }

    private func plain(_ event: TaskEvent) {
        let name = event.task.name
        switch event.kind {
        case .started, .ready, .result, .operatorRequest:
            return
        case let .progress(progress):
            guard progressDue(event, interval: Self.plainInterval) else { return }
            Terminal.error("overtime: \(name): \(Self.describe(progress))")
        case let .budgetChanged(remaining, cause):
            let left = remaining.map { "\(DurationText.format($0)) left" } ?? "no limit"
            switch cause {
            case .start:
                return
            case let .childExtend(asked, why, granted):
                let reason = why.map { " (\($0))" } ?? ""
                Terminal.error("overtime: \(name): asked for \(DurationText.format(asked)) more\(reason): \(granted ? "granted" : "not all granted"), \(left)")
            case let .operatorExtend(amount, _, clipped):
                Terminal.error("overtime: \(name): extended by \(DurationText.format(amount))\(clipped ? " (clipped by max-runtime)" : ""), \(left)")
            case .revoke:
                Terminal.error("overtime: \(name): budget revoked, \(left)")
            }
        case let .expiring(remaining):
            Terminal.error("overtime: \(name): deadline in \(DurationText.format(remaining))")
        case let .cancelSent(reason, grace):
            Terminal.error("overtime: \(name): cancelling (\(reason.rawValue): \(Self.explain(reason))); SIGTERM sent, SIGKILL in \(DurationText.format(grace))")
        case .killSent:
            Terminal.error("overtime: \(name): still running after grace; SIGKILL sent")
        case let .protocolError(error, excerpt):
            let shown = tasks.withLock { tasks -> Int in
                tasks[event.task.id, default: TaskState()].protocolErrorsShown += 1
                return tasks[event.task.id]!.protocolErrorsShown
            }
            if shown <= Self.shownProtocolErrors {
                Terminal.error("overtime: \(name): protocol error on fd 3 (\(error)): \(excerpt)")
            }
            if shown == Self.shownProtocolErrors {
                Terminal.error("overtime: \(name): further protocol errors are counted, not shown")
            }
        case let .exited(outcome):
            if outcome.protocolErrors > Self.shownProtocolErrors {
                Terminal.error("overtime: \(name): \(outcome.protocolErrors) protocol errors in all")
            }
            if let reason = outcome.cancelReason {
                let how = outcome.killed ? "killed" : Self.describe(outcome.termination)
                Terminal.error("overtime: \(name): cancelled (\(reason.rawValue)) after \(DurationText.format(outcome.elapsed)); \(how); exit \(outcome.exitCode)")
            }
        }
    }

    static func explain(_ reason: CancelReason) -> String {
        switch reason {
        case .timeout: "no progress within its budget"
        case .deadline: "max-runtime reached"
        case .revoked: "revoked budget ran out"
        case .user: "cancelled by user"
        case .shutdown: "supervisor shutting down"
        case .dependency: "a dependency failed"
        }
    }

    static func describe(_ termination: Termination) -> String {
        switch termination {
        case let .exited(code): "exited \(code)"
        case let .signaled(signal): "died of \(SignalNames.name(signal))"
        case let .failedToStart(failure): failure.message
        }
    }

    /// `45% (450/1000) epoch 3 — loss 0.12`
    static func describe(_ p: Progress) -> String {
        var parts: [String] = []
        if let f = p.fractionCompleted { parts.append("\(Int((f * 100).rounded(.down)))%") }
        if let c = p.completed { parts.append(p.total.map { "(\(c)/\($0))" } ?? "(\(c))") }
        if let title = p.title { parts.append(title) }
        if let detail = p.detail { parts.append("— \(detail)") }
        return parts.isEmpty ? "alive" : parts.joined(separator: " ")
    }
}

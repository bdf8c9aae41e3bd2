import Overtime
import OvertimeProtocol

/// Something worth a line of its own, printed once (above the live rows in `tty` mode,
/// timestamped on stderr in `plain` mode): a state change, never a progress update.
enum Notice: Sendable, Equatable {
    case started(task: String, pid: Int32?, attempt: Int)
    case cancelling(task: String, reason: CancelReason, grace: Duration, why: String? = nil)
    case killSent(task: String)
    case expiring(task: String, remaining: Duration)
    /// The engine (Slurm, a container platform) warned of its end; the task was told.
    case engineExpiring(task: String, remaining: Duration, source: EngineTimeSource)
    case budget(task: String, remaining: Duration?, cause: BudgetChange)
    case protocolError(task: String, error: String, excerpt: String, shown: Int)
    case protocolErrorTotal(task: String, count: Int)
    case operatorRequest(task: String, action: String, uid: UInt32)
    /// A process outside the task connected to its socket (the first few are shown).
    case reporterRefused(task: String, pid: Int32?, uid: UInt32?, count: Int, shown: Int)
    /// A daemon said `STOPPING=1`, `ERRNO=…` or the like over sd_notify.
    case notified(task: String, key: String, value: String)
    /// Its memory passed the warning level (DESIGN §7).
    case memoryWarning(task: String, used: UInt64, limit: UInt64)
    /// A limit's cancel waits for the diagnose command (`--diagnose`).
    case diagnosing(task: String, reason: CancelReason, limit: Duration)
    /// Under every-reporter, the deadline that passed was this reporter's (after the cancel
    /// line it explains).
    case reporterQuiet(task: String, reporter: String)
    /// `--window auto` learned the window of a phase from the task's pace.
    case windowLearned(task: String, phase: String, window: Duration)
    /// `--on-stall warn`: the soft deadline passed and the task goes on, marked stalled.
    case stalled(task: String, quiet: Duration, why: String)
    case resumed(task: String, after: Duration)
    /// The task was advised to checkpoint before its hard end.
    case advice(task: String, action: String, remaining: Duration, why: String)
    /// In a batch, the task's pace fell far below its peers'.
    case straggler(task: String, rate: Double, median: Double, below: Double, restart: Bool)
    /// `overtime run`'s task ended.
    case ended(TaskOutcome)
    /// A batch task ended for good (after its retries), or was skipped.
    case finished(TaskReport)
    case retrying(task: String, attempt: Int, after: Duration, because: String)
    /// A supervisor-level remark (a signal received, the run directory).
    case note(String)
    /// The closing line of `overtime run` in `tty` mode.
    case summary(text: String, succeeded: Bool)

    /// How the line is marked in `tty` mode.
    enum Tone: Sendable, Equatable {
        case success, failure, warning, info
    }

    var task: String? {
        switch self {
        case let .started(task, _, _), let .cancelling(task, _, _, _), let .killSent(task), let .expiring(task, _), let .engineExpiring(task, _, _),
             let .budget(task, _, _), let .protocolError(task, _, _, _), let .protocolErrorTotal(task, _),
             let .operatorRequest(task, _, _), let .retrying(task, _, _, _), let .reporterRefused(task, _, _, _, _),
             let .notified(task, _, _), let .memoryWarning(task, _, _), let .diagnosing(task, _, _), let .reporterQuiet(task, _),
             let .windowLearned(task, _, _), let .stalled(task, _, _), let .resumed(task, _), let .advice(task, _, _, _),
             let .straggler(task, _, _, _, _):
            return task
        case let .ended(outcome): return outcome.task.name
        case let .finished(report): return report.name
        case .note, .summary: return nil
        }
    }

    var tone: Tone {
        switch self {
        case .started, .budget, .operatorRequest, .note, .notified, .windowLearned, .resumed: return .info
        case let .summary(_, succeeded): return succeeded ? .success : .failure
        case .cancelling, .killSent, .expiring, .engineExpiring, .protocolError, .protocolErrorTotal, .retrying, .reporterRefused, .memoryWarning, .diagnosing, .reporterQuiet,
             .stalled, .advice, .straggler: return .warning
        case let .ended(outcome): return outcome.succeeded ? .success : .failure
        case let .finished(report):
            switch report.outcome {
            case .succeeded: return .success
            case .failed: return .failure
            case .skipped: return .warning
            }
        }
    }

    /// The words after `task: ` (or the whole remark for a note); the same in every mode.
    var message: String {
        switch self {
        case let .started(_, pid, attempt):
            return "started" + (attempt > 1 ? " (attempt \(attempt))" : "") + (pid.map { ", pid \($0)" } ?? "")
        case let .cancelling(_, reason, grace, why):
            return "cancelling (\(reason.rawValue): \(EventText.explain(reason, why: why))); SIGTERM sent, SIGKILL in \(DurationText.format(grace))"
        case .killSent:
            return "still running after grace; SIGKILL sent"
        case let .expiring(_, remaining):
            return "deadline in \(DurationText.format(remaining))"
        case let .engineExpiring(_, remaining, source):
            let whence = switch source {
            case .warnLead: "--warn-lead"
            case .slurm: "the Slurm job's end time"
            case .fallback: "the default; no --warn-lead, and no Slurm end time"
            case .head: "passed on by the batch's head"
            }
            return "the engine ends in \(DurationText.format(remaining)) (\(whence)); told the task (expiring)"
        case let .budget(_, remaining, cause):
            return EventText.budget(remaining: remaining, cause: cause) ?? "budget: \(EventText.left(remaining))"
        case let .protocolError(_, error, excerpt, shown):
            // On fd 3, the task's socket or its sd_notify socket: the excerpt says which.
            return "protocol error (\(error)): \(excerpt)"
                + (shown == EventText.shownProtocolErrors ? "; further protocol errors are counted, not shown" : "")
        case let .protocolErrorTotal(_, count):
            return "\(count) protocol errors in all"
        case let .operatorRequest(_, action, uid):
            return "operator (uid \(uid)): \(action)"
        case let .notified(_, key, value):
            return "sd_notify: \(key)=\(TextWidth.sanitize(value))"
        case let .diagnosing(_, reason, limit):
            return "\(reason.rawValue): running its diagnose command first (at most \(DurationText.format(limit))), then cancelling"
        case let .reporterQuiet(_, reporter):
            return "\(TextWidth.sanitize(reporter)) went quiet: its own deadline passed (--every-reporter)"
        case let .windowLearned(_, phase, window):
            return "window learned from its pace in phase '\(TextWidth.sanitize(phase))': \(DurationText.format(window))"
        case let .stalled(_, _, why):
            // `why` tells how long it has been quiet, and since what.
            return "stalled (\(TextWidth.sanitize(why))); going on (--on-stall warn)"
        case let .resumed(_, after):
            return "reporting again after a stall of \(DurationText.format(after))"
        case let .advice(_, action, _, why):
            return "advised to \(TextWidth.sanitize(action)): \(TextWidth.sanitize(why))"
        case let .straggler(_, rate, median, below, restart):
            return "straggler: \(EventText.rate(rate)), under \(EventText.share(below)) of its peers' median \(EventText.rate(median))"
                + (restart ? "; restarting it" : "")
        case let .memoryWarning(_, used, limit):
            return "memory at \(ByteSize.text(used)) of its \(ByteSize.text(limit)) max; warned it"
        case let .reporterRefused(_, pid, uid, count, shown):
            let who = pid.map { "pid \($0)" + (uid.map { ", uid \($0)" } ?? "") } ?? "a process the kernel did not name"
            let what = count == 1 ? "a connection" : "\(count) datagrams"
            return "refused \(what) to the task's socket from \(who), which is not part of the task"
                + (shown == EventText.shownProtocolErrors ? "; further ones are counted, not shown" : "")
        case let .ended(outcome):
            return EventText.describe(outcome)
        case let .finished(report):
            return EventText.describe(report)
        case let .retrying(_, attempt, after, because):
            return "\(because); retrying in \(DurationText.format(after)) (attempt \(attempt))"
        case let .note(text), let .summary(text, _):
            return text
        }
    }

    /// `task: message`, or the note alone.
    var text: String {
        task.map { "\($0): \(message)" } ?? message
    }
}

/// Words for events and outcomes, shared by the plain lines and the live display.
enum EventText {
    /// Protocol errors shown one by one before they are only counted.
    static let shownProtocolErrors = 3
    /// sd_notify records (`STOPPING=1`, …) shown per task; the journal keeps them all,
    /// thinned as any frequent event.
    static let shownNotifications = 10
    /// Replies to a task's own extend requests shown one by one, then at most one per
    /// `extendReplyInterval`.
    static let shownExtendReplies = 3
    static let extendReplyInterval = Duration.seconds(5)

    static func explain(_ reason: CancelReason) -> String {
        switch reason {
        case .timeout: "no progress within its budget"
        case .deadline: "max-runtime reached"
        case .revoked: "revoked budget ran out"
        case .user: "cancelled by user"
        case .shutdown: "supervisor shutting down"
        case .dependency: "a dependency failed"
        case .failFast: "another task failed (--fail-fast)"
        case .memory: "memory reached its max"
        case .straggler: "far slower than its peers; restarting"
        }
    }

    /// The reason's words, then what the cancel said beyond them (for a `timeout`, what
    /// went quiet).
    static func explain(_ reason: CancelReason, why: String?) -> String {
        guard let why else { return explain(reason) }
        return "\(explain(reason)): \(why)"
    }

    /// A pace in shares of the work a minute: `1.2%/min`.
    static func rate(_ perSecond: Double) -> String {
        let perMinute = perSecond * 6000
        let rounded = perMinute >= 10 ? (perMinute).rounded() : (perMinute * 10).rounded() / 10
        return "\(rounded)%/min"
    }

    /// `50%`.
    static func share(_ fraction: Double) -> String {
        "\(Int((fraction * 100).rounded()))%"
    }

    static func left(_ remaining: Duration?) -> String {
        remaining.map { "\(DurationText.format($0)) left" } ?? "no limit"
    }

    /// What a budget change says; nil for the budget a task starts with.
    static func budget(remaining: Duration?, cause: BudgetChange) -> String? {
        let left = left(remaining)
        switch cause {
        case .start:
            return nil
        case let .childExtend(asked, why, granted):
            let reason = why.map { " (\(TextWidth.sanitize($0)))" } ?? ""
            return "asked for \(DurationText.format(asked)) more\(reason): \(granted ? "granted" : "not all granted"), \(left)"
        case let .operatorExtend(amount, _, clipped):
            return "extended by \(DurationText.format(amount))\(clipped ? " (clipped by max-runtime)" : ""), \(left)"
        case .revoke:
            return "budget revoked, \(left)"
        }
    }

    static func describe(_ termination: Termination) -> String {
        switch termination {
        case let .exited(code): "exited \(code)"
        case let .signaled(signal): "died of \(signal.name)"
        case let .failedToStart(failure): failure.message
        }
    }

    /// How it died, with who sent the signal: "died of SIGKILL, not sent by Overtime".
    static func describeDeath(_ outcome: TaskOutcome) -> String {
        let how = describe(outcome.termination)
        guard case .signaled = outcome.termination else { return how }
        if let kills = outcome.oomKills, kills > 0 {
            return "\(how): the kernel's OOM killer killed \(kills == 1 ? "a process" : "\(kills) processes") of it"
        }
        switch outcome.signalSender {
        case .outside?: return how + (outcome.likelyOOM ? ", not sent by Overtime (likely the OOM killer: its memory was near its limit)" : ", not sent by Overtime")
        case .forwarded?: return how + ", passed on by Overtime"
        case .overtime?, nil: return how
        }
    }

    /// How `overtime run`'s task ended, in the words of a batch report where they overlap:
    /// `succeeded in 5.2s`, `failed (exited 3) in 1.0s`, `cancelled (timeout: …) after 5.0s;
    /// killed after grace; exit 137`, `could not start: x: command not found`.
    static func describe(_ outcome: TaskOutcome) -> String {
        let time = DurationText.format(outcome.elapsed)
        if case let .failedToStart(failure) = outcome.termination {
            return "could not start: \(failure.message) (exit \(outcome.exitCode))"
        }
        if let reason = outcome.cancelReason {
            let how = outcome.killed ? "killed after grace" : describeDeath(outcome)
            return "cancelled (\(reason.rawValue): \(explain(reason))) after \(time); \(how); exit \(outcome.exitCode)"
        }
        if outcome.succeeded { return "succeeded in \(time)" }
        if case .exited = outcome.termination { return "failed (\(describe(outcome.termination))) in \(time)" }
        return "failed (\(describeDeath(outcome))) in \(time); exit \(outcome.exitCode)"
    }

    /// How a batch task ended: `succeeded in 2.1s`, `failed (exit 3) in 1s`, `skipped (…)`.
    static func describe(_ report: TaskReport) -> String {
        let time = report.duration.map { " in \(DurationText.format($0))" } ?? ""
        switch report.outcome {
        case .succeeded:
            return report.resumed ? "succeeded in the earlier run; not run again" : "succeeded\(time)"
        case .failed:
            let why = report.reason == "exit" ? (report.detail ?? "exit") : [report.reason, report.detail].compactMap { $0 }.joined(separator: ", ")
            return "failed (\(why))\(time)" + (report.reason == "exit" ? "" : report.exitCode.map { ", exit \($0)" } ?? "")
        case .skipped:
            return "skipped (\(report.reason ?? "?")" + (report.detail.map { ": \($0)" } ?? "") + ")"
        }
    }

    /// `45% (450/1000) epoch 3 — loss 0.12`
    static func describe(_ p: Progress) -> String {
        var parts: [String] = []
        if let f = p.fractionCompleted { parts.append("\(Int((f * 100).rounded(.down)))%") }
        if let c = p.completed { parts.append(p.total.map { "(\(c)/\($0))" } ?? "(\(c))") }
        if let title = p.title { parts.append(TextWidth.sanitize(title)) }
        if let detail = p.detail { parts.append("— \(TextWidth.sanitize(detail))") }
        return parts.isEmpty ? "alive" : parts.joined(separator: " ")
    }
}

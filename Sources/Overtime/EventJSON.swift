import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes events and outcomes as JSON lines: the form shared by `--progress json`, the
/// final `--json` report, and (later) the journal and the control socket.
public struct EventEncoder: Sendable {
    public let runID: String
    /// Wall-clock minus monotonic time, sampled once: events carry monotonic instants, and
    /// reports show them as UTC timestamps.
    private let wallOffsetNanoseconds: Int64

    public init(runID: String) {
        self.runID = runID
        var wall = timespec()
        var mono = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_MONOTONIC, &mono)
        wallOffsetNanoseconds = (Int64(wall.tv_sec) - Int64(mono.tv_sec)) * 1_000_000_000 + Int64(wall.tv_nsec - mono.tv_nsec)
    }

    /// `2026-11-30T05:03:15.123Z` for a monotonic instant.
    public func timestamp(_ instant: MonotonicInstant) -> String {
        let wall = instant.nanoseconds &+ wallOffsetNanoseconds
        var seconds = time_t(wall / 1_000_000_000)
        let millis = Int((wall % 1_000_000_000) / 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2)).\(pad(millis, 3))Z"
    }

    /// `{"event":"thinned","kind":"protocol-error","count":N}`: N events of a kind were not
    /// written since the last one that was.
    public func thinnedLine(task: TaskRef, time: MonotonicInstant, kind: ThinnedKind, count: Int) -> [UInt8] {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.key("time"); w.string(timestamp(time))
        w.key("run"); w.string(runID)
        w.key("task"); w.string(task.name)
        w.key("event"); w.string("thinned")
        w.key("kind"); w.string(kind.rawValue)
        w.key("count"); w.int(count)
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    /// One event as a JSON line (newline included).
    /// - Parameter thinned: for an `exited` event, what a consumer held back of the task's
    ///   events over its life, by kind (written as `thinned` when not empty).
    public func line(for event: TaskEvent, thinned: [ThinnedKind: Int] = [:]) -> [UInt8] {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.key("time"); w.string(timestamp(event.time))
        w.key("run"); w.string(runID)
        w.key("task"); w.string(event.task.name)
        w.key("event")
        switch event.kind {
        case let .started(pid):
            w.string("started")
            w.key("pid"); w.int(Int(pid))
        case let .progress(progress, remaining):
            w.string("progress")
            w.progressFields(progress)
            w.key("remaining"); Self.writeSeconds(remaining, into: &w)
        case let .heartbeat(remaining):
            w.string("heartbeat")
            w.key("remaining"); Self.writeSeconds(remaining, into: &w)
        case .ready:
            w.string("ready")
        case let .result(value):
            w.string("result")
            w.key("value"); w.value(value)
        case let .budgetChanged(remaining, cause):
            w.string("budget")
            w.key("remaining"); Self.writeSeconds(remaining, into: &w)
            switch cause {
            case .start:
                w.key("cause"); w.string("start")
            case let .childExtend(asked, why, granted):
                w.key("cause"); w.string("extend")
                w.key("asked"); w.seconds(asked.seconds)
                if let why { w.key("why"); w.string(why) }
                w.key("granted"); w.bool(granted)
            case let .operatorExtend(amount, pastMax, clipped):
                w.key("cause"); w.string("operator-extend")
                w.key("amount"); w.seconds(amount.seconds)
                w.key("past_max"); w.bool(pastMax)
                w.key("clipped"); w.bool(clipped)
            case let .revoke(after):
                w.key("cause"); w.string("revoke")
                w.key("after"); w.seconds(after.seconds)
            }
        case let .expiring(remaining):
            w.string("expiring")
            w.key("remaining"); w.seconds(remaining.seconds)
        case let .cancelSent(reason, grace):
            w.string("cancel")
            w.key("reason"); w.string(reason.rawValue)
            w.key("grace"); w.seconds(grace.seconds)
        case .killSent:
            w.string("kill")
            w.key("signal"); w.string("SIGKILL")
        case let .protocolError(error, excerpt):
            w.string("protocol-error")
            w.key("error"); w.string(error.kind.rawValue)
            w.key("message"); w.string(error.message)
            w.key("excerpt"); w.string(excerpt)
        case let .operatorRequest(action, uid):
            w.string("operator")
            w.key("action"); w.string(action)
            w.key("uid"); w.int(Int(uid))
        case let .exited(outcome):
            w.string("exited")
            Self.writeOutcomeFields(outcome, into: &w)
            if !thinned.isEmpty {
                w.key("thinned")
                w.beginObject()
                for kind in ThinnedKind.allCases { if let n = thinned[kind] { w.key(kind.rawValue); w.int(n) } }
                w.endObject()
            }
        }
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    /// The final report of `overtime run --json` (newline included).
    public func report(_ outcome: TaskOutcome) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("run"); w.string(runID)
        w.key("task"); w.string(outcome.task.name)
        Self.writeOutcomeFields(outcome, into: &w)
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    static func writeOutcomeFields(_ outcome: TaskOutcome, into w: inout JSONWriter) {
        w.key("pid")
        if let pid = outcome.pid { w.int(Int(pid)) } else { w.null() }
        w.key("exit_code"); w.int(Int(outcome.exitCode))
        switch outcome.termination {
        case let .exited(code):
            w.key("status"); w.string("exited")
            w.key("code"); w.int(Int(code))
        case let .signaled(signal):
            w.key("status"); w.string("signaled")
            w.key("signal"); w.string(SignalNames.name(signal))
        case let .failedToStart(failure):
            w.key("status"); w.string("failed-to-start")
            w.key("error"); w.string(failure.message)
        }
        w.key("cancel_reason")
        if let reason = outcome.cancelReason { w.string(reason.rawValue) } else { w.null() }
        w.key("killed"); w.bool(outcome.killed)
        w.key("elapsed"); w.seconds(outcome.elapsed.seconds)
        w.key("progress"); w.progress(outcome.lastProgress)
        w.key("result")
        if let result = outcome.result { w.value(result) } else { w.null() }
        w.key("protocol_errors"); w.int(outcome.protocolErrors)
        w.key("ready"); w.bool(outcome.wasReady)
    }


    static func writeSeconds(_ d: Duration?, into w: inout JSONWriter) {
        if let d { w.seconds(d.seconds) } else { w.null() }
    }
}

/// Signal names for reports (`SIGTERM`), numbers Linux uses.
public enum SignalNames {
    private static let names: [Int32: String] = [
        1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
        8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
        14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
        20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
        26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
    ]

    public static func name(_ signal: Int32) -> String {
        names[signal] ?? "SIG\(signal)"
    }
}

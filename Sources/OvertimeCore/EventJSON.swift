import OvertimeProtocol

/// Writes events and outcomes as JSON lines: the form shared by `--progress json`, the
/// final `--json` report, and (later) the journal and the control socket.
public struct EventEncoder: Sendable {
    public let runID: String
    /// Wall-clock minus monotonic time, sampled once by whoever makes the encoder (the
    /// supervisor reads both clocks): events carry monotonic instants, and reports show
    /// them as UTC timestamps.
    public let wallOffsetNanoseconds: Int64

    public init(runID: String, wallOffsetNanoseconds: Int64) {
        self.runID = runID
        self.wallOffsetNanoseconds = wallOffsetNanoseconds
    }

    /// `2026-11-30T05:03:15.123Z` for a monotonic instant.
    public func timestamp(_ instant: MonotonicInstant) -> String {
        let wall = instant.nanoseconds &+ wallOffsetNanoseconds
        let (seconds, nanos) = wall.quotientAndRemainder(dividingBy: 1_000_000_000)
        let (wholeSeconds, millis) = nanos < 0 ? (seconds - 1, Int((nanos + 1_000_000_000) / 1_000_000)) : (seconds, Int(nanos / 1_000_000))
        let (days, secondOfDay) = wholeSeconds.quotientAndRemainder(dividingBy: 86_400)
        let (day, second) = secondOfDay < 0 ? (days - 1, secondOfDay + 86_400) : (days, secondOfDay)
        let date = CivilDate(daysSinceEpoch: day)
        func pad(_ n: Int64, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(date.year, 4))-\(pad(date.month, 2))-\(pad(date.day, 2))T"
            + "\(pad(second / 3600, 2)):\(pad(second / 60 % 60, 2)):\(pad(second % 60, 2)).\(pad(Int64(millis), 3))Z"
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
        case let .engineExpiring(remaining, source):
            w.string("engine-expiring")
            w.key("remaining"); w.seconds(remaining.seconds)
            w.key("source"); w.string(source.rawValue)
        case let .cancelSent(reason, grace, why):
            w.string("cancel")
            w.key("reason"); w.string(reason.rawValue)
            w.key("grace"); w.seconds(grace.seconds)
            if let why { w.key("why"); w.string(why) }
        case .killSent:
            w.string("kill")
            w.key("signal"); w.string("SIGKILL")
        case let .protocolError(error, excerpt):
            w.string("protocol-error")
            w.key("error"); w.string(error.kind.rawValue)
            w.key("message"); w.string(error.message)
            w.key("excerpt"); w.string(excerpt)
        case let .reporters(count):
            w.string("reporters")
            w.key("count"); w.int(count)
        case let .notified(key, value):
            w.string("notify")
            w.key("key"); w.string(key)
            w.key("value"); w.string(value)
        case let .diagnosing(reason, limit):
            w.string("diagnosing")
            w.key("reason"); w.string(reason.rawValue)
            w.key("limit"); w.seconds(limit.seconds)
        case let .reporterQuiet(name):
            w.string("reporter-quiet")
            w.key("reporter"); w.string(name)
        case let .memoryWarning(used, limit):
            w.string("memory-warning")
            w.key("used"); w.int(Int(clamping: used))
            w.key("limit"); w.int(Int(clamping: limit))
        case let .reporterRefused(pid, uid, count):
            w.string("reporter-refused")
            w.key("pid"); if let pid { w.int(Int(pid)) } else { w.null() }
            w.key("uid"); if let uid { w.int(Int(uid)) } else { w.null() }
            w.key("count"); w.int(count)
        case let .operatorRequest(action, uid):
            w.string("operator")
            w.key("action"); w.string(action)
            w.key("uid"); w.int(Int(uid))
        case let .phase(name, window):
            w.string("phase")
            w.key("name"); w.string(name)
            w.key("window"); Self.writeSeconds(window, into: &w)
        case let .windowLearned(phase, window):
            w.string("window-learned")
            w.key("phase"); w.string(phase)
            w.key("window"); w.seconds(window.seconds)
        case let .stalled(quiet, why):
            w.string("stalled")
            w.key("quiet"); w.seconds(quiet.seconds)
            w.key("why"); w.string(why)
        case let .resumed(after):
            w.string("resumed")
            w.key("after"); w.seconds(after.seconds)
        case let .advice(action, remaining, why):
            w.string("advice")
            w.key("do"); w.string(action)
            w.key("remaining"); w.seconds(remaining.seconds)
            w.key("why"); w.string(why)
        case let .straggler(rate, median, below, restart):
            w.string("straggler")
            w.key("rate"); w.number(rate)
            w.key("median"); w.number(median)
            w.key("below"); w.number(below)
            w.key("action"); w.string(restart ? "restart" : "warn")
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
    /// - Parameter more: fields of the supervisor's own to add (its containment).
    public func report(_ outcome: TaskOutcome, more: (inout JSONWriter) -> Void = { _ in }) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("run"); w.string(runID)
        w.key("task"); w.string(outcome.task.name)
        Self.writeOutcomeFields(outcome, into: &w)
        more(&w)
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
            w.key("signal"); w.string(signal.name)
        case let .failedToStart(failure):
            w.key("status"); w.string("failed-to-start")
            w.key("error"); w.string(failure.message)
        }
        w.key("cancel_reason")
        if let reason = outcome.cancelReason { w.string(reason.rawValue) } else { w.null() }
        if let why = outcome.cancelWhy { w.key("cancel_why"); w.string(why) }
        w.key("killed"); w.bool(outcome.killed)
        w.key("elapsed"); w.seconds(outcome.elapsed.seconds)
        w.key("progress"); w.progress(outcome.lastProgress)
        w.key("result")
        if let result = outcome.result { w.value(result) } else { w.null() }
        w.key("protocol_errors"); w.int(outcome.protocolErrors)
        w.key("ready"); w.bool(outcome.wasReady)
        w.key("outcome"); w.string(outcome.kind.rawValue)
        if case .signaled = outcome.termination, let sender = outcome.signalSender {
            w.key("signal_sender"); w.string(sender.rawValue)
        }
        w.key("oom_kills"); if let kills = outcome.oomKills { w.int(kills) } else { w.null() }
        if outcome.likelyOOM { w.key("likely_oom"); w.bool(true) }
        if let phase = outcome.phase { w.key("phase"); w.string(phase) }
        if outcome.stalls > 0 { w.key("stalls"); w.int(outcome.stalls) }
        writeUsage(outcome.usage, into: &w)
    }

    /// `peak_memory` (bytes), `memory_source`, `cpu_user` and `cpu_system` (seconds), each
    /// null when unmeasured: in every report of a task's end (DESIGN §7).
    public static func writeUsage(_ usage: ResourceUsage, into w: inout JSONWriter) {
        w.key("peak_memory"); if let peak = usage.peakMemory { w.int(Int(clamping: peak)) } else { w.null() }
        w.key("memory_source"); if let source = usage.memorySource { w.string(source.rawValue) } else { w.null() }
        w.key("cpu_user"); writeSeconds(usage.cpuUser, into: &w)
        w.key("cpu_system"); writeSeconds(usage.cpuSystem, into: &w)
    }


    static func writeSeconds(_ d: Duration?, into w: inout JSONWriter) {
        if let d { w.seconds(d.seconds) } else { w.null() }
    }
}

/// Milliseconds since 1970 for a journal timestamp (`2026-11-30T05:03:15.123Z`, as
/// `EventEncoder.timestamp` writes it); nil for anything else.
public func journalTimeMilliseconds(_ text: String) -> Int64? {
    let bytes = Array(text.utf8)
    guard bytes.count == 24, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
          bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "."), bytes[23] == UInt8(ascii: "Z")
    else { return nil }
    func number(_ from: Int, _ count: Int) -> Int64? {
        var n: Int64 = 0
        for byte in bytes[from..<from + count] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            n = n * 10 + Int64(byte - 0x30)
        }
        return n
    }
    guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
          let minute = number(14, 2), let second = number(17, 2), let millis = number(20, 3),
          (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
    else { return nil }
    let days = CivilDate(year: year, month: month, day: day).daysSinceEpoch
    return ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + millis
}

/// A day of the proleptic Gregorian calendar, from days since 1970-01-01 (the civil-from-
/// days algorithm: eras of 400 years, March-based years so that leap days fall last).
struct CivilDate: Equatable {
    var year: Int64
    var month: Int64
    var day: Int64

    init(daysSinceEpoch: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    init(year: Int64, month: Int64, day: Int64) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The inverse of `init(daysSinceEpoch:)` (days-from-civil, the same eras and
    /// March-based years): how a report reads the journal's timestamps back.
    var daysSinceEpoch: Int64 {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

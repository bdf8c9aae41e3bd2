// A task as the control socket's `status` reply lists it (docs/control.md).

/// One task as `status` shows it (docs/control.md, "A task in `status`").
public struct TaskStatus: Sendable, Equatable {
    /// Where the task is. Running states are a task's own (`run` and `batch`); the others
    /// are a batch's view of a task that does not run now.
    public enum State: Sendable, Equatable {
        case running
        /// Cancel sent, SIGKILL at the end of grace; the reason always travels with it.
        case cancelling(CancelReason)
        /// Exited, its output and channel still being drained.
        case exiting
        /// A batch task being spawned.
        case starting
        case waiting
        /// A batch task waiting out its backoff before its next attempt.
        case retrying
        case succeeded
        case failed
        case skipped

        /// A process of the task is alive (or about to be): starting, running, being
        /// cancelled or drained.
        public var isRunning: Bool {
            switch self {
            case .running, .cancelling, .exiting, .starting: true
            case .waiting, .retrying, .succeeded, .failed, .skipped: false
            }
        }

        /// The `state` word on the wire.
        public var word: String {
            switch self {
            case .running: "running"
            case .cancelling: "cancelling"
            case .exiting: "exiting"
            case .starting: "starting"
            case .waiting: "waiting"
            case .retrying: "retrying"
            case .succeeded: "succeeded"
            case .failed: "failed"
            case .skipped: "skipped"
            }
        }
    }

    /// One process reporting for a task, as `status` lists them while there are several.
    public struct ReporterStatus: Sendable, Equatable {
        /// What it called itself (`reporter`), else `pid N` or `reporter N`.
        public var name: String
        /// Its own bar that moved last; nil before its first progress.
        public var progress: Progress?
        /// Seconds since that bar moved.
        public var sinceReport: Double?
        /// That bar is closed.
        public var closed: Bool

        public init(name: String, progress: Progress?, sinceReport: Double?, closed: Bool) {
            self.name = name
            self.progress = progress
            self.sinceReport = sinceReport
            self.closed = closed
        }
    }

    /// What only a task with a process has. Its fields are written together, and `null`
    /// in them means "none" (no pid yet, no limit, no progress), which is not the same as
    /// a task that has none of them because it does not run.
    public struct Live: Sendable, Equatable {
        public var pid: Int32?
        /// Seconds since it started.
        public var elapsed: Double
        /// Seconds left; nil when the task has no limit.
        public var remaining: Double?
        /// What it has reported so far (the bar that moved last); nil before its first progress.
        public var progress: Progress?
        /// Its processes connected to report: the leader's fd 3 and those on its socket
        /// (nil from a supervisor that does not say).
        public var reporters: Int?
        /// Each connected reporter, while there is more than one.
        public var byReporter: [ReporterStatus]?
        /// Its memory now and at its highest so far, in bytes, and its CPU seconds so far
        /// (DESIGN §7); nil where nothing measures them.
        public var memory: UInt64?
        public var peakMemory: UInt64?
        public var cpuUser: Double?
        public var cpuSystem: Double?
        /// Under every-reporter, each reporter that has reported and its seconds left, the
        /// least first (empty before any has reported); nil when the task has it off.
        public var everyReporter: [ReporterLeft]?
        /// The phase the task named last (docs/hangs.md); nil before it named one.
        public var phase: String?
        /// Seconds a report moves the deadline ahead by now: the phase's window, or the
        /// task's; nil when there is none (no limit, or none in this phase).
        public var window: Double?
        /// That window was learned from the task's own pace (`--window auto`).
        public var windowLearned = false
        /// Under `--on-stall warn`, since when the task is stalled (UTC ISO 8601) and for how
        /// many seconds; nil while it is not.
        public var stalledSince: String?
        public var stalled: Double?
        /// Seconds to its hard limit (`max-runtime`, or a batch's `ends-by`), which no
        /// progress or extend without `past_max` moves; nil when it has none.
        public var hardLimitRemaining: Double?
        /// Its `memory-max` in bytes; nil when it has none.
        public var memoryMax: UInt64?

        /// One reporter's own time left: its name (`rank 1`, `pid 4242`; docs/protocol.md)
        /// and its seconds.
        public struct ReporterLeft: Sendable, Equatable {
            public var reporter: String
            public var remaining: Double

            public init(reporter: String, remaining: Double) {
                self.reporter = reporter
                self.remaining = remaining
            }
        }

        public init(pid: Int32?, elapsed: Double, remaining: Double?, progress: Progress?, reporters: Int? = nil,
                    byReporter: [ReporterStatus]? = nil,
                    memory: UInt64? = nil, peakMemory: UInt64? = nil, cpuUser: Double? = nil, cpuSystem: Double? = nil,
                    everyReporter: [ReporterLeft]? = nil) {
            self.byReporter = byReporter
            self.pid = pid
            self.elapsed = elapsed
            self.remaining = remaining
            self.progress = progress
            self.reporters = reporters
            self.memory = memory
            self.peakMemory = peakMemory
            self.cpuUser = cpuUser
            self.cpuSystem = cpuSystem
            self.everyReporter = everyReporter
        }
    }

    public var name: String
    /// Attempts so far (batches only).
    public var attempts: Int?
    public var state: State
    /// Why a batch task ended as it did (`dependency`, `timeout`, ...), from its report.
    public var reason: String?
    public var live: Live?
    /// The sweep or array a batch task is an element of (its task's own name in the job file).
    public var sweep: String?
    /// For a row that stands for a large sweep's elements not listed on rows of their own
    /// (those waiting and those that succeeded): how many are in each state, by its word.
    public var elements: [String: Int]?

    public init(name: String, attempts: Int? = nil, state: State, reason: String? = nil, live: Live? = nil) {
        self.name = name
        self.attempts = attempts
        self.state = state
        self.reason = reason
        self.live = live
    }

    /// The field order is the one `status` has always had: attempts before the live
    /// fields, the state's words in the middle.
    func write(into w: inout JSONWriter) {
        w.beginObject()
        w.key("name"); w.string(name)
        if let attempts { w.key("attempts"); w.int(attempts) }
        if let live {
            w.key("pid")
            if let pid = live.pid { w.int(Int(pid)) } else { w.null() }
        }
        w.key("state"); w.string(state.word)
        if case let .cancelling(reason) = state { w.key("cancel_reason"); w.string(reason.rawValue) }
        if let reason { w.key("reason"); w.string(reason) }
        if let sweep { w.key("sweep"); w.string(sweep) }
        if let elements {
            w.key("elements")
            w.beginObject()
            for (word, count) in elements.sorted(by: { $0.key < $1.key }) {
                w.key(word); w.int(count)
            }
            w.endObject()
        }
        if let live {
            w.key("elapsed"); w.seconds(live.elapsed)
            w.key("remaining")
            if let remaining = live.remaining { w.seconds(remaining) } else { w.null() }
            w.key("progress"); w.progress(live.progress)
            // Written when there is something to say, so a task with one fixed window and
            // no stall reads as before.
            if let phase = live.phase { w.key("phase"); w.string(phase) }
            if let window = live.window { w.key("window"); w.seconds(window) }
            if live.windowLearned { w.key("window_learned"); w.bool(true) }
            if let since = live.stalledSince { w.key("stalled_since"); w.string(since) }
            if let stalled = live.stalled { w.key("stalled"); w.seconds(stalled) }
            if let left = live.hardLimitRemaining { w.key("max_runtime_remaining"); w.seconds(left) }
            if let reporters = live.reporters { w.key("reporters"); w.int(reporters) }
            if let list = live.byReporter {
                w.key("by_reporter")
                w.beginArray()
                for reporter in list {
                    w.beginObject()
                    w.key("name"); w.string(reporter.name)
                    w.key("progress"); w.progress(reporter.progress)
                    w.key("since_report")
                    if let since = reporter.sinceReport { w.seconds(since) } else { w.null() }
                    w.key("closed"); w.bool(reporter.closed)
                    w.endObject()
                }
                w.endArray()
            }
            // Written when measured (DESIGN §7), so a task nothing measures reads as before.
            if let memory = live.memory { w.key("memory"); w.int(Int(clamping: memory)) }
            if let peak = live.peakMemory { w.key("peak_memory"); w.int(Int(clamping: peak)) }
            if let max = live.memoryMax { w.key("memory_max"); w.int(Int(clamping: max)) }
            if let user = live.cpuUser { w.key("cpu_user"); w.seconds(user) }
            if let system = live.cpuSystem { w.key("cpu_system"); w.seconds(system) }
            if let every = live.everyReporter {
                w.key("every_reporter")
                w.beginArray()
                for left in every {
                    w.beginObject()
                    w.key("reporter"); w.string(left.reporter)
                    w.key("remaining"); w.seconds(left.remaining)
                    w.endObject()
                }
                w.endArray()
            }
        }
        w.endObject()
    }

    /// Reads one element of a `status` reply's `tasks`. A task with `elapsed` is live.
    init(_ value: JSONValue) throws(ProtocolError) {
        guard case .object = value else { throw ProtocolError(.wrongType, "a task is a JSON object") }
        guard case let .string(name)? = value["name"] else { throw ProtocolError(.wrongType, "\"name\" must be a string") }
        self.name = name
        attempts = try Self.count(value["attempts"], "attempts")
        guard case let .string(word)? = value["state"] else { throw ProtocolError(.wrongType, "\"state\" must be a string") }
        switch word {
        case "running": state = .running
        case "cancelling":
            guard case let .string(reasonWord)? = value["cancel_reason"], let reason = CancelReason(rawValue: reasonWord) else {
                throw ProtocolError(.wrongType, "a cancelling task needs a known \"cancel_reason\"")
            }
            state = .cancelling(reason)
        case "exiting": state = .exiting
        case "starting": state = .starting
        case "waiting": state = .waiting
        case "retrying": state = .retrying
        case "succeeded": state = .succeeded
        case "failed": state = .failed
        case "skipped": state = .skipped
        default: throw ProtocolError(.unknownType, "unknown state \"\(word.prefix(32))\"")
        }
        reason = try Self.string(value["reason"], "reason")
        sweep = try Self.string(value["sweep"], "sweep")
        switch value["elements"] {
        case nil, .null?: elements = nil
        case let .object(members)?:
            var counts: [String: Int] = [:]
            for (word, count) in members {
                guard let n = try Self.count(count, "elements") else { continue }
                counts[word] = n
            }
            elements = counts
        default: throw ProtocolError(.wrongType, "\"elements\" must be an object of counts")
        }
        guard let elapsedValue = value["elapsed"] else {
            live = nil
            return
        }
        guard case let .number(elapsed) = elapsedValue else { throw ProtocolError(.wrongType, "\"elapsed\" must be a number") }
        let pid = try Self.count(value["pid"], "pid")
        guard pid.map({ $0 <= Int(Int32.max) }) ?? true else { throw ProtocolError(.outOfRange, "\"pid\" is not a process id") }
        let remaining: Double?
        switch value["remaining"] {
        case nil, .null?: remaining = nil
        case let .number(seconds)?: remaining = seconds
        default: throw ProtocolError(.wrongType, "\"remaining\" must be a number or null")
        }
        var byReporter: [ReporterStatus]?
        switch value["by_reporter"] {
        case nil, .null?: break
        case let .array(items)?:
            byReporter = try items.map { item throws(ProtocolError) in
                guard case let .string(name)? = item["name"] else { throw ProtocolError(.wrongType, "a reporter needs a \"name\"") }
                return ReporterStatus(name: name, progress: try Self.progress(item["progress"]),
                                      sinceReport: try Self.number(item["since_report"], "since_report"),
                                      closed: item["closed"] == .bool(true))
            }
        default: throw ProtocolError(.wrongType, "\"by_reporter\" must be an array")
        }
        live = Live(pid: pid.map { Int32($0) }, elapsed: elapsed, remaining: remaining, progress: try Self.progress(value["progress"]),
                    reporters: try Self.count(value["reporters"], "reporters"), byReporter: byReporter,
                    memory: try Self.count(value["memory"], "memory").map { UInt64($0) },
                    peakMemory: try Self.count(value["peak_memory"], "peak_memory").map { UInt64($0) },
                    cpuUser: try Self.number(value["cpu_user"], "cpu_user"),
                    cpuSystem: try Self.number(value["cpu_system"], "cpu_system"),
                    everyReporter: try Self.reportersLeft(value["every_reporter"]))
        live?.phase = try Self.string(value["phase"], "phase")
        live?.window = try Self.number(value["window"], "window")
        live?.windowLearned = value["window_learned"] == .bool(true)
        live?.stalledSince = try Self.string(value["stalled_since"], "stalled_since")
        live?.stalled = try Self.number(value["stalled"], "stalled")
        live?.hardLimitRemaining = try Self.number(value["max_runtime_remaining"], "max_runtime_remaining")
        live?.memoryMax = try Self.count(value["memory_max"], "memory_max").map { UInt64($0) }
    }

    /// A progress object as `progressFields` writes it, or nil for `null` or none.
    private static func progress(_ value: JSONValue?) throws(ProtocolError) -> Progress? {
        switch value {
        case nil, .null?: return nil
        case let given? where given.isObject:
            return Progress(
                completed: try Self.count(given["completed"], "completed"),
                total: try Self.count(given["total"], "total"),
                fraction: try Self.number(given["fraction"], "fraction"),
                title: try Self.string(given["title"], "title"),
                detail: try Self.string(given["detail"], "detail"),
                bar: try Self.string(given["bar"], "bar"),
                closed: given["closed"] == .bool(true),
                reporter: try Self.string(given["reporter"], "reporter"),
                reporting: try Self.count(given["reporting"], "reporting"))
        default: throw ProtocolError(.wrongType, "\"progress\" must be an object or null")
        }
    }

    private static func reportersLeft(_ value: JSONValue?) throws(ProtocolError) -> [Live.ReporterLeft]? {
        switch value {
        case nil, .null?: return nil
        case let .array(items)?:
            var left: [Live.ReporterLeft] = []
            for item in items {
                guard case let .string(reporter)? = item["reporter"], let remaining = try number(item["remaining"], "remaining") else {
                    throw ProtocolError(.wrongType, "each of \"every_reporter\" must have a \"reporter\" name and a \"remaining\"")
                }
                left.append(Live.ReporterLeft(reporter: reporter, remaining: remaining))
            }
            return left
        default: throw ProtocolError(.wrongType, "\"every_reporter\" must be an array")
        }
    }

    private static func string(_ value: JSONValue?, _ field: StaticString) throws(ProtocolError) -> String? {
        switch value {
        case nil, .null?: return nil
        case let .string(text)?: return text
        default: throw ProtocolError(.wrongType, "\"\(field)\" must be a string")
        }
    }

    private static func number(_ value: JSONValue?, _ field: StaticString) throws(ProtocolError) -> Double? {
        switch value {
        case nil, .null?: return nil
        case let .number(n)?: return n
        default: throw ProtocolError(.wrongType, "\"\(field)\" must be a number")
        }
    }

    /// An integer ≥ 0, as the channel's counts are read (`JSONReader.readCount`).
    private static func count(_ value: JSONValue?, _ field: StaticString) throws(ProtocolError) -> Int? {
        guard let n = try number(value, field) else { return nil }
        guard n >= 0, n == n.rounded(), n <= 9_007_199_254_740_992 else {
            throw ProtocolError(.outOfRange, "\"\(field)\" must be an integer ≥ 0")
        }
        return Int(n)
    }
}

// The control socket's messages (docs/control.md): one JSON object per line each way, at
// most 64 KiB a line, unknown fields ignored; a request may carry an `id` (any JSON value)
// that its reply echoes.
//
// Unlike the channel's lines, control lines are read into a `JSONValue` first and then
// looked at: an operator sends a handful, speed does not matter, and a malformed one must be
// answered with where it broke ("not a JSON request: ... at byte N") and with its `id`
// whenever the object got far enough to have one.

/// A duration as a control request carries it: text as on the command line (`"10m"`,
/// `"1h30m"`) or a number of seconds.
///
/// It stays unread here: the duration syntax and its limits belong to the supervisor
/// (`DurationText` in `Overtime`), which turns this into a `Duration` or refuses it, so
/// that `ctl extend job 10m` and `{"by":"10m"}` can never be read two ways.
public enum ControlDuration: Sendable, Equatable {
    case text(String)
    case seconds(Double)

    /// A string or a number; nil for any other JSON value.
    init?(_ value: JSONValue?) {
        switch value {
        case let .string(text)?: self = .text(text)
        case let .number(seconds)?: self = .seconds(seconds)
        default: return nil
        }
    }

    func write(into w: inout JSONWriter) {
        switch self {
        case let .text(text): w.string(text)
        // Milliseconds are the protocol's resolution for seconds (`JSONWriter.seconds`).
        case let .seconds(seconds): w.seconds(seconds)
        }
    }
}

/// A request to a supervisor's control socket.
public struct ControlRequest: Sendable, Equatable {
    /// What is asked: the `op` of the request and the fields it needs.
    public enum Op: Sendable, Equatable {
        /// Every task the supervisor knows, answered with `ControlReply.Outcome.status`.
        case status
        /// Who the supervisor is (what it runs, where, since when), answered with
        /// `ControlReply.Outcome.supervisor`: what `overtime ctl list` shows.
        case info
        /// The live event stream, answered with `.watching` and then event lines.
        case watch
        /// Cancel the task: reason `user` unless said (a batch's head passes on its own
        /// reasons to a task it runs elsewhere: `shutdown`, `fail-fast`, `deadline`), with
        /// the task's own grace unless said.
        case cancel(task: String, reason: CancelReason = .user, grace: ControlDuration? = nil)
        /// Add `by` to the task's deadline; past `max-runtime` only when `pastMax`.
        case extend(task: String, by: ControlDuration, pastMax: Bool)
        /// The engine this run is part of ends in `remaining` seconds: send the task
        /// `expiring` (a batch's head passing on its `--warn-signal` to a remote task).
        case expiring(task: String, remaining: Double)
        /// The deadline becomes now + `after` (nil: 0) and progress no longer moves it.
        case revoke(task: String, after: ControlDuration?)
    }

    /// Echoed in the reply, so a client may match replies to requests.
    public var id: JSONValue?
    public var op: Op

    public init(id: JSONValue? = nil, _ op: Op) {
        self.id = id
        self.op = op
    }

    /// A request that could not be read, with the `id` its error reply must echo (nil when
    /// the line was not a JSON object, or had none).
    public struct DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
        public var id: JSONValue?
        /// What was wrong, in the sentence the error reply carries.
        public var problem: ProtocolError

        public init(id: JSONValue?, _ problem: ProtocolError) {
            self.id = id
            self.problem = problem
        }

        public var description: String { problem.description }
    }

    /// The ops there are, for "expected ..." in error replies.
    public static let opNames = "status, info, watch, cancel, extend, revoke or expiring"
    /// Why an `extend` is refused when its `by` is missing or not a positive duration. Public
    /// because the supervisor says it too, once it has read the duration.
    public static let byProblem = "\"extend\" needs \"by\": a duration such as \"10m\" or a number of seconds"
    /// Why a `revoke` is refused when its `after` is not a duration.
    public static let afterProblem = "\"after\" must be a duration such as \"30s\" or a number of seconds"

    /// This request as one line, newline included (what `overtime ctl` sends).
    public func encoded() -> [UInt8] {
        var w = JSONWriter(capacity: 96)
        w.beginObject()
        if let id { w.key("id"); w.value(id) }
        w.key("op")
        switch op {
        case .status: w.string("status")
        case .info: w.string("info")
        case .watch: w.string("watch")
        case let .cancel(task, reason, grace):
            w.string("cancel")
            w.key("task"); w.string(task)
            if reason != .user { w.key("reason"); w.string(reason.rawValue) }
            if let grace { w.key("grace"); grace.write(into: &w) }
        case let .extend(task, by, pastMax):
            w.string("extend")
            w.key("task"); w.string(task)
            w.key("by"); by.write(into: &w)
            w.key("past_max"); w.bool(pastMax)
        case let .revoke(task, after):
            w.string("revoke")
            w.key("task"); w.string(task)
            if let after { w.key("after"); after.write(into: &w) }
        case let .expiring(task, remaining):
            w.string("expiring")
            w.key("task"); w.string(task)
            w.key("remaining"); w.seconds(remaining)
        }
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    /// Reads one request line (without its newline; a trailing `\r` is whitespace).
    /// - Throws: `DecodeError` naming what is wrong: not JSON (and at which byte), not an
    ///   object, no `op`, an unknown op, a missing `task`, a `by` or `after` of the wrong type.
    ///   Whether a duration's text or number is a valid duration is the supervisor's call.
    public static func decode(_ line: [UInt8]) throws(DecodeError) -> ControlRequest {
        guard line.count <= ProtocolLimits.maxLineLength else {
            throw DecodeError(id: nil, ProtocolError(.tooLong, "request line longer than 64 KiB"))
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(line)
        } catch {
            throw DecodeError(id: nil, ProtocolError(error.problem.kind, "not a JSON request: \(error.located)"))
        }
        return try decode(value)
    }

    /// Reads a request already parsed as JSON.
    public static func decode(_ value: JSONValue) throws(DecodeError) -> ControlRequest {
        let id = value["id"]
        func refuse(_ kind: ProtocolError.Kind, _ message: String) -> DecodeError {
            DecodeError(id: id, ProtocolError(kind, message))
        }
        guard case .object = value else { throw refuse(.notJSON, "a request is a JSON object") }
        guard case let .string(op)? = value["op"] else { throw refuse(.missingType, "no \"op\"; expected \(opNames)") }
        func task() throws(DecodeError) -> String {
            guard case let .string(task)? = value["task"], !task.isEmpty else {
                throw refuse(.wrongType, "\"\(op)\" needs \"task\": the task's name")
            }
            return task
        }
        switch op {
        case "status": return ControlRequest(id: id, .status)
        case "info": return ControlRequest(id: id, .info)
        case "watch": return ControlRequest(id: id, .watch)
        case "cancel":
            let task = try task()
            var reason = CancelReason.user
            switch value["reason"] {
            case nil, .null?: break
            case let .string(word)? where CancelReason(rawValue: word) != nil: reason = CancelReason(rawValue: word)!
            default: throw refuse(.wrongType, "\"reason\" must be a cancel reason such as \"shutdown\"")
            }
            var grace: ControlDuration?
            if let given = value["grace"], given != .null {
                guard let duration = ControlDuration(given) else { throw refuse(.wrongType, "\"grace\" must be a duration such as \"10s\" or seconds") }
                grace = duration
            }
            return ControlRequest(id: id, .cancel(task: task, reason: reason, grace: grace))
        case "extend":
            let task = try task()
            guard let by = ControlDuration(value["by"]) else { throw refuse(.wrongType, byProblem) }
            // Only `true` passes max-runtime: any other value keeps the limit, the safe side.
            return ControlRequest(id: id, .extend(task: task, by: by, pastMax: value["past_max"] == .bool(true)))
        case "revoke":
            let task = try task()
            switch value["after"] {
            case nil, .null?:
                return ControlRequest(id: id, .revoke(task: task, after: nil))
            case let given?:
                guard let after = ControlDuration(given) else { throw refuse(.wrongType, afterProblem) }
                return ControlRequest(id: id, .revoke(task: task, after: after))
            }
        case "expiring":
            let task = try task()
            guard case let .number(remaining)? = value["remaining"], remaining.isFinite, remaining >= 0 else {
                throw refuse(.wrongType, "\"remaining\" must be a number of seconds ≥ 0")
            }
            return ControlRequest(id: id, .expiring(task: task, remaining: remaining))
        default:
            throw refuse(.unknownType, "unknown op \"\(op.prefix(40))\"; expected \(opNames)")
        }
    }
}

/// A supervisor's answer to one control request.
public struct ControlReply: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// `{"ok":false,"error":...}`: the request was refused or could not be read.
        case failed(String)
        /// `{"ok":true,"result":...}`: what a cancel, extend or revoke did, in words.
        case done(String)
        /// `{"ok":true,"run":ID,"tasks":[...],"containment":{...}}`: the answer to `status`,
        /// with the run's id and how the supervisor holds its tasks (DESIGN §7); each nil
        /// from one that does not say.
        case status([TaskStatus], containment: JSONValue? = nil, run: String? = nil)
        /// `{"ok":true,"watching":true}`: event lines follow.
        case watching
        /// `{"ok":true,"supervisor":{...}}`: the answer to `info`.
        case supervisor(SupervisorInfo)
    }

    /// The request's `id`, echoed.
    public var id: JSONValue?
    public var outcome: Outcome

    public init(id: JSONValue? = nil, _ outcome: Outcome) {
        self.id = id
        self.outcome = outcome
    }

    /// This reply as one line, newline included.
    public func encoded() -> [UInt8] {
        var w = JSONWriter(capacity: 128)
        w.beginObject()
        if let id { w.key("id"); w.value(id) }
        switch outcome {
        case let .failed(message):
            w.key("ok"); w.bool(false)
            w.key("error"); w.string(message)
        case let .done(result):
            w.key("ok"); w.bool(true)
            w.key("result"); w.string(result)
        case let .status(tasks, containment, run):
            w.key("ok"); w.bool(true)
            if let run { w.key("run"); w.string(run) }
            w.key("tasks")
            w.beginArray()
            for task in tasks { task.write(into: &w) }
            w.endArray()
            if let containment { w.key("containment"); w.value(containment) }
        case .watching:
            w.key("ok"); w.bool(true)
            w.key("watching"); w.bool(true)
        case let .supervisor(info):
            w.key("ok"); w.bool(true)
            w.key("supervisor"); info.write(into: &w)
        }
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    /// Reads one reply line (without its newline).
    /// - Throws: `ProtocolError` naming what is wrong: not JSON, not an object, no boolean
    ///   `ok`, a refusal without its `error`, a success that carries none of `tasks`,
    ///   `watching` or `result`, or a task in `tasks` that cannot be read.
    ///
    /// A reply has no length limit: a `status` reply lists every task of a batch, and a
    /// batch of thousands answers with more than 64 KiB (the limit guards the supervisor
    /// from its clients, not the other way round).
    public static func decode(_ line: [UInt8]) throws(ProtocolError) -> ControlReply {
        let value: JSONValue
        do {
            value = try JSONValue.parse(line)
        } catch {
            throw ProtocolError(error.problem.kind, "not a JSON reply: \(error.located)")
        }
        guard case .object = value else { throw ProtocolError(.notJSON, "a reply is a JSON object") }
        let id = value["id"]
        guard case let .bool(ok)? = value["ok"] else { throw ProtocolError(.missingType, "a reply needs \"ok\": true or false") }
        guard ok else {
            guard case let .string(message)? = value["error"] else { throw ProtocolError(.wrongType, "a refusal needs \"error\": a string") }
            return ControlReply(id: id, .failed(message))
        }
        if let tasks = value["tasks"] {
            guard case let .array(items) = tasks else { throw ProtocolError(.wrongType, "\"tasks\" must be an array") }
            var statuses: [TaskStatus] = []
            statuses.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                do {
                    statuses.append(try TaskStatus(item))
                } catch {
                    throw ProtocolError(error.kind, "task \(index) in \"tasks\": \(error.message)")
                }
            }
            var run: String?
            if case let .string(name)? = value["run"] { run = name }
            return ControlReply(id: id, .status(statuses, containment: value["containment"], run: run))
        }
        if value["watching"] == .bool(true) { return ControlReply(id: id, .watching) }
        if case let .string(result)? = value["result"] { return ControlReply(id: id, .done(result)) }
        if let supervisor = value["supervisor"] {
            do {
                return ControlReply(id: id, .supervisor(try SupervisorInfo(supervisor)))
            } catch {
                throw ProtocolError(error.kind, "\"supervisor\": \(error.message)")
            }
        }
        throw ProtocolError(.missingType, "a reply with \"ok\":true carries \"tasks\", \"watching\", \"result\" or \"supervisor\"")
    }
}

/// A supervisor as `info` describes it (docs/control.md, "Which supervisor"): enough for a
/// person with several running to tell theirs apart.
public struct SupervisorInfo: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case run
        case batch
    }

    public var run: String
    public var kind: Kind
    public var pid: Int32
    public var uid: UInt32
    /// The user's name where the supervisor could look it up.
    public var user: String?
    /// When the supervisor started, UTC ISO 8601 (`2026-12-01T17:48:14.120Z`).
    public var started: String
    /// The directory it was started in.
    public var cwd: String
    /// What `overtime run` runs: the command and its arguments.
    public var command: [String]?
    /// What `overtime batch` runs: its job file, as given, and its run directory.
    public var jobFile: String?
    public var runDirectory: String?
    /// The live page's URL, token included (`--ui`); only its own user may ask for it.
    public var livePage: String?
    /// Tasks running now (starting, running, cancelling, exiting), and all it knows.
    public var running: Int
    public var total: Int

    public init(run: String, kind: Kind, pid: Int32, uid: UInt32, user: String?, started: String, cwd: String,
                command: [String]? = nil, jobFile: String? = nil, runDirectory: String? = nil, running: Int, total: Int) {
        self.run = run
        self.kind = kind
        self.pid = pid
        self.uid = uid
        self.user = user
        self.started = started
        self.cwd = cwd
        self.command = command
        self.jobFile = jobFile
        self.runDirectory = runDirectory
        self.running = running
        self.total = total
    }

    /// What it runs, in a few words: the command line, or the job file.
    public var runs: String {
        if let command { return command.joined(separator: " ") }
        return jobFile ?? "-"
    }

    /// This description as a JSON object (the `supervisor` of an `info` reply).
    public func write(into w: inout JSONWriter) {
        w.beginObject()
        w.key("run"); w.string(run)
        w.key("kind"); w.string(kind.rawValue)
        w.key("pid"); w.int(Int(pid))
        w.key("uid"); w.int(Int(uid))
        w.key("user"); if let user { w.string(user) } else { w.null() }
        w.key("started"); w.string(started)
        w.key("cwd"); w.string(cwd)
        if let command {
            w.key("command")
            w.beginArray()
            for word in command { w.string(word) }
            w.endArray()
        }
        if let jobFile { w.key("job_file"); w.string(jobFile) }
        if let runDirectory { w.key("run_dir"); w.string(runDirectory) }
        if let livePage { w.key("live_page"); w.string(livePage) }
        w.key("tasks")
        w.beginObject()
        w.key("running"); w.int(running)
        w.key("total"); w.int(total)
        w.endObject()
        w.endObject()
    }

    init(_ value: JSONValue) throws(ProtocolError) {
        guard case .object = value else { throw ProtocolError(.wrongType, "must be a JSON object") }
        func text(_ key: String) throws(ProtocolError) -> String {
            guard case let .string(text)? = value[key] else { throw ProtocolError(.wrongType, "\"\(key)\" must be a string") }
            return text
        }
        func optionalText(_ key: String) throws(ProtocolError) -> String? {
            switch value[key] {
            case nil, .null?: return nil
            case let .string(text)?: return text
            default: throw ProtocolError(.wrongType, "\"\(key)\" must be a string")
            }
        }
        func count(_ container: JSONValue?, _ key: String, upTo limit: Double = Double(Int32.max)) throws(ProtocolError) -> Int {
            guard case let .number(n)? = container?[key], n >= 0, n <= limit, n == n.rounded() else {
                throw ProtocolError(.wrongType, "\"\(key)\" must be a whole number ≥ 0")
            }
            return Int(n)
        }
        run = try text("run")
        guard let kind = Kind(rawValue: try text("kind")) else { throw ProtocolError(.wrongType, "\"kind\" must be \"run\" or \"batch\"") }
        self.kind = kind
        pid = Int32(try count(value, "pid"))
        uid = UInt32(try count(value, "uid", upTo: Double(UInt32.max)))
        user = try optionalText("user")
        started = try text("started")
        cwd = try text("cwd")
        switch value["command"] {
        case nil, .null?: command = nil
        case let .array(words)?:
            command = try words.map { word throws(ProtocolError) -> String in
                guard case let .string(text) = word else { throw ProtocolError(.wrongType, "\"command\" must be an array of strings") }
                return text
            }
        default: throw ProtocolError(.wrongType, "\"command\" must be an array of strings")
        }
        jobFile = try optionalText("job_file")
        runDirectory = try optionalText("run_dir")
        livePage = try optionalText("live_page")
        running = try count(value["tasks"], "running")
        total = try count(value["tasks"], "total")
    }
}

extension JSONValue {
    public var isObject: Bool {
        if case .object = self { true } else { false }
    }
}

extension JSONWriter {
    /// A progress report's fields, as events and `status` carry them: `fraction` is the
    /// share done (from `completed`/`total` when the task sent no fraction), to 4 places.
    public mutating func progressFields(_ p: Progress) {
        if let c = p.completed { key("completed"); int(c) }
        if let t = p.total { key("total"); int(t) }
        if let f = p.fractionCompleted { key("fraction"); number((f * 10_000).rounded() / 10_000) }
        if let s = p.title { key("title"); string(s) }
        if let s = p.detail { key("detail"); string(s) }
        if let s = p.bar { key("bar"); string(s) }
        if p.closed { key("closed"); bool(true) }
        if let s = p.reporter { key("reporter"); string(s) }
        if let n = p.reporting { key("reporting"); int(n) }
    }

    /// A last progress report as an object of those fields, or `null` before the first.
    public mutating func progress(_ p: Progress?) {
        guard let p else { return null() }
        beginObject()
        progressFields(p)
        endObject()
    }
}

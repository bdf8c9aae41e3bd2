import OvertimeProtocol

/// Reads back the event lines `EventEncoder` writes (docs/control.md's table): how the head
/// of an executor hears a task that runs under an `overtime run` elsewhere, line by line
/// from that run's control stream, and re-reports it as its own.
///
/// Decoding is lenient where the encoder may grow (unknown fields are ignored; an event of
/// a kind this version does not know is `nil`, not an error) and strict where a value is
/// needed to act on (a `cancel` without a known reason is an error).
public enum EventDecoder {
    /// One decoded line: the task's name as the remote run called it, and what happened.
    public struct Line: Sendable, Equatable {
        public var task: String
        public var kind: TaskEvent.Kind
    }

    /// Decodes one line; nil for a line that is not an event this version knows (a reply
    /// to a control request, a `thinned` count, a newer kind).
    /// - Throws: `ProtocolError` for an event line that cannot be read.
    public static func decode(_ value: JSONValue) throws(ProtocolError) -> Line? {
        guard case .object = value, case let .string(word)? = value["event"] else { return nil }
        guard case let .string(task)? = value["task"] else { throw ProtocolError(.wrongType, "an event needs \"task\"") }
        let fields = Fields(value: value, event: word)
        let kind: TaskEvent.Kind
        switch word {
        case "started": kind = .started(pid: Int32(clamping: try fields.count("pid")))
        case "progress": kind = .progress(try fields.progress(), remaining: try fields.optionalSeconds("remaining"))
        case "heartbeat": kind = .heartbeat(remaining: try fields.optionalSeconds("remaining"))
        case "ready": kind = .ready
        case "result": kind = .result(value["value"] ?? .null)
        case "budget": kind = .budgetChanged(remaining: try fields.optionalSeconds("remaining"), cause: try fields.budgetCause())
        case "expiring": kind = .expiring(remaining: try fields.seconds("remaining"))
        case "engine-expiring":
            kind = .engineExpiring(remaining: try fields.seconds("remaining"),
                                   source: EngineTimeSource(rawValue: try fields.string("source")) ?? .fallback)
        case "cancel":
            kind = .cancelSent(reason: try fields.reason("reason"), grace: try fields.seconds("grace"), why: try fields.optionalString("why"))
        case "kill": kind = .killSent
        case "protocol-error":
            let errorKind = ProtocolError.Kind(rawValue: try fields.string("error")) ?? .wrongType
            kind = .protocolError(ProtocolError(errorKind, try fields.string("message")), excerpt: try fields.string("excerpt"))
        case "operator": kind = .operatorRequest(action: try fields.string("action"), uid: UInt32(clamping: try fields.count("uid")))
        case "reporter-refused":
            kind = .reporterRefused(pid: try fields.optionalCount("pid").map { Int32(clamping: $0) },
                                    uid: try fields.optionalCount("uid").map { UInt32(clamping: $0) },
                                    count: try fields.optionalCount("count") ?? 1)
        case "reporters": kind = .reporters(count: try fields.count("count"))
        case "notify": kind = .notified(key: try fields.string("key"), value: try fields.string("value"))
        case "memory-warning": kind = .memoryWarning(used: UInt64(try fields.count("used")), limit: UInt64(try fields.count("limit")))
        case "diagnosing": kind = .diagnosing(reason: try fields.reason("reason"), limit: try fields.seconds("limit"))
        case "reporter-quiet": kind = .reporterQuiet(name: try fields.string("reporter"))
        case "phase": kind = .phase(name: try fields.string("name"), window: try fields.optionalSeconds("window"))
        case "window-learned": kind = .windowLearned(phase: try fields.string("phase"), window: try fields.seconds("window"))
        case "stalled": kind = .stalled(quiet: try fields.seconds("quiet"), why: try fields.optionalString("why") ?? "")
        case "resumed": kind = .resumed(after: try fields.seconds("after"))
        case "advice":
            kind = .advice(action: try fields.string("do"), remaining: try fields.seconds("remaining"), why: try fields.optionalString("why") ?? "")
        case "straggler":
            kind = .straggler(rate: try fields.number("rate"), median: try fields.number("median"), below: try fields.number("below"),
                              restart: try fields.string("action") == "restart")
        case "exited": kind = .exited(try fields.outcome(task: task))
        default: return nil
        }
        return Line(task: task, kind: kind)
    }

    /// The fields of one event, read with the event's name in every message.
    struct Fields {
        let value: JSONValue
        let event: String

        func problem(_ field: String, _ expected: String) -> ProtocolError {
            ProtocolError(.wrongType, "\"\(field)\" of a \(event) event must be \(expected)")
        }

        func string(_ field: String) throws(ProtocolError) -> String {
            guard case let .string(text)? = value[field] else { throw problem(field, "a string") }
            return text
        }

        func optionalString(_ field: String) throws(ProtocolError) -> String? {
            switch value[field] {
            case nil, .null?: return nil
            case let .string(text)?: return text
            default: throw problem(field, "a string")
            }
        }

        func number(_ field: String) throws(ProtocolError) -> Double {
            guard case let .number(n)? = value[field], n.isFinite else { throw problem(field, "a number") }
            return n
        }

        func optionalNumber(_ field: String) throws(ProtocolError) -> Double? {
            switch value[field] {
            case nil, .null?: return nil
            case let .number(n)? where n.isFinite: return n
            default: throw problem(field, "a number")
            }
        }

        func count(_ field: String) throws(ProtocolError) -> Int {
            let n = try number(field)
            guard n >= 0, n == n.rounded(), n < 9.2e18 else { throw problem(field, "a whole number ≥ 0") }
            return Int(n)
        }

        func optionalCount(_ field: String) throws(ProtocolError) -> Int? {
            guard let n = try optionalNumber(field) else { return nil }
            guard n >= 0, n == n.rounded(), n < 9.2e18 else { throw problem(field, "a whole number ≥ 0") }
            return Int(n)
        }

        func seconds(_ field: String) throws(ProtocolError) -> Duration {
            Duration.seconds(fromDouble: max(0, try number(field)))
        }

        func optionalSeconds(_ field: String) throws(ProtocolError) -> Duration? {
            try optionalNumber(field).map { Duration.seconds(fromDouble: max(0, $0)) }
        }

        func bool(_ field: String) throws(ProtocolError) -> Bool {
            switch value[field] {
            case nil, .null?: return false
            case let .bool(b)?: return b
            default: throw problem(field, "true or false")
            }
        }

        func reason(_ field: String) throws(ProtocolError) -> CancelReason {
            guard let reason = CancelReason(rawValue: try string(field)) else { throw problem(field, "a cancel reason") }
            return reason
        }

        func progress() throws(ProtocolError) -> Progress {
            try Self.progress(in: self)
        }

        static func progress(in fields: Fields) throws(ProtocolError) -> Progress {
            let completed = try fields.optionalCount("completed"), total = try fields.optionalCount("total")
            // The encoder writes the share done beside a count it was computed from; read
            // back, the count is what was reported, and the share follows from it again.
            let fraction = completed != nil && total != nil ? nil : try fields.optionalNumber("fraction")
            return Progress(completed: completed, total: total, fraction: fraction, title: try fields.optionalString("title"),
                            detail: try fields.optionalString("detail"), bar: try fields.optionalString("bar"), closed: try fields.bool("closed"),
                            reporter: try fields.optionalString("reporter"), reporting: try fields.optionalCount("reporting"))
        }

        func budgetCause() throws(ProtocolError) -> BudgetChange {
            switch try string("cause") {
            case "start": return .start
            case "extend":
                return .childExtend(asked: try seconds("asked"), why: try optionalString("why"), granted: try bool("granted"))
            case "operator-extend":
                return .operatorExtend(amount: try seconds("amount"), pastMax: try bool("past_max"), clipped: try bool("clipped"))
            case "revoke":
                return .revoke(after: try seconds("after"))
            default:
                throw problem("cause", "start, extend, operator-extend or revoke")
            }
        }

        /// The outcome fields of an `exited` event (or of `overtime run --json`'s report).
        func outcome(task: String) throws(ProtocolError) -> TaskOutcome {
            let termination: Termination
            switch try string("status") {
            case "exited": termination = .exited(Int32(clamping: try count("code")))
            case "signaled":
                guard let signal = Signal(name: try string("signal")) else { throw problem("signal", "a signal name such as SIGTERM") }
                termination = .signaled(signal)
            case "failed-to-start":
                // The remote's exit code says which kind of failure it was (126, 127, 125).
                let code = try count("exit_code")
                let errno: Int32 = code == 127 ? ErrorNumber.ENOENT : code == 126 ? ErrorNumber.EACCES : 0
                termination = .failedToStart(SpawnFailure(errno: errno, message: try string("error"), beforeExec: code == 125))
            default:
                throw problem("status", "exited, signaled or failed-to-start")
            }
            let progress: Progress? = switch value["progress"] {
            case nil, .null?: nil
            case let object? where object.isObject: try Self.progress(in: Fields(value: object, event: event))
            default: throw problem("progress", "an object or null")
            }
            var outcome = TaskOutcome(
                task: TaskRef(id: 0, name: task),
                pid: try optionalCount("pid").map { Int32(clamping: $0) },
                termination: termination,
                cancelReason: try optionalString("cancel_reason").flatMap(CancelReason.init(rawValue:)),
                killed: try bool("killed"),
                elapsed: try seconds("elapsed"),
                lastProgress: progress,
                result: value["result"].flatMap { $0 == .null ? nil : $0 },
                protocolErrors: try optionalCount("protocol_errors") ?? 0,
                wasReady: try bool("ready"))
            outcome.cancelWhy = try optionalString("cancel_why")
            outcome.oomKills = try optionalCount("oom_kills")
            outcome.likelyOOM = try bool("likely_oom")
            outcome.signalSender = try optionalString("signal_sender").flatMap(SignalSender.init(rawValue:))
            outcome.phase = try optionalString("phase")
            outcome.stalls = try optionalCount("stalls") ?? 0
            outcome.usage = ResourceUsage(
                peakMemory: try optionalCount("peak_memory").map { UInt64($0) },
                cpuUser: try optionalSeconds("cpu_user"), cpuSystem: try optionalSeconds("cpu_system"),
                memorySource: try optionalString("memory_source").flatMap(ResourceUsage.MemorySource.init(rawValue:)))
            return outcome
        }
    }
}

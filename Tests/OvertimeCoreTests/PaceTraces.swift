import Foundation
import OvertimeProtocol
import OvertimeTestSupport
@testable import OvertimeCore

/// A pace trace (Tests/Fixtures/pace-traces): the messages a task sent, at their time from
/// its start, recorded from a real program or synthesized from stated parameters; and the
/// points where a hang is put into it.
struct PaceTrace: Sendable {
    struct Message: Sendable {
        var at: Duration
        var message: ChildMessage
    }

    struct HangPoint: Sendable {
        var name: String
        /// The task hangs right after its message at this time.
        var after: Duration
    }

    var name: String
    /// "recorded" or "synthesized".
    var origin: String
    /// Covers the task's start up to its first step's report.
    var budget: Duration
    var hangs: [HangPoint]
    var messages: [Message]

    static let directory = Checkout.path("Tests/Fixtures/pace-traces")

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// Every trace of the directory, by name.
    static func all() throws -> [PaceTrace] {
        try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasSuffix(".jsonl") }
            .sorted()
            .map { try load(String($0.dropLast(".jsonl".count))) }
    }

    /// A trace file: a header line, then one message a line, as the task wrote it on its
    /// channel plus `t`, its time in seconds from the task's start (an unknown field, which
    /// the protocol's own decoder leaves aside).
    static func load(_ name: String) throws -> PaceTrace {
        let path = directory + "/" + name + ".jsonl"
        guard let data = FileManager.default.contents(atPath: path) else { throw Malformed(description: "\(path): cannot read") }
        let lines = data.split(separator: UInt8(ascii: "\n")).map { Array($0) }
        guard let first = lines.first else { throw Malformed(description: "\(path): empty") }
        let header = try JSONValue.parse(first)
        guard case let .number(budget)? = header["budget"], case let .string(origin)? = header["origin"],
              case let .array(hangs)? = header["hangs"] else {
            throw Malformed(description: "\(path): the header needs budget, origin and hangs")
        }
        var trace = PaceTrace(name: name, origin: origin, budget: .seconds(fromDouble: budget), hangs: [], messages: [])
        for hang in hangs {
            guard case let .string(hangName)? = hang["name"], case let .number(after)? = hang["after"] else {
                throw Malformed(description: "\(path): a hang needs name and after")
            }
            trace.hangs.append(HangPoint(name: hangName, after: .seconds(fromDouble: after)))
        }
        for (index, line) in lines.dropFirst().enumerated() {
            guard case let .number(t)? = try JSONValue.parse(line)["t"] else {
                throw Malformed(description: "\(path):\(index + 2): no t")
            }
            let message = try ChildMessage.decode(line)
            trace.messages.append(Message(at: .seconds(fromDouble: t), message: message))
        }
        return trace
    }

    /// The messages up to and including the one at `after`: the task hung there.
    func hung(after: Duration) -> [Message] {
        messages.filter { $0.at <= after }
    }

    /// Whether the task names phases.
    var hasPhases: Bool {
        messages.contains { if case .phase = $0.message { true } else { false } }
    }

    /// The longest silence after each report, by the phase the task was in when it sent it
    /// (the window of that phase covers it). The wait for the first report is the budget's.
    var longestSilenceByPhase: [String: Duration] {
        var phase = PhaseNames.initial
        var longest: [String: Duration] = [:]
        for (message, next) in zip(messages, messages.dropFirst()) {
            if case let .phase(name, _) = message.message { phase = name }
            longest[phase] = max(longest[phase] ?? .zero, next.at - message.at)
        }
        return longest
    }

    /// `d` in seconds, to the millisecond (the traces' own precision).
    static func seconds(_ d: Duration) -> Double {
        (d.seconds * 1000).rounded() / 1000
    }

    var longestSilence: Duration {
        longestSilenceByPhase.values.max() ?? .zero
    }
}

/// A trace fed into a `TaskMachine` on a fake clock: each message at its time, and `tick`
/// at every wake the machine asks for in between, as the loop would.
struct PaceReplay {
    /// One passed soft deadline (a stall under `--on-stall warn`, else the cancel).
    struct Trip: Sendable {
        var at: Duration
        /// The last report before it, and the next one (nil: none came).
        var lastReport: Duration
        var nextReport: Duration?
        /// The window in force when it tripped, whether learned, and the phase.
        var window: Duration?
        var learned: Bool
        var phase: String?

        /// The silence that tripped it: from the last report to the next.
        var interval: Duration? { nextReport.map { $0 - lastReport } }
    }

    private(set) var machine: TaskMachine
    private(set) var now: MonotonicInstant
    private let origin: MonotonicInstant
    private var actions: [TaskMachine.Action] = []
    private(set) var lastReport: Duration = .zero
    /// The soft deadlines that passed, in order.
    private(set) var trips: [Trip] = []
    /// When it was cancelled, and why.
    private(set) var cancelled: (at: Duration, reason: CancelReason)?
    /// Each window learned, when, for which phase.
    private(set) var learned: [(at: Duration, phase: String, window: Duration)] = []

    init(policy: BudgetPolicy) {
        origin = MonotonicInstant(nanoseconds: 1_000_000_000_000)
        now = origin
        machine = TaskMachine(policy: policy, startedAt: origin)
        machine.start(pid: 42, now: now, into: &actions)
        actions.removeAll()
    }

    /// Replays `messages`, then lets `after` pass with no more of them (a hang).
    static func run(_ messages: [PaceTrace.Message], policy: BudgetPolicy, thenSilenceFor after: Duration = .zero) -> PaceReplay {
        var replay = PaceReplay(policy: policy)
        for message in messages where replay.cancelled == nil {
            replay.send(message)
        }
        if replay.cancelled == nil { replay.wait(until: replay.lastReport + after) }
        return replay
    }

    mutating func send(_ message: PaceTrace.Message) {
        wait(until: message.at)
        guard cancelled == nil else { return }
        now = origin + message.at
        machine.receive(message.message, now: now, into: &actions)
        if let open = trips.indices.last, trips[open].nextReport == nil { trips[open].nextReport = message.at }
        lastReport = message.at
        observe()
    }

    /// Moves the clock to `time` from start, ticking at each wake due on the way.
    mutating func wait(until time: Duration) {
        let end = origin + time
        while cancelled == nil, let wake = machine.nextWake, wake <= end {
            now = max(now, wake)
            let window = machine.windowInForce
            let phase = machine.phaseName
            machine.tick(now: now, into: &actions)
            observe(window: window, phase: phase)
            // A wake the tick left where it was would come round for ever.
            if machine.nextWake == wake { break }
        }
        if cancelled == nil { now = max(now, end) }
    }

    private mutating func observe(window: (window: Duration?, learned: Bool)? = nil, phase: String? = nil) {
        let at = now - origin
        for action in actions {
            guard case let .emit(kind) = action else { continue }
            switch kind {
            case .stalled, .cancelSent(.timeout, _, _):
                trips.append(Trip(at: at, lastReport: lastReport, window: window?.window, learned: window?.learned ?? false, phase: phase))
            default:
                break
            }
            if case let .cancelSent(reason, _, _) = kind { cancelled = (at, reason) }
            if case let .windowLearned(phase, window) = kind { learned.append((at, phase, window)) }
        }
        actions.removeAll()
    }

    /// Time from the last report to the cancel; nil when it was not cancelled.
    var detection: Duration? {
        cancelled.map { $0.at - lastReport }
    }
}

/// The three ways to watch a trace for hangs that the table compares.
enum HangOption: String, CaseIterable, Sendable {
    /// One fixed window long enough for the trace's longest silence: what a user must set
    /// without phases or learning.
    case fixedWorst = "fixed window"
    /// A fixed window per phase, each long enough for that phase's longest silence
    /// (`--phase-window` for the phases the task names, `--window` for the rest).
    case phaseWindows = "phases"
    /// `--window auto`, with the phases the task names.
    case learned = "--window auto"

    /// How far above the longest silence a user sets a fixed window.
    static let userMargin = 1.25

    func policy(for trace: PaceTrace, onStall: StallAction) -> BudgetPolicy {
        var policy = BudgetPolicy(budget: trace.budget)
        policy.onStall = onStall
        switch self {
        case .fixedWorst:
            policy.window = Self.withMargin(trace.longestSilence)
        case .phaseWindows:
            var windows = trace.longestSilenceByPhase.mapValues(Self.withMargin)
            policy.window = windows.removeValue(forKey: PhaseNames.initial) ?? Self.withMargin(trace.longestSilence)
            policy.phaseWindows = windows
        case .learned:
            policy.learnedWindows = .default
        }
        return policy
    }

    static func withMargin(_ silence: Duration) -> Duration {
        .milliseconds(Int64((silence.seconds * userMargin * 1000).rounded(.up)))
    }
}

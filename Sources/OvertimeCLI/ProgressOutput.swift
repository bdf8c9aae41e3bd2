import Overtime
import OvertimeProtocol
import Synchronization

/// What `overtime run` shows while a task runs: the live display on stderr (`tty`, with the
/// task's own output passed through above its row), timestamped `plain` lines on stderr
/// (progress at most once a second, every state change at once), `json` events on stdout,
/// or nothing. Failures to start are always shown. Events come on the supervisor's loop
/// thread.
final class ProgressOutput: EventSink, Sendable {
    /// Progress lines per task per second, at most, in each mode.
    static let plainInterval = Duration.seconds(1)
    static let jsonInterval = Duration.milliseconds(100)

    let mode: ResolvedProgressMode
    let encoder: EventEncoder
    private let environment: [String: String]
    private let jsonThrottle = Mutex(FrequentEventThrottle(interval: ProgressOutput.jsonInterval))
    private let plain: PlainOutput?
    private let live = Mutex<LiveDisplay?>(nil)

    init(mode: RunCommand.ProgressMode, encoder: EventEncoder) {
        let environment = ProcessEnvironment.values(of: DisplayCapabilities.environmentNames)
        self.mode = ResolvedProgressMode.resolve(mode, stderrIsTerminal: TerminalDevice.isTerminal(2), environment: environment,
                                                 isInit: TerminalDevice.isInit)
        self.encoder = encoder
        self.environment = environment
        plain = self.mode == .plain ? PlainOutput(progressInterval: Self.plainInterval) : nil
        // The task writes to this stderr too, and may leave a bar's line open on it.
        if self.mode == .plain { Terminal.startPlainLines(environment: environment) }
    }

    /// The task as it should be spawned: in `tty` mode its stderr (and its stdout, when that
    /// is the same terminal) is captured and written above the live row, which starts here.
    /// It is captured through a pseudo-terminal the size of ours: the task still sees a
    /// terminal, so a program that buffers its output into a pipe (Python does) prints each
    /// line as it would if run directly.
    func prepare(_ spec: TaskSpec) -> TaskSpec {
        guard mode == .tty else { return spec }
        var model = DisplayModel()
        model.policies[spec.name] = spec.policy
        let display = LiveDisplay(model: model, capabilities: DisplayCapabilities.detect(environment: environment),
                                  environment: environment)
        var spec = spec
        if case .inherit = spec.stderr {
            spec.stderr = .terminal(sizeFrom: 2, valve: display.valve) { bytes in display.output(bytes, fd: 2) }
        }
        if case .inherit = spec.stdout, TerminalDevice.sameTerminal(1, 2) {
            spec.stdout = .terminal(sizeFrom: 2, valve: display.valve) { bytes in display.output(bytes, fd: 1) }
        }
        live.withLock { $0 = display }
        // What was said before (no control socket, say) must be on the screen before the
        // first frame, which erases from where it thinks its rows are.
        Terminal.stderr.flush()
        display.start()
        return spec
    }

    /// The task is over: the live display prints the summary, clears its row and shows the
    /// cursor again.
    func finish(_ outcome: TaskOutcome) {
        guard let display = live.withLock({ $0 }) else { return }
        display.finish(closing: [Self.summary(outcome)])
    }

    /// `done: 0 of 1 succeeded in 5.2s (cancelled: timeout); exit 124`
    static func summary(_ outcome: TaskOutcome) -> Notice {
        var text = "done: \(outcome.succeeded ? 1 : 0) of 1 succeeded in \(DurationText.format(outcome.elapsed))"
        if let reason = outcome.cancelReason { text += " (cancelled: \(reason.rawValue))" }
        text += "; exit \(outcome.exitCode)"
        return .summary(text: text, succeeded: outcome.succeeded)
    }

    func receive(_ encoded: inout EncodedEvent) {
        let event = encoded.event
        switch mode {
        case .none, .json:
            if case let .exited(outcome) = event.kind, case let .failedToStart(failure) = outcome.termination {
                Terminal.error("overtime: \(TextWidth.sanitize(failure.message))")
            }
            if mode == .json { json(&encoded) }
        case .plain:
            plain?.handle(event)
        case .tty:
            live.withLock { $0 }?.handle(event)
        }
    }

    /// A supervisor-level remark (a signal received), shown in plain and tty modes.
    func note(_ text: String) {
        switch mode {
        case .plain: plain?.note(text)
        case .tty:
            if let display = live.withLock({ $0 }) {
                display.note(.note(text))
            } else {
                Terminal.error("overtime: \(TextWidth.sanitize(text))")
            }
        case .json, .none: return
        }
    }

    /// A remark that must be seen in every mode (a refused control client, the task guard
    /// lost): like `note`, and on stderr where `note` shows nothing.
    func warn(_ text: String) {
        switch mode {
        case .plain, .tty: note(text)
        case .json, .none: Terminal.error("overtime: \(TextWidth.sanitize(text))")
        }
    }

    private func json(_ encoded: inout EncodedEvent) {
        // Thinned as the journal is: a task flooding its channel must not flood stdout.
        let event = encoded.event
        let lines = jsonThrottle.withLock { encoded.lines(through: &$0) }
        for (i, line) in lines.enumerated() {
            // The last line is the event's own; any before it are `thinned` counts.
            Terminal.writeOut(line, i == lines.count - 1 ? .of(event) : .event)
        }
    }
}

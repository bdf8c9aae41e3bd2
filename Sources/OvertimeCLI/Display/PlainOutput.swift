import Overtime
import OvertimeLoop
import OvertimeProtocol
import Synchronization

/// The `plain` display, for logs and pipes: one timestamped line on stderr per state change
/// and at most one progress line per task per `progressInterval`. Lines read
/// `14:03:07 overtime: NAME: MESSAGE` (or `14:03:07 overtime: REMARK`), the same words in
/// `overtime run` and `overtime batch`, so one grep serves both.
final class PlainOutput: Sendable {
    private struct State: Sendable {
        var model = DisplayModel()
        var progressThrottle: FrequentEventThrottle
    }

    private let state: Mutex<State>

    init(progressInterval: Duration) {
        state = Mutex(State(progressThrottle: FrequentEventThrottle(interval: progressInterval)))
    }

    /// `14:03:07 overtime: TEXT`, on one line whatever TEXT holds: a task's name (by default
    /// its command's base name, which may hold anything) or a message from a task reaches
    /// the stream with no control character or line break.
    static func line(_ text: String, time: String = TerminalDevice.timeOfDay()) -> String {
        "\(time) overtime: \(TextWidth.sanitize(text))"
    }

    func handle(_ event: TaskEvent, standalone: Bool = true) {
        let (lines, progressLine) = state.withLock { state -> ([String], String?) in
            let lines = state.model.apply(event, standalone: standalone).map(\.text)
            // Heartbeats print nothing, so only progress is offered to the throttle.
            switch event.kind {
            case let .progress(progress, _) where state.progressThrottle.admits(event):
                return (lines, "\(event.task.name): \(EventText.describe(progress))")
            case .exited:
                _ = state.progressThrottle.admits(event)  // forgets the task
            default:
                break
            }
            return (lines, nil)
        }
        // A task's end is always shown; its progress, when stderr is blocked, as its latest.
        let importance: QueuedWriter.Importance = .of(event)
        for line in lines { Terminal.error(Self.line(line), importance) }
        if let progressLine { Terminal.error(Self.line(progressLine), importance) }
    }

    func handle(_ update: BatchUpdate) {
        if case let .taskEvent(event) = update {
            handle(event, standalone: false)
            return
        }
        let lines = state.withLock { $0.model.apply(update).map(\.text) }
        let importance: QueuedWriter.Importance = if case .finished = update { .kept } else { .event }
        for line in lines { Terminal.error(Self.line(line), importance) }
    }

    func note(_ text: String) {
        Terminal.error(Self.line(text))
    }
}

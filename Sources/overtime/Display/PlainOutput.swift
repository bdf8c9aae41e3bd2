import Overtime
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

    /// `14:03:07 overtime: TEXT`
    static func line(_ text: String, time: String = TerminalDevice.timeOfDay()) -> String {
        "\(time) overtime: \(text)"
    }

    func handle(_ event: TaskEvent, standalone: Bool = true) {
        let lines = state.withLock { state -> [String] in
            var lines = state.model.apply(event, standalone: standalone).map(\.text)
            // Heartbeats print nothing, so only progress is offered to the throttle.
            switch event.kind {
            case let .progress(progress, _) where state.progressThrottle.admits(event):
                lines.append("\(event.task.name): \(EventText.describe(progress))")
            case .exited:
                _ = state.progressThrottle.admits(event)  // forgets the task
            default:
                break
            }
            return lines
        }
        for line in lines { Terminal.error(Self.line(line)) }
    }

    func handle(_ update: BatchUpdate) {
        if case let .taskEvent(event) = update {
            handle(event, standalone: false)
            return
        }
        let lines = state.withLock { $0.model.apply(update).map(\.text) }
        for line in lines { Terminal.error(Self.line(line)) }
    }

    func note(_ text: String) {
        Terminal.error(Self.line(text))
    }
}

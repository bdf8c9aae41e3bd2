import OvertimeCore
import OvertimeLoop

/// The embedding program's handler as a sink: it takes the typed event, never the bytes.
final class HandlerSink: EventSink, Sendable {
    private let handler: Supervisor.EventHandler
    init(_ handler: @escaping Supervisor.EventHandler) { self.handler = handler }
    func receive(_ event: inout EncodedEvent) { handler(event.event) }
}

/// The watchers of `overtime run`'s control socket: every event, except that progress (and
/// the other kinds a task can cause at any rate) reaches them at most 10 times a second per
/// task.
final class ControlWatchers: EventSink {
    static let interval = Duration.milliseconds(100)
    private let server: ControlServer
    private var throttle = FrequentEventThrottle(interval: ControlWatchers.interval)

    init(_ server: ControlServer) { self.server = server }

    func receive(_ event: inout EncodedEvent) {
        guard server.hasWatchers else { return }
        for line in event.lines(through: &throttle) { server.broadcast(line) }
    }
}

extension QueuedWriter.Importance {
    /// How much a line about `event` matters when its reader falls behind: a task's
    /// progress and heartbeats only as their latest (each its own key), its end always,
    /// anything else as an event.
    public static func of(_ event: TaskEvent) -> Self {
        switch event.kind {
        case .progress: .latest(key: event.task.id &* 2)
        case .heartbeat: .latest(key: event.task.id &* 2 &+ 1)
        case .exited: .kept
        default: .event
        }
    }
}

import OvertimeCore

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

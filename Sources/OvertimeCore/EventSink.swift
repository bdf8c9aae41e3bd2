import OvertimeProtocol

/// Where a supervisor's task events go: the embedding program's handler, the control
/// socket's watchers, a batch's journal, the CLI's output. The supervisor holds a list of
/// them and passes each event to every one, in order, on its loop thread; keep `receive`
/// quick.
///
/// An event is turned into its JSON line at most once, and only when a sink asks for the
/// bytes (`EncodedEvent.line()`): a supervisor whose sinks all take the typed event never
/// encodes one.
public protocol EventSink: AnyObject {
    func receive(_ event: inout EncodedEvent)
}

/// One event on its way through the sinks, with its JSON line made on first request and
/// shared by every sink after.
public struct EncodedEvent {
    public let event: TaskEvent
    private let encoder: EventEncoder
    private var encoded: [UInt8]?

    package init(_ event: consuming TaskEvent, encoder: EventEncoder) {
        self.event = event
        self.encoder = encoder
    }

    /// The event as a JSON line (newline included), as `EventEncoder.line(for:)` writes it.
    public mutating func line() -> [UInt8] {
        if let encoded { return encoded }
        let line = encoder.line(for: event)
        encoded = line
        return line
    }

    /// The lines a consumer thinned by `throttle` writes for this event: none when it is
    /// held back, else the `thinned` counts it is owed, then the event itself (an `exited`
    /// event carries the consumer's own totals, so that one line is the consumer's alone).
    public mutating func lines(through throttle: inout FrequentEventThrottle) -> [[UInt8]] {
        let admission = throttle.admit(event)
        guard admission.write else { return [] }
        var lines = admission.summaries.map { encoder.thinnedLine(task: event.task, time: event.time, kind: $0.kind, count: $0.count) }
        lines.append(admission.totals.isEmpty ? line() : encoder.line(for: event, thinned: admission.totals))
        return lines
    }
}

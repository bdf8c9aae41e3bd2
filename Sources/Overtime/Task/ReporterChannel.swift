import OvertimeLoop
import OvertimeProtocol

/// One connection a process of a task reports on: the leader's fd 3, or a connection to
/// the task's `OVERTIME_SOCKET`. Its stream, its line framer, and its share of the
/// bad-line pacing (a reporter sending garbage is slowed down alone). Loop-thread only.
final class ReporterChannel {
    let id: ReporterID
    let stream: ByteStream
    var framer = LineFramer()
    /// Bad lines in the current second, from `badLinesSince`; the timer that resumes reading.
    var badLines = 0
    var badLinesSince: MonotonicInstant
    var paceTimer: LoopTimer?
    private(set) var closed = false

    init(id: ReporterID, stream: ByteStream, now: MonotonicInstant) {
        self.id = id
        self.stream = stream
        badLinesSince = now
    }

    func close() {
        guard !closed else { return }
        closed = true
        paceTimer?.close()
        paceTimer = nil
        stream.close()
    }
}

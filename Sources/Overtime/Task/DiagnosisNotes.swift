import OvertimeLoop

/// The lines a task runner writes around a `--diagnose` command, to the descriptor the
/// command's output goes to, written by a thread of its own (a stalled terminal, a full
/// pipe only the loop drains, a log on a frozen filesystem never hold the loop). Closed
/// once what is queued is written.
struct DiagnosisNotes {
    private let writer: QueuedWriter

    init(fd: Int32) {
        writer = QueuedWriter(fd: fd, closesDescriptor: true) { _, _ in }
    }

    /// Queues `text`, and waits a moment for it to be written: the diagnose command writes
    /// to the same output, and a note belongs before (or after) what it printed. A
    /// stalled output holds the loop for that moment only.
    func write(_ text: String) {
        writer.write(Array(text.utf8))
        writer.flush(waitingAtMost: Self.orderWait)
    }

    func close() { writer.closeWhenWritten() }

    static let orderWait = Duration.milliseconds(50)
}

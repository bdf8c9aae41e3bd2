import Overtime
import OvertimeLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--events FILE`: the event lines of `--progress json` written to a file (or a descriptor,
/// `/dev/fd/N`, a FIFO) of the user's choosing, so that the task's stdout stays the task's.
/// Thinned as `--progress json` is, and written as stdout is: by a thread of its own, so a
/// reader that stops or a filesystem that stalls never holds the loop, with the same policy
/// for what is dropped while it is blocked (a task's latest progress kept, every end kept).
final class EventFileSink: EventSink, Sendable {
    private let throttle = Mutex(FrequentEventThrottle(interval: ProgressOutput.jsonInterval))
    private let writer: QueuedWriter

    /// - Throws: `UsageError` naming the file when it cannot be opened.
    init(path: String) throws(UsageError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw UsageError(message: "overtime run: --events: cannot open \(path): \(String(cString: strerror(errno)))")
        }
        writer = QueuedWriter(output: { bytes in
            do throws(SystemError) {
                try Descriptors.writeAll(fd, bytes)
                return true
            } catch {
                Terminal.error("overtime: --events: the file stopped taking lines (\(error.reason))")
                return false
            }
        }, onClose: { Descriptors.close(fd) }) { lines, bytes in
            Terminal.error("overtime: " + Terminal.dropMessage("the --events file", lines, bytes))
        }
    }

    func receive(_ encoded: inout EncodedEvent) {
        let importance = QueuedWriter.Importance.of(encoded.event)
        let lines = throttle.withLock { encoded.lines(through: &$0) }
        for (i, line) in lines.enumerated() {
            // Any line before the event's own is a count of thinned ones.
            writer.write(line, i == lines.count - 1 ? importance : .event)
        }
    }

    /// Waits until every line is written (before exit), then closes the file.
    func finish() {
        writer.flush()
        writer.closeWhenWritten()
    }
}

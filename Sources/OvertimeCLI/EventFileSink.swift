import Overtime
import OvertimeLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--events FILE`: the event lines of `--progress json` written to a file (or a descriptor,
/// `/dev/fd/N`) of the user's choosing, so that the task's stdout stays the task's. Thinned
/// as `--progress json` is.
final class EventFileSink: EventSink, Sendable {
    private let fd: Int32
    private let throttle = Mutex(FrequentEventThrottle(interval: ProgressOutput.jsonInterval))
    /// Said once: the file stopped taking lines (a full disk, a reader gone).
    private let failed = Atomic<Bool>(false)

    /// - Throws: `UsageError` naming the file when it cannot be opened.
    init(path: String) throws(UsageError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw UsageError(message: "overtime run: --events: cannot open \(path): \(String(cString: strerror(errno)))")
        }
        self.fd = fd
    }

    func receive(_ encoded: inout EncodedEvent) {
        let lines = throttle.withLock { encoded.lines(through: &$0) }
        for line in lines where !TerminalDevice.writeAll(fd, line) {
            if !failed.exchange(true, ordering: .relaxed) { Terminal.error("overtime: --events: the file stopped taking lines (\(String(cString: strerror(errno))))") }
            return
        }
    }

    deinit { Descriptors.close(fd) }
}

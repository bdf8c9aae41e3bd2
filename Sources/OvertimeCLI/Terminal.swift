import OvertimeLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The CLI's stdout and stderr. Everything goes through a `QueuedWriter` per descriptor:
/// whole lines, in order, written by a thread of its own, so a reader that stops reading
/// never holds up the loop thread (where most lines come from). `flush` before exit.
enum Terminal {
    static let stdout: QueuedWriter = QueuedWriter(fd: 1) { lines, bytes in
        Terminal.stderr.write(Array((dropMessage("stdout", lines, bytes) + "\n").utf8), .kept)
    }
    static let stderr: QueuedWriter = QueuedWriter(output: { bytes in
        let start = stderrLineStart.withLock { $0 }
        return (try? Descriptors.writeAll(2, start.prefix + bytes)) != nil
    }, dropNote: { lines, bytes in
        // Said on stderr itself, in the form of the lines around it.
        Terminal.stderr.write(Array((PlainOutput.line(dropMessage("stderr", lines, bytes)) + "\n").utf8), .kept)
    })

    /// How stderr's writes start a line: as they are, except under the `plain` display
    /// (`startPlainLines`), whose lines may follow a task's open line there.
    private static let stderrLineStart = Mutex(LineStart.asIs)

    /// The `plain` display is on: each write on stderr starts a line of its own (LineStart).
    static func startPlainLines(environment: [String: String]) {
        let start = LineStart.of(2, environment: environment)
        stderrLineStart.withLock { $0 = start }
    }

    /// `output on stderr was blocked; 12 lines (240 KiB) of progress and events were dropped`
    static func dropMessage(_ stream: String, _ lines: Int, _ bytes: Int) -> String {
        let size = bytes >= 1024 ? "\(bytes / 1024) KiB" : "\(bytes) bytes"
        return "output on \(stream) was blocked; \(lines) line\(lines == 1 ? "" : "s") (\(size)) of progress and events were dropped, none of the ends"
    }

    static func error(_ line: String, _ importance: QueuedWriter.Importance = .kept) {
        stderr.write(Array((line + "\n").utf8), importance)
    }

    static func writeOut(_ bytes: [UInt8], _ importance: QueuedWriter.Importance = .kept) {
        stdout.write(bytes, importance)
    }

    static func out(_ line: String) {
        stdout.write(Array((line + "\n").utf8), .kept)
    }

    /// Waits until both are written (however long the reader takes: what is kept must
    /// reach it). Before exit.
    static func flush() {
        stdout.flush()
        stderr.flush()
    }
}

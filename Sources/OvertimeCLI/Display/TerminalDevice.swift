import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The few facts the display reads from the system: whether a descriptor is a terminal,
/// the terminal's size, the environment.
enum TerminalDevice {
    static func isTerminal(_ fd: Int32) -> Bool {
        isatty(fd) == 1
    }

    /// Running as PID 1: a container's entrypoint.
    static var isInit: Bool {
        getpid() == 1
    }

    /// Whether two descriptors are the same terminal (stdout and stderr on one screen).
    static func sameTerminal(_ a: Int32, _ b: Int32) -> Bool {
        guard isTerminal(a), isTerminal(b) else { return false }
        var sa = stat()
        var sb = stat()
        guard fstat(a, &sa) == 0, fstat(b, &sb) == 0 else { return false }
        return sa.st_rdev == sb.st_rdev
    }

    /// Columns and lines of the terminal on `fd` (TIOCGWINSZ), read afresh each time so a
    /// resize shows at the next redraw; else `COLUMNS`/`LINES`, else 80×24.
    static func size(_ fd: Int32, environment: [String: String]) -> (columns: Int, lines: Int) {
        var size = winsize()
        if ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
            return (Int(size.ws_col), size.ws_row > 0 ? Int(size.ws_row) : 24)
        }
        let columns = environment["COLUMNS"].flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil } ?? 80
        let lines = environment["LINES"].flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil } ?? 24
        return (columns, lines)
    }

    /// Writes all of `bytes` to `fd` (`Descriptors.writeAll`: short writes, EINTR and a
    /// descriptor someone made non-blocking all taken care of); gives up quietly on a closed
    /// descriptor (nothing more can be shown). It blocks while the reader does not read:
    /// call it on a thread of the display's or the output's own, never the loop's.
    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        _ = writeAll(fd, bytes)
    }

    /// `write`, saying whether everything was written.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        (try? Descriptors.writeAll(fd, bytes)) != nil
    }

    /// The local wall-clock time of day, `14:03:07`, for plain lines.
    static func timeOfDay() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var t = now.tv_sec
        var parts = tm()
        localtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }

}

import OvertimeLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How the `plain` display's lines on stderr start on a line of their own when the task
/// writes to the same stderr (`overtime run` passes it on), and its progress bar left its
/// line open: tqdm redraws with `\r` and no newline, and a line of ours written then would
/// be glued to the bar.
///
/// - On a terminal (not `TERM=dumb`), each write first clears the open line (`\r`, erase
///   to its end), as `tqdm.write` does; the bar redraws itself below at its next update.
///   At the start of an empty line this changes nothing on the screen.
/// - In a regular file (`2>log`), a newline goes first when the file's last byte is not
///   one (read with `pread`, on the writer's thread: never the loop's, through a descriptor
///   of its own opened for reading, since a shell's `2>` opens the file write-only).
/// - On a pipe, nothing can be known: lines go as they are.
enum LineStart: Sendable {
    case asIs
    case clearTerminalLine
    /// The file, opened again for reading (close-on-exec).
    case newlineAfterOpenLine(reading: Int32)

    /// Chosen once: what `fd` is does not change.
    static func of(_ fd: Int32, environment: [String: String]) -> LineStart {
        if TerminalDevice.isTerminal(fd) {
            return environment["TERM"] == "dumb" ? .asIs : .clearTerminalLine
        }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return .asIs }
        let reading = open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC)
        return reading >= 0 ? .newlineAfterOpenLine(reading: reading) : .asIs
    }

    private static let clearLine: [UInt8] = Array("\r\u{1B}[K".utf8)

    /// What goes before the lines written now.
    var prefix: [UInt8] {
        switch self {
        case .asIs:
            return []
        case .clearTerminalLine:
            return Self.clearLine
        case let .newlineAfterOpenLine(reading):
            var info = stat()
            guard fstat(reading, &info) == 0, info.st_size > 0 else { return [] }
            var last: UInt8 = 0
            guard pread(reading, &last, 1, info.st_size - 1) == 1, last != UInt8(ascii: "\n") else { return [] }
            return [UInt8(ascii: "\n")]
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes to the CLI's stdout and stderr with plain `write(2)`: no buffering to lose when a
/// signal ends the process, and whole lines from the loop thread never interleave.
enum Terminal {
    static func error(_ line: String) {
        write(2, Array((line + "\n").utf8))
    }

    static func writeOut(_ bytes: [UInt8]) {
        write(1, bytes)
    }

    static func out(_ line: String) {
        write(1, Array((line + "\n").utf8))
    }

    private static func write(_ fd: Int32, _ bytes: [UInt8]) {
        TerminalDevice.write(fd, bytes)
    }
}

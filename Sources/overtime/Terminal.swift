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
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0, errno == EINTR {
                    continue
                } else {
                    return  // a closed stdout/stderr: nothing more can be shown
                }
            }
        }
    }
}

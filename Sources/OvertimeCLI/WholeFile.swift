import Overtime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file the CLI writes for someone to read (a `--report`, a run report page): written
/// whole, to a temporary name beside it that is renamed over it, so a reader never sees
/// half of one and a failed write leaves the old file, or none.
enum WholeFile {
    /// - Returns: nil when written; otherwise why not (strerror's words).
    static func write(_ bytes: [UInt8], to path: String) -> String? {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        var written = fd >= 0 && TerminalDevice.writeAll(fd, bytes)
        var reason = String(cString: strerror(errno))
        // Some filesystems (NFS, a quota) say "no space" only when the file is closed.
        if fd >= 0, close(fd) != 0, written {
            written = false
            reason = String(cString: strerror(errno))
        }
        if written, rename(temporary, path) != 0 {
            written = false
            reason = String(cString: strerror(errno))
        }
        guard !written else { return nil }
        if fd >= 0 { unlink(temporary) }
        return reason
    }
}

import Overtime
import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file the CLI writes for someone to read (a `--report`, a run report page): written
/// whole, to a temporary name beside it that is renamed over it, so a reader never sees
/// half of one and a failed write leaves the old file, or none (`Descriptors.replaceFile`,
/// which the run journal's summary and the metrics file use too).
enum WholeFile {
    /// - Returns: nil when written; otherwise why not (strerror's words).
    static func write(_ bytes: [UInt8], to path: String) -> String? {
        Descriptors.replaceFile(path, with: bytes, temporary: path + ".tmp-\(getpid())").map { String(cString: strerror($0)) }
    }
}

internal import OvertimeCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Resident memory from `/proc`, for tasks without a memory cgroup.
public enum ProcessMemory {
    private static let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))

    /// The resident set of each of `pids` summed (`/proc/PID/statm`), those gone skipped.
    /// Pages two of them share count twice: an upper bound, as `ps` would add them up.
    public static func residentSum(_ pids: [Int32]) -> UInt64 {
        var total: UInt64 = 0
        for pid in pids { total += resident(pid) ?? 0 }
        return total
    }

    static func resident(_ pid: Int32) -> UInt64? {
        guard let bytes = Descriptors.readWholeFile("/proc/\(pid)/statm"),
              let pages = KernelText.residentPages(statm: bytes) else { return nil }
        return pages * pageSize
    }

    /// The summed resident set of every process of each session, from one pass over
    /// `/proc/*/stat` (a task's leader leads a session of its own, so its session id is
    /// its pid): the cost is one read per process on the machine, however many tasks.
    public static func residentBySession() -> [Int32: UInt64] {
        var sums: [Int32: UInt64] = [:]
        for name in Descriptors.directoryEntries("/proc") ?? [] {
            guard let first = name.utf8.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9"),
                  let bytes = Descriptors.readWholeFile("/proc/\(name)/stat"),
                  let (session, pages) = KernelText.sessionAndResidentPages(stat: bytes) else { continue }
            sums[session, default: 0] += pages * pageSize
        }
        return sums
    }
}
